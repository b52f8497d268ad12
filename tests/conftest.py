"""Test configuration: CPU, float64 by default (float32 paths are tested explicitly)."""

import gc
import os
import tempfile

os.environ.setdefault("JAX_PLATFORMS", "cpu")
# The suite is bound by XLA compile time: most tests compile a kernel once and run it for a
# few seconds. LLVM's optimization level 1 compiles about a quarter faster than the default
# (3) and runs these small kernels about as fast; level 0 halved their run speed. A level
# given in XLA_FLAGS wins. Tests must not depend on the level (it changes rounding, not the
# semantics): every Geweke test here was checked at levels 1 and 3.
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_backend_optimization_level" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_backend_optimization_level=1").strip()

# compiled programs on disk, shared by the workers and by the CLI and example subprocesses: a
# module that compiles what an earlier one compiled (the caches are cleared between modules,
# below) loads it instead; kept out of the user's own cache folder
os.environ.setdefault(
    "BNPJAX_CACHE_DIR", os.path.join(tempfile.gettempdir(), "bnpjax-test-compilation-cache")
)

import jax  # noqa: E402  (after the environment above)

jax.config.update("jax_enable_x64", True)


import pytest  # noqa: E402

from bnpjax.infer.driver import clear_compile_cache  # noqa: E402

# Start JAX's CPU backend now, as one device, whatever the tests run first; after importing
# bnpjax, whose XLA flags are read when the backend starts (started before them, the suite
# ran in 28:45 instead of about 17 minutes). A command run in this process
# (``bnpjax.cli.main``) splits the CPU into one device per core when the backend has not
# started yet (``bnpjax.infer.use_cpu_cores``), and then every later test of the worker ran
# on two devices: in float32 a few draws differ in their last bit from a one-device run's,
# and a test that compares with a one-device subprocess failed or passed by the order of the
# tests (tests/cli/test_resume.py after tests/cli/test_inputs.py).
jax.devices("cpu")


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Release every compiled program after each test module. Each XLA CPU executable keeps a
    few memory mappings; the whole suite in one process compiled enough of them to pass the
    kernel's limit (vm.max_map_count, 65530) and crash inside XLA."""
    yield
    clear_compile_cache()
    jax.clear_caches()
    gc.collect()


def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, at most four (each worker holds its own JAX runtime and
    compiled programs, about 1-2 GB)."""
    return max(1, min(4, os.cpu_count() or 1))
