"""Harnesses that prove samplers right: Geweke's joint-distribution test, the table of
Geweke cases run over the model protocol, and small test kernels with known targets."""

from bnpjax.testing.geweke import (
    GewekeCase,
    GewekeResult,
    default_test_functions,
    geweke_test,
    run_geweke_case,
)

__all__ = ["GewekeCase", "GewekeResult", "default_test_functions", "geweke_test", "run_geweke_case"]
