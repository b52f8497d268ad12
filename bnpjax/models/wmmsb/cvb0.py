r"""Synchronous collapsed variational Bayes (CVB0) for the WMMSB / MMSB.

:math:`\gamma_{ijkk'}` replaces the indicator pair of each observed pair by its variational
joint and every count by its expectation under :math:`q` (zero-order form):
:math:`\gamma_{ijkk'} \propto (N^{-ij}_{ik} + \alpha_k)(N^{-ij}_{jk'} + \alpha_{k'})\,
\mathrm{pred}(y_{ij} \mid N^{Y,-ij}_{kk'}, N^{\Phi,-ij}_{kk'})`. Each step updates every pair
from the statistics of the previous step, in chunks of pairs (``lax.scan``); observed zeros
held as a dense mask are updated by matrix products. ``likelihood="bg"`` follows every pass
with the closed-form Beta-Gamma updates of :math:`E_q[r_{kk'}]`, :math:`E_q[p_{kk'}]`.

CVB0 is an optimiser: :func:`cvb0` returns a :class:`bnpjax.infer.VariationalAlgorithm` run
by :func:`bnpjax.fit`.

References
----------
Asuncion, A., Welling, M., Smyth, P. and Teh, Y. W. (2009). On smoothing and inference for
topic models. *UAI* (CVB0).

Dulac, A. (2020). *Contributions to stochastic blockmodels for weighted networks*, PhD
thesis, Université Grenoble Alpes, appendix "WMMSB inference derivations" (equation ``eq1``
and the Beta-Gamma updates ``eq:update2``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bnpjax.infer.base import as_step, bind, concrete_or_none
from bnpjax.infer.checks import check_flag, check_integer, renamed_arguments
from bnpjax.infer.variational import VariationalAlgorithm
from bnpjax.models.wmmsb.data import (
    WMMSBData,
    WMMSBHyper,
    _check_common,
    _check_zeros_held,
    _num_nodes,
    _resolve_hyper,
)
from bnpjax.models.wmmsb.likelihood import (
    _bg_update,
    _log_pred,
    _log_pred_zero,
    _log_theta,
    _node_update,
    _solve_rows,
    _variational_output,
)
from bnpjax.ops import segment_sum

__all__ = ["CVB0Info", "CVB0State", "build_step", "cvb0", "init"]


class CVB0State(NamedTuple):
    r"""State of :func:`cvb0`: the variational joints and their expected counts.

    ``gamma``: :math:`\gamma_{ijkk'}` of each explicit pair (``(P, K, K)``; ``(0, K, K)``
    with ``store_gamma=False``); ``zgamma``: the same for the listed zero pairs; ``n_node``:
    :math:`N_{ik}`, expected indicators of node ``i`` in class ``k`` (``(N, K)``); ``n_y``:
    :math:`N^Y_{kk'}`, expected summed counts per block; ``n_phi``: :math:`N^\Phi_{kk'}`,
    expected pairs per block; ``r``, ``p``: the NB parameters per block (``(K, K)``; the fixed
    hyperparameters for nb/bernoulli, :math:`E_q[r_{kk'}]` and :math:`E_q[p_{kk'}]` for bg).
    """

    gamma: jax.Array
    zgamma: jax.Array
    n_node: jax.Array
    n_y: jax.Array
    n_phi: jax.Array
    r: jax.Array
    p: jax.Array

    sharded_axes = (("gamma", 0), ("zgamma", 0))  # per pair, as the data's


class CVB0Info(NamedTuple):
    """Per-step diagnostics of :func:`cvb0`: ``loglik``, the mean training log predictive
    per observed pair under the statistics the step started from; ``lp``, the same summed
    over the observed pairs."""

    loglik: jax.Array
    lp: jax.Array


def _pair_chunks(arrays, chunk):
    P = arrays[0].shape[0]
    n = -(-P // chunk)
    out = []
    for a in arrays:
        pad = n * chunk - P
        a = jnp.concatenate([a, jnp.zeros((pad, *a.shape[1:]), a.dtype)]) if pad else a
        out.append(a.reshape((n, chunk, *a.shape[1:])))
    return out, P


def _gamma_pass(pairs, old_gamma, stats, hyper, likelihood, chunk, zero, ymax=None):
    """New gamma for every pair of ``pairs = (src, dst, y, w)`` from ``stats`` (synchronous
    CVB0); returns (new gamma or None, new statistics, log predictive sum). With ``ymax``
    (static, the largest count) the predictive under the inclusive counts is tabulated once
    per count value (``(ymax + 1) x K^2`` Gamma functions instead of ``pairs x K^2``)."""
    n_node, n_y, n_phi, hr, hp = stats
    table = None
    if ymax is not None and not zero:
        values = jnp.arange(ymax + 1, dtype=n_y.dtype)[:, None, None]
        table = _log_pred(values, n_y, n_phi, hr, hp, likelihood)
    _N, K = n_node.shape
    store = old_gamma is not None
    arrays = list(pairs) + ([old_gamma] if store else [])
    chunks, P = _pair_chunks(arrays, chunk)
    log_theta = _log_theta(n_node, hyper.alpha)
    base0 = _log_pred_zero(n_y, n_phi, hr, hp, likelihood)

    def body(acc, xs):
        nn, ny, nphi, ll = acc
        i, j, y, w = xs[:4]
        ai, aj = n_node[i], n_node[j]
        # training log predictive of the current model (inclusive counts)
        if zero:
            lpred = jnp.broadcast_to(base0, (i.shape[0], K, K))
        elif table is not None:
            lpred = table[y.astype(jnp.int32)]
        else:
            lpred = _log_pred(y[:, None, None], n_y, n_phi, hr, hp, likelihood)
        joint = log_theta[i][:, :, None] + log_theta[j][:, None, :] + lpred
        ll = ll + jnp.sum(w * jax.nn.logsumexp(joint, axis=(1, 2)))
        if store:
            g = xs[4] * w[:, None, None]
            ai = ai - g.sum(2)
            aj = aj - g.sum(1)
            yy = y[:, None, None]
            lpred = (
                _log_pred_zero(n_y - yy * g, n_phi - g, hr, hp, likelihood)
                if zero
                else _log_pred(yy, n_y - yy * g, n_phi - g, hr, hp, likelihood)
            )
        logits = jnp.log(ai + hyper.alpha)[:, :, None] + jnp.log(aj + hyper.alpha)[:, None, :]
        logits = logits + lpred
        gam = jax.nn.softmax(logits.reshape(-1, K * K), axis=-1).reshape(-1, K, K)
        gw = gam * w[:, None, None]
        nn = nn.at[i].add(gw.sum(2)).at[j].add(gw.sum(1))
        ny = ny + jnp.einsum("p,pkl->kl", y, gw)
        nphi = nphi + gw.sum(0)
        return (nn, ny, nphi, ll), (gam if store else None)

    zeros = (jnp.zeros_like(n_node), jnp.zeros_like(n_y), jnp.zeros_like(n_phi))
    (nn, ny, nphi, ll), gam = lax.scan(body, (*zeros, jnp.zeros((), n_y.dtype)), chunks)
    if store:
        gam = gam.reshape((-1, K, K))[:P]
    return gam, (nn, ny, nphi), ll


def _dense_zero_pass(zmask, stats, hyper, likelihood):
    r"""The CVB0 pass over the observed zeros held as a dense ``N x N`` mask ``W``, counts
    inclusive. With :math:`\hat\theta_i \propto N_i + \alpha` and :math:`E_{kk'} =
    \mathrm{pred}(0 \mid N^Y_{kk'}, N^\Phi_{kk'})`, every zero pair has :math:`\gamma_{ij} =
    \hat\theta_i \hat\theta_j^\top \circ E / Z_{ij}` with :math:`Z = \hat\Theta E
    \hat\Theta^\top`, so with :math:`R = W / Z` the new statistics are matrix products."""
    n_node, n_y, n_phi, hr, hp = stats
    theta = jnp.exp(_log_theta(n_node, hyper.alpha))
    E = jnp.exp(_log_pred_zero(n_y, n_phi, hr, hp, likelihood))
    Z = theta @ E @ theta.T
    R = zmask / Z
    nn = theta * (R @ (theta @ E.T)) + theta * (R.T @ (theta @ E))
    nphi = E * (theta.T @ R @ theta)
    ll = jnp.sum(zmask * jnp.log(Z))
    return (nn, jnp.zeros_like(n_y), nphi), ll


def _step(
    data, hyper, key, state, *, likelihood, chunk, store, ymax=None, init=None, node_update="pass"
):
    del key, init
    stats = (state.n_node, state.n_y, state.n_phi, state.r, state.p)
    explicit = (data.src, data.dst, data.y, data.w)
    zpairs = (data.zsrc, data.zdst, jnp.zeros_like(data.zw), data.zw)
    g1, s1, ll1 = _gamma_pass(
        explicit, state.gamma if store else None, stats, hyper, likelihood, chunk, False, ymax
    )
    g2, s2, ll2 = _gamma_pass(
        zpairs, state.zgamma if store else None, stats, hyper, likelihood, chunk, True
    )
    n_node, n_y, n_phi = (a + b for a, b in zip(s1, s2, strict=True))
    zero_roles = s2[0]
    count = jnp.sum(data.w) + jnp.sum(data.zw)
    if data.zmask.shape[0]:
        s3, ll3 = _dense_zero_pass(data.zmask, stats, hyper, likelihood)
        n_node, n_y, n_phi = (a + b for a, b in zip((n_node, n_y, n_phi), s3, strict=True))
        zero_roles = zero_roles + s3[0]
        ll2 = ll2 + ll3
        count = count + jnp.sum(data.zmask)
    if node_update == "solve":
        theta = jnp.exp(_log_theta(state.n_node, hyper.alpha))
        n_node = _solve_rows(s1[0], zero_roles / theta, zero_roles.sum(-1), hyper.alpha)
    r, p = state.r, state.p
    if likelihood == "bg":
        r, p = _bg_update(n_y, n_phi, p, hyper)
    new = CVB0State(
        g1 if store else state.gamma, g2 if store else state.zgamma, n_node, n_y, n_phi, r, p
    )
    total = ll1 + ll2
    return new, CVB0Info(total / count, total)


def _init(
    data, hyper, key, *, likelihood, chunk, store, ymax=None, init="assortative", node_update=None
):
    del chunk, ymax, node_update
    tilt_size = 9.0 if init == "assortative" else 0.0
    K = hyper.alpha.shape[0]
    N = _num_nodes(data)
    dtype = data.y.dtype
    theta = jax.random.dirichlet(key, jnp.ones(K, dtype), (N,))
    tilt = 1.0 + tilt_size * jnp.eye(K, dtype=dtype) * (data.y > 0)[:, None, None]
    g = theta[data.src][:, :, None] * theta[data.dst][:, None, :] * tilt
    g = g / g.sum((1, 2), keepdims=True) * data.w[:, None, None]
    zs = theta[data.zsrc] * data.zw[:, None]
    n_node = (
        segment_sum(g.sum(2), data.src, N)
        + segment_sum(g.sum(1), data.dst, N)
        + segment_sum(zs, data.zsrc, N)
        + segment_sum(theta[data.zdst] * data.zw[:, None], data.zdst, N)
    )
    n_y = jnp.einsum("p,pkl->kl", data.y, g)
    n_phi = g.sum(0) + zs.T @ theta[data.zdst]
    if data.zmask.shape[0]:
        W = data.zmask
        n_node = n_node + theta * W.sum(1)[:, None] + theta * W.sum(0)[:, None]
        n_phi = n_phi + theta.T @ W @ theta
    r = jnp.full((K, K), hyper.r, dtype)
    p = jnp.full((K, K), hyper.p, dtype)
    if likelihood == "bg":
        p = jnp.full((K, K), hyper.eps, dtype)
        r, p = _bg_update(n_y, n_phi, p, hyper)
    empty = jnp.zeros((0, K, K), dtype)
    zg = zs[:, :, None] * theta[data.zdst][:, None, :] if store else empty
    return CVB0State(g if store else empty, zg, n_node, n_y, n_phi, r, p)


def init(
    key,
    data: WMMSBData,
    hyper: WMMSBHyper,
    *,
    likelihood: str = "nb",
    store_gamma: bool = True,
    init: str = "assortative",
    **settings,
) -> CVB0State:
    """Initial variational state.

    The starting :math:`\\gamma_{ij}` is :math:`\\theta_i \\otimes \\theta_j` for per-node
    :math:`\\theta \\sim \\mathrm{Dirichlet}(1)` (node-specific starting memberships break the
    label symmetry), with ``init="assortative"`` times ``1 + 9 [k = k']`` renormalised for
    the pairs with ``y > 0``; the statistics follow from it.

    Parameters
    ----------
    key : jax.random.key
    data : WMMSBData
    hyper : WMMSBHyper
    likelihood : {"nb", "bg", "bernoulli"}
    store_gamma : bool
        Keep the per-pair :math:`\\gamma` (exact "-ij" counts).
    init : {"assortative", "random"}
    **settings
        Other factory settings (unused here).

    Returns
    -------
    CVB0State
    """
    del settings
    store = check_flag(store_gamma, "store_gamma")
    return _init(data, hyper, key, likelihood=likelihood, chunk=1, store=store, init=init)


def build_step(
    *,
    likelihood: str = "nb",
    store_gamma: bool = True,
    chunk: int = 4096,
    max_count=None,
    node_update: str | None = None,
):
    """The CVB0 update ``step(key, state, data, hyper) -> (state, info)`` (the key is unused:
    the update is deterministic).

    Parameters
    ----------
    likelihood : {"nb", "bg", "bernoulli"}
    store_gamma : bool
    chunk : int
        Pairs per vectorised chunk.
    max_count : int, optional
        Tabulate the link predictive for counts ``0..max_count`` (None: no table).
    node_update : {"pass", "solve"}, optional
        As in :func:`cvb0` (default "solve" for bernoulli, "pass" otherwise).

    Returns
    -------
    callable
    """
    node_update = _node_update(node_update, likelihood)
    return as_step(
        _step,
        likelihood=likelihood,
        chunk=check_integer(chunk, "chunk", 1),
        store=check_flag(store_gamma, "store_gamma"),
        ymax=None if max_count is None else check_integer(max_count, "max_count", 0),
        node_update=node_update,
    )


@renamed_arguments(K="rank")
def cvb0(
    data: WMMSBData,
    hyper: WMMSBHyper | None = None,
    *,
    rank: int | None = None,
    likelihood: str = "nb",
    store_gamma: bool = True,
    chunk: int = 4096,
    max_count: int | None = None,
    init: str = "assortative",
    node_update: str | None = None,
    pointwise_log_likelihood: bool | None = None,
) -> VariationalAlgorithm:
    """Synchronous CVB0 as a variational algorithm (one step = one full pass).

    The variational posterior drawn by ``sample`` is the CVB0 approximation with the
    indicators summed out: :math:`\\theta_i \\sim \\mathrm{Dirichlet}(N_i + \\alpha)`
    independently per node, and per block :math:`\\phi_{kk'} \\sim \\mathrm{Gamma}(r +
    N^Y_{kk'}, \\text{scale } s / (N^\\Phi_{kk'} s + 1))`, :math:`s = p / (1 - p)` (nb; bg with
    :math:`E_q[r], E_q[p]`) or :math:`\\mathrm{Beta}(a + N^Y_{kk'}, b + N^\\Phi_{kk'} -
    N^Y_{kk'})` (bernoulli), where :math:`N` are the expected counts of the final state. The
    predictive averaged over these draws is the CVB0 plug-in predictive.

    Parameters
    ----------
    data : WMMSBData
        With the observed zeros listed or dense.
    hyper : WMMSBHyper, optional
        Default ``make_hyper(rank, likelihood=likelihood)``.
    rank : int, optional
        Number of communities (required when ``hyper`` is None).
    likelihood : {"nb", "bg", "bernoulli"}
    store_gamma : bool
        Keep every pair's :math:`\\gamma` for the exact "-ij" counts (memory ``pairs x
        K^2``); False uses inclusive counts.
    chunk : int
        Pairs per vectorised chunk (memory ``chunk x K^2``).
    max_count : int, optional
        Size of the table of the link predictive per count value (default: the largest
        count rounded up to a power of 2; pass the same value for fits on subsets of one
        network to share one compilation).
    init : {"assortative", "random"}
        Starting :math:`\\gamma` (see :func:`init`). CVB0 finds a local optimum.
    node_update : {"pass", "solve"}, optional
        "pass": the node rows are the sums of one pass (plain CVB0); "solve": each row is
        moved to its fixed point given the pass's link roles and zero factors (the same
        fixed points, reached in far fewer passes on sparse networks, where a pass moves
        the memberships by only about degree / number of zeros; see
        ``likelihood._solve_rows``). Default "solve" for the MMSB (``"bernoulli"``), "pass"
        otherwise. The MMSB's evidence (AUC, 100 passes of ``benchmarks/wmmsb_online_roc.py``
        at 10% / 100% of the training links; mean of repetitions 0-2, hep-th repetition 0):
        hep-th 0.519 / 0.512 with "pass" (no structure) against 0.638 / 0.743 with "solve";
        moreno_names 0.752 / 0.818 against 0.760 / 0.861; fb_uc 0.876 / 0.906 against 0.859
        / 0.905 (the one loss).
    pointwise_log_likelihood : bool, optional
        Store the pointwise log-likelihood of every observed pair under every draw (the
        ``log_likelihood`` group, with ``observed_data``); default: on up to 20000 observed
        pairs.

    Returns
    -------
    VariationalAlgorithm
        ``info.loglik`` is the mean training log predictive per observed pair under the
        statistics the step started from; ``sample`` draws ``theta`` (node, community) and
        ``phi`` (community, community_to), and the pointwise ``log_likelihood`` of ``y``.

    References
    ----------
    Asuncion et al. (2009); Dulac (2020), appendix "WMMSB inference derivations", ``eq1``.
    """
    hyper = _resolve_hyper(hyper, rank, likelihood)
    _check_common(data, hyper, likelihood)
    if init not in ("assortative", "random"):
        raise ValueError(f"init must be 'assortative' or 'random', got {init!r}")
    _check_zeros_held(data, "CVB0")
    chunk = check_integer(chunk, "chunk", 1)
    store_gamma = check_flag(store_gamma, "store_gamma")
    if max_count is not None:
        max_count = check_integer(max_count, "max_count", 0)
    y_host = concrete_or_none(data.y)  # None while traced: no table then
    ymax = None
    if y_host is not None and y_host.size:
        top = float(y_host.max())
        if max_count is not None and max_count < top:
            raise ValueError(
                f"max_count ({max_count}) is below the largest observed count ({top:g}): the "
                "predictive's table must cover every count (None: sized from the data)"
            )
        if max_count is not None:
            ymax = max_count
        elif top <= 65536:
            ymax = 2 ** int(np.ceil(np.log2(max(top, 1.0))))  # rounded up: fewer recompiles
    node_update = _node_update(node_update, likelihood)
    static = dict(
        likelihood=likelihood, chunk=int(chunk), store=bool(store_gamma), ymax=ymax, init=init
    )
    if node_update != "pass":  # the default keeps the settings (and the cache key) of before
        static["node_update"] = node_update
    sample, spec = _variational_output(
        data, hyper, likelihood, pointwise_log_likelihood, f"wmmsb.cvb0.{likelihood}", static
    )
    return VariationalAlgorithm(
        init=bind(_init, data, hyper, **static),
        step=bind(_step, data, hyper, **static),
        sample=sample,
        spec=spec,
    )


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `cvb0.init` and `.build_step`.
cvb0.init = init
cvb0.build_step = build_step
