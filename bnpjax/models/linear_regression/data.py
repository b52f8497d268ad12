"""Data, hyperparameters and state of the Normal-Gamma linear regression."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import (
    check_dtype_range,
    check_integer,
    check_real_array,
    deprecated_alias,
    is_positive_finite,
)
from bnpjax.ops._dtypes import device_array

__all__ = [
    "LinearRegressionData",
    "LinearRegressionHyper",
    "LinearRegressionState",
    "NormalGammaPrior",
    "make_data",
    "make_hyper",
    "make_prior",
]


class LinearRegressionData(NamedTuple):
    """Validated data: design ``X`` (n, p), response ``y`` (n,), ``mask`` (n,) of observed
    entries as 0/1 floats, and ``observed`` (n_obs,) their indices."""

    X: jax.Array
    y: jax.Array
    mask: jax.Array
    observed: jax.Array


class LinearRegressionHyper(NamedTuple):
    """Normal-Gamma prior: ``beta | tau ~ N(mean, (tau * precision)^-1)``,
    ``tau ~ Gamma(a, b)`` (shape, rate)."""

    mean: jax.Array
    precision: jax.Array
    a: jax.Array
    b: jax.Array


#: Deprecated name of :class:`LinearRegressionHyper`.
NormalGammaPrior = LinearRegressionHyper


class LinearRegressionState(NamedTuple):
    """Sampler state: coefficients ``beta`` (p,) and noise precision ``tau`` (scalar)."""

    beta: jax.Array
    tau: jax.Array


def make_data(X, y, mask=None) -> LinearRegressionData:
    """Validate and convert user data; unobserved responses are never used.

    Parameters
    ----------
    X : array_like, shape (n, p)
        Design matrix, finite numbers.
    y : array_like, shape (n,)
        Responses; may hold NaN where ``mask`` is False.
    mask : array_like of bool, shape (n,), optional
        True where ``y`` is observed (default: every entry).

    Returns
    -------
    LinearRegressionData

    Raises
    ------
    ValueError
        Naming the argument, for wrong shapes, non-finite values or no observation at all.
    """
    X = check_real_array(X, "X")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, p), got shape {X.shape}")
    if X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(
            f"X must have at least one row and one feature column, got shape {X.shape}"
        )
    y = check_real_array(y, "y", finite=False)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if mask is None:
        mask = np.ones(y.shape, bool)
    mask = np.asarray(mask)
    if mask.shape != y.shape or mask.dtype != bool:
        raise ValueError(
            f"mask must be a boolean array of shape {y.shape}, got {mask.dtype} of shape "
            f"{mask.shape} (True where y is observed; e.g. np.isfinite(y))"
        )
    if not mask.any():
        raise ValueError("mask must mark at least one observed entry of y")
    bad = np.flatnonzero(mask & ~np.isfinite(y))
    if bad.size:
        raise ValueError(
            f"y must be finite where observed ({y[bad[0]]} at index {bad[0]}); pass "
            "mask=np.isfinite(y) to leave missing responses out"
        )
    dtype = jnp.result_type(float)
    y_filled = np.where(mask, y, 0.0)
    return LinearRegressionData(
        X=device_array(X, dtype),
        y=device_array(y_filled, dtype),
        mask=device_array(mask, dtype),
        observed=device_array(np.flatnonzero(mask), jnp.int32),
    )


def make_hyper(
    num_features: int, *, mean=0.0, precision=1.0, a=1.0, b=1.0
) -> LinearRegressionHyper:
    """The Normal-Gamma prior, with scalar, diagonal or full-matrix precision.

    Parameters
    ----------
    num_features : int
        Number of coefficients ``p``.
    mean : float or array_like, shape (p,)
        Prior mean of ``beta``, finite.
    precision : float or array_like, shape (p,) or (p, p)
        A positive scalar, a vector of positive entries (a diagonal) or a symmetric positive
        definite matrix; the prior precision of ``beta`` is ``tau * precision``.
    a, b : float
        Shape and rate of the Gamma prior of the noise precision ``tau``.

    Returns
    -------
    LinearRegressionHyper

    Raises
    ------
    ValueError
        Naming the argument that is out of range.
    """
    dtype = jnp.result_type(float)
    p = check_integer(num_features, "num_features", 1)
    mean = np.asarray(mean, float)
    if mean.ndim > 1 or mean.size not in (1, p):
        raise ValueError(f"mean must be a scalar or a ({p},) vector, got shape {mean.shape}")
    mean = np.broadcast_to(mean, (p,))
    if not np.all(np.isfinite(mean)):
        raise ValueError("mean must be finite (NaN or inf found)")
    precision = np.asarray(precision, float)
    if precision.ndim <= 1:
        if precision.size not in (1, p):
            raise ValueError(f"precision must be a scalar, a ({p},) vector or a ({p}, {p}) matrix")
        precision = np.diag(np.broadcast_to(precision, (p,)))
    if precision.shape != (p, p):
        raise ValueError(f"precision must be a scalar, a ({p},) vector or a ({p}, {p}) matrix")
    if not np.all(np.isfinite(precision)):
        raise ValueError("precision must be finite (NaN or inf found)")
    if not np.allclose(precision, precision.T):
        raise ValueError("precision must be symmetric positive definite (it is not symmetric)")
    smallest = float(np.linalg.eigvalsh(precision).min())
    if smallest <= 0:
        raise ValueError(
            f"precision must be symmetric positive definite (its smallest eigenvalue is "
            f"{smallest:.3g}); a diagonal of positive prior precisions always is"
        )
    if not (is_positive_finite(a) and is_positive_finite(b)):
        raise ValueError(f"a and b must be positive, got a={a}, b={b}")
    for name, value in (("mean", mean), ("precision", precision), ("a", a), ("b", b)):
        check_dtype_range(np.asarray(value, float), name)
    return LinearRegressionHyper(
        device_array(mean, dtype),
        device_array(precision, dtype),
        device_array(a, dtype),
        device_array(b, dtype),
    )


make_prior = deprecated_alias(make_hyper, "make_prior")
