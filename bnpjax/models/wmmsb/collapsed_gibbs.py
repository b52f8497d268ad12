r"""Collapsed Gibbs sampler of the WMMSB / MMSB: memberships and block parameters integrated
out, the indicator pair of each observed pair drawn from

.. math::

    P(s_{ij}=k, r_{ij}=k' \mid \cdot) \propto (n^{-ij}_{ik} + \alpha_k)
        (n^{-ij}_{jk'} + \alpha_{k'})\, \mathrm{pred}(y_{ij} \mid n^{Y,-ij}_{kk'},
        n^{\Phi,-ij}_{kk'}).

Pairs are visited in sequence (a ``lax.scan``): every pair is coupled to every other through
the block counts; the ``K x K`` joint of one pair is one vectorised categorical draw.

References
----------
Airoldi, E. M., Blei, D. M., Fienberg, S. E. and Xing, E. P. (2008). Mixed membership
stochastic blockmodels. *JMLR* 9, 1981-2014.

Dulac, A. (2020). *Contributions to stochastic blockmodels for weighted networks*, PhD
thesis, Université Grenoble Alpes, appendix "WMMSB inference derivations" (the collapsed
Gibbs conditional stated after equation ``eq1``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.special import gammaln

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, as_step, bind, concrete_or_none
from bnpjax.infer.checks import renamed_arguments
from bnpjax.models.wmmsb.data import (
    WMMSBData,
    WMMSBHyper,
    _check_common,
    _check_zeros_held,
    _num_nodes,
    _observed_spec,
    _resolve_hyper,
)
from bnpjax.models.wmmsb.likelihood import _log_mixture_pred, _log_pred, _log_theta
from bnpjax.ops import sample_categorical, segment_sum

__all__ = ["GibbsInfo", "GibbsState", "build_step", "collapsed_gibbs", "init"]


class GibbsState(NamedTuple):
    r"""State of :func:`collapsed_gibbs`: the indicator pair of every observed pair and the
    block counts they imply (``P`` explicit pairs, ``Z`` listed zero pairs).

    ``s``, ``r``: sender class :math:`z_{i\to j}` and receiver class :math:`z_{i\leftarrow j}`
    of each explicit pair (``(P,)`` int); ``zs``, ``zr``: the same for the listed zero pairs
    (``(Z,)``); ``n_node``: :math:`n_{ik}`, indicators drawn from :math:`\theta_i` equal to
    ``k`` (``(N, K)``); ``n_y``: :math:`n^Y_{kk'}`, summed counts per block; ``n_phi``:
    :math:`n^\Phi_{kk'}`, pairs per block (both ``(K, K)``; padding has weight 0).
    """

    s: jax.Array  # (P,) sender classes of explicit pairs
    r: jax.Array  # (P,) receiver classes
    zs: jax.Array  # (Z,) same for implicit zeros
    zr: jax.Array
    n_node: jax.Array  # (N, K)
    n_y: jax.Array  # (K, K)
    n_phi: jax.Array  # (K, K)


class GibbsInfo(NamedTuple):
    r"""Per-step diagnostics of :func:`collapsed_gibbs`: ``lp``, the collapsed log joint
    :math:`\log p(Y, Z)` of the observed pairs after the sweep, :math:`\theta` and
    :math:`\phi` integrated out (Dirichlet-multinomial times Gamma-Poisson or Beta-Bernoulli
    block terms, the :math:`-\log y!` terms included)."""

    lp: jax.Array


def _counts(data, s, r, zs, zr, K):
    N = _num_nodes(data)
    oh_s = jax.nn.one_hot(s, K, dtype=data.y.dtype) * data.w[:, None]
    oh_r = jax.nn.one_hot(r, K, dtype=data.y.dtype) * data.w[:, None]
    zoh_s = jax.nn.one_hot(zs, K, dtype=data.y.dtype) * data.zw[:, None]
    zoh_r = jax.nn.one_hot(zr, K, dtype=data.y.dtype) * data.zw[:, None]
    n_node = (
        segment_sum(oh_s, data.src, N)
        + segment_sum(oh_r, data.dst, N)
        + segment_sum(zoh_s, data.zsrc, N)
        + segment_sum(zoh_r, data.zdst, N)
    )
    n_phi = oh_s.T @ oh_r + zoh_s.T @ zoh_r
    n_y = (oh_s * data.y[:, None]).T @ oh_r
    return n_node, n_y, n_phi


def _with_counts(data, state: GibbsState) -> GibbsState:
    """``state`` with the block counts recomputed from its indicators and ``data``."""
    K = state.n_node.shape[-1]
    counts = _counts(data, state.s, state.r, state.zs, state.zr, K)
    return state._replace(**dict(zip(("n_node", "n_y", "n_phi"), counts, strict=True)))


def _sweep(key, pairs, classes, counts, hyper, likelihood, exclude_own=True):
    """One sequential sweep over ``pairs = (src, dst, y, w)``; ``classes = (s, r)``.
    ``exclude_own=False`` leaves the pair in its own block counts while its conditional is
    computed (a wrong kernel; the Geweke tests build it to check that they catch it)."""
    src, dst, y, w = pairs
    K = hyper.alpha.shape[0]

    def visit(carry, xs):
        n_node, n_y, n_phi = carry
        i, j, yy, ww, s, r, k = xs
        own = jnp.zeros((K, K), n_y.dtype).at[s, r].set(ww)
        ni = n_node[i] - ww * jax.nn.one_hot(s, K, dtype=n_y.dtype)
        nj = n_node[j] - ww * jax.nn.one_hot(r, K, dtype=n_y.dtype)
        removed = own if exclude_own else jnp.zeros_like(own)
        ny, nphi = n_y - yy * removed, n_phi - removed
        logits = (
            jnp.log(ni + hyper.alpha)[:, None]
            + jnp.log(nj + hyper.alpha)[None, :]
            + _log_pred(yy, ny, nphi, hyper.r, hyper.p, likelihood)
        )
        c = sample_categorical(k, logits.reshape(-1))
        s_new, r_new = c // K, c % K
        keep = ww > 0
        s_new, r_new = jnp.where(keep, s_new, s), jnp.where(keep, r_new, r)
        add = jnp.zeros((K, K), n_y.dtype).at[s_new, r_new].set(ww)
        n_node = n_node.at[i].set(ni + ww * jax.nn.one_hot(s_new, K, dtype=n_y.dtype))
        n_node = n_node.at[j].set(nj + ww * jax.nn.one_hot(r_new, K, dtype=n_y.dtype))
        return (n_node, n_y - yy * own + yy * add, n_phi - own + add), (s_new, r_new)

    keys = jax.random.split(key, src.shape[0])
    counts, (s, r) = lax.scan(visit, counts, (src, dst, y, w, *classes, keys))
    return (s, r), counts


def _log_dirichlet_multinomial(counts, alpha):
    return (
        gammaln(alpha.sum())
        - gammaln(alpha.sum() + counts.sum(-1))
        + jnp.sum(gammaln(alpha + counts) - gammaln(alpha), -1)
    )


def _collapsed_lp(data, hyper, n_node, n_y, n_phi, likelihood):
    """log p(Y, Z) with theta and phi integrated out (nb: the -log y! terms included)."""
    lp = jnp.sum(_log_dirichlet_multinomial(n_node, hyper.alpha))
    if likelihood == "bernoulli":
        a, b = hyper.r, hyper.p
        lp += jnp.sum(
            gammaln(a + b)
            - gammaln(a)
            - gammaln(b)
            + gammaln(a + n_y)
            + gammaln(b + n_phi - n_y)
            - gammaln(a + b + n_phi)
        )
    else:
        r, theta = hyper.r, hyper.p / (1 - hyper.p)
        lp += jnp.sum(
            gammaln(r + n_y)
            - gammaln(r)
            + n_y * jnp.log(theta / (n_phi * theta + 1))
            - r * jnp.log1p(n_phi * theta)
        )
        lp -= jnp.sum(data.w * gammaln(data.y + 1))
    return lp


def _step(data, hyper, key, state, *, likelihood, exclude_own=True):
    k1, k2 = jax.random.split(key)
    counts = (state.n_node, state.n_y, state.n_phi)
    (s, r), counts = _sweep(
        k1,
        (data.src, data.dst, data.y, data.w),
        (state.s, state.r),
        counts,
        hyper,
        likelihood,
        exclude_own,
    )
    zeros = jnp.zeros_like(data.zw)
    (zs, zr), counts = _sweep(
        k2,
        (data.zsrc, data.zdst, zeros, data.zw),
        (state.zs, state.zr),
        counts,
        hyper,
        likelihood,
        exclude_own,
    )
    new = GibbsState(s, r, zs, zr, *counts)
    return new, GibbsInfo(_collapsed_lp(data, hyper, *counts, likelihood))


def _prior_indicators(key, data, hyper) -> GibbsState:
    """``theta_i ~ Dir(alpha)`` and every pair's indicators (theta then discarded)."""
    N = _num_nodes(data)
    k1, k2, k3, k4, k5 = jax.random.split(key, 5)
    log_theta = jnp.log(jax.random.dirichlet(k1, hyper.alpha, (N,)))
    s = sample_categorical(k2, log_theta[data.src])
    r = sample_categorical(k3, log_theta[data.dst])
    zs = sample_categorical(k4, log_theta[data.zsrc])
    zr = sample_categorical(k5, log_theta[data.zdst])
    K = hyper.alpha.shape[0]
    return GibbsState(s, r, zs, zr, *_counts(data, s, r, zs, zr, K))


