"""Data, hyperparameters, state and step diagnostics of the linear-Gaussian IBP model."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import (
    check_dtype_range,
    check_real_array,
    is_positive_finite,
    renamed_arguments,
)

__all__ = ["IBPLGData", "IBPLGHyper", "IBPLGInfo", "IBPLGState", "make_data", "make_hyper"]


class IBPLGData(NamedTuple):
    """``X`` (N, D) with unobserved entries set to 0, ``mask`` (N, D) 1.0 where observed, and
    ``observed`` (num_observed,) the row-major flat indices of the observed entries."""

    X: jax.Array
    mask: jax.Array
    observed: jax.Array

    #: rows are conditionally independent given the weights (the row-parallel sampler), so
    #: the rows of ``X`` and ``mask`` may be split over devices (:mod:`bnpjax.infer.sharding`)
    sharded_axes = {"X": 0, "mask": 0}


class IBPLGHyper(NamedTuple):
    """Gamma(shape, rate) prior of alpha; InvGamma(shape, scale) priors of the variances
    ``sigma_x^2`` and ``sigma_a^2``."""

    alpha_shape: jax.Array
    alpha_rate: jax.Array
    sigma_x_shape: jax.Array
    sigma_x_scale: jax.Array
    sigma_a_shape: jax.Array
    sigma_a_scale: jax.Array


class IBPLGState(NamedTuple):
    """Sampler state: features ``Z`` (N, capacity), weights ``A`` (capacity, D; zero in
    inactive columns), the IBP mass ``alpha``, the noise and weight sds ``sigma_x`` and
    ``sigma_a``, and the data ``X`` with its missing entries imputed."""

    Z: jax.Array  # (N, capacity) in {0, 1}
    A: jax.Array  # (capacity, D); zero in inactive columns
    alpha: jax.Array
    sigma_x: jax.Array
    sigma_a: jax.Array
    X: jax.Array  # (N, D) the data with missing entries imputed

    sharded_axes = {"Z": 0, "X": 0}  # rows, with the data's (bnpjax.infer.sharding)


class IBPLGInfo(NamedTuple):
    """Per-step diagnostics: the log joint ``lp``, the number of active features, and whether
    (and to what size) the feature buffer must grow."""

    lp: jax.Array
    num_features: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def make_data(X, mask=None) -> IBPLGData:
    """Validate ``X`` and its observation mask.

    Parameters
    ----------
    X : array_like, shape (N, D)
        The data; NaN is accepted only where ``mask`` is False.
    mask : array_like of bool, shape (N, D), optional
        True where observed (default: every entry). Every row needs an observed entry.

    Returns
    -------
    IBPLGData

    Raises
    ------
    ValueError
        Naming the argument.
    """
    X = check_real_array(X, "X", finite=False)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D array (N, D), got shape {X.shape}")
    if mask is None:
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or inf; pass mask=... (False where missing)")
        mask = np.ones(X.shape, bool)
    mask = np.asarray(mask)
    if mask.shape != X.shape or mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array of shape {X.shape}")
    if not np.all(np.isfinite(X[mask])):
        raise ValueError("X must be finite where mask is True")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"mask leaves rows without any observed entry: {empty[:10].tolist()}")
    dtype = jnp.result_type(float)
    return IBPLGData(
        jnp.asarray(np.where(mask, X, 0.0), dtype),
        jnp.asarray(mask, dtype),
        jnp.asarray(np.flatnonzero(mask), jnp.int32),
    )


def _pair(value, name):
    try:
        a, b = value
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair of positive numbers, got {value!r}") from None
    if not (is_positive_finite(a) and is_positive_finite(b)):
        raise ValueError(f"{name} must be a pair of positive numbers, got {value!r}")
    check_dtype_range(np.asarray([a, b], float), name)
    return a, b


@renamed_arguments(alpha="alpha_prior", sigma_x="sigma_x_prior", sigma_a="sigma_a_prior")
def make_hyper(
    *,
    alpha_prior=(1.0, 1.0),
    sigma_x_prior=(1.0, 1.0),
    sigma_a_prior=(1.0, 1.0),
) -> IBPLGHyper:
    """The hyperpriors.

    Parameters
    ----------
    alpha_prior : (float, float)
        ``(a, b)``: alpha ~ Gamma(shape a, rate b). Old name ``alpha``.
    sigma_x_prior, sigma_a_prior : (float, float)
        ``(shape, scale)`` of the inverse-Gamma priors of ``sigma_x^2`` and ``sigma_a^2``.
        Old names ``sigma_x``, ``sigma_a``.

    Returns
    -------
    IBPLGHyper

    Raises
    ------
    ValueError
        Naming the argument that is not a pair of positive numbers.
    """
    values = [
        *_pair(alpha_prior, "alpha_prior"),
        *_pair(sigma_x_prior, "sigma_x_prior"),
        *_pair(sigma_a_prior, "sigma_a_prior"),
    ]
    dtype = jnp.result_type(float)
    return IBPLGHyper(*(jnp.asarray(v, dtype) for v in values))
