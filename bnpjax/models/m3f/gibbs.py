"""Gibbs M3F: Gibbs sampling of the augmented max-margin matrix factorization.

One sweep draws :math:`\\lambda \\mid U, V, \\theta`, then :math:`V` (with the item biases,
as one block, when ``item_bias``), then :math:`U`, then the thresholds :math:`\\theta`, each
an exact conditional of the augmented pseudo-posterior; the factor rows are drawn all at once
by :mod:`bnpjax.models.m3f.linalg`. Before them, Metropolis-Hastings moves of
:mod:`bnpjax.models.m3f.scale` on the pseudo-posterior with :math:`\\lambda` integrated out
rescale each user's factors with the thresholds, each item's factors, and all scores with all
thresholds (not the items' with fixed items), then shift each threshold: given
:math:`\\lambda`, the draws pin every score near its margin and the sweep alone crawls.

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML.
Polson, N. G. and Scott, S. L. (2011). Data augmentation for support vector machines.
Bayesian Analysis 6(1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind
from bnpjax.infer.checks import check_flag, check_integer, check_start_scale
from bnpjax.infer.programs import WITHOUT_YNN_FUSIONS
from bnpjax.models.m3f import linalg, scale
from bnpjax.models.m3f.conditionals import (
    _dims,
    _observed,
    _pair_terms,
    _sample_omega,
    _sample_theta,
    _scores,
    _trace,
    _train_mae,
    _with_bias,
    pseudo_log_posterior,
)
from bnpjax.models.m3f.data import (
    M3FData,
    M3FHyper,
    M3FInfo,
    M3FState,
    _check_common,
    _item_factors,
    _sizes,
    _test_arrays,
)

__all__ = ["build_step", "gibbs", "init"]


def _fixed_items(item_factors, item_biases, item_bias, rank, num_items, dtype):
    """Check the strong-generalization inputs; returns ``(rank, fixed)``."""
    if item_factors is None:
        if item_biases is not None:
            raise ValueError("item_biases is given without item_factors")
        return (10 if rank is None else check_integer(rank, "rank")), None
    V = _item_factors(item_factors, num_items)
    if rank is not None and check_integer(rank, "rank") != V.shape[1]:
        raise ValueError(f"rank={rank} does not match item_factors with {V.shape[1]} columns")
    if item_biases is None:
        if item_bias:
            raise ValueError("item_bias=True with fixed item_factors needs item_biases")
        c = np.zeros(num_items)
    else:
        c = np.asarray(item_biases, dtype=float)
        if c.shape != (num_items,):
            raise ValueError(f"item_biases must have shape ({num_items},), got {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError("item_biases contains NaN or infinite values")
    return V.shape[1], (jnp.asarray(V, dtype), jnp.asarray(c, dtype))


def _init(data, hyper, fixed, key, *, rank, num_users, num_items, init_scale, lambda_rate=0.0):
    key_u, key_v, key_w = jax.random.split(key, 3)
    dtype = data.signs.dtype
    U = init_scale * jax.random.normal(key_u, (num_users, rank), dtype)
    if fixed is None:
        V = init_scale * jax.random.normal(key_v, (num_items, rank), dtype)
        bias = jnp.zeros((num_items,), dtype)
    else:
        V, bias = fixed
    theta = jnp.broadcast_to(hyper.rho, (num_users, hyper.rho.shape[0])).astype(dtype)
    x = _scores(data, U, V) + bias[data.items]
    omega = _sample_omega(key_w, data, hyper, theta, x, lambda_rate)
    return M3FState(U, V, theta, omega, bias)


def _scale_moves(key, data, hyper, state, *, item_bias, fixed_items, lambda_rate):
    """The moves of :mod:`bnpjax.models.m3f.scale` on ``(U, V, theta, c)``; the state's
    augmentation is stale afterwards and is drawn next. Returns the state and the pairs'
    scores. Each move rescales whole groups, so the pairs' scores and thresholds are gathered
    once and rescaled from move to move (the gathers were a fifth of the sweep)."""
    key_u, key_v, key_a, key_t = jax.random.split(key, 4)
    U, V, theta, bias = state.U, state.V, state.theta, state.bias
    pairs = {"scores": _scores(data, U, V), "theta_pairs": theta[data.users]}
    U, theta, _, a = scale._scale_users(
        key_u, data, hyper, U, V, theta, bias, lambda_rate=lambda_rate, **pairs
    )
    a_pairs = a[data.users]
    pairs = {
        "scores": a_pairs * pairs["scores"],
        "theta_pairs": a_pairs[:, None] * pairs["theta_pairs"],
    }
    if not fixed_items:
        V, _, a = scale._scale_items(
            key_v, data, hyper, U, V, theta, bias, lambda_rate=lambda_rate, **pairs
        )
        pairs["scores"] = a[data.items] * pairs["scores"]
        V, theta, bias, _, a = scale._scale_all(
            key_a, data, hyper, U, V, theta, bias, item_bias=item_bias, lambda_rate=lambda_rate,
            **pairs,
        )  # fmt: skip
        pairs = {name: a * value for name, value in pairs.items()}
    x = pairs["scores"] + bias[data.items]
    theta, _ = scale._shift_thresholds(
        key_t, data, hyper, theta, x, lambda_rate=lambda_rate, theta_pairs=pairs["theta_pairs"]
    )
    return state._replace(U=U, V=V, theta=theta, bias=bias), x


def _step(
    data,
    hyper,
    key,
    state,
    *,
    num_users,
    num_items,
    item_bias=False,
    fixed_items=False,
    lambda_rate=0.0,
):
    key_w, key_v, key_u, key_t = jax.random.split(key, 4)
    state, x = _scale_moves(
        jax.random.fold_in(key, 1),
        data,
        hyper,
        state,
        item_bias=item_bias,
        fixed_items=fixed_items,
        lambda_rate=lambda_rate,
    )
    bias = state.bias
    omega = _sample_omega(key_w, data, hyper, state.theta, x, lambda_rate)
    b, xi = _pair_terms(data, hyper, state.theta, omega)
    if fixed_items:
        # strong generalization: V and c stay as given; the sweep samples q(U, theta | V, c)
        V = state.V
    elif item_bias:
        # (V_j, c_j) as one block: the biases are the weights of a feature every user holds
        rank = state.V.shape[1]
        U1, Vc = _with_bias(state.U, state.V, bias)
        sd = jnp.concatenate([jnp.full((rank,), hyper.sigma_v), hyper.sigma_b[None]])
        Vc, _ = linalg._gaussian_rows(key_v, U1, data.users, b, xi, data.item_buckets, sd, Vc)
        V, bias = Vc[:, :rank], Vc[:, rank]
    else:
        V, _ = linalg._gaussian_rows(
            key_v, state.U, data.users, b, xi, data.item_buckets, hyper.sigma_v, state.V
        )
    # given c, the bias enters each pair's exponent -b/2 (x + c)^2 + xi (x + c) as xi - b c
    U, U_mean = linalg._gaussian_rows(
        key_u,
        V,
        data.items,
        b,
        xi - b * bias[data.items],
        data.user_buckets,
        hyper.sigma_u,
        state.U,
    )
    x = _scores(data, U, V) + bias[data.items]
    theta = _sample_theta(key_t, data, hyper, omega, x, num_users)
    new = M3FState(U, V, theta, omega, bias)
    info = M3FInfo(
        lp=pseudo_log_posterior(data, hyper, new),
        train_mae=_train_mae(data, theta, x),
        num_features=jnp.asarray(U.shape[1], jnp.int32),
        capacity_exceeded=jnp.zeros((), bool),
        capacity_needed=jnp.zeros((), jnp.int32),
        score_factors=_with_bias(U_mean, V, bias),
    )
    return new, info


def _gibbs_trace(
    data,
    hyper,
    test,
    state,
    info,
    *,
    keep_factors,
    item_bias=False,
    fixed_items=False,
    log_likelihood=True,
):
    posterior = {"theta": state.theta}
    if keep_factors:
        posterior["U"] = state.U
        if not fixed_items:
            posterior["V"] = state.V
    if item_bias and not fixed_items:
        posterior["bias"] = state.bias
    F, G = _with_bias(state.U, state.V, state.bias)
    return _trace(data, hyper, test, F, G, state.theta, info, posterior, log_likelihood)


def init(
    key,
    data: M3FData,
    hyper: M3FHyper | None = None,
    *,
    rank: int | None = None,
    init_scale: float = 0.1,
    item_factors=None,
    item_biases=None,
) -> M3FState:
    """A starting state of Gibbs M3F.

    Parameters
    ----------
    key : jax.Array
        A ``jax.random.key``.
    data : M3FData
    hyper : M3FHyper, optional
        Default ``make_hyper(L)``.
    rank : int, optional
        Number of factors (default 10, or the width of ``item_factors``).
    init_scale : float
        Sd of the random start of ``U`` and ``V``.
    item_factors, item_biases : array_like, optional
        A fixed item side (as in :func:`gibbs`).

    Returns
    -------
    M3FState
    """
    hyper = _check_common(data, hyper)
    rank, fixed = _fixed_items(
        item_factors, item_biases, False, rank, _sizes(data)["num_items"], data.signs.dtype
    )
    init_scale = check_start_scale(init_scale, "init_scale")
    return _init(data, hyper, fixed, key, rank=rank, init_scale=init_scale, **_sizes(data))


def build_step(*, item_bias: bool = False, fixed_items: bool = False):
    """The Gibbs M3F sweep as ``step(key, state, data, hyper) -> (state, info)``.

    Parameters
    ----------
    item_bias : bool
        Draw the item biases with the item factors.
    fixed_items : bool
        Keep ``V`` and the biases as they are in the state (strong generalization).

    Returns
    -------
    callable
    """

    item_bias = check_flag(item_bias, "item_bias")
    fixed_items = check_flag(fixed_items, "fixed_items")

    def step(key, state, data, hyper):
        return _step(
            data, hyper, key, state, item_bias=item_bias, fixed_items=fixed_items, **_sizes(data)
        )

    return step


def _gibbs(
    data,
    hyper,
    *,
    rank=None,
    init_scale=0.1,
    test=None,
    keep_factors=True,
    item_bias=False,
    item_factors=None,
    item_biases=None,
    log_likelihood=True,
    lambda_rate=0.0,
):
    hyper = _check_common(data, hyper)
    init_scale = check_start_scale(init_scale, "init_scale")
    keep_factors = check_flag(keep_factors, "keep_factors")
    item_bias = check_flag(item_bias, "item_bias")
    log_likelihood = check_flag(log_likelihood, "pointwise_log_likelihood")
    sizes = _sizes(data)
    rank, fixed = _fixed_items(
        item_factors, item_biases, item_bias, rank, sizes["num_items"], data.signs.dtype
    )
    item_bias = bool(item_bias or item_biases is not None)
    fixed_items = fixed is not None
    private = {"lambda_rate": float(lambda_rate)} if lambda_rate else {}
    return SamplingAlgorithm(
        init=bind(
            _init, data, hyper, fixed, rank=rank, init_scale=float(init_scale), **sizes, **private
        ),
        step=bind(
            _step, data, hyper, item_bias=item_bias, fixed_items=fixed_items, **sizes, **private
        ),
        trace=bind(
            _gibbs_trace,
            data,
            hyper,
            _test_arrays(test, data),
            keep_factors=keep_factors,
            item_bias=item_bias,
            fixed_items=fixed_items,
            log_likelihood=log_likelihood,
        ),
        spec=ArvizSpec(
            name="m3f.gibbs",
            dims=_dims("U", "factor"),
            observed_data=_observed(data) if log_likelihood else {},
            settings={
                "rank": rank,
                "C": float(hyper.C),
                "item_bias": item_bias,
                "fixed_items": fixed_items,
            },
        ),
        # faster without on the CPU (bnpjax.infer.programs; docs/benchmarks.md)
        compiler_options=WITHOUT_YNN_FUSIONS,
    )


def gibbs(
    data: M3FData,
    hyper: M3FHyper | None = None,
    *,
    rank: int | None = None,
    init_scale: float = 0.1,
    test=None,
    keep_factors: bool = True,
    item_bias: bool = False,
    item_factors=None,
    item_biases=None,
    pointwise_log_likelihood: bool = True,
) -> SamplingAlgorithm:
    """Gibbs M3F as a kernel for :func:`bnpjax.sample`.

    ``item_bias=True`` adds an item bias to every score, :math:`x_{ij} = U_i \\cdot V_j +
    c_j`, :math:`c_j \\sim \\mathcal N(0, \\sigma_b^2)`, drawn with :math:`V_j` as one
    Gaussian block. ``item_factors`` (and ``item_biases``) hold the item side fixed: the
    sweep then samples :math:`q(U, \\theta \\mid Y, V, c)`, the strong-generalization
    protocol (fit new users against the items of a run on other users).

    Parameters
    ----------
    data : M3FData
        From :func:`make_data`.
    hyper : M3FHyper, optional
        From :func:`make_hyper`; default ``make_hyper(L)``.
    rank : int, optional
        Number of factors (default 10; the width of ``item_factors`` when given).
    init_scale : float
        Sd of the random start of the factors.
    test : tuple of array_like, optional
        Held-out pairs ``(users, items)``: their scores ``score_test``, levels
        ``level_test`` and the Rao-Blackwellized score ``score_test_rb`` are traced at every
        kept draw (:func:`bnpjax.models.m3f.predict`).
    keep_factors : bool
        Trace ``U`` and ``V`` (else the thresholds only; a fixed ``V`` is never traced).
    item_bias : bool
        Add item biases.
    item_factors : array_like, optional
        Fixed item factors ``(num_items, rank)``.
    item_biases : array_like, optional
        Fixed item biases ``(num_items,)`` (with ``item_factors``).
    pointwise_log_likelihood : bool
        Trace the pointwise log-likelihood of the training ratings (the hinge
        pseudo-likelihood normalized over the L levels) and store them as ``observed_data``.

    Returns
    -------
    SamplingAlgorithm

    References
    ----------
    Xu, Zhu & Zhang (2013), Appendices A-B; Polson & Scott (2011).
    """
    return _gibbs(
        data,
        hyper,
        rank=rank,
        init_scale=init_scale,
        test=test,
        keep_factors=keep_factors,
        item_bias=item_bias,
        item_factors=item_factors,
        item_biases=item_biases,
        log_likelihood=pointwise_log_likelihood,
    )


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `gibbs.init` and `.build_step`.
gibbs.init = init
gibbs.build_step = build_step