def init(key, data: WMMSBData, hyper: WMMSBHyper, **settings) -> GibbsState:
    """Initial state: indicators drawn from the prior, with their block counts.

    Parameters
    ----------
    key : jax.random.key
    data : WMMSBData
    hyper : WMMSBHyper
    **settings
        The factory's settings (unused: the prior draw does not depend on them).

    Returns
    -------
    GibbsState
    """
    del settings
    return _with_counts(data, _prior_indicators(key, data, hyper))


def build_step(*, likelihood: str = "nb"):
    """The transition ``step(key, state, data, hyper) -> (state, info)``: one sweep over the
    explicit pairs, then one over the listed zeros.

    Parameters
    ----------
    likelihood : {"nb", "bernoulli"}

    Returns
    -------
    callable
    """

    return as_step(_step, likelihood=likelihood)


def _init(data, hyper, key):
    return init(key, data, hyper)


def _trace(data, hyper, explicit, zero, state, info, *, likelihood):
    out = {
        "posterior": {"n_node": state.n_node, "n_y": state.n_y, "n_phi": state.n_phi},
        "sample_stats": {"lp": info.lp},
    }
    if explicit is not None:
        out["log_likelihood"] = {"y": _pointwise(data, hyper, state, explicit, zero, likelihood)}
    return out


