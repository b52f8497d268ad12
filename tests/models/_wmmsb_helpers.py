"""Shared helpers of the WMMSB tests: planted-block networks and the held-out AUC."""

import numpy as np

from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb


def planted(seed, N=40, K=3, directed=True, within=3.0, between=0.05):
    """Poisson counts from ``K`` planted blocks, 20% of the pairs held out."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, N)
    rates = np.full((K, K), between)
    np.fill_diagonal(rates, within)
    Y = rng.poisson(rates[z][:, z])
    np.fill_diagonal(Y, 0)
    held = rng.random((N, N)) < 0.2
    np.fill_diagonal(held, False)
    if not directed:
        Y = np.triu(Y, 1)
        Y = Y + Y.T
        held = np.triu(held, 1)
        held = held | held.T
    return Y, held


def held_pairs(held, directed=True):
    upper = np.triu(np.ones_like(held), 1).astype(bool)
    return np.nonzero(held & (True if directed else upper))


def auc(Y, held, state, hyper, likelihood, directed=True):
    """Held-out AUC of the plug-in link probability of one state's (expected) counts."""
    ii, jj = held_pairs(held, directed)
    score = wmmsb.expected_link_probability(state, hyper, ii, jj, likelihood=likelihood)
    return roc_auc(Y[ii, jj] > 0, np.asarray(score))
