# ruff: noqa: E402  (a one-off script: the environment is set before jax is imported)
"""Record the FM cases' draws of ``tests/reference/fm.py`` from the code of this checkout:
``PYTHONPATH=.:tests python tests/reference/_record_fm.py``. Used when the FM sweep changed
its draws on purpose (the joint draw of ``b`` and ``mu_w``; the scale move of the
linear weights with their variances; the variances from one call of the gamma sampler and
the normals from one call; the factor-scale move of users against items; the MH
tests' uniforms from the normals' call)."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_backend_optimization_level=1"
import jax

jax.config.update("jax_enable_x64", True)
from reference._record import record
from reference.fm import CASES

record(CASES)
