"""Old entry points of ``bnpjax.models.ibp_lg``, kept for one release."""

from __future__ import annotations

import warnings

import numpy as np

from bnpjax.models.ibp_lg import geweke, predict
from bnpjax.models.ibp_lg.data import IBPLGData


def _warn(old, new):
    warnings.warn(f"ibp_lg.{old} is deprecated, use ibp_lg.{new}", FutureWarning, stacklevel=3)


def prior_sample(
    key, num_rows, num_dims, hyper, *, capacity, flags, alpha=1.0, sigma_x=1.0, sigma_a=1.0
):
    """Deprecated: :func:`bnpjax.models.ibp_lg.geweke.prior_sample`."""
    _warn("prior_sample", "geweke.prior_sample(key, data, hyper, **settings)")
    return geweke._prior_state(
        key,
        num_rows,
        num_dims,
        hyper,
        capacity=capacity,
        flags=flags,
        alpha=alpha,
        sigma_x=sigma_x,
        sigma_a=sigma_a,
        background=0.0,  # the old signature knows no offset: held at the data's zero
    )


def data_sample(key, state, data):
    """Deprecated: :func:`bnpjax.models.ibp_lg.geweke.data_sample`."""
    _warn("data_sample", "geweke.data_sample(key, state, data, hyper)")
    return geweke.data_sample(key, state, data)


def refresh(data, state):
    """Deprecated: :func:`bnpjax.models.ibp_lg.geweke.refresh`."""
    _warn("refresh", "geweke.refresh")
    return geweke.refresh(data, state)


def _host_data(X, mask):
    X = np.asarray(X, float)
    mask = np.isfinite(X) if mask is None else np.asarray(mask, bool)
    return IBPLGData(np.where(mask, X, 0.0), mask.astype(float), np.flatnonzero(mask))


def posterior_mean_features(Z, X, sigma_x, sigma_a, mask=None) -> np.ndarray:
    """Deprecated: :func:`bnpjax.models.ibp_lg.feature_means` (over posterior draws).
    ``E[A | Z, X]`` of one ``Z`` for its active columns, shape (K+, D)."""
    _warn("posterior_mean_features", "feature_means(draws, data)")
    Z = np.asarray(Z)
    one = lambda v: np.asarray(v, float)[None, None]  # noqa: E731
    draws = {"posterior": {"Z": one(Z), "sigma_x": one(sigma_x), "sigma_a": one(sigma_a)}}
    means = predict.feature_means(draws, _host_data(X, mask))[0, 0]
    return np.asarray(means)[Z.sum(0) > 0]


def heldout_log_likelihood(idata, X_true, heldout_mask) -> dict:
    """Deprecated: :func:`bnpjax.models.ibp_lg.log_likelihood` with ``test=(X, mask)``.
    The posterior predictive log density of the held-out entries, pooled over draws:
    ``{"pointwise": (entries,), "mean": float}``."""
    from scipy.special import logsumexp

    _warn("heldout_log_likelihood", "log_likelihood(draws, data, test=(X, mask))")
    heldout_mask = np.asarray(heldout_mask, bool)
    X_true = np.asarray(X_true, float)
    if X_true.shape != heldout_mask.shape:
        raise ValueError("X_true and heldout_mask must have the same shape")
    data = _host_data(np.zeros(X_true.shape), np.ones(X_true.shape, bool))
    ll = predict.log_likelihood(idata, data, test=(X_true, heldout_mask))
    draws = ll.reshape(-1, ll.shape[-1])
    pointwise = logsumexp(draws, axis=0) - np.log(draws.shape[0])
    return {"pointwise": pointwise, "mean": float(pointwise.mean())}
