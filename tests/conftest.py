"""Test configuration: CPU, float64 by default (float32 paths are tested explicitly)."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The suite is bound by XLA compile time (hundreds of small kernels, each run briefly): LLVM's
# optimization level 0 cut two compile-heavy tests from 44 s and 28 s to 32 s and 15 s. It
# changes the generated code's speed, not its semantics. A level given in XLA_FLAGS wins.
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_backend_optimization_level=0").strip()

import jax  # noqa: E402  (after the environment above)

jax.config.update("jax_enable_x64", True)
