r"""Small kernels with known targets, for testing the driver.

:func:`poisson_birth_death` is a variable-dimension sampler in a fixed-capacity buffer: its
target is a Poisson(``rate``) number of features, each with an independent N(0, 1) value.
One step proposes, with probability 1/2 each, a birth (a new value from N(0, 1)) or the death of
a uniformly chosen active feature; the Metropolis-Hastings acceptance probabilities of this
spatial birth-death move are

.. math::

    A_{K \to K+1} = \min\!\left(1, \frac{\text{rate}}{K + 1}\right), \qquad
    A_{K \to K-1} = \min\!\left(1, \frac{K}{\text{rate}}\right),

because the birth proposal density equals the value's target density and cancels. A birth into
a full buffer reports ``capacity_exceeded``; every random number the kernel draws has a shape
independent of the capacity, so a run that grows its buffer reproduces the run of an unbounded
buffer draw for draw.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind
from bnpjax.infer.capacity import growable, pad_fields
from bnpjax.infer.checks import check_integer, check_positive

__all__ = ["BirthDeathInfo", "BirthDeathState", "poisson_birth_death"]


class BirthDeathState(NamedTuple):
    """State of :func:`poisson_birth_death`: feature ``values`` in a buffer and the ``active``
    mask of the slots in use (inactive values are 0)."""

    values: jax.Array  # (capacity,)
    active: jax.Array  # (capacity,) bool


class BirthDeathInfo(NamedTuple):
    """Per-step diagnostics of :func:`poisson_birth_death`: the log target ``lp``, the move's
    acceptance probability, the number of features, and whether (and to what size) the
    buffer must grow."""

    lp: jax.Array
    acceptance_rate: jax.Array
    num_features: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def _log_target(rate, state):
    k = jnp.sum(state.active)
    log_poisson = k * jnp.log(rate) - rate - jax.scipy.special.gammaln(k + 1.0)
    log_values = jnp.sum(jnp.where(state.active, -0.5 * state.values**2 - 0.9189385332046727, 0))
    return log_poisson + log_values


def _init(rate, key, *, capacity):
    del key
    return BirthDeathState(jnp.zeros(capacity), jnp.zeros(capacity, bool))


def _step(rate, key, state, *, capacity):
    key_move, key_value, key_accept, key_pick = jax.random.split(key, 4)
    k = jnp.sum(state.active)
    birth = jax.random.bernoulli(key_move)
    u = jax.random.uniform(key_accept)

    # birth into the first free slot
    value = jax.random.normal(key_value)
    free = jnp.argmin(state.active)
    full = k >= capacity
    born = BirthDeathState(state.values.at[free].set(value), state.active.at[free].set(True))
    accept_birth = u < rate / (k + 1.0)

    # death of the j-th active feature, j uniform over the k active ones
    j = jnp.floor(jax.random.uniform(key_pick) * k).astype(jnp.int32)
    index = jnp.argmax(jnp.cumsum(state.active) == j + 1)
    died = BirthDeathState(state.values.at[index].set(0.0), state.active.at[index].set(False))
    accept_death = (k > 0) & (u < k / rate)

    do_birth = birth & accept_birth & ~full
    do_death = ~birth & accept_death
    new = jax.tree_util.tree_map(
        lambda b, d, s: jnp.where(do_birth, b, jnp.where(do_death, d, s)), born, died, state
    )
    exceeded = birth & accept_birth & full
    info = BirthDeathInfo(
        lp=_log_target(rate, new),
        acceptance_rate=jnp.where(
            birth,
            jnp.minimum(1.0, rate / (k + 1.0)),
            jnp.where(k > 0, jnp.minimum(1.0, k / rate), 0.0),
        ),
        num_features=jnp.sum(new.active),
        capacity_exceeded=exceeded,
        capacity_needed=jnp.where(exceeded, k + 1, 0).astype(jnp.int32),
    )
    return new, info


def _trace(state, info):
    return {
        "posterior": {"values": state.values, "active": state.active},
        "sample_stats": {
            "lp": info.lp,
            "acceptance_rate": info.acceptance_rate,
            "num_features": info.num_features,
        },
    }


def poisson_birth_death(rate: float = 3.0, *, capacity: int = 4) -> SamplingAlgorithm:
    """Birth-death MH sampler of a Poisson(``rate``) number of N(0, 1) features (module doc)."""
    check_positive(rate, "rate")
    capacity = check_integer(capacity, "capacity")
    rate_arr = jnp.asarray(rate, jnp.result_type(float))

    def build(capacity):
        return SamplingAlgorithm(
            init=bind(_init, rate_arr, capacity=capacity),
            step=bind(_step, rate_arr, capacity=capacity),
            trace=_trace,
            spec=ArvizSpec(
                name="testing.poisson_birth_death",
                dims={"values": ["feature"], "active": ["feature"]},
                settings={"rate": float(rate)},
            ),
        )

    return growable(build, capacity, pad_fields({"values": 0, "active": 0}))
