r"""The ILFM sampler: Gibbs and Metropolis-Hastings moves in one sweep.

One step: (1-2) the entities in turn, Gibbs for the features others hold and a joint MH move
for each entity's unique features and their weights (:mod:`~bnpjax.models.ilfm.entity_scan`);
(2b) with ``merge_split > 0``, that many moves that merge two features held by the same
entities or split one into two such copies, and with ``nest > 0`` that many moves that take a
feature's subset out of it or put a disjoint one in (:mod:`~bnpjax.models.ilfm.merge_split`);
(2c) with ``ridge=True``, the biases and weights along the directions no logit sees
(:mod:`~bnpjax.models.ilfm.ridge`); (3) the weights, biases and covariate coefficients by
HMC, with unit or Fisher mass (:mod:`~bnpjax.models.ilfm.mass`), or random-walk MH
(:mod:`~bnpjax.models.ilfm.weights`), whose step size (and pair weights) are adapted during
warmup only; (4) :math:`\alpha \mid F \sim \mathrm{Gamma}(a + K_+, b + H_N)` and, with a prior
on it, the weights' scale from its inverse-Gamma conditional. ``mode="global"`` shares one
feature matrix between all relations; ``mode="single"`` runs an independent model per relation,
the same step ``vmap``-ed over relations.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (the MCMC inference procedure).
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224 (the conjugate update of alpha).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, concrete_or_none, pad_axis
from bnpjax.infer.capacity import growable
from bnpjax.infer.checks import check_flag, check_integer, check_positive, renamed_arguments
from bnpjax.infer.tempering import (
    TemperedKernel,
    check_temperatures,
    grow_replicas,
    replica_exchange,
)
from bnpjax.models.ilfm.data import (
    ILFMData,
    ILFMHyper,
    ILFMInfo,
    ILFMState,
    current_hyper,
    make_hyper,
)
from bnpjax.models.ilfm.entity_scan import entity_update, ibp_rate, laplace_weights
from bnpjax.models.ilfm.joint import (
    LIKELIHOODS,
    _offset,
    log_joint,
    per_relation,
    pointwise_log_likelihood,
)
from bnpjax.models.ilfm.mass import MASSES, PAIR_WEIGHT_SMOOTHING, dense_hmc, pair_weights
from bnpjax.models.ilfm.merge_split import merge_split_moves, nest_moves
from bnpjax.models.ilfm.ridge import ridge_move
from bnpjax.models.ilfm.start import INIT_STRATEGIES, _block_weights, cluster_features
from bnpjax.models.ilfm.weights import hmc, random_walk, sample_weight_scale
from bnpjax.priors import ibp

__all__ = ["MODES", "WEIGHT_MOVES", "build_step", "gibbs", "init"]

#: "global": one feature matrix for all relations; "single": one model per relation
MODES = ("global", "single")
#: how step 3 moves the weights
WEIGHT_MOVES = ("hmc", "random_walk")
#: how step 2 proposes the weights of an entity's new features: from Laplace fits to its
#: links (the default) or from the prior (Miller et al. 2009)
BIRTHS = {"laplace": laplace_weights, "prior": None}


# --------------------------------------------------------------------------------------------
# one model (all relations share F)


def _model_init(
    data, hyper, key, *, capacity, num_init_features, step_size, alpha, init_strategy,
    mass="unit", likelihood="logit",
):  # fmt: skip
    key_f, key_w = jax.random.split(key)
    R, N, _ = data.Y.shape
    dtype = data.Y.dtype
    rate = jnp.sum(data.Y) / jnp.maximum(jnp.sum(data.mask), 1.0)
    bias = jnp.full((R,), jnp.log(rate) - jnp.log1p(-rate), dtype)
    if init_strategy == "cluster":
        clusters = cluster_features(key_f, data, num_init_features)
        F = jnp.zeros((N, capacity), dtype).at[:, : clusters.shape[1]].set(clusters) > 0
        W = _block_weights(data, F.astype(dtype), bias)
    else:
        slots = jnp.arange(capacity) < num_init_features
        F = (jax.random.uniform(key_f, (N, capacity)) < 0.5) & slots
        W = 0.1 * hyper.sigma_w * jax.random.normal(key_w, (R, capacity, capacity), dtype)
    active = F.sum(0) > 0
    W = W * (active[:, None] & active[None, :])
    beta = jnp.zeros((R, data.X.shape[0]), dtype)
    log_step = jnp.asarray(math.log(step_size), dtype)
    alpha = jnp.asarray(alpha, dtype)
    # the weights' scale is in the state only when sampled: a fixed one leaves every draw as is
    sigma_w = None if hyper.sigma_w_shape is None else jnp.asarray(hyper.sigma_w, dtype)
    off = jnp.zeros((), bool)
    weights = None
    if mass == "fisher":
        weights = pair_weights(data, F.astype(dtype), W, bias, beta, likelihood)
    return ILFMState(F.astype(dtype), W, bias, alpha, log_step, beta, off, sigma_w, weights)


def _while_adapting(adapt, state, value, moved):
    """``moved()`` in a step that adapts (built with ``adapt``, or while the state's switch
    is on), ``value`` otherwise; a state without the switch adapts only with ``adapt``."""
    if adapt:
        return moved()
    if state.adapting is None:
        return value
    return jnp.where(state.adapting, moved(), value)


def _model_step(
    data, hyper, key, state, *, kappa, num_leapfrog, adapt, weights, likelihood,
    new_feature_rate=ibp_rate, birth="laplace", merge_split=0, merge_split_move=merge_split_moves,
    nest=0, nest_move=nest_moves, ridge=False, dense_move=dense_hmc,
):  # fmt: skip
    key_flip, key_birth, key_hmc, key_alpha = jax.random.split(key, 4)
    hyper = current_hyper(hyper, state)
    F, W = state.F, state.W
    N, C = F.shape
    uniforms = jax.random.uniform(key_flip, (N, C), F.dtype)
    keys = jax.random.split(key_birth, N)
    zero = jnp.zeros((), F.dtype)
    carry = (F, W, F.sum(0), jnp.zeros((), bool), jnp.zeros((), jnp.int32), zero, zero)

    def entity(carry, xs):
        return entity_update(
            carry,
            xs,
            data=data,
            offset=_offset(state.bias, state.beta, data.X),
            alpha=state.alpha,
            sigma_w=hyper.sigma_w,
            kappa=kappa,
            likelihood=likelihood,
            new_feature_rate=new_feature_rate,
            birth_weights=BIRTHS[birth] if isinstance(birth, str) else birth,
        )

    (F, W, _, exceeded, needed, takes, births), _ = jax.lax.scan(
        entity, carry, (jnp.arange(N), uniforms, keys)
    )
    merges_splits = zero
    if merge_split:  # its own key: the other moves' draws do not change with it
        F, W, merges_splits, full = merge_split_move(
            jax.random.fold_in(key, 7), F, W, state.alpha, hyper.sigma_w, merge_split
        )
        exceeded = exceeded | full
        needed = jnp.maximum(needed, jnp.sum(F.sum(0) > 0).astype(jnp.int32) + full)
    if nest:  # its own key too; K+ and the slots do not change
        F, W, nests = nest_move(jax.random.fold_in(key, 8), F, W, hyper.sigma_w, nest)
        merges_splits = merges_splits + nests
    bias = state.bias
    if ridge:  # its own key too
        W, bias, _ = ridge_move(
            jax.random.fold_in(key, 10), data, hyper, F, W, bias, state.beta, likelihood
        )
    frozen = state.pair_weights
    if frozen is not None and weights != "hmc":
        raise ValueError("a state with a Fisher mass (pair_weights) needs weights='hmc'")
    if weights == "hmc" and frozen is not None:
        W, bias, beta, accept_prob = dense_move(
            key_hmc, data, hyper, F, W, bias, state.beta, state.log_step_size,
            num_leapfrog, likelihood, frozen,
        )  # fmt: skip
        target_accept = 0.8
        # warmup: a moving average of the states' pair weights
        frozen = _while_adapting(adapt, state, frozen, lambda: (
            (1 - PAIR_WEIGHT_SMOOTHING) * frozen
            + PAIR_WEIGHT_SMOOTHING * pair_weights(data, F, W, bias, beta, likelihood)
        ))  # fmt: skip
    elif weights == "hmc":
        W, bias, beta, accept_prob = hmc(
            key_hmc, data, hyper, F, W, bias, state.beta, state.log_step_size,
            num_leapfrog, likelihood,
        )  # fmt: skip
        target_accept = 0.8
    else:
        W, bias, accept_prob = random_walk(
            key_hmc, data, hyper, F, W, bias, state.log_step_size, likelihood
        )
        beta = state.beta
        target_accept = 0.44
    # warmup only: Robbins-Monro on log(step size) towards the target acceptance
    log_step = _while_adapting(adapt, state, state.log_step_size, lambda: (
        state.log_step_size + 0.1 * (accept_prob - target_accept)
    ))  # fmt: skip
    k_plus = jnp.sum(F.sum(0) > 0)
    alpha = ibp.sample_alpha(key_alpha, k_plus, N, hyper.alpha_shape, hyper.alpha_rate)
    sigma_w = state.sigma_w
    if sigma_w is not None:  # its own key: the other draws do not change with it
        sigma_w = sample_weight_scale(
            jax.random.fold_in(key, 9), F, W, hyper.sigma_w_shape, hyper.sigma_w_scale
        )
    new = ILFMState(
        F, W, bias, alpha.astype(F.dtype), log_step, beta, state.adapting, sigma_w, frozen
    )
    info = ILFMInfo(
        lp=log_joint(data, hyper, new, likelihood),
        num_features=k_plus.astype(jnp.int32),
        acceptance_rate=accept_prob,
        birth_acceptance=takes / N,
        capacity_exceeded=exceeded,
        capacity_needed=needed,
        births_deaths=births,
        merges_splits=merges_splits,
    )
    return new, info


# --------------------------------------------------------------------------------------------
# both modes: "single" is the one-model kernel vmap-ed over relations


def _init(data, hyper, key, *, mode, **settings):
    if mode == "global":
        return _model_init(data, hyper, key, **settings)
    keys = jax.random.split(key, data.Y.shape[0])
    return jax.vmap(lambda d, k: _model_init(d, hyper, k, **settings))(per_relation(data), keys)


def _step(data, hyper, key, state, *, mode, **settings):
    if mode == "global":
        return _model_step(data, hyper, key, state, **settings)
    keys = jax.random.split(key, data.Y.shape[0])
    new, info = jax.vmap(lambda d, k, s: _model_step(d, hyper, k, s, **settings))(
        per_relation(data), keys, state
    )
    info = info._replace(
        lp=jnp.sum(info.lp),
        capacity_exceeded=jnp.any(info.capacity_exceeded),
        capacity_needed=jnp.max(info.capacity_needed),
    )
    return new, info


def _tempered_step(data, hyper, key, state, beta, **settings):
    """The step at inverse temperature ``beta``: every likelihood term of every move is the
    mask times the entry's log-probability (:func:`~bnpjax.models.ilfm.joint._bernoulli`), so
    a mask scaled by ``beta`` is the likelihood to the power ``beta``, and each move, exact for
    any nonnegative mask, leaves ``p(theta) p(Y | theta)^beta`` invariant."""
    return _step(data._replace(mask=data.mask * beta), hyper, key, state, **settings)


def _log_likelihood(data, state, *, mode, likelihood):
    return jnp.sum(data.mask * _relation_pointwise(data, state, likelihood, mode))


def _set_adaptation(state: ILFMState, on) -> ILFMState:
    """Step-size adaptation on (warmup) or off (the kept draws), in either mode; a state
    without the switch (built by hand, ``adapting=None``) is left as it is."""
    if state.adapting is None:
        return state
    return state._replace(adapting=jnp.broadcast_to(on, jnp.shape(state.adapting)))


def _grow_state(state: ILFMState, capacity: int) -> ILFMState:
    """Pad ``F`` and ``W`` to ``capacity`` features (either mode: counted from the end)."""
    return state._replace(
        F=pad_axis(state.F, -1, capacity),
        W=pad_axis(pad_axis(state.W, -1, capacity), -2, capacity),
    )


def _relation_pointwise(data, state, likelihood, mode):
    """``log p(y^r_ij | state)`` for every entry (R, N, N)."""
    if mode == "global":
        return pointwise_log_likelihood(state, data, likelihood)
    one = jax.vmap(lambda s, d: pointwise_log_likelihood(s, d, likelihood))
    return one(state, per_relation(data))[:, 0]


def _trace(data, hyper, observed, state, info, *, mode, likelihood):
    single = mode == "single"
    beta = state.beta[:, 0] if single else state.beta
    bias = state.bias[:, 0] if single else state.bias
    if data.X_scale is not None:  # back in the covariates' units (make_data standardises)
        bias = bias - beta @ (data.X_loc / data.X_scale)
        beta = beta / data.X_scale
    covariates = {"beta": beta} if data.X.shape[0] else {}
    posterior = {
        "num_features": info.num_features,
        "alpha": state.alpha,
        **({} if state.sigma_w is None else {"sigma_w": state.sigma_w}),
        "bias": bias,
        "F": state.F,
        "W": state.W[:, 0] if single else state.W,
        **covariates,
    }
    if single:
        stats = {
            "lp": info.lp,
            "acceptance_rate": jnp.mean(info.acceptance_rate),
            "birth_acceptance": jnp.mean(info.birth_acceptance),
            "births_deaths": jnp.sum(info.births_deaths),
            "merges_splits": jnp.sum(info.merges_splits),
        }
    else:
        stats = {
            "lp": info.lp,
            "acceptance_rate": info.acceptance_rate,
            "birth_acceptance": info.birth_acceptance,
            "births_deaths": info.births_deaths,
            "merges_splits": info.merges_splits,
            "step_size": jnp.exp(state.log_step_size),
        }
    out = {"posterior": posterior, "sample_stats": stats}
    if observed is not None:
        pointwise = _relation_pointwise(data, state, likelihood, mode).reshape(-1)
        out["log_likelihood"] = {"Y": pointwise[observed]}
    return out


# --------------------------------------------------------------------------------------------
# the public levels: init, build_step, the factory


def _check_settings(mode, likelihood, weights, init_strategy, birth="laplace", mass="unit"):
    for name, value, allowed in (
        ("birth", birth, tuple(BIRTHS)),
        ("mass", mass, MASSES),
        ("mode", mode, MODES),
        ("likelihood", likelihood, LIKELIHOODS),
        ("weights", weights, WEIGHT_MOVES),
        ("init_strategy", init_strategy, INIT_STRATEGIES),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {allowed}, got {value!r}")


def _check_moves(value, name):
    value = check_integer(value, name, 0)
    if value >= 2**31:  # the move loop's bound is an int32
        raise ValueError(f"{name} must be below 2**31, got {value}")
    return value


def _default_num_init_features(data, mode, init_strategy, num_init_features, capacity):
    if num_init_features is None:
        relations_per_model = 1 if mode == "single" else data.Y.shape[0]
        num_init_features = 4 if relations_per_model == 1 else 3
    else:
        minimum = 1 if init_strategy == "cluster" else 0
        num_init_features = check_integer(num_init_features, "num_init_features", minimum)
        if num_init_features > capacity:  # a start the buffer cannot hold (as iPM3F)
            raise ValueError(f"num_init_features {num_init_features} > capacity {capacity}")
    return min(int(num_init_features), capacity)


def init(
    key,
    data: ILFMData,
    hyper: ILFMHyper | None = None,
    *,
    capacity: int = 16,
    num_init_features: int | None = None,
    init_strategy: str = "random",
    step_size: float = 0.05,
    alpha: float = 1.0,
    mode: str = "global",
    mass: str = "unit",
    likelihood: str = "logit",
) -> ILFMState:
    """A starting state of :func:`gibbs` (its keywords of the same names).

    Returns
    -------
    ILFMState
        with a leading relation axis when ``mode="single"``.
    """
    _check_settings(mode, likelihood, "hmc", init_strategy, mass=mass)
    hyper = make_hyper() if hyper is None else hyper
    capacity = check_integer(capacity, "capacity")
    num_init_features = _default_num_init_features(
        data, mode, init_strategy, num_init_features, capacity
    )
    return _init(
        data, hyper, key, mode=mode, capacity=capacity, num_init_features=num_init_features,
        init_strategy=init_strategy, step_size=check_positive(step_size, "step_size"),
        alpha=check_positive(alpha, "alpha"), mass=mass, likelihood=likelihood,
    )  # fmt: skip


def _public_step(key, state, data, hyper, **settings):
    return _step(data, hyper, key, state, **settings)


def build_step(
    *,
    kappa: int = 5,
    num_leapfrog: int = 10,
    weights: str = "hmc",
    likelihood: str = "logit",
    mode: str = "global",
    adapt: bool = False,
    birth: str = "laplace",
    merge_split: int = 0,
    nest: int = 0,
    ridge: bool = False,
):
    """The sampler's transition (module docstring) for the given settings.

    Parameters
    ----------
    kappa, num_leapfrog, weights, likelihood, mode, birth, merge_split, nest, ridge
        as in :func:`gibbs`.
    adapt
        adapt the weight move's step size at every step (a warmup step; the kept chain uses
        ``False``). With ``False`` a step still adapts while its state's switch
        ``ILFMState.adapting`` is on, as the driver sets it during warmup; ``init`` returns
        it off.

    Returns
    -------
    callable
        ``step(key, state, data, hyper) -> (ILFMState, ILFMInfo)``.
    """
    _check_settings(mode, likelihood, weights, "random", birth)
    return bind(
        _public_step,
        birth=birth,
        merge_split=_check_moves(merge_split, "merge_split"),
        nest=_check_moves(nest, "nest"),
        ridge=check_flag(ridge, "ridge"),
        kappa=check_integer(kappa, "kappa"),
        num_leapfrog=check_integer(num_leapfrog, "num_leapfrog"),
        adapt=bool(adapt),
        weights=weights,
        likelihood=likelihood,
        mode=mode,
    )


def _observed_entries(data: ILFMData):
    """Observed entries: flat indices and (relations, senders, receivers); None while tracing."""
    mask = concrete_or_none(data.mask)
    if mask is None:
        return None
    return np.flatnonzero(mask.reshape(-1) > 0), np.nonzero(mask > 0)


@renamed_arguments(link="likelihood")
def gibbs(
    data: ILFMData,
    hyper: ILFMHyper | None = None,
    *,
    capacity: int = 16,
    kappa: int = 5,
    num_leapfrog: int = 10,
    step_size: float = 0.05,
    alpha: float = 1.0,
    num_init_features: int | None = None,
    init_strategy: str = "random",
    mode: str = "global",
    weights: str = "hmc",
    likelihood: str = "logit",
    pointwise_log_likelihood: bool = True,
    birth: str = "laplace",
    merge_split: int = 0,
    nest: int = 0,
    ridge: bool = False,
    mass: str = "unit",
    temperatures=None,
) -> SamplingAlgorithm:
    """The ILFM sampler as a kernel for :func:`bnpjax.sample`.

    Parameters
    ----------
    data
        from :func:`make_data`.
    hyper
        from :func:`make_hyper` (default: its defaults); with its ``sigma_w_prior`` the
        sampler draws the weights' scale every sweep
        (:func:`~bnpjax.models.ilfm.weights.sample_weight_scale`) and traces it as
        ``sigma_w``.
    capacity
        the initial size of the feature buffer (the driver grows it when needed).
    kappa
        the largest number of new features one entity may propose.
    num_leapfrog, step_size
        HMC leapfrog steps and the initial step size (adapted during warmup).
    alpha
        the starting value of the IBP concentration.
    num_init_features, init_strategy
        the start: ``"random"`` (``num_init_features`` features, each entity holding each
        with probability 1/2, small weights) or ``"cluster"`` (one feature per k-means cluster
        of the link profiles, :func:`cluster_features`). Default 3 with several relations
        per model, 4 with one. Neither births nor deaths of features held by many entities
        are often accepted, so the number of features stays near its start: a surplus the
        chain must kill one flip at a time persists (on nations, 4 chains from 10 features
        kept 8 and had a log joint near -7400; from 3 they kept 2-3 and reached -3630 to
        -3990), and a start with too few is also kept. Compare the log joint ``lp`` of
        chains from several starts.
    mode
        ``"global"`` (one feature matrix for all relations) or ``"single"`` (an independent
        model per relation; the state gains a leading relation axis).
    weights
        ``"hmc"`` or ``"random_walk"`` (no covariates) for the weight move.
    likelihood
        ``"logit"`` or ``"probit"`` (``link=`` is the deprecated spelling).
    pointwise_log_likelihood
        keep ``log p(y^r_ij | draw)`` of every observed entry in the trace's
        ``log_likelihood`` group (for ``az.loo``).
    birth
        how the move of an entity's unique features proposes the weights of new features:
        ``"laplace"`` (default) from Gaussian fits to the entity's links
        (:func:`~bnpjax.models.ilfm.entity_scan.laplace_weights`), or ``"prior"`` from the
        prior, as Miller et al. (2009). With many relations a feature carries many weights,
        prior draws almost never fit, and the number of features never changes (on nations,
        56 relations, no accepted birth or death in 4 x 200 sweeps); both are exact.
    merge_split
        moves per sweep that merge two features held by the same entities or split one into
        two such copies (:mod:`~bnpjax.models.ilfm.merge_split`; 0: none). Copies of a
        feature held by many entities are created and removed by the other moves only one
        entity at a time, and chains keep or lack them for hundreds of sweeps; this move
        jumps between the two without touching the likelihood, for about the cost of one
        entity's update.
    nest
        moves per sweep that take a feature out of the one whose entities include all of
        its own, or put a disjoint one in (:mod:`~bnpjax.models.ilfm.merge_split`; 0: none):
        a feature ``l`` inside a wider ``k``, its weights cancelling part of ``k``'s, is
        another state the flips leave only one entity at a time, and this move changes no
        logit either. With weights whose prior is narrower than the links need, it shows
        that the posterior holds such nested features (on the planted data of ``bnpjax demo
        ilfm`` at seeds 2 and 3, K+ 4-5 in every chain, where chains without it were at 3
        for 31-75 % of their draws).
    ridge
        draw every relation's bias and weights along the directions that change no logit
        from the prior's conditional on them, once per sweep, before the weight move
        (:mod:`~bnpjax.models.ilfm.ridge`): the bias against the weights of features that
        cover every entity together (two complementary features, say), and the weights of
        features that are linear combinations of others. The HMC move crosses such ridges by
        a random walk; on the planted data of ``bnpjax demo ilfm`` at seed 2, with a prior on
        the weights' scale and nest moves, it took the bulk ESS of two of the three biases
        from 398 and 526 to 1,900-2,800 of 2,800 draws, for about a tenth more time per sweep.
    mass
        the HMC move's mass: ``"unit"`` (the default) or ``"fisher"``, each relation's
        Fisher information at pair weights adapted during warmup and then frozen
        (:mod:`~bnpjax.models.ilfm.mass`): the directions only the prior bounds get steps
        of their own scale. Costs ``O(C^6)`` per relation and sweep for a buffer of ``C``.
    temperatures
        inverse temperatures for replica exchange (None: none), 1 first and
        strictly decreasing, e.g. ``bnpjax.infer.tempering.geometric_temperatures(4, 0.4)``.
        Each chain then runs one copy of this sampler per temperature, on the likelihood to
        that power, and neighbouring copies swap states (:mod:`bnpjax.infer.tempering`); the
        copy at temperature one is kept. Chains otherwise stay in the configuration of
        features they first find: on planted networks 15-70 nats of log joint below the
        planted one (the features split or merged differently), which no move of single
        entities or single features leaves. Each sweep costs about ``len(temperatures)``
        sweeps of one chain.

    Returns
    -------
    SamplingAlgorithm

    References
    ----------
    Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature
    models for link prediction. NeurIPS 22 (the MCMC inference procedure).
    """
    _check_settings(mode, likelihood, weights, init_strategy, birth, mass)
    if mass != "unit" and weights != "hmc":
        raise ValueError("mass='fisher' needs weights='hmc' (the random walk has no mass)")
    if not isinstance(data, ILFMData):
        raise ValueError("data must come from bnpjax.models.ilfm.make_data")
    if weights == "random_walk" and data.X.shape[0]:
        raise ValueError("covariates need weights='hmc' (the random walk moves no coefficients)")
    capacity = check_integer(capacity, "capacity")
    kappa = check_integer(kappa, "kappa")
    num_leapfrog = check_integer(num_leapfrog, "num_leapfrog")
    merge_split = _check_moves(merge_split, "merge_split")
    nest = _check_moves(nest, "nest")
    ridge = check_flag(ridge, "ridge")
    if temperatures is not None:
        temperatures = check_temperatures(temperatures)
    step_size = check_positive(step_size, "step_size")
    alpha = check_positive(alpha, "alpha")
    hyper = make_hyper() if hyper is None else hyper
    if not isinstance(hyper, ILFMHyper):
        raise ValueError("hyper must come from bnpjax.models.ilfm.make_hyper")
    num_init_features = _default_num_init_features(
        data, mode, init_strategy, num_init_features, capacity
    )
    entries = _observed_entries(data) if pointwise_log_likelihood else None
    observed = None if entries is None else jnp.asarray(entries[0])
    single = mode == "single"
    dims = {"bias": ["relation"], "F": ["entity", "feature"], "beta": ["relation", "covariate"],
            "W": ["relation", "feature", "feature2"], "Y": ["obs"]}  # fmt: skip
    if single:
        dims.update(num_features=["relation"], alpha=["relation"], sigma_w=["relation"],
                    F=["relation", "entity", "feature"])  # fmt: skip
    observed_data, constant_data = {}, {}
    if entries is not None:
        relation, sender, receiver = entries[1]
        observed_data = {"Y": np.asarray(data.Y)[relation, sender, receiver]}
        constant_data = {"obs_relation": relation, "obs_sender": sender, "obs_receiver": receiver}
        dims.update(obs_relation=["obs"], obs_sender=["obs"], obs_receiver=["obs"])
    spec = ArvizSpec(
        name=f"ilfm.gibbs.{mode}",
        dims=dims,
        observed_data=observed_data,
        constant_data=constant_data,
        settings={"kappa": kappa, "num_leapfrog": num_leapfrog, "mode": mode,
                  "weights": weights, "likelihood": likelihood, "birth": birth,
                  "merge_split": merge_split, "nest": nest, "ridge": ridge, "mass": mass},
    )  # fmt: skip
    moves = dict(kappa=kappa, num_leapfrog=num_leapfrog, weights=weights, likelihood=likelihood,
                 birth=birth, merge_split=merge_split, nest=nest, ridge=ridge)  # fmt: skip
    start = dict(num_init_features=num_init_features, init_strategy=init_strategy,
                 step_size=step_size, alpha=alpha, mass=mass, likelihood=likelihood)  # fmt: skip

    def parts(capacity, step):
        return dict(
            init=bind(_init, data, hyper, mode=mode, capacity=capacity, **start),
            # warmup adapts the step size through the state: one program for both phases
            step=bind(step, data, hyper, mode=mode, adapt=False, **moves),
            set_adaptation=_set_adaptation,
            trace=bind(_trace, data, hyper, observed, mode=mode, likelihood=likelihood),
            spec=spec,
        )

    def build(capacity):
        return SamplingAlgorithm(**parts(capacity, _step))

    def build_tempered(capacity):
        tempered = TemperedKernel(
            **parts(capacity, _tempered_step),
            log_likelihood=bind(_log_likelihood, data, mode=mode, likelihood=likelihood),
            rung_fields=("log_step_size", "pair_weights"),  # adapted per temperature
        )
        return replica_exchange(tempered, temperatures)

    if temperatures is not None:
        return growable(build_tempered, capacity, grow_replicas(_grow_state))
    return growable(build, capacity, _grow_state)


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `gibbs.init` and `.build_step`.
gibbs.init = init
gibbs.build_step = build_step
