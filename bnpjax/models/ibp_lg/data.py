"""Data, hyperparameters, state and step diagnostics of the linear-Gaussian IBP model."""

from __future__ import annotations

import warnings
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
from bnpjax.infer.scaling import location_scale

__all__ = ["IBPLGData", "IBPLGHyper", "IBPLGInfo", "IBPLGState", "make_data", "make_hyper"]


class IBPLGData(NamedTuple):
    """``X`` (N, D) standardised, ``(X - loc) / scale``, with unobserved entries set to 0,
    ``mask`` (N, D) 1.0 where observed, ``observed`` (num_observed,) the row-major flat
    indices of the observed entries, and the ``loc`` and ``scale`` of the standardisation
    (0 and 1 when :func:`make_data` was asked for ``standardize=False``)."""

    X: jax.Array
    mask: jax.Array
    observed: jax.Array
    loc: jax.Array | float = 0.0
    scale: jax.Array | float = 1.0

    #: rows are conditionally independent given the weights (the row-parallel sampler), so
    #: the rows of ``X`` and ``mask`` may be split over devices (:mod:`bnpjax.infer.sharding`)
    sharded_axes = (("X", 0), ("mask", 0))


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

    sharded_axes = (("Z", 0), ("X", 0))  # rows, with the data's (bnpjax.infer.sharding)


class IBPLGInfo(NamedTuple):
    """Per-step diagnostics: the log joint ``lp``, the number of active features, and whether
    (and to what size) the feature buffer must grow."""

    lp: jax.Array
    num_features: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def make_data(X, mask=None, *, center=None, standardize: bool = True) -> IBPLGData:
    """Validate ``X`` and its observation mask, and standardise ``X``.

    The model ``X = Z A + noise`` has no offset: its zero is an entry that no feature
    touches, and its default hyperpriors and starting values assume entries of order 1. So
    that a fit does not depend on the data's units, ``X`` is standardised once, on the host
    in float64: ``(X - loc) / scale``, with ``loc`` from ``center`` and ``scale`` the root mean
    square of the observed entries about it. The samplers run on the standardised data and
    trace ``A``, ``sigma_x`` and ``sigma_a`` (and the pointwise log-likelihood) back in the
    data's units; :func:`~bnpjax.models.ibp_lg.predict` returns data units too. Multiplying
    ``X`` by ``c > 0`` therefore leaves the law of ``Z`` and ``alpha`` unchanged and multiplies
    ``A``, ``sigma_x`` and ``sigma_a`` by ``c``; the chains are the same draw for draw.

    A shift is not a change of units for this model: ``X + c`` holds one more feature, the
    constant image ``c`` in every row. Pass the background level as ``center`` (the value of
    an entry no feature touches: ``center=c`` makes ``X + c`` the same fit as ``X``). Data
    whose entries sit far from ``center`` against their spread get a ``UserWarning``: their
    offset costs a feature, and in float32 their variation is lost in rounding.

    Parameters
    ----------
    X : array_like, shape (N, D)
        The data; NaN is accepted only where ``mask`` is False.
    mask : array_like of bool, shape (N, D), optional
        True where observed (default: every entry). Every row needs an observed entry.
    center : None, float, "mode" or "mean"
        The background level subtracted before the fit: None keeps the data's origin (0); a
        number; ``"mode"``, the half-sample mode of the observed entries
        (:func:`bnpjax.infer.scaling.half_sample_mode`, the level most entries sit at); or
        ``"mean"``. A data-derived level is only an estimate: on the bars data the mode lies
        0.15 above the true background of 0, and the sampler spends features on the
        difference, so give the level when it is known.
    standardize : bool
        False keeps ``X`` as given (``loc = 0``, ``scale = 1``, ``center`` not allowed): then
        the hyperpriors of :func:`make_hyper` and the factories' starting values
        ``sigma_x = sigma_a = 1`` are in the data's units, and data far from order 1 need
        priors to match.

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
        raise ValueError(
            f"mask must be a boolean array of shape {X.shape}, got {mask.dtype} of shape "
            f"{mask.shape} (True where X is observed; e.g. np.isfinite(X))"
        )
    if not np.all(np.isfinite(X[mask])):
        raise ValueError("X must be finite where mask is True")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(
            f"mask leaves rows without any observed entry: {empty[:10].tolist()}; drop those "
            "rows (nothing can be learnt about their features)"
        )
    dtype = jnp.result_type(float)
    loc, scale = _standardisation(X[mask], center, standardize)
    return IBPLGData(
        jnp.asarray(np.where(mask, (np.asarray(X, np.float64) - loc) / scale, 0.0), dtype),
        jnp.asarray(mask, dtype),
        jnp.asarray(np.flatnonzero(mask), jnp.int32),
        jnp.asarray(loc, dtype),
        jnp.asarray(scale, dtype),
    )


def _standardisation(values, center, standardize: bool) -> tuple[float, float]:
    """``(loc, scale)`` of :func:`make_data`; warns when the entries sit far from ``loc``."""
    if not standardize:
        if center is not None:
            raise ValueError("center needs standardize=True (the data are kept as given)")
        return 0.0, 1.0
    if isinstance(center, str) or center is None:
        if center not in ("mode", "mean", None):
            raise ValueError(f"center must be None, a number, 'mode' or 'mean', got {center!r}")
        loc, scale = location_scale(values, center)
    else:
        if not (isinstance(center, int | float | np.integer | np.floating)
                and np.isfinite(center)):  # fmt: skip
            raise ValueError(f"center must be None, a number, 'mode' or 'mean', got {center!r}")
        loc, scale = location_scale(np.asarray(values, np.float64) - float(center), None)
        loc = float(center)
    offset, spread = abs(float(np.mean(values)) - loc), float(np.std(values))
    if offset > 100 * spread:
        warnings.warn(
            f"X's entries sit far from the model's zero (mean {offset + loc:.6g}, sd "
            f"{spread:.3g}, center {loc:.6g}): the sampler will spend a feature on the "
            "offset, and in float32 the variation is lost in rounding; pass center= the "
            "background level (an entry no feature touches)",
            UserWarning,
            stacklevel=3,
        )
    return loc, scale


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
    """The hyperpriors, in the units of the standardised data (see :func:`make_data`): the
    defaults put the noise and weight variances near 1, the data's own spread.

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
