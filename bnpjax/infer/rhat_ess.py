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

import functools
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from bnpjax.infer.sharding import usable_cores

__all__ = ["ess_bulk", "ess_tail", "split_rhat", "summary_estimates"]

#: draws per block of columns (:func:`_in_column_blocks`; 2 MB of float64)
_BLOCK_VALUES = 1 << 18
#: the fractional offset of Blom's normal scores (Vehtari et al. 2021, eq. 14)
_BLOM_OFFSET = 3.0 / 8.0


def _as_columns(values) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    if values.ndim != 3:
        raise ValueError(f"values must have shape (chain, draw, column), got {values.shape}")
    return values


def _in_column_blocks(estimator):
    """``estimator`` (of ``(chain, draw, column)`` values, one estimate per column, or a tuple
    of them) run on a block of columns at a time: each column's estimates are its own, and
    the work arrays of a block stay small enough to be reused from block to block, where
    whole (about 120 MB for 4 x 1000 draws of 600 columns) they were fresh memory that took
    longer to fault in than the arithmetic. The blocks run on a thread per core."""

    @functools.wraps(estimator)
    def blocked(values, *args, **kwargs):
        values = _as_columns(values)
        chains, draws, columns = values.shape
        step = max(1, _BLOCK_VALUES // (4 * chains * draws))
        if columns <= step:
            return estimator(values, *args, **kwargs)
        starts = range(0, columns, step)
        workers = min(len(starts), usable_cores())

        def block(a):
            return estimator(values[:, :, a : a + step], *args, **kwargs)

        if workers > 1:
            # NumPy's sorts, FFTs and array arithmetic release the interpreter's lock: the
            # blocks run side by side (600 columns of 4 x 1000 draws: 0.50 -> 0.27 s, 2 cores).
            # What the estimators import is imported here first: not by several threads at once
            import scipy.special  # noqa: F401

            with ThreadPoolExecutor(workers) as pool:
                parts = list(pool.map(block, starts))
        else:
            parts = [block(a) for a in starts]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate(part) for part in zip(*parts, strict=True))
        return np.concatenate(parts)

    return blocked


def _split_chains(values: np.ndarray) -> np.ndarray:
    """Each chain's first and last halves as two chains (the middle draw of an odd length is
    dropped), so that a trend within a chain shows as disagreement between chains."""
    half = values.shape[1] // 2
    return np.concatenate([values[:, :half], values[:, values.shape[1] - half :]], axis=0)


def _sort_columns(values: np.ndarray):
    """Each column's pooled draws (column, chain * draw) and the order that sorts them."""
    chains, draws, columns = values.shape
    pooled = np.ascontiguousarray(values.reshape(chains * draws, columns).T)
    order = np.argsort(pooled, axis=1)  # ties are averaged below: no need for a stable sort
    return pooled, order, np.take_along_axis(pooled, order, axis=1)


def _normal_scores(values: np.ndarray, sorted_columns=None) -> np.ndarray:
    """Blom's normal scores of the pooled draws of each column: ties share their average rank,
    which matters for the integer quantities (K+) these diagnostics often see. Every column
    at once (one sort, or ``sorted_columns`` from :func:`_sort_columns`), so that a run's
    hundreds of thresholds or weights cost one call.

    An average rank is ``(first + last) / 2 + 1`` for the 0-based sorted positions of a run of
    ties, so the scores come from a table of the ``2 size - 1`` possible values of
    ``first + last`` (one ``ndtri`` per table entry, not per draw); without ties ``first =
    last`` is the position, and only the columns with ties are searched for their runs."""
    from scipy.special import ndtri

    size = values.shape[0] * values.shape[1]
    pooled, order, ordered = sorted_columns or _sort_columns(values)
    table = ndtri(
        (np.arange(2 * size - 1) / 2.0 + 1.0 - _BLOM_OFFSET) / (size - 2 * _BLOM_OFFSET + 1)
    )
    position = np.arange(size)
    twice = np.broadcast_to(2 * position, ordered.shape)
    tied = (ordered[:, 1:] == ordered[:, :-1]).any(axis=1)
    if tied.any():
        runs = ordered[tied]
        starts = np.ones(runs.shape, dtype=bool)
        starts[:, 1:] = runs[:, 1:] != runs[:, :-1]
        ends = np.ones(runs.shape, dtype=bool)
        ends[:, :-1] = starts[:, 1:]
        # the first and last sorted positions of each draw's run of ties
        first = np.maximum.accumulate(np.where(starts, position, 0), axis=1)
        last = np.minimum.accumulate(np.where(ends, position, size - 1)[:, ::-1], axis=1)
        twice = twice.copy()
        twice[tied] = first + last[:, ::-1]
    scores = np.empty_like(pooled)
    np.put_along_axis(scores, order, table[twice], axis=1)
    return scores.T.reshape(values.shape)


