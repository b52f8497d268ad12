"""Dtype promotion shared by the ops modules (internal)."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def as_inexact(*args) -> tuple[jax.Array, ...]:
    """Convert ``args`` to arrays of their common floating dtype.

    Python scalars are weakly typed, so ``f(x32, 2.0)`` stays float32; integer-only inputs
    get the default float (float64 under ``jax_enable_x64``).
    """
    arrays = [jnp.asarray(x) for x in args]
    dtype = jnp.result_type(*arrays, float)
    return tuple(x.astype(dtype) for x in arrays)
