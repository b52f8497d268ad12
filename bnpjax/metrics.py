"""Evaluation metrics shared by the models (host-side NumPy; inputs are array-likes)."""

from __future__ import annotations

import numpy as np

from bnpjax.infer.checks import check_integer

__all__ = ["log_mean_exp", "mae", "nmae", "nmae_uniform", "rmse", "roc_auc"]


def _pair(y_true, y_pred):
    y_true = np.asarray(y_true, float).ravel()
    y_pred = np.asarray(y_pred, float).ravel()
    if y_true.shape != y_pred.shape:
        raise ValueError(f"y_true and y_pred differ in size: {y_true.size} vs {y_pred.size}")
    if y_true.size == 0:
        raise ValueError("y_true is empty")
    return y_true, y_pred


def rmse(y_true, y_pred) -> float:
    """Root mean squared error."""
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.sqrt(np.mean((y_true - y_pred) ** 2)))


def mae(y_true, y_pred) -> float:
    """Mean absolute error."""
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean(np.abs(y_true - y_pred)))


def nmae(y_true, y_pred, *, low: float, high: float) -> float:
    """MAE normalised by the range of the rating scale, ``MAE / (high - low)`` (Marlin 2004),
    the measure of the max-margin matrix factorization literature."""
    if not high > low:
        raise ValueError(f"high must exceed low, got low={low}, high={high}")
    return mae(y_true, y_pred) / (high - low)


def roc_auc(y_true, score) -> float:
    """Area under the ROC curve by the Mann-Whitney statistic (ties count one half)."""
    y_true, score = _pair(y_true, score)
    positive = y_true > 0.5
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("roc_auc needs both positive and negative labels")
    from scipy.stats import rankdata

    ranks = rankdata(score)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def log_mean_exp(log_values, axis=0) -> np.ndarray:
    """``log(mean(exp(x)))`` along ``axis``, stably: the posterior predictive log density of
    held-out data from per-draw log-likelihoods."""
    x = np.asarray(log_values, float)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    out = np.log(np.mean(np.exp(x - top), axis=axis, keepdims=True)) + top
    return np.squeeze(out, axis=axis)


# --------------------------------------------------------------------------------------------
# max-margin matrix factorization (Marlin 2004; the M3F / iPM3F literature)


def nmae_uniform(y_true, y_pred, *, num_levels: int) -> float:
    """MAE divided by the expected MAE of guessing uniformly at random on ``1..L`` for
    uniformly distributed ratings, :math:`\\sum_{k=2}^{L} k(k-1) / L^2` (1.6 for L = 5): the
    NMAE of Marlin (2004) and of the M3F papers (Xu, Zhu & Zhang 2013)."""
    check_integer(num_levels, "num_levels", 2)
    expected = sum(k * (k - 1) for k in range(2, num_levels + 1)) / num_levels**2
    return mae(y_true, y_pred) / expected
