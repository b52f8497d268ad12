"""Predictions, pointwise log-likelihoods and feature weights of the linear-Gaussian IBP
model from posterior draws (the draws must keep ``Z`` and ``A``: ``trace_features=True``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import check_flag
from bnpjax.infer.predictive import map_draws, posterior_draws
from bnpjax.models.ibp_lg.conditionals import entry_log_likelihood
from bnpjax.models.ibp_lg.data import IBPLGData

__all__ = ["feature_means", "log_likelihood", "predict"]


def _check_data(data):
    if not isinstance(data, IBPLGData):
        raise ValueError("data must come from bnpjax.models.ibp_lg.make_data")


def _as_test(test, data: IBPLGData) -> IBPLGData:
    """``test`` as IBPLGData: an IBPLGData, or a pair ``(X, mask)`` whose True entries are the
    held-out entries (rows without any are allowed)."""
    if isinstance(test, IBPLGData):  # back to the data's units
        X = np.asarray(test.X, np.float64) * float(test.scale) + np.asarray(test.loc, np.float64)
        mask = np.asarray(test.mask) > 0
    else:
        try:
            X, mask = test
        except (TypeError, ValueError):
            raise ValueError("test must be IBPLGData or a pair (X, mask)") from None
        X, mask = np.asarray(X, float), np.asarray(mask)
        if mask.dtype != bool:
            raise ValueError("test: mask must be boolean")
    if X.shape != tuple(data.X.shape) or mask.shape != X.shape:
        raise ValueError(f"test must have the shape of data.X {tuple(data.X.shape)}")
    if not np.all(np.isfinite(X[mask])):
        raise ValueError("test: X must be finite at the held-out entries")
    dtype = data.X.dtype
    # in the units of the draws, relative to the training data's column means
    return IBPLGData(
        jnp.asarray(np.where(mask, X - np.asarray(data.loc, np.float64), 0.0), dtype),
        jnp.asarray(mask, dtype),
        jnp.asarray(np.flatnonzero(mask), jnp.int32),
    )


def _arrays(draws, names, data):
    """The draws of ``names`` and the offset relative to the column means ``data.loc``, in the
    data's units (a fit from before the offset existed: its data's zero)."""
    try:
        arrays = posterior_draws(draws, names)
    except ValueError as err:
        if "lacks" in str(err):
            raise ValueError("the fit kept no features: sample with trace_features=True") from err
        raise
    try:
        offset = posterior_draws(draws, ["offset"])["offset"]
    except ValueError:
        offset = np.zeros((1, 1, data.X.shape[1]))
    # relative to the column means, as the kernels hold it (in float32 an offset near 1e6 was
    # traced to 7 digits, so far from its origin the difference keeps only what they hold)
    relative = np.asarray(offset, np.float64) - np.asarray(data.loc, np.float64)
    arrays["offset"] = np.broadcast_to(relative, (*arrays[names[0]].shape[:2], relative.shape[-1]))
    return arrays


def predict(draws, data: IBPLGData, test=None, *, key=None) -> np.ndarray:
    """Posterior predictions of held-out entries, one per posterior draw, in the data's units.

    Parameters
    ----------
    draws : arviz.InferenceData, dict or list
        The InferenceData of :func:`bnpjax.sample`, a run's ``trace``, or a list of them
        (pooled along the chain axis).
    data : IBPLGData
        The training data.
    test : IBPLGData or (X, mask), optional
        The held-out entries (True in ``mask``; the values are not used here). Default: the
        missing entries of ``data``.
    key : jax.Array, optional
        Without it the means ``offset_d + (Z A)_nd``; with it draws ``x_nd ~ N(offset_d +
        (Z A)_nd, sigma_x^2)``.

    Returns
    -------
    numpy.ndarray, shape (chain, draw, entry)
        Entries in row-major order.
    """
    _check_data(data)
    if test is None:
        missing = np.asarray(data.mask) == 0
        test = (np.zeros(missing.shape), missing)
    target = _as_test(test, data)
    arrays = _arrays(draws, ["Z", "A", "sigma_x"], data)
    observed = target.observed
    if key is not None:
        chain, draw = arrays["sigma_x"].shape[:2]
        arrays["index"] = np.arange(chain * draw).reshape(chain, draw)

    loc = jnp.asarray(np.broadcast_to(np.asarray(data.loc, np.float64), data.X.shape[1:]))

    def one(d):
        mean = loc + d["offset"] + d["Z"].astype(d["A"].dtype) @ d["A"]
        mean = mean.reshape(-1)[observed]
        if key is None:
            return mean
        noise = jax.random.normal(jax.random.fold_in(key, d["index"]), mean.shape, mean.dtype)
        return mean + d["sigma_x"] * noise

    return map_draws(one, arrays)


def log_likelihood(draws, data: IBPLGData, test=None) -> np.ndarray:
    """Pointwise ``log N(x_nd | offset_d + (Z A)_nd, sigma_x^2)`` for every posterior draw.

    Parameters
    ----------
    draws : arviz.InferenceData, dict or list
        As in :func:`predict`.
    data : IBPLGData
        The training data.
    test : IBPLGData or (X, mask), optional
        Held-out entries (True in ``mask``) and their values; None scores the observed
        entries of ``data``. Missing entries are never scored.

    Returns
    -------
    numpy.ndarray, shape (chain, draw, entry)
        Entries in row-major order.
    """
    _check_data(data)
    if test is None:  # the observed entries, relative to the column means, in the data's units
        target = data._replace(X=data.X * data.scale)
    else:
        target = _as_test(test, data)
    arrays = _arrays(draws, ["Z", "A", "sigma_x"], data)
    return map_draws(
        lambda d: entry_log_likelihood(
            target.X - d["offset"],
            target.observed,
            d["Z"].astype(d["A"].dtype),
            d["A"],
            d["sigma_x"],
        ),
        arrays,
    )


def feature_means(draws, data: IBPLGData, *, integrate_offset=None) -> np.ndarray:
    """The posterior mean of the feature weights ``A`` per posterior draw, per column of ``X``
    over its observed rows (zero in inactive feature columns): given the draw's offset,
    ``(Z'Z + sigma_x^2 / sigma_a^2 I)^-1 Z'(X - offset)``, or with the offset integrated out
    under its flat prior, the same with ``Z`` and ``X`` centred on their column means over
    the observed rows (the intercept of a ridge regression left unpenalised).

    Parameters
    ----------
    draws : arviz.InferenceData, dict or list
        As in :func:`predict`; needs ``Z``, ``sigma_x`` and ``sigma_a`` (and ``offset``, read
        as the data's zero when absent).
    data : IBPLGData
        The training data.
    integrate_offset : bool, optional
        Integrate the offset out (a sampled offset: one draw of it adds its own noise,
        ``sigma_x / sqrt(N)`` per column, to every weight) or condition on it (an offset held
        at the background level). Default: integrate when the traced offset differs between
        draws, i.e. when it was sampled. The integral is under the flat prior (the
        default); a proper one (``make_hyper(offset_sd=)``) is not read here.

    Returns
    -------
    numpy.ndarray, shape (chain, draw, capacity, D)

    References
    ----------
    Griffiths & Ghahramani (2011), sec. 5 (the posterior of ``A`` given ``Z``).
    """
    _check_data(data)
    if integrate_offset is not None:
        integrate_offset = check_flag(integrate_offset, "integrate_offset")
    arrays = _arrays(draws, ["Z", "sigma_x", "sigma_a"], data)
    X, mask = data.X, data.mask
    scale = float(data.scale)
    if integrate_offset is None:
        offsets = arrays["offset"].reshape(-1, X.shape[1])
        integrate_offset = bool(np.any(offsets != offsets[:1]))

    def one(d):
        Z = d["Z"].astype(X.dtype)
        X_less = X - d["offset"] / scale  # standardised
        ratio = (d["sigma_x"] / d["sigma_a"]) ** 2
        eye = jnp.eye(Z.shape[1], dtype=X.dtype)

        def column(x, m):
            if integrate_offset:
                # the flat offset integrated out: the regression on Z centred over the
                # observed rows (the draw's offset drops out with the centring)
                n = jnp.maximum(m.sum(), 1)
                Zc = (Z - (Z * m[:, None]).sum(0) / n) * m[:, None]
                return jnp.linalg.solve(Zc.T @ Zc + ratio * eye, Zc.T @ (x * m))
            Zm = Z * m[:, None]
            return jnp.linalg.solve(Zm.T @ Z + ratio * eye, Zm.T @ x)

        return jax.vmap(column, in_axes=(1, 1), out_axes=1)(X_less, mask)

    return map_draws(one, arrays) * float(data.scale)  # in the data's units
