"""Held-out predictions and pointwise log-likelihoods of a fitted factorization machine.

``draws`` is the InferenceData of :func:`bnpjax.sample`, a run's ``trace``, or a list of
them (pooled into one chain); ``data`` the training :class:`~bnpjax.models.fm.FMData` and
``test`` the held-out design and targets as another ``FMData`` (``make_data(X_test, y_test,
likelihood=..., X_rel=...)``; placeholder targets are fine for :func:`predict`).
"""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from bnpjax.infer.base import bind
from bnpjax.infer.predictive import map_draws, posterior_draws
from bnpjax.models.fm.conditionals import _predict_coo, _predict_parts
from bnpjax.models.fm.data import LIKELIHOODS, FMData, FMState
from bnpjax.models.fm.likelihoods import _log_likelihood_terms

__all__ = ["log_likelihood", "predict"]

_OUTPUTS = ("latent", "probability")


def _variables(draws) -> set:
    first = draws[0] if isinstance(draws, list | tuple) and draws else draws
    table = getattr(first, "posterior", None)
    if table is None and isinstance(first, dict):
        table = first.get("posterior", {})
    return set(table or ())


def _likelihood(draws, likelihood) -> str:
    """The likelihood of the fit: ordinal fits trace ``cutpoints``, Gaussian fits
    ``noise_var``, probit fits neither."""
    if likelihood is not None:
        if likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
        return likelihood
    names = _variables(draws)
    if "cutpoints" in names:
        return "ordinal"
    return "gaussian" if "noise_var" in names else "probit"


def _check(design, name: str, num_features: int) -> FMData:
    if not isinstance(design, FMData):
        raise ValueError(f"{name} must come from bnpjax.models.fm.make_data")
    if design.group.shape[0] != num_features:
        raise ValueError(
            f"{name} has {design.group.shape[0]} features but the draws have {num_features}"
        )
    return design


def _predict_one(test, draw, *, output, likelihood):
    yhat, _ = _predict_parts(test, draw["b"], draw["w"], draw["V"])
    if output == "latent":
        return yhat
    if likelihood == "probit":
        return ndtr(yhat)
    upper = jnp.concatenate([draw["cutpoints"], jnp.full((1,), jnp.inf, yhat.dtype)])
    return jnp.diff(ndtr(upper[None, :] - yhat[:, None]), axis=1, prepend=0.0)


def _log_likelihood_one(target, draw, *, likelihood):
    yhat, _ = _predict_parts(target, draw["b"], draw["w"], draw["V"])
    noise_var = draw.get("noise_var", jnp.ones((), yhat.dtype))
    cutpoints = draw.get("cutpoints", jnp.zeros((0,), yhat.dtype))
    return _log_likelihood_terms(target.y, yhat, noise_var, cutpoints, likelihood)


def predict(
    draws, data: FMData, test: FMData, *legacy, output: str = "latent",
    likelihood: str | None = None, batch_size: int = 64,
) -> np.ndarray:  # fmt: skip
    """Predictions for the rows of ``test`` from every draw.

    Parameters
    ----------
    draws
        InferenceData of :func:`bnpjax.sample`, a run's ``trace``, or a list of them.
    data : FMData
        the training data (its number of features is checked against the draws).
    test : FMData
        the held-out design (``make_data(X_test, y_test, ...)``; its targets are not used).
    output : {"latent", "probability"}
        ``"latent"``: ``hat y`` per draw, shape (chain, draw, n_test); ``"probability"``:
        ``P(y = 1)`` (probit, same shape) or ``P(y = k)`` (ordinal, with a last axis of
        levels).
    likelihood : str, optional
        the fit's likelihood (default: read from the variables of ``draws``).
    batch_size : int
        draws evaluated at once (:func:`bnpjax.infer.predictive.map_draws`).

    Returns
    -------
    numpy.ndarray
    """
    if legacy:  # the old predict(rows, cols, values, num_rows, b, w, V, relations=()): one draw
        warnings.warn(
            "predict(rows, cols, values, num_rows, b, w, V) is deprecated: use "
            "predict(draws, data, test)",
            FutureWarning,
            stacklevel=2,
        )
        return _predict_coo(draws, data, test, *legacy)
    if output not in _OUTPUTS:
        raise ValueError(f"output must be one of {_OUTPUTS}, got {output!r}")
    likelihood = _likelihood(draws, likelihood)
    names = ["b", "w", "V"] + (["cutpoints"] if likelihood == "ordinal" else [])
    posterior = posterior_draws(draws, names)
    num_features = posterior["w"].shape[-1]
    _check(data, "data", num_features)
    test = _check(test, "test", num_features)
    if output == "probability" and likelihood == "gaussian":
        raise ValueError("output 'probability' needs a probit or ordinal fit")

    one = bind(_predict_one, test, output=output, likelihood=likelihood)
    return np.asarray(map_draws(one, posterior, batch_size=batch_size))


def log_likelihood(
    draws, data: FMData, test: FMData | None = None, *, likelihood: str | None = None,
    batch_size: int = 64,
) -> np.ndarray:  # fmt: skip
    """Pointwise ``log p(y_d | draw)`` of the training targets (``test`` None) or of the
    held-out targets of ``test``.

    Parameters
    ----------
    draws
        InferenceData of :func:`bnpjax.sample`, a run's ``trace``, or a list of them.
    data : FMData
        the training data.
    test : FMData, optional
        held-out design and targets.
    likelihood : str, optional
        the fit's likelihood (default: read from the variables of ``draws``).
    batch_size : int
        draws evaluated at once.

    Returns
    -------
    numpy.ndarray
        shape (chain, draw, n) for the ``n`` targets of ``data`` or ``test``.
    """
    if isinstance(draws, FMData) and isinstance(data, FMState):
        # the old log_likelihood(data, state, likelihood="gaussian"): one state
        warnings.warn(
            "log_likelihood(data, state, likelihood) is deprecated: use "
            "log_likelihood(draws, data, test=None)",
            FutureWarning,
            stacklevel=2,
        )
        data, state, likelihood = draws, data, test or likelihood or "gaussian"
        yhat, _ = _predict_parts(data, state.b, state.w, state.V)
        return _log_likelihood_terms(data.y, yhat, state.noise_var, state.cutpoints, likelihood)
    likelihood = _likelihood(draws, likelihood)
    names = ["b", "w", "V"]
    names += {"gaussian": ["noise_var"], "ordinal": ["cutpoints"], "probit": []}[likelihood]
    posterior = posterior_draws(draws, names)
    num_features = posterior["w"].shape[-1]
    data = _check(data, "data", num_features)
    target = data if test is None else _check(test, "test", num_features)
    # the draws are in the targets' units; make_data standardises gaussian targets
    target = target._replace(y=target.y * target.y_scale + target.y_loc, y_loc=0.0, y_scale=1.0)

    one = bind(_log_likelihood_one, target, likelihood=likelihood)
    return np.asarray(map_draws(one, posterior, batch_size=batch_size))
