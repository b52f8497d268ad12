"""Harnesses that prove samplers right: Geweke's joint-distribution test, the table of
Geweke cases run over the model protocol, small test kernels with known targets, and a switch
to run a block in float32 or float64."""

from bnpjax.testing.geweke import (
    GewekeCase,
    GewekeResult,
    default_test_functions,
    exact_start_test,
    geweke_test,
    run_geweke_case,
)
from bnpjax.testing.precision import float_precision

__all__ = [
    "GewekeCase",
    "GewekeResult",
    "default_test_functions",
    "exact_start_test",
    "float_precision",
    "geweke_test",
    "run_geweke_case",
]
