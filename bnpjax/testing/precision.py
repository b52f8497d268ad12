"""Run a block of code in float32 or float64, whatever the process's setting."""

from __future__ import annotations

import contextlib

import jax

__all__ = ["float_precision"]


@contextlib.contextmanager
def float_precision(dtype: str):
    """Within the block, JAX computes in ``dtype`` (``"float32"``, the default users get, or
    ``"float64"``); the process's ``jax_enable_x64`` setting is restored after it.

    Parameters
    ----------
    dtype : {"float32", "float64"}
    """
    if dtype not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", dtype == "float64")
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)
