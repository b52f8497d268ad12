"""Argument checks and deprecations shared by every public entry point.

Each check raises a ``ValueError`` that names the argument, before anything is traced.
"""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable

import numpy as np

__all__ = [
    "check_integer",
    "check_integer_array",
    "check_positive",
    "deprecated_alias",
    "is_positive_finite",
    "renamed_arguments",
]


def is_positive_finite(value) -> bool:
    """Whether ``value`` is one positive finite real number (not a bool, not an array)."""
    if isinstance(value, bool):
        return False
    try:
        return bool(np.isfinite(value) and value > 0)
    except (TypeError, ValueError):
        return False


def check_positive(value, name: str) -> float:
    """``value`` as a ``float`` if it is one positive finite real number.

    Raises
    ------
    ValueError
        naming ``name`` otherwise.
    """
    if not is_positive_finite(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return float(value)


def check_integer(value, name: str, minimum: int = 1) -> int:
    """``value`` as an ``int`` if it is an integer (not a bool) ``>= minimum``.

    Parameters
    ----------
    value
        a Python or NumPy integer.
    name
        the argument's name, for the error message.
    minimum
        the smallest value accepted.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        naming ``name`` when ``value`` is not such an integer.
    """
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_integer_array(
    value, name: str, *, minimum: int | None = None, maximum: int | None = None, size=None
) -> np.ndarray:
    """``value`` as a 1-d ``int64`` array of integer values in ``[minimum, maximum]``.

    Floats holding whole numbers (as read from a CSV file) are accepted; fractions, NaN, bools
    of another meaning and values out of range are not.

    Parameters
    ----------
    value
        array-like of integers.
    name
        the argument's name, for the error message.
    minimum, maximum
        inclusive bounds (None: unbounded).
    size
        the required length (None: any).

    Returns
    -------
    numpy.ndarray
        of dtype ``int64``.

    Raises
    ------
    ValueError
        naming ``name``.
    """
    array = np.asarray(value)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if size is not None and array.shape[0] != size:
        raise ValueError(f"{name} must have length {size}, got {array.shape[0]}")
    if array.size and not (
        np.issubdtype(array.dtype, np.integer)
        or (
            np.issubdtype(array.dtype, np.floating)
            and np.all(np.isfinite(array))
            and np.all(array == np.round(array))
        )
    ):
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    out = array.astype(np.int64)
    if minimum is not None and out.size and out.min() < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out.min()}")
    if maximum is not None and out.size and out.max() > maximum:
        raise ValueError(f"{name} must be <= {maximum}, got {out.max()}")
    return out


def renamed_arguments(**renames: str) -> Callable:
    """Decorator: keyword arguments renamed in this release keep working for one more.

    ``@renamed_arguments(prior="hyper")`` lets a call with ``prior=...`` through as
    ``hyper=...`` with a ``FutureWarning`` naming the new keyword; giving both is an error.
    """

    def decorate(fn):
        parameters = inspect.signature(fn).parameters
        for old, new in renames.items():
            if new not in parameters:
                raise TypeError(f"{fn.__qualname__} has no argument {new!r} for {old!r}")

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(
                            f"{fn.__name__}() got both {old!r} (deprecated) and {new!r}"
                        )
                    warnings.warn(
                        f"{fn.__name__}({old}=...) is deprecated; use {new}=...",
                        FutureWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def deprecated_alias(function: Callable, old_name: str) -> Callable:
    """``function`` under its previous name, warning ``FutureWarning`` at each call."""

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        warnings.warn(
            f"{old_name} is deprecated; use {function.__name__}",
            FutureWarning,
            stacklevel=2,
        )
        return function(*args, **kwargs)

    wrapper.__name__ = old_name
    wrapper.__qualname__ = old_name
    wrapper.__doc__ = f"Deprecated alias of :func:`{function.__name__}`."
    return wrapper
