r"""Replica exchange (parallel tempering): chains at several temperatures of the likelihood
that swap states, so that the chain at temperature one crosses between modes that its own
kernel leaves only rarely.

Rung :math:`t` of a ladder :math:`1 = \beta_0 > \beta_1 > \dots > \beta_{T-1} > 0` targets
:math:`\pi_t(\theta) \propto p(\theta)\, p(y \mid \theta)^{\beta_t}`; one step of the
replica-exchange kernel proposes to swap the states of neighbouring rungs, first the pairs
:math:`(0, 1), (2, 3), \dots`, then :math:`(1, 2), (3, 4), \dots`, then moves every rung with
the model's kernel at its temperature (the rungs are conditionally independent given their
states, so the moves are ``vmap``-ed). The swaps come before the moves so that what the cold
rung's move reports (a model's log joint, its number of features) is of the state the driver
records with it; swapped after the moves, a draw would carry the statistics of the state its
rung held before the swap. Each swap is accepted with probability

.. math:: \min\{1, \exp[(\beta_t - \beta_{t+1})(\ell_{t+1} - \ell_t)]\},
   \qquad \ell_t = \log p(y \mid \theta_t).

Each swap is a Metropolis-Hastings move with a symmetric proposal on the product target
:math:`\prod_t \pi_t(\theta_t)`, whose ratio is the one above; the pairs of one round are
disjoint, so they are decided at once. The product is left invariant by every part of the
step, so the rung at :math:`\beta_0 = 1` is a Markov chain with the posterior as its
stationary distribution, and it is the only rung the driver keeps.

Tuning parameters that belong to a temperature rather than to a state (a step size adapted
during warmup) stay with their rung when states swap (``rung_fields``).

Why not a Geweke test: the successive-conditional simulator redraws the data from the cold
state, after which the hot rungs are no longer draws from their tempered posteriors given the
new data, so the joint it samples is not the one it compares against. The tests compare the
cold rung with quadrature on a target whose modes a local kernel alone does not cross, and a
twin with a wrong swap ratio fails that comparison.

References
----------
Swendsen, R. H. and Wang, J.-S. (1986). Replica Monte Carlo simulation of spin-glasses.
Physical Review Letters 57, 2607-2609.
Geyer, C. J. (1991). Markov chain Monte Carlo maximum likelihood. Computing Science and
Statistics: Proceedings of the 23rd Symposium on the Interface, 156-163.
Syed, S., Bouchard-Côté, A., Deligiannidis, G. and Doucet, A. (2022). Non-reversible
parallel tempering: a scalable highly parallel MCMC scheme. JRSS B 84, 321-350 (the
alternation of even and odd pairs).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, default_trace

__all__ = [
    "ReplicaExchangeInfo",
    "ReplicaExchangeState",
    "TemperedKernel",
    "check_temperatures",
    "geometric_temperatures",
    "grow_replicas",
    "replica_exchange",
]


class TemperedKernel(NamedTuple):
    """A model's kernel as a family indexed by an inverse temperature.

    Attributes
    ----------
    init
        ``init(key) -> State``: one chain's start.
    step
        ``step(key, state, beta) -> (State, Info)``, leaving
        :math:`p(\\theta)\\, p(y \\mid \\theta)^{\\beta}` invariant for every ``beta`` in (0, 1].
    log_likelihood
        ``log_likelihood(state) -> scalar``: :math:`\\log p(y \\mid \\theta)` at temperature one.
    warmup_step
        as ``step``, with adaptation (None: ``step``).
    set_adaptation
        ``set_adaptation(state, on) -> State`` of one chain, as in
        :class:`~bnpjax.infer.base.SamplingAlgorithm` (applied to every rung).
    trace
        ``trace(state, info)`` of the model, applied to the rung at temperature one.
    spec
        the model's :class:`~bnpjax.infer.base.ArvizSpec`.
    rung_fields
        names of state fields that stay with their rung when states swap (step sizes).
    """

    init: Callable
    step: Callable
    log_likelihood: Callable
    warmup_step: Callable | None = None
    trace: Callable | None = None
    spec: ArvizSpec = ArvizSpec()
    rung_fields: tuple[str, ...] = ()
    set_adaptation: Callable | None = None


class ReplicaExchangeState(NamedTuple):
    """The rungs' states (leading axis: temperature, coldest first) and their
    log-likelihoods at temperature one."""

    replicas: Any
    log_likelihood: jax.Array


class ReplicaExchangeInfo(NamedTuple):
    """The cold rung's info, the acceptance probability of each neighbouring swap
    (``T - 1``), and capacity bookkeeping over all rungs."""

    cold: Any
    swap_acceptance: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def check_temperatures(temperatures: Sequence[float], name: str = "temperatures"):
    """``temperatures`` as a tuple of floats, checked: at least two inverse temperatures,
    the first exactly 1, strictly decreasing, all positive.

    Raises
    ------
    ValueError
        naming ``name``.
    """
    try:
        ladder = tuple(float(b) for b in temperatures)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a sequence of numbers, got {temperatures!r}") from err
    if len(ladder) < 2:
        raise ValueError(f"{name} needs at least two inverse temperatures, got {ladder}")
    if ladder[0] != 1.0:
        raise ValueError(f"{name} must start at 1 (the posterior), got {ladder[0]}")
    if not all(math.isfinite(b) and b > 0 for b in ladder):
        raise ValueError(f"{name} must be positive and finite, got {ladder}")
    if any(b >= a for a, b in itertools.pairwise(ladder)):
        raise ValueError(f"{name} must decrease strictly, got {ladder}")
    return ladder


def geometric_temperatures(num: int, hottest: float) -> tuple[float, ...]:
    """``num`` inverse temperatures from 1 down to ``hottest``, evenly spaced in log.

    Parameters
    ----------
    num
        the number of rungs (at least 2).
    hottest
        the smallest inverse temperature, in (0, 1).

    Returns
    -------
    tuple of float
    """
    if isinstance(num, bool) or not isinstance(num, int) or num < 2:
        raise ValueError(f"num must be an integer >= 2, got {num!r}")
    if not 0.0 < float(hottest) < 1.0:
        raise ValueError(f"hottest must lie in (0, 1), got {hottest!r}")
    ratio = float(hottest) ** (1.0 / (num - 1))
    return tuple(ratio**t for t in range(num))  # ratio**0 is exactly 1.0


def _init(tempered_init, log_likelihood, key, *, num_rungs):
    replicas = jax.vmap(tempered_init)(jax.random.split(key, num_rungs))
    return ReplicaExchangeState(replicas, jax.vmap(log_likelihood)(replicas))


def _log_swap_ratio(betas, ll):
    """log MH ratio of swapping the states of rungs t and t + 1, for every t."""
    return (betas[:-1] - betas[1:]) * (ll[1:] - ll[:-1])


def _swap_round(key, state, betas, parity, rung_fields):
    """Swap the pairs (t, t + 1) with t = parity mod 2, each with its MH probability."""
    ll = state.log_likelihood
    T = betas.shape[0]
    first = jnp.arange(T - 1)
    proposed = first % 2 == parity
    log_ratio = _log_swap_ratio(betas, ll)
    accept_prob = jnp.exp(jnp.minimum(log_ratio, 0.0))
    u = jax.random.uniform(key, (T - 1,), ll.dtype)
    swap = proposed & (u < accept_prob)
    # the pairs of one round are disjoint: rung t takes t + 1's state and t + 1 takes t's
    up = jnp.pad(swap, (0, 1)).astype(jnp.int32)
    down = jnp.pad(swap, (1, 0)).astype(jnp.int32)
    source = jnp.arange(T) + up - down
    moved = jax.tree.map(lambda leaf: jnp.take(leaf, source, axis=0), state.replicas)
    if rung_fields:
        moved = moved._replace(**{f: getattr(state.replicas, f) for f in rung_fields})
    return ReplicaExchangeState(moved, ll[source]), jnp.where(proposed, accept_prob, 0.0)


def _step(tempered_step, log_likelihood, key, state, *, betas, rung_fields):
    ladder = jnp.asarray(betas, state.log_likelihood.dtype)
    T = ladder.shape[0]
    key_move, key_even, key_odd = jax.random.split(key, 3)
    # swaps first, moves last: the cold rung's info (a model's log joint, its K+) is then of
    # the state the driver records; after the moves a swap could bring another rung's state
    state, even = _swap_round(key_even, state, ladder, 0, rung_fields)
    state, odd = _swap_round(key_odd, state, ladder, 1, rung_fields)
    replicas, infos = jax.vmap(tempered_step)(jax.random.split(key_move, T), state.replicas, ladder)
    state = ReplicaExchangeState(replicas, jax.vmap(log_likelihood)(replicas))
    exceeded = getattr(infos, "capacity_exceeded", None)
    needed = getattr(infos, "capacity_needed", None)
    info = ReplicaExchangeInfo(
        cold=jax.tree.map(lambda leaf: leaf[0], infos),
        swap_acceptance=even + odd,
        capacity_exceeded=jnp.zeros((), bool) if exceeded is None else jnp.any(exceeded),
        capacity_needed=jnp.zeros((), jnp.int32) if needed is None else jnp.max(needed),
    )
    return state, info


def _trace(model_trace, state, info):
    cold = jax.tree.map(lambda leaf: leaf[0], state.replicas)
    out = (model_trace or default_trace)(cold, info.cold)
    stats = dict(out.get("sample_stats", {}))
    stats["swap_acceptance"] = info.swap_acceptance
    return {**out, "sample_stats": stats}


def _grow(state, capacity, *, grow_state):
    replicas = jax.vmap(lambda s: grow_state(s, capacity))(state.replicas)
    return state._replace(replicas=replicas)


def replica_exchange(tempered: TemperedKernel, temperatures: Sequence[float]) -> SamplingAlgorithm:
    """Replica exchange over ``temperatures`` (module docstring) as a kernel for
    :func:`bnpjax.sample`.

    Parameters
    ----------
    tempered
        the model's :class:`TemperedKernel`.
    temperatures
        inverse temperatures, 1 first, strictly decreasing (:func:`geometric_temperatures`).

    Returns
    -------
    SamplingAlgorithm
        its state is a :class:`ReplicaExchangeState`; the trace is the model's trace of the
        rung at temperature one, plus ``swap_acceptance`` (one per neighbouring pair) in
        ``sample_stats``.

    References
    ----------
    Geyer (1991); Syed, Bouchard-Côté, Deligiannidis and Doucet (2022) (module docstring).
    """
    betas = check_temperatures(temperatures)
    rung_fields = tuple(tempered.rung_fields)
    spec = tempered.spec
    dims = {**spec.dims, "swap_acceptance": ["temperature_pair"]}
    settings = {**spec.settings, "temperatures": betas}
    return SamplingAlgorithm(
        init=bind(_init, tempered.init, tempered.log_likelihood, num_rungs=len(betas)),
        step=bind(
            _step, tempered.step, tempered.log_likelihood, betas=betas, rung_fields=rung_fields
        ),
        # no warmup step of the model's own: none here either, so warmup runs the sampling
        # program (the driver compiles one program instead of two)
        warmup_step=None
        if tempered.warmup_step is None
        else bind(
            _step, tempered.warmup_step, tempered.log_likelihood, betas=betas,
            rung_fields=rung_fields,
        ),
        trace=bind(_trace, tempered.trace),
        spec=spec._replace(dims=dims, settings=settings),
        set_adaptation=None
        if tempered.set_adaptation is None
        else bind(_set_adaptation, set_one=tempered.set_adaptation),
    )  # fmt: skip


def _set_adaptation(state, on, *, set_one):
    """The model's ``set_adaptation`` on every rung."""
    replicas = jax.vmap(set_one, (0, None))(state.replicas, on)
    return state._replace(replicas=replicas)


def grow_replicas(grow_state: Callable) -> Callable:
    """A ``grow_state`` for replica-exchange states from the model's one-chain
    ``grow_state``."""
    return bind(_grow, grow_state=grow_state)
