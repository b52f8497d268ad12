"""Argument checks shared by the model factories: each names the argument in its ValueError."""

from __future__ import annotations

import numpy as np


def is_positive_finite(value) -> bool:
    """Whether ``value`` is one positive finite real number (not a bool, not an array)."""
    if isinstance(value, bool):
        return False
    try:
        return bool(np.isfinite(value) and value > 0)
    except (TypeError, ValueError):
        return False


def check_integer(value, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= minimum``, else a
    ``ValueError`` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
