# ruff: noqa: E402  (a one-off script: the environment is set before jax is imported)
"""Record the Gibbs M3F cases' draws of ``tests/reference/m3f.py`` from the code of this
checkout: ``PYTHONPATH=.:tests python tests/reference/_record_m3f_gibbs.py``. Used when the
sweep changed its draws on purpose (the scale and threshold moves of
``bnpjax.models.m3f.scale``); the iPM3F and MAP cases keep the draws of ``_record_m3f.py``."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_backend_optimization_level=1"
import jax

jax.config.update("jax_enable_x64", True)
from reference._record import record
from reference.m3f import CASES

record(CASES, ("m3f.gibbs", "m3f.gibbs_item_bias"))
