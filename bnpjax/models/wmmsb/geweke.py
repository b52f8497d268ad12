"""The Geweke protocol of the WMMSB (Geweke 2004): prior draws of the collapsed Gibbs state,
data draws given the indicators, and the block counts recomputed after new data.

References
----------
Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
*JASA* 99, 799-804.
"""

from __future__ import annotations

import jax

from bnpjax.models.wmmsb.collapsed_gibbs import GibbsState, _prior_indicators, _with_counts
from bnpjax.models.wmmsb.data import WMMSBData, WMMSBHyper, _check_likelihood

__all__ = ["data_sample", "prior_sample", "refresh"]


def prior_sample(key, data: WMMSBData, hyper: WMMSBHyper, **settings) -> GibbsState:
    """Draw ``theta_i ~ Dirichlet(alpha)`` and every pair's indicators (``theta`` then
    discarded), with the block counts they imply.

    Parameters
    ----------
    key : jax.random.key
    data : WMMSBData
    hyper : WMMSBHyper
    **settings
        The factory's settings (``rank``, ``likelihood``; unused by the prior).

    Returns
    -------
    GibbsState
    """
    del settings
    return _prior_indicators(key, data, hyper)


def data_sample(
    key, state: GibbsState, data: WMMSBData, hyper: WMMSBHyper, *, likelihood="nb", **settings
) -> WMMSBData:
    """Draw the explicit pairs' ``y`` given the indicators.

    ``phi`` from its prior, then ``y ~ Poisson(phi[s, r])`` (bernoulli: ``phi ~ Beta(a,
    b)``, ``y ~ Bernoulli``). With ``phi`` independent of the indicators a priori this is an
    exact draw from ``p(y | z)``.

    Parameters
    ----------
    key : jax.random.key
    state : GibbsState
    data : WMMSBData
    hyper : WMMSBHyper
    likelihood : {"nb", "bernoulli"}
    **settings
        Other factory settings (unused).

    Returns
    -------
    WMMSBData
        ``data`` with new ``y`` (padding stays 0).
    """
    del settings
    _check_likelihood(likelihood)
    K = hyper.alpha.shape[0]
    k1, k2 = jax.random.split(key)
    if likelihood == "bernoulli":
        phi = jax.random.beta(k1, hyper.r, hyper.p, (K, K))
        y = jax.random.bernoulli(k2, phi[state.s, state.r]).astype(data.y.dtype)
    else:
        phi = jax.random.gamma(k1, hyper.r, (K, K)) * hyper.p / (1 - hyper.p)
        y = jax.random.poisson(k2, phi[state.s, state.r]).astype(data.y.dtype)
    return data._replace(y=y * data.w)


def refresh(data: WMMSBData, state: GibbsState, **settings) -> GibbsState:
    """Recompute the block counts from the indicators after ``data`` was redrawn.

    Parameters
    ----------
    data : WMMSBData
    state : GibbsState
    **settings
        The factory's settings (unused: the rank is read from the state).

    Returns
    -------
    GibbsState
    """
    del settings
    return _with_counts(data, state)
