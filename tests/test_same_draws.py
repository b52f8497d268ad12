"""The restructuring changed no draw: every kernel, built with today's API on a tiny data set,
reproduces the draws recorded from the code before it (commit d831a64). The cases live in
``tests/reference/<model>.py`` (``CASES = {name: build}``, ``build() -> (algorithm,
run_kwargs)``), the recorded draws in ``tests/reference/draws/<name>.npz`` (keys
``group/variable`` of the run's trace and ``final/<field>`` of the final state). A kernel
whose draws change on purpose is re-recorded in the same commit (``tests/reference/_record*.py``),
and CHANGELOG.md says why: 2026-11-30, the Gamma sampler (``bnpjax.ops.sample_gamma``)
changed the FM, linear-Gaussian IBP, ILFM, iPM3F and linear-regression draws."""

import importlib
import pathlib

import jax
import numpy as np
import pytest
from tiers import long_only

import bnpjax
from bnpjax.infer import VariationalAlgorithm, fit_run

REFERENCE_DIR = pathlib.Path(__file__).parent / "reference"
#: the slowest cases (60-90 s each with an empty compilation cache on the 2-core CI machine),
#: whose model keeps another case in every run: ipm3f_parallel, ilfm.gibbs
LONG_CASES = {"m3f.ipm3f_sequential", "ilfm.gibbs_random_walk", "ilfm.gibbs_single"}


def _cases():
    cases = []
    for path in sorted(REFERENCE_DIR.glob("[!_]*.py")):
        module = importlib.import_module(f"reference.{path.stem}")
        renamed = getattr(module, "RENAMED", {})
        for name, build in module.CASES.items():
            marks = ()
            if name in LONG_CASES:
                marks = long_only("60-90 s")
            cases.append(pytest.param(name, build, renamed, id=name, marks=marks))
    return cases


def _flatten(result) -> dict[str, np.ndarray]:
    out = {}
    for group, values in result.trace.items():
        for name, value in values.items():
            out[f"{group}/{name}"] = np.asarray(value)
    state = result.final_state
    for field in getattr(state, "_fields", ()):
        out[f"final/{field}"] = np.asarray(getattr(state, field))
    return out


@pytest.mark.parametrize(("name", "build", "renamed"), _cases())
def test_same_draws_as_before_the_restructuring(name, build, renamed):
    algorithm, run_kwargs = build()
    recorded = np.load(REFERENCE_DIR / "draws" / f"{name}.npz")
    if isinstance(algorithm, VariationalAlgorithm):
        result = fit_run(algorithm, **run_kwargs)
        now = {f"final/{f}": getattr(result.state, f) for f in result.state._fields}
    else:
        now = _flatten(bnpjax.run(algorithm, **run_kwargs))
    assert recorded.files, name
    for old_key in recorded.files:
        group, _, variable = old_key.partition("/")
        new_key = f"{group}/{renamed.get(variable, variable)}"
        assert new_key in now, f"{name}: {new_key} is no longer produced"
        old, new = recorded[old_key], np.asarray(now[new_key])
        assert old.shape == new.shape, f"{name}: {new_key} {old.shape} -> {new.shape}"
        if np.issubdtype(old.dtype, np.floating):
            np.testing.assert_allclose(new, old, rtol=1e-9, atol=1e-12, err_msg=new_key)
        else:
            np.testing.assert_array_equal(new, old, err_msg=new_key)


def test_every_model_has_reference_draws():
    models = {p.values[0].split(".")[0] for p in _cases()}
    assert models >= {"linear_regression", "ibp_lg", "ilfm", "wmmsb", "m3f", "fm"}, models


jax.config.update("jax_enable_x64", True)
