"""The driver's NaN guard: a chain whose state turns non-finite stops the run.

The compiled chunk reduces its final state to one "all finite" flag per state array (a
reduction per chunk, not per step). When a flag is down, the chunk is replayed step by step
from its start state (same step keys, so the same draws) to name the first step and the
state variables that went non-finite; only a failing run pays for that.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import nonfinite_leaves

__all__ = ["NonFiniteStateError", "chunk_error", "finite_flags", "locate_nonfinite"]


class NonFiniteStateError(FloatingPointError):
    """A chain's state turned NaN or infinite: ``step`` (the first step found, or None),
    ``variables`` (the state fields), ``chains`` and ``checkpoint`` (the last good checkpoint
    file, or None)."""

    def __init__(self, message, *, step=None, variables=(), chains=(), checkpoint=None):
        super().__init__(message)
        self.step = step
        self.variables = tuple(variables)
        self.chains = tuple(chains)
        self.checkpoint = checkpoint


def finite_flags(states) -> jax.Array:
    """One boolean per floating array of ``states``: whether it is all finite (traced)."""
    flags = [
        jnp.all(jnp.isfinite(leaf))
        for leaf in jax.tree_util.tree_leaves(states)
        if jnp.issubdtype(leaf.dtype, jnp.inexact)
    ]
    return jnp.stack(flags) if flags else jnp.ones((0,), bool)


def _bad_chains(states, variables) -> list[int]:
    chains: set[int] = set()
    for path, leaf in jax.tree_util.tree_flatten_with_path(states)[0]:
        if jax.tree_util.keystr(path) in variables:
            host = np.asarray(leaf)
            chains |= set(np.flatnonzero(~np.isfinite(host.reshape(host.shape[0], -1)).all(1)))
    return sorted(int(c) for c in chains)


def locate_nonfinite(
    step: Callable,
    states,
    first_step: int,
    num_steps: int,
    *,
    checkpoint=None,
    checkpoint_step: int | None = None,
) -> NonFiniteStateError:
    """Replay ``num_steps`` steps from ``states`` (``step(states, t) -> states``, all chains,
    step index ``t`` from ``first_step``) and return the error naming the first step whose
    state is non-finite, its variables and chains, and the last good checkpoint."""
    one = jax.jit(step)
    step_found, variables = None, []
    s = states
    for t in range(first_step, first_step + num_steps):
        s = one(s, jnp.asarray(t, jnp.int32))
        variables = nonfinite_leaves(s)
        if variables:
            step_found = t
            break
    chains = _bad_chains(s, variables) if variables else []
    where = (
        f"at step {step_found}"
        if step_found is not None
        else f"between steps {first_step} and {first_step + num_steps - 1}"
    )
    names = ", ".join(v.lstrip(".") for v in variables) or "its state"
    if checkpoint is not None:
        advice = (
            f"the last good checkpoint is {str(checkpoint)!r} (step {checkpoint_step}); "
            "resume from it with other settings or data"
        )
    else:
        advice = "run with checkpoint_path=... to keep the last good state"
    message = (
        f"chain{'s' if len(chains) != 1 else ''} {', '.join(map(str, chains)) or '?'} turned "
        f"non-finite {where}: {names} (NaN or inf); the run stopped rather than record "
        f"meaningless draws. Check the data's scale and the hyperparameters; {advice}"
    )
    return NonFiniteStateError(
        message, step=step_found, variables=variables, chains=chains, checkpoint=checkpoint
    )


def chunk_error(step: Callable, run_keys, states, first_step: int, num_steps: int, guard=None):
    """The error for a chunk that ended non-finite: its steps replayed one at a time from
    ``states`` (:func:`locate_nonfinite`), each with the keys the chunk folded from
    ``run_keys`` for it.

    Parameters
    ----------
    step : callable
        ``step(keys, states) -> (states, info)`` over all the chains at once.
    run_keys : jax.Array
        the chains' run keys (one per chain).
    states, first_step, num_steps
        as for :func:`locate_nonfinite`.
    guard : dict, optional
        ``{"path": the last checkpoint file, "step": its step}`` when the run checkpoints.

    Returns
    -------
    NonFiniteStateError
    """

    def one_step(s, t):
        keys = jax.vmap(jax.random.fold_in, (0, None))(run_keys, t)
        return step(keys, s)[0]

    guard = guard or {}
    return locate_nonfinite(
        one_step,
        states,
        first_step,
        num_steps,
        checkpoint=guard.get("path"),
        checkpoint_step=guard.get("step"),
    )
