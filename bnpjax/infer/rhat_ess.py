"""Rank-normalised split R-hat and bulk and tail effective sample sizes, in NumPy.

The estimators of Vehtari, Gelman, Simpson, Carpenter and Buerkner (2021), the ones Stan,
NumPyro and ArviZ report, written against plain arrays so that a fit's convergence check does
not import ArviZ and xarray (about 1.5 s of a fresh process's first fit, more than sampling a
small model takes). :mod:`bnpjax.infer.diagnostics` uses them; they agree with ArviZ 0.x's
``rhat(method="rank")``, ``ess(method="bulk")`` and ``ess(method="tail")`` to rounding
(tested).

Every function takes ``values`` of shape (chain, draw, column) and returns one estimate per
column, so that all the scalars of a run are diagnosed in one call.

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Buerkner, P.-C. (2021).
Rank-normalization, folding, and localization: an improved R-hat for assessing convergence of
MCMC. Bayesian Analysis 16(2), 667-718 (R-hat: eqs. 3-4 and section 4; ESS: section 3.2 and
appendix A, Geyer's initial monotone sequence).

Geyer, C. J. (1992). Practical Markov chain Monte Carlo. Statistical Science 7(4), 473-483.

Blom, G. (1958). Statistical Estimates and Transformed Beta-Variables. Wiley (the 3/8 offset
of the normal scores).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ess_bulk", "ess_tail", "split_rhat"]

#: the fractional offset of Blom's normal scores (Vehtari et al. 2021, eq. 14)
_BLOM_OFFSET = 3.0 / 8.0


def _as_columns(values) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if values.ndim != 3:
        raise ValueError(f"values must have shape (chain, draw, column), got {values.shape}")
    return values


def _split_chains(values: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as two chains (the middle draw of an odd length is
    dropped), so that a trend within a chain shows as disagreement between chains."""
    half = values.shape[1] // 2
    return np.concatenate([values[:, :half], values[:, values.shape[1] - half :]], axis=0)


def _normal_scores(values: np.ndarray) -> np.ndarray:
    """Blom's normal scores of the pooled draws of each column: ties share their average rank,
    which matters for the integer quantities (K+) these diagnostics often see."""
    from scipy.special import ndtri

    chains, draws, columns = values.shape
    pooled = values.reshape(chains * draws, columns)
    ranks = np.empty_like(pooled)
    for column in range(columns):
        ordered = np.sort(pooled[:, column])
        below = np.searchsorted(ordered, pooled[:, column], side="left")
        at_or_below = np.searchsorted(ordered, pooled[:, column], side="right")
        ranks[:, column] = (below + at_or_below + 1) / 2.0  # average 1-based rank of the tie
    size = chains * draws
    scores = ndtri((ranks - _BLOM_OFFSET) / (size - 2 * _BLOM_OFFSET + 1))
    return scores.reshape(values.shape)


def _rhat(values: np.ndarray) -> np.ndarray:
    """The potential scale reduction of chains already split (eq. 3-4); NaN where every chain
    is constant."""
    draws = values.shape[1]
    within = values.var(axis=1, ddof=1).mean(axis=0)
    between = draws * values.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + draws - 1) / draws)


def split_rhat(values) -> np.ndarray:
    """Rank-normalised split R-hat of each column: the larger of the bulk R-hat (normal scores
    of the draws) and the tail R-hat (normal scores of the draws' distance from the median).

    Parameters
    ----------
    values : array_like, shape (chain, draw, column)
        At least two chains and four draws.

    Returns
    -------
    numpy.ndarray, shape (column,)
        NaN for a column with NaN draws, or constant within every chain.
    """
    values = _as_columns(values)
    split = _split_chains(values)
    bulk = _rhat(_normal_scores(split))
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    tail = _rhat(_normal_scores(folded))
    out = np.where(np.isnan(bulk) | (tail > bulk), tail, bulk)
    out[np.isnan(values).any(axis=(0, 1))] = np.nan
    return out


def _autocovariance(values: np.ndarray) -> np.ndarray:
    """Biased autocovariance of each chain at every lag (divided by the chain's length), by
    FFT with zero padding: (chain, draw, column)."""
    draws = values.shape[1]
    centred = values - values.mean(axis=1, keepdims=True)
    size = 1 << int(2 * draws - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=1)[:, :draws] / draws


