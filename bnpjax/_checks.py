"""Transitional: the checks live in :mod:`bnpjax.infer.checks`."""

from bnpjax.infer.checks import check_integer, is_positive_finite

__all__ = ["check_integer", "is_positive_finite"]