def _sorted_quantile(ordered: np.ndarray, probability: float) -> np.ndarray:
    """``np.quantile(x, probability, axis=...)`` (its default, R's type 7) of each row of
    ``ordered``, rows already sorted: the same index arithmetic and interpolation as NumPy's,
    so the same values, without NumPy's partition of every row."""
    size = ordered.shape[1]
    virtual = (size - 1) * np.asarray(probability, dtype=float)
    below = int(np.floor(virtual))
    above = min(below + 1, size - 1)
    gamma = virtual - below
    a, b = ordered[:, below], ordered[:, above]
    difference = b - a
    if gamma >= 0.5:  # NumPy's branch of its interpolation, for the same rounding
        return b - difference * (1 - gamma)
    return a + difference * gamma


def _sorted_median(ordered: np.ndarray) -> np.ndarray:
    """``np.median`` of each row of ``ordered``, rows already sorted (the same values)."""
    size = ordered.shape[1]
    middle = size // 2
    if size % 2:
        return ordered[:, middle].copy()
    return (ordered[:, middle - 1] + ordered[:, middle]) / 2.0


def _rhat(values: np.ndarray) -> np.ndarray:
    """The potential scale reduction of chains already split (eq. 3-4); NaN where every chain
    is constant."""
    draws = values.shape[1]
    within = values.var(axis=1, ddof=1).mean(axis=0)
    between = draws * values.mean(axis=1).var(axis=0, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.sqrt((between / within + draws - 1) / draws)


def _split_rhat_of(split: np.ndarray, bulk_scores: np.ndarray, median) -> np.ndarray:
    """:func:`split_rhat` of chains already split, given their normal scores and each
    column's median."""
    bulk = _rhat(bulk_scores)
    folded = np.abs(split - median)
    tail = _rhat(_normal_scores(folded))
    return np.where(np.isnan(bulk) | (tail > bulk), tail, bulk)


@_in_column_blocks
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
    split = _split_chains(values)
    sorted_columns = _sort_columns(split)
    scores = _normal_scores(split, sorted_columns)
    out = _split_rhat_of(split, scores, _sorted_median(sorted_columns[2]))
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


def _geyer_tau(rho: np.ndarray, size: int) -> np.ndarray:
    """The integrated autocorrelation time of each column from its autocorrelations ``rho``
    (lag, column), by Geyer's initial monotone sequence as Stan and ArviZ compute it (Vehtari
    et al. 2021, appendix A), for every column at once.

    The sums of consecutive pairs of lags, :math:`P_0 = 1 + \\rho_1` and :math:`P_j =
    \\rho_{2j} + \\rho_{2j+1}`, are read while positive (the initial positive sequence; ``J``
    pairs, at most as many as leave three lags to spare) and made non-increasing by a running
    minimum (the initial monotone sequence); the even lag after them is added when it is
    positive or its pair's sum is not negative."""
    lags, columns = rho.shape
    last_pair = max(0, (lags - 3) // 2)  # the pairs Stan's loop may read, lags 2..2 last + 1
    pairs = np.empty((last_pair + 1, columns))
    pairs[0] = 1.0 + rho[1]
    pairs[1:] = rho[2 : 2 * last_pair + 1 : 2] + rho[3 : 2 * last_pair + 2 : 2]
    not_positive = ~(pairs[:last_pair] > 0.0)
    num_pairs = np.full(columns, last_pair)
    if last_pair:
        num_pairs = np.where(not_positive.any(axis=0), not_positive.argmax(axis=0), last_pair)
    monotone = np.minimum.accumulate(pairs, axis=0)
    kept = np.arange(last_pair + 1)[:, None] < num_pairs
    summed = np.where(kept, monotone, 0.0).sum(axis=0)
    cols = np.arange(columns)
    even = rho[2 * num_pairs, cols]
    after = np.where((pairs[num_pairs, cols] >= 0.0) | (even > 0.0), even, 0.0)
    after = np.where(num_pairs == 0, 1.0, after)  # lag 0's 1, when no pair was read
    tau = -1.0 + 2.0 * summed + after
    return np.maximum(tau, 1.0 / np.log10(size))


def _ess(values: np.ndarray) -> np.ndarray:
    """ESS of each column of chains already split (or transformed): (chain, draw, column)."""
    chains, draws, _ = values.shape
    autocovariance = _autocovariance(values)
    means = values.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_var = autocovariance[:, 0].mean(axis=0) * draws / (draws - 1.0)
        var_plus = mean_var * (draws - 1.0) / draws
        if chains > 1:
            var_plus = var_plus + means.var(axis=0, ddof=1)
        rho = 1.0 - (mean_var - autocovariance.mean(axis=0)) / var_plus  # (lag, column)
        out = chains * draws / _geyer_tau(rho, chains * draws)
    # constant: every draw is as good as independent
    constant = np.ptp(values, axis=(0, 1)) < np.finfo(float).resolution
    out = np.where(constant, float(chains * draws), out)
    return np.where(np.isnan(values).any(axis=(0, 1)), np.nan, out)


@_in_column_blocks
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
    out = _ess(_normal_scores(_split_chains(values)))
    out[np.isnan(values).any(axis=(0, 1))] = np.nan
    return out


@_in_column_blocks
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
    return _ess_tail(values, probabilities)


def _ess_tail(values, probabilities=(0.05, 0.95), ordered=None) -> np.ndarray:
    """:func:`ess_tail`; ``ordered``: each column's pooled draws sorted (column, draw), when
    known, for the quantiles. Both indicators' ESS in one call."""
    nan = np.isnan(values).any(axis=(0, 1))
    filled = np.where(nan, 0.0, values)
    if ordered is None:
        ordered = np.sort(filled.reshape(-1, filled.shape[2]).T, axis=1)
    # R's type 7 quantile, numpy's default
    indicators = [filled <= _sorted_quantile(ordered, p) for p in probabilities]
    ess = _ess(_split_chains(np.concatenate(indicators, axis=2).astype(float)))
    # the smaller of the two, a NaN ignored (as a running np.fmin from infinity)
    out = np.fmin.reduce(ess.reshape(len(probabilities), -1), axis=0, initial=np.inf)
    out[nan] = np.nan
    return out


@_in_column_blocks
def summary_estimates(values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`ess_bulk`, :func:`ess_tail` and :func:`split_rhat` (NaN for one chain) of each
    column at once: the split chains' normal scores, a sort of every column's pooled draws
    and most of the cost for hundreds of columns, are computed once for the bulk ESS and the
    R-hat (identical results).

    Parameters
    ----------
    values : array_like, shape (chain, draw, column)
        At least four draws.

    Returns
    -------
    tuple of numpy.ndarray, each of shape (column,)
        Bulk ESS, tail ESS, split R-hat.
    """
    nan = np.isnan(values).any(axis=(0, 1))
    split = _split_chains(values)
    sorted_columns = _sort_columns(split)
    scores = _normal_scores(split, sorted_columns)
    bulk = _ess(scores)
    bulk[nan] = np.nan
    # with an even number of draws the split chains hold every draw: the quantiles and the
    # median come from their sort (NaN columns are NaN whatever they read)
    ordered = sorted_columns[2] if values.shape[1] % 2 == 0 else None
    tail = _ess_tail(values, ordered=ordered)
    if values.shape[0] < 2:
        return bulk, tail, np.full(bulk.shape, np.nan)
    median = _sorted_median(sorted_columns[2])
    rhat = _split_rhat_of(split, scores, median)
    rhat[nan] = np.nan
    return bulk, tail, rhat
