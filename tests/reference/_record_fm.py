# ruff: noqa: E402  (a one-off script: the environment is set before jax is imported)
"""Record the FM cases' draws of ``tests/reference/fm.py`` from the code of this checkout:
``PYTHONPATH=.:tests python tests/reference/_record_fm.py``. Used when the FM sweep changed
its draws on purpose (the joint draw of ``b`` and ``mu_w``; the scale move of the
linear weights with their variances)."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_backend_optimization_level=1"
import jax

jax.config.update("jax_enable_x64", True)
import numpy as np

from bnpjax.infer import run
from reference.fm import CASES

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "draws")

for name, build in CASES.items():
    algorithm, run_kwargs = build()
    result = run(algorithm, **run_kwargs)
    arrays = {
        f"{group}/{variable}": np.asarray(value)
        for group, values in result.trace.items()
        for variable, value in values.items()
    }
    for field in result.final_state._fields:
        arrays[f"final/{field}"] = np.asarray(getattr(result.final_state, field))
    np.savez(os.path.join(OUT, f"{name}.npz"), **arrays)
    print(name, sorted(arrays))