def _ess_of_column(autocovariance: np.ndarray, chain_means: np.ndarray) -> float:
    """Geyer's initial monotone sequence estimate of one column's ESS (Vehtari et al. 2021,
    appendix A); ``autocovariance`` (chain, draw), ``chain_means`` (chain,)."""
    chains, draws = autocovariance.shape
    mean_var = autocovariance[:, 0].mean() * draws / (draws - 1.0)
    var_plus = mean_var * (draws - 1.0) / draws
    if chains > 1:
        var_plus += chain_means.var(ddof=1)
    # rho[t] for every lag at once; the sequences below only read it
    rho = 1.0 - (mean_var - autocovariance.mean(axis=0)) / var_plus
    kept = np.zeros(draws)
    kept[0], kept[1] = 1.0, rho[1]
    even, odd = 1.0, rho[1]
    # Geyer's initial positive sequence: pairs (t + 1, t + 2) while the last pair's sum is
    # positive; a pair with a negative sum is not kept
    t = 1
    while t < draws - 3 and even + odd > 0.0:
        even, odd = rho[t + 1], rho[t + 2]
        if even + odd >= 0.0:
            kept[t + 1], kept[t + 2] = even, odd
        t += 2
    max_lag = t - 2
    if even > 0.0:  # the last even lag still carries information
        kept[max_lag + 1] = even
    # Geyer's initial monotone sequence: no pair's sum above the previous pair's
    t = 1
    while t <= max_lag - 2:
        if kept[t + 1] + kept[t + 2] > kept[t - 1] + kept[t]:
            kept[t + 1] = kept[t + 2] = (kept[t - 1] + kept[t]) / 2.0
        t += 2
    tail = kept[max_lag + 1] if max_lag + 1 < draws else 0.0
    size = chains * draws
    tau = -1.0 + 2.0 * kept[: max_lag + 1].sum() + tail
    tau = max(tau, 1.0 / np.log10(size))
    return size / tau


def _ess(values: np.ndarray) -> np.ndarray:
    """ESS of each column of chains already split (or transformed): (chain, draw, column)."""
    columns = values.shape[2]
    out = np.full(columns, np.nan)
    autocovariance = _autocovariance(values)
    means = values.mean(axis=1)
    for column in range(columns):
        column_values = values[:, :, column]
        if np.isnan(column_values).any():
            continue
        if np.ptp(column_values) < np.finfo(float).resolution:
            out[column] = column_values.size  # constant: every draw is as good as independent
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            out[column] = _ess_of_column(autocovariance[:, :, column], means[:, column])
    return out


def ess_bulk(values) -> np.ndarray:
    """Bulk effective sample size of each column: the ESS of the split chains' normal scores.

    Parameters
    ----------
    values : array_like, shape (chain, draw, column)
        At least four draws.

    Returns
    -------
    numpy.ndarray, shape (column,)
        NaN for a column with NaN draws.
    """
    values = _as_columns(values)
    out = _ess(_normal_scores(_split_chains(values)))
    out[np.isnan(values).any(axis=(0, 1))] = np.nan
    return out


def ess_tail(values, probabilities=(0.05, 0.95)) -> np.ndarray:
    """Tail effective sample size of each column: the smaller ESS of the indicators of being
    at or below the 5% and the 95% quantiles (split chains).

    Parameters
    ----------
    values : array_like, shape (chain, draw, column)
        At least four draws.
    probabilities : pair of float
        The two quantiles.

    Returns
    -------
    numpy.ndarray, shape (column,)
        NaN for a column with NaN draws.
    """
    values = _as_columns(values)
    nan = np.isnan(values).any(axis=(0, 1))
    filled = np.where(np.isnan(values), 0.0, values)
    pooled = filled.reshape(-1, filled.shape[2])
    out = np.full(values.shape[2], np.inf)
    for probability in probabilities:
        # R's type 7 quantile, numpy's default
        quantile = np.quantile(pooled, probability, axis=0)
        out = np.fmin(out, _ess(_split_chains((filled <= quantile).astype(float))))
    out[nan] = np.nan
    return out
