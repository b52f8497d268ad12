"""Argument checks and deprecations shared by every public entry point.

Each check raises a ``ValueError`` that names the argument, before anything is traced.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import os
import warnings
from collections.abc import Callable

import numpy as np

__all__ = [
    "check_allocation",
    "check_dtype_range",
    "check_finite_tree",
    "check_integer",
    "check_integer_array",
    "check_nonnegative",
    "check_positive",
    "check_positive_if_concrete",
    "check_real_array",
    "check_seed",
    "check_start_scale",
    "concrete",
    "deprecated_alias",
    "is_positive_finite",
    "key_from_random_state",
    "nonfinite_leaves",
    "renamed_arguments",
    "run_dtype",
]

#: the largest seed ``jax.random.key`` takes (it reads a Python int as an int64)
MAX_SEED = 2**63 - 1


def is_positive_finite(value) -> bool:
    """Whether ``value`` is one positive finite real number (not a bool, not an array)."""
    if isinstance(value, bool):
        return False
    try:
        return bool(np.isfinite(value) and value > 0)
    except (TypeError, ValueError):
        return False


def check_positive(value, name: str) -> float:
    """``value`` as a ``float`` if it is one positive finite real number, in range for the
    run's dtype (:func:`check_dtype_range`).

    Raises
    ------
    ValueError
        naming ``name`` otherwise.
    """
    if not is_positive_finite(value):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    check_dtype_range(np.float64(value), name)
    return float(value)


def check_flag(value, name: str) -> bool:
    """``value`` as a ``bool`` if it is one (Python or NumPy); a truthy string or number is
    refused, not read as True.

    Raises
    ------
    ValueError
        naming ``name`` otherwise.
    """
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


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


# --------------------------------------------------------------------------------------------
# arrays of real numbers, in range for the dtype of the run


def run_dtype() -> np.dtype:
    """The floating dtype a run computes in: float64 with ``jax_enable_x64``, else float32."""
    import jax

    return np.dtype(np.float64 if jax.config.jax_enable_x64 else np.float32)


def concrete(value) -> np.ndarray | None:
    """Host copy of ``value``, or None while it is traced (inside compiled code a check on
    values is left to the caller's caller, which validated the data before tracing)."""
    import jax

    if isinstance(value, jax.core.Tracer):
        return None
    try:
        return np.asarray(value)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def check_dtype_range(array, name: str, dtype=None) -> None:
    """Refuse finite values of ``array`` beyond the largest number of ``dtype`` (default: the
    run's, :func:`run_dtype`): converted, they would become inf and every draw NaN.

    Raises
    ------
    ValueError
        naming ``name``, the largest value and the dtype.
    """
    dtype = run_dtype() if dtype is None else np.dtype(dtype)
    array = np.asarray(array)
    if not array.size or array.dtype.kind not in "fiu":
        return
    finite = np.abs(array[np.isfinite(array)]) if array.dtype.kind == "f" else np.abs(array)
    largest = float(finite.max(initial=0))
    limit = float(np.finfo(dtype).max)
    if largest > limit:
        advice = (
            "rescale it, or enable 64-bit floats (jax.config.update('jax_enable_x64', True))"
            if dtype == np.float32
            else "rescale it"
        )
        raise ValueError(
            f"{name} holds {largest:.3g}, beyond the largest {dtype} ({limit:.3g}) this run "
            f"computes in; {advice}"
        )


def check_nonnegative(value, name: str, meaning: str = "") -> float:
    """``value`` as a ``float`` if it is one real number, finite and >= 0; else a
    ``ValueError`` naming ``name`` (and saying what it is, ``meaning``, when given)."""
    what = f" ({meaning})" if meaning else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a number >= 0{what}, got {value!r}")
    value = float(value)  # an integer too large for NumPy's isfinite is still a number
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be finite and >= 0{what}, got {value!r}")
    return value


def check_start_scale(value, name: str) -> float:
    """The sd of a model's random start of its factors: a real number, finite, >= 0 and in
    range for the run's dtype; else a ``ValueError`` naming ``name``."""
    value = check_nonnegative(value, name, "the sd of the factors' start")
    check_dtype_range(np.float64(value), name)
    return value


def check_real_array(value, name: str, *, finite: bool = True, ndim=None) -> np.ndarray:
    """``value`` as a float64 NumPy array of real numbers, in range for the run's dtype.

    Booleans and integers are converted; strings that do not read as numbers, objects,
    complex numbers, NaN and infinities (unless ``finite`` is False) are refused, as are finite
    values beyond the run's dtype (:func:`check_dtype_range`).

    Parameters
    ----------
    value
        array-like.
    name
        the argument's name, for the error message.
    finite
        refuse NaN and infinities; False leaves them to the caller (missing entries that a
        mask hides).
    ndim
        the required number of dimensions (None: any).

    Returns
    -------
    numpy.ndarray
        of dtype ``float64``.

    Raises
    ------
    ValueError
        naming ``name`` and saying what is wrong.
    """
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be an array of numbers ({err})") from None
    if ndim is not None and array.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {array.shape}")
    kind = array.dtype.kind
    if kind == "c":
        raise ValueError(
            f"{name} must be real, got dtype {array.dtype} (pass .real if the imaginary parts "
            "are zero)"
        )
    if kind not in "biuf":
        if kind in "mM":
            raise ValueError(f"{name} must hold numbers, got dtype {array.dtype}")
        for item in array.reshape(-1):
            item = item.item() if isinstance(item, np.generic) else item
            if isinstance(item, complex):
                raise ValueError(f"{name} must be real; {item!r} is complex")
            try:
                float(item)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must hold numbers; {item!r} is not one") from None
    array = array.astype(np.float64)
    bad = ~np.isfinite(array)
    if finite and bad.any():
        if array.ndim == 0:  # a scalar setting: no index to give
            raise ValueError(f"{name} must be finite, got {array.item()}")
        where = tuple(int(i[0]) for i in np.nonzero(bad))
        raise ValueError(
            f"{name} contains NaN or infinite values (first at index {where}: {array[where]}); "
            "drop or impute them (where a model takes a mask, mark missing entries in it)"
        )
    check_dtype_range(array, name)
    return array


def check_positive_if_concrete(value, name: str, *, minimum_exclusive: float = 0.0):
    """Refuse a concrete ``value`` (scalar or array) with an entry that is not a finite number
    above ``minimum_exclusive``; a traced value passes (checked where it was made)."""
    host = concrete(value)
    if host is None:
        return value
    if host.dtype.kind not in "iuf":
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    ok = np.isfinite(host) & (host > minimum_exclusive)
    if not np.all(ok):
        shown = host if host.ndim == 0 else host[~ok].reshape(-1)[:3]
        raise ValueError(f"{name} must be a finite number > {minimum_exclusive:g}, got {shown}")
    check_dtype_range(host, name)
    return value


# --------------------------------------------------------------------------------------------
# states, seeds, memory


def nonfinite_leaves(tree) -> list[str]:
    """Names (paths such as ``.alpha`` or ``['posterior']['Z']``) of the floating leaves of
    ``tree`` that hold a NaN or an infinity (host arrays, no tracing)."""
    import jax

    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        host = np.asarray(leaf)
        if host.dtype.kind in "fc" and not np.all(np.isfinite(host)):
            bad.append(jax.tree_util.keystr(path) or "<root>")
    return bad


def check_finite_tree(tree, name: str) -> None:
    """Refuse a pytree (a state) with a NaN or infinite entry, naming its fields."""
    bad = nonfinite_leaves(tree)
    if bad:
        raise ValueError(f"{name} has NaN or infinite values in {', '.join(bad)}")


def check_seed(seed, name: str = "seed") -> int:
    """``seed`` as an ``int`` if ``jax.random.key`` takes it (an integer in
    ``[0, 2**63)``), else ``ValueError`` naming ``name``."""
    if (
        isinstance(seed, bool)
        or not isinstance(seed, int | np.integer)
        or not (0 <= seed <= MAX_SEED)
    ):
        raise ValueError(f"{name} must be an integer in [0, 2**63), got {seed!r}")
    return int(seed)


def key_from_random_state(random_state, name: str = "random_state"):
    """A ``jax.random.key`` from scikit-learn's ``random_state`` conventions: an integer
    seed; None (a seed drawn from NumPy's global generator, as scikit-learn does, so that
    ``np.random.seed`` makes it repeatable); a ``numpy.random.RandomState`` or
    ``numpy.random.Generator`` (a seed drawn from it); or a JAX key, used as given."""
    import jax

    from bnpjax.infer.keys import key_from_seed

    if isinstance(random_state, jax.Array) and jax.dtypes.issubdtype(
        random_state.dtype, jax.dtypes.prng_key
    ):
        return random_state
    if random_state is None:
        random_state = np.random.mtrand._rand
    if isinstance(random_state, np.random.RandomState):
        return key_from_seed(int(random_state.randint(0, 2**31 - 1)))
    if isinstance(random_state, np.random.Generator):
        return key_from_seed(int(random_state.integers(0, 2**63 - 1)))
    try:
        seed = check_seed(random_state, name)
    except ValueError:
        raise ValueError(
            f"{name} must be None, an integer in [0, 2**63), a numpy RandomState or Generator "
            f"or a jax.random.key, got {random_state!r}"
        ) from None
    return key_from_seed(seed)


def _memory_bytes() -> int | None:
    """Memory this process could still use: MemAvailable (Linux), else the physical total."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _format_bytes(size: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.3g} {unit}"
        size /= 1024
    return f"{size:.3g} TiB"  # pragma: no cover


def check_allocation(shape, dtype, name: str, *, copies: int = 1) -> None:
    """Refuse a dense allocation of ``copies`` arrays of ``shape`` and ``dtype`` that would
    not fit in the memory this machine has available, naming ``name`` and the size, before
    anything is allocated."""
    size = copies * math.prod(int(s) for s in shape) * np.dtype(dtype).itemsize
    available = _memory_bytes()
    if available is not None and size > available:
        raise ValueError(
            f"{name} needs dense arrays of shape {tuple(int(s) for s in shape)} "
            f"({_format_bytes(size)}), more than the {_format_bytes(available)} of memory "
            "available; check the ids or sizes (an id far beyond the others makes every "
            "array that large)"
        )
