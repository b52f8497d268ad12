"""Test configuration: CPU, float64 by default (float32 paths are tested explicitly)."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax

jax.config.update("jax_enable_x64", True)
