"""Every kernel passes Geweke's joint-distribution test through its model's protocol, and a
deliberately broken twin of it fails by a wide margin (one table, as BlackJAX runs one table
of algorithms). The rows live in ``tests/geweke_cases/<model>.py`` as ``CASES``."""

import importlib
import pathlib

import pytest

from bnpjax.testing import run_geweke_case

CASE_DIR = pathlib.Path(__file__).parent / "geweke_cases"


def _cases():
    cases = []
    for path in sorted(CASE_DIR.glob("[!_]*.py")):
        module = importlib.import_module(f"geweke_cases.{path.stem}")
        for case in module.CASES:
            marks = getattr(module, "MARKS", {}).get(case.name, ())
            cases.append(pytest.param(case, id=case.name, marks=marks))
    return cases


CASES = _cases()


def test_the_table_covers_every_model():
    models = {param.values[0].name.split(".")[0] for param in CASES}
    assert models >= {"linear_regression", "ibp_lg", "ilfm", "wmmsb", "m3f", "fm"}, models


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_kernel_passes(case):
    result = run_geweke_case(case)
    assert result.passed, f"{case.name}\n{result}"


@pytest.mark.slow
@pytest.mark.parametrize("case", [p for p in CASES if p.values[0].broken_factory is not None])
def test_broken_twin_fails(case):
    result = run_geweke_case(case, broken=True)
    assert not result.passed, f"{case.name} (broken twin)\n{result}"
    # not a marginal call: a real slip is caught by a wide margin
    assert result.max_abs_z > 2 * result.threshold, f"{case.name} (broken twin)\n{result}"


def test_every_kernel_has_a_broken_twin():
    missing = [p.values[0].name for p in CASES if p.values[0].broken_factory is None]
    assert not missing, f"rows without a broken twin: {missing}"
