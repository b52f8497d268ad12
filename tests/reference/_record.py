"""What the ``_record_*.py`` scripts share: run cases and store their draws as
``draws/<name>.npz`` (keys ``group/variable`` of the trace and ``final/<field>``)."""

import os

import numpy as np

from bnpjax.infer import run

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "draws")


def record(cases, names=None):
    """Run ``cases[name]()`` for every name (default all) and save its draws."""
    for name in cases if names is None else names:
        algorithm, run_kwargs = cases[name]()
        result = run(algorithm, **run_kwargs)
        arrays = {
            f"{group}/{variable}": np.asarray(value)
            for group, values in result.trace.items()
            for variable, value in values.items()
        }
        for field in result.final_state._fields:
            value = getattr(result.final_state, field)
            if value is not None:  # an optional field the kernel does not use
                arrays[f"final/{field}"] = np.asarray(value)
        np.savez(os.path.join(OUT, f"{name}.npz"), **arrays)
        print(name, sorted(arrays))
