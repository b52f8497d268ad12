"""The Geweke table and the recovery tests in float32, the precision users get by default
(issue 28).

The suite runs in float64 (tests/conftest.py), and the case modules build their data when
imported, so the float32 rows run in a process of their own
(``tests/geweke_cases/_worker.py``), with x64 off before JAX is imported. Every row there is
exactly the float64 row: the same sizes, seeds, statistics, thresholds and broken twins.

The recovery tests of every model run in float32 the same way: ``pytest -p float32_plugin``
(tests/float32_plugin.py) in a subprocess, which turns x64 off after tests/conftest.py turned
it on and before any test module is imported.

The default suite runs the linear regression's row and its twin (about 15 s on one core);
``BNPJAX_LONG_TESTS=1`` runs every row and twin of the table, and the recovery tests. The
full table's figures, in both precisions, are in docs/guides/inputs.md ("Float32").
"""

import importlib
import json
import os
import pathlib
import subprocess
import sys

import pytest
from tiers import long_only

WORKER = pathlib.Path(__file__).parent / "geweke_cases" / "_worker.py"
CHEAP = ["linear_regression.gibbs"]
#: the tests that check a fit against the truth that generated its data, one or more per model
RECOVERY = [
    "tests/models/test_ibp_lg.py::test_recovers_bars",
    "tests/models/test_ibp_lg.py::test_heldout_log_likelihood_beats_a_constant_predictor",
    "tests/models/test_linear_regression.py::test_predict_and_log_likelihood_of_held_out_responses",
    "tests/models/test_fm_estimators.py::test_recovery_of_the_noiseless_signal",
    "tests/models/test_ilfm.py::test_link_prediction_on_a_planted_structure_and_capacity_growth",
    "tests/models/test_ilfm.py::test_cluster_start_finds_the_planted_communities",
    "tests/models/test_wmmsb_collapsed_gibbs.py::test_collapsed_gibbs_recovers_planted_blocks",
    "tests/models/test_wmmsb_cvb0.py::test_cvb0_recovers_planted_blocks",
    "tests/models/test_wmmsb_cvb0.py::test_scvb0_recovers_planted_blocks_and_stops_on_a_plateau",
    "tests/models/test_m3f_gibbs.py::test_recovery_m3f_and_ipm3f_and_baseline",
]
ROOT = pathlib.Path(__file__).parents[1]


def _row_names():
    names = []
    for path in sorted(WORKER.parent.glob("[!_]*.py")):
        module = importlib.import_module(f"geweke_cases.{path.stem}")
        names += [case.name for case in module.CASES]
    return names


def _float32_rows(names, timeout):
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    done = subprocess.run(
        [sys.executable, str(WORKER), "float32", "--with-twins", "--only", *names],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert {line["name"] for line in lines} == set(names), done.stdout
    return lines


def _check(lines):
    for line in lines:
        assert "error" not in line, line
        if line["broken"]:  # a twin may well blow up: that is a failure, as it should be
            # the twin fails in float32 too, by the table's wide margin
            assert not line["passed"] and line["max_abs_z"] > 2 * line["threshold"], line
        else:
            assert not line["nonfinite"], line  # a NaN statistic is a float32 failure
            assert line["passed"], line


def test_cheap_rows_pass_in_float32_and_their_twins_fail():
    _check(_float32_rows(CHEAP, timeout=300))


@pytest.mark.slow
@long_only("the whole table in float32")
@pytest.mark.parametrize("name", [n for n in _row_names() if n not in CHEAP])
def test_row_passes_in_float32_and_its_twin_fails(name):
    _check(_float32_rows([name], timeout=3600))


@pytest.mark.slow
@long_only("the recovery tests in float32")
@pytest.mark.parametrize("test", RECOVERY, ids=lambda t: t.split("::")[-1])
def test_recovery_in_float32(test):
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    tests_dir = str(ROOT / "tests")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (tests_dir, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "float32_plugin", "-p", "no:cacheprovider",
         "-n", "0", test],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800,
    )  # fmt: skip
    assert "jax_enable_x64 off" in done.stdout, done.stdout[-2000:]
    assert done.returncode == 0, done.stdout[-6000:]


def test_m3f_geweke_lambda_prior_is_never_zero(monkeypatch):
    """The float32 table's finding: jax.random.exponential is exactly 0 when its uniform is 0
    (once in 2^23 float32 draws), which made 1 / lambda infinite in the iPM3F rows' marginal
    simulator (max |z| = inf). The prior's draw keeps off 0 even then."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from bnpjax.models.m3f import geweke
    from bnpjax.testing import float_precision

    with float_precision("float32"):
        zeros = lambda key, shape, dtype: jnp.zeros(shape, dtype)  # noqa: E731
        monkeypatch.setattr(jax.random, "uniform", zeros)
        lam = np.asarray(geweke._exponential(jax.random.key(0), (3,), jnp.float32))
    assert lam.dtype == np.float32
    np.testing.assert_allclose(lam, -np.log(2.0**-24), rtol=1e-6)  # the top quantile, 16.6
