"""Control flow that stays cheap when a kernel is ``vmap``-ed over chains.

Under ``jax.vmap`` with a batched predicate, ``lax.cond`` becomes a select: both branches run
for every batch member, so a costly branch that a single chain takes rarely is paid by every
chain at every step. :func:`apply_if` is a ``lax.while_loop`` of at most one iteration
instead: JAX batches a while loop by running its body while any member's predicate holds and
keeping the carry of the others, so the costly function runs only at steps where at least one
member needs it, and its values are exactly those of the unbatched call.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp
from jax import lax

__all__ = ["apply_if"]


def apply_if(predicate, function: Callable, default, *inputs):
    """``function(*inputs)`` where ``predicate`` holds, else ``default``; under ``vmap`` the
    function runs at all only when some batch member's predicate holds (module docstring).

    Parameters
    ----------
    predicate : bool scalar array
        whether to apply ``function``.
    function : callable
        maps ``inputs`` to a pytree of the structure, shapes and dtypes of ``default``.
    default : pytree of arrays
        the value where ``predicate`` is false.
    *inputs : pytrees of arrays
        the arrays ``function`` computes from. Pass them here rather than closing over them:
        XLA moves computations that do not depend on a loop's state out of the loop, where
        they would run at every call; the inputs reach ``function`` through an optimization
        barrier with the loop's state, so nothing of it can be moved.

    Returns
    -------
    pytree
        ``function(*inputs)`` or ``default``.

    Notes
    -----
    A while loop has no reverse-mode derivative: use ``lax.cond`` inside differentiated code.
    """

    def body(carry):
        pending, _ = carry
        _, args = lax.optimization_barrier((pending, inputs))
        return jnp.zeros((), bool), function(*args)

    start = (jnp.asarray(predicate, bool), default)
    _, value = lax.while_loop(lambda carry: carry[0], body, start)
    return value
