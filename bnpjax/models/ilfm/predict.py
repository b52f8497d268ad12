"""Link prediction from posterior draws of :func:`~bnpjax.models.ilfm.gibbs`.

:func:`predict` gives the posterior predictive probability of a link, :math:`E[P(y^r_{ij} = 1
\\mid F, W, s, \\beta) \\mid Y_{obs}]`, averaged over every kept draw (what held-out AUC is
computed from); :func:`log_likelihood` gives pointwise log densities per draw for
``az.loo`` / ``az.compare`` or for a held-out log predictive density.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (held-out link prediction).
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr

from bnpjax.infer.arviz_adapter import pooled_draws
from bnpjax.infer.base import bind
from bnpjax.infer.checks import check_integer, renamed_arguments
from bnpjax.infer.predictive import map_draws
from bnpjax.models.ilfm.data import ILFMData, covariates_in_units
from bnpjax.models.ilfm.joint import LIKELIHOODS, _bernoulli, _logits, _offset

__all__ = ["log_likelihood", "predict"]

_NAMES = ("F", "W", "bias", "beta")


def _likelihood_of(draws, likelihood):
    """The chain's likelihood: given, else read from the InferenceData's settings."""
    if likelihood is None and hasattr(draws, "posterior"):
        settings = draws.posterior.attrs.get("kernel_settings", "{}")
        if isinstance(settings, str):
            settings = json.loads(settings)
        likelihood = settings.get("likelihood", settings.get("link"))
    likelihood = "logit" if likelihood is None else likelihood
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    return likelihood


def _pooled(draws, data: ILFMData) -> dict[str, np.ndarray]:
    """``F``, ``W``, ``bias``, ``beta`` of every draw, pooled over chains on one axis."""
    if not isinstance(data, ILFMData):
        raise ValueError("data must come from bnpjax.models.ilfm.make_data")
    F, W, bias = (pooled_draws(draws, "posterior", name) for name in ("F", "W", "bias"))
    try:
        beta = pooled_draws(draws, "posterior", "beta")
    except ValueError:  # a model without covariates
        beta = np.zeros((*bias.shape, 0), F.dtype)
    if beta.shape[-1] != data.X.shape[0]:
        raise ValueError(
            f"data has {data.X.shape[0]} covariates but the draws have {beta.shape[-1]}"
        )
    if data.Y.shape[-1] != F.shape[-2]:
        raise ValueError(f"data has {data.Y.shape[-1]} entities but the draws have {F.shape[-2]}")
    return {"F": F, "W": W, "bias": bias, "beta": beta}


def _logits_of(draw, X):
    """The logits (R, N, N) of one traced draw; a ``mode="single"`` draw (``F`` with a
    relation axis) is one model per relation."""
    F, W, bias, beta = (draw[name] for name in _NAMES)
    if F.ndim == 3:  # single: relation r reads its own F[r]
        features = jnp.einsum("rik,rkl,rjl->rij", F, W, F)
        return features + _offset(bias, beta, X)
    return _logits(F, W, _offset(bias, beta, X))


def _draw_probabilities(X, index, draw, *, likelihood):
    eta = _logits_of(draw, X).reshape(-1)[index]
    return ndtr(eta) if likelihood == "probit" else jax.nn.sigmoid(eta)


def _draw_log_likelihood(X, Y, index, draw, *, likelihood):
    eta = _logits_of(draw, X).reshape(-1)[index]
    return _bernoulli(Y.reshape(-1)[index], eta, 1.0, likelihood)


def _entries(data: ILFMData, test) -> np.ndarray:
    """Flat indices of the entries to predict: every entry (``test`` None), the observed
    entries of an :class:`ILFMData`, or the True entries of a boolean mask."""
    shape = data.Y.shape
    if test is None:
        return np.arange(int(np.prod(shape)))
    mask = np.asarray(test.mask > 0) if isinstance(test, ILFMData) else np.asarray(test)
    if mask.dtype != bool:
        raise ValueError("test must be the make_data of the held-out links or a boolean mask")
    if mask.shape == shape[1:]:
        mask = np.broadcast_to(mask, shape)
    if mask.shape != shape:
        raise ValueError(f"test must have the shape of the data {shape}, got {mask.shape}")
    return np.flatnonzero(mask.reshape(-1))


@renamed_arguments(link="likelihood", chunk="batch_size")
def predict(
    draws, data: ILFMData, test=None, *, likelihood: str | None = None, batch_size: int = 50
) -> np.ndarray:
    """Posterior predictive link probabilities.

    Parameters
    ----------
    draws
        the InferenceData of :func:`bnpjax.sample`, a run's ``trace``, or a list of them
        (pooled); the posterior must hold ``F``, ``W``, ``bias`` (and ``beta`` with
        covariates), of either mode.
    data
        the :func:`make_data` the chains ran on (its covariates and shape).
    test
        the entries to predict: ``None`` (every entry), the :func:`make_data` of the held-out
        links (its observed entries), or a boolean mask of the shape of ``data.Y``.
    likelihood
        the chains' likelihood; by default read from the InferenceData, else ``"logit"``.
    batch_size
        draws per compiled batch (one program per shape, reused by later calls).

    Returns
    -------
    numpy.ndarray
        (R, N, N) when ``test`` is None, else (entry,) in the order of ``np.nonzero`` of the
        test mask: the posterior mean of :math:`P(y^r_{ij} = 1)`.
    """
    likelihood = _likelihood_of(draws, likelihood)
    batch_size = check_integer(batch_size, "batch_size")
    pooled = _pooled(draws, data)
    index = _entries(data, test)
    X = covariates_in_units(data)  # the units of the traced coefficients
    fn = bind(_draw_probabilities, X, jnp.asarray(index), likelihood=likelihood)
    total = pooled["F"].shape[0]
    batch_size = min(batch_size, total)
    mean = np.zeros(index.size, np.float64)
    for start in range(0, total, batch_size):
        # every batch has batch_size draws (the last one repeats a draw, dropped below), so
        # one compiled program serves every batch of every call
        rows = np.minimum(np.arange(start, start + batch_size), total - 1)
        batch = {k: v[rows][None] for k, v in pooled.items()}
        values = np.asarray(map_draws(fn, batch, batch_size=batch_size)[0], np.float64)
        mean += values[: min(batch_size, total - start)].sum(0)
    mean /= total
    return mean.reshape(data.Y.shape) if test is None else mean


def log_likelihood(draws, data: ILFMData, test: ILFMData | None = None, *, likelihood=None):
    """Pointwise log densities of observed links under every draw.

    Parameters
    ----------
    draws
        as in :func:`predict`, with its (chain, draw) axes kept (a trace or InferenceData).
    data
        the :func:`make_data` the chains ran on.
    test
        None: the observed training entries of ``data``; else the :func:`make_data` of the
        held-out links (its observed entries). Unobserved entries are never counted.
    likelihood
        as in :func:`predict`.

    Returns
    -------
    numpy.ndarray
        (chain, draw, entry), entries in the order of ``np.nonzero`` of the mask.
    """
    likelihood = _likelihood_of(draws, likelihood)
    if isinstance(draws, list | tuple):
        raise ValueError("log_likelihood needs one run's draws (chain and draw axes)")
    _pooled(draws, data)  # validation
    table = draws.posterior if hasattr(draws, "posterior") else draws["posterior"]
    arrays = {}
    for name in _NAMES:
        if name in table:
            arrays[name] = np.asarray(table[name])
    if "beta" not in arrays:
        arrays["beta"] = np.zeros((*arrays["bias"].shape, 0), arrays["F"].dtype)
    target = data if test is None else test
    if not isinstance(target, ILFMData):
        raise ValueError("test must come from bnpjax.models.ilfm.make_data")
    index = _entries(data, target)
    X = covariates_in_units(data)  # the units of the traced coefficients
    fn = bind(_draw_log_likelihood, X, target.Y, jnp.asarray(index), likelihood=likelihood)
    return np.asarray(map_draws(fn, arrays))