def _pointwise(data, hyper, state, explicit, zero, likelihood):
    """Log predictive of every observed pair (explicit, then listed zeros) under the counts."""
    lt = _log_theta(state.n_node, hyper.alpha)
    stats = (state.n_y, state.n_phi, hyper.r, hyper.p, likelihood)
    a = _log_mixture_pred(lt, data.src[explicit], data.dst[explicit], data.y[explicit], *stats)
    zy = jnp.zeros(zero.shape[0], data.y.dtype)
    b = _log_mixture_pred(lt, data.zsrc[zero], data.zdst[zero], zy, *stats)
    return jnp.concatenate([a, b])


def _observed(data):
    """Host indices of the real (unpadded) explicit and zero pairs, or (None, None) while
    ``data`` is traced."""
    w, zw = concrete_or_none(data.w), concrete_or_none(data.zw)
    if w is None or zw is None:
        return None, None
    return np.nonzero(w > 0)[0].astype(np.int32), np.nonzero(zw > 0)[0].astype(np.int32)


def _build(data, hyper, likelihood, exclude_own=True):
    explicit, zero = _observed(data)
    observed, coords = ({}, {}) if explicit is None else _observed_spec(data)
    block = ["community", "community_to"]
    trace_args = (explicit, zero)
    if explicit is not None:
        trace_args = (jnp.asarray(explicit), jnp.asarray(zero))
    return SamplingAlgorithm(
        init=bind(_init, data, hyper),
        step=bind(_step, data, hyper, likelihood=likelihood, exclude_own=exclude_own),
        trace=bind(_trace, data, hyper, *trace_args, likelihood=likelihood),
        spec=ArvizSpec(
            name=f"wmmsb.collapsed_gibbs.{likelihood}",
            dims={"n_node": ["node", "community"], "n_y": block, "n_phi": block, "y": ["obs"]},
            coords=coords,
            observed_data=observed,
            settings={"likelihood": likelihood},
        ),
    )


@renamed_arguments(K="rank")
def collapsed_gibbs(
    data: WMMSBData,
    hyper: WMMSBHyper | None = None,
    *,
    rank: int | None = None,
    likelihood: str = "nb",
) -> SamplingAlgorithm:
    """Collapsed Gibbs sampler of the WMMSB (fixed ``r``, ``p``) or the MMSB.

    Parameters
    ----------
    data : WMMSBData
        From :func:`make_data` or :func:`make_network` with the observed zeros listed
        (``zeros="list"``).
    hyper : WMMSBHyper, optional
        Default ``make_hyper(rank, likelihood=likelihood)``.
    rank : int, optional
        Number of communities (required when ``hyper`` is None).
    likelihood : {"nb", "bernoulli"}

    Returns
    -------
    SamplingAlgorithm
        Posterior: the counts ``n_node``, ``n_y``, ``n_phi``; ``sample_stats.lp`` the
        collapsed log joint; ``log_likelihood.y`` the pointwise log predictive of every
        observed pair given the counts.

    References
    ----------
    Dulac (2020), appendix "WMMSB inference derivations", the conditional after ``eq1``.
    """
    if not isinstance(likelihood, str) or likelihood not in ("nb", "bernoulli"):
        raise ValueError(
            f"likelihood must be 'nb' or 'bernoulli' for collapsed Gibbs, got {likelihood!r}"
        )
    hyper = _resolve_hyper(hyper, rank, likelihood)
    _check_common(data, hyper, likelihood)
    if data.zmask.shape[0]:
        raise ValueError("data: collapsed Gibbs needs the observed zeros listed (zeros='list')")
    _check_zeros_held(data, "collapsed Gibbs")
    return _build(data, hyper, likelihood)


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `collapsed_gibbs.init` and `.build_step`.
collapsed_gibbs.init = init
collapsed_gibbs.build_step = build_step
