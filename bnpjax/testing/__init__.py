"""Harnesses that prove samplers right: Geweke's joint-distribution test and test kernels."""

from bnpjax.testing.geweke import GewekeResult, default_test_functions, geweke_test

__all__ = ["GewekeResult", "default_test_functions", "geweke_test"]
