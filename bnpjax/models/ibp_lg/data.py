"""Data, hyperparameters, state and step diagnostics of the linear-Gaussian IBP model."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import (
    check_dtype_range,
    check_flag,
    check_real_array,
    is_positive_finite,
    renamed_arguments,
)
from bnpjax.infer.scaling import location_scale
from bnpjax.ops._dtypes import device_array

__all__ = ["IBPLGData", "IBPLGHyper", "IBPLGInfo", "IBPLGState", "make_data", "make_hyper"]


class IBPLGData(NamedTuple):
    """``X`` (N, D) standardised, ``(X - loc) / scale``, with unobserved entries set to 0,
    ``mask`` (N, D) 1.0 where observed, ``observed`` (num_observed,) the row-major flat
    indices of the observed entries, the ``loc`` (D,) and ``scale`` of the standardisation
    (0 and 1 when :func:`make_data` was asked for ``standardize=False``), and ``background``
    (D,): the level of an entry no feature touches, standardised (the data's zero unless
    ``center`` says otherwise), at which a sampler built with ``sample_offset=False`` holds
    the per-column offset."""

    X: jax.Array
    mask: jax.Array
    observed: jax.Array
    loc: jax.Array | float = 0.0
    scale: jax.Array | float = 1.0
    background: jax.Array | float = 0.0

    #: rows are conditionally independent given the weights (the row-parallel sampler), so
    #: the rows of ``X`` and ``mask`` may be split over devices (:mod:`bnpjax.infer.sharding`)
    sharded_axes = (("X", 0), ("mask", 0))


class IBPLGHyper(NamedTuple):
    """Gamma(shape, rate) prior of alpha; InvGamma(shape, scale) priors of the variances
    ``sigma_x^2`` and ``sigma_a^2``; the N(0, 1 / offset_precision) prior of each column's
    offset (standardised units; 0, the default, is the flat prior)."""

    alpha_shape: jax.Array
    alpha_rate: jax.Array
    sigma_x_shape: jax.Array
    sigma_x_scale: jax.Array
    sigma_a_shape: jax.Array
    sigma_a_scale: jax.Array
    offset_precision: jax.Array | float = 0.0


class IBPLGState(NamedTuple):
    """Sampler state: features ``Z`` (N, capacity), weights ``A`` (capacity, D; zero in
    inactive columns), the IBP mass ``alpha``, the noise and weight sds ``sigma_x`` and
    ``sigma_a``, the data ``X`` with its missing entries imputed, less the per-column
    ``offset`` (D,): ``X - 1 offset' = Z A + noise``, so the sweeps of ``Z`` and ``A`` read
    ``X`` alone."""

    Z: jax.Array  # (N, capacity) in {0, 1}
    A: jax.Array  # (capacity, D); zero in inactive columns
    alpha: jax.Array
    sigma_x: jax.Array
    sigma_a: jax.Array
    X: jax.Array  # (N, D) the data with missing entries imputed, less the offset
    offset: jax.Array  # (D,)

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

    The model is ``X = 1 offset' + Z A + noise``, with the offset of each column (the level of
    an entry no feature touches) sampled under a flat prior by default; the factories'
    ``sample_offset=False`` holds it at ``background``, the data's zero or ``center``:
    Griffiths and Ghahramani's linear-Gaussian model. Its default hyperpriors and
    starting values assume entries of order 1, so ``X`` is standardised once, on the host in
    float64: ``(X - loc) / scale``, with ``loc`` the column means of the observed entries and
    ``scale`` their root mean square about them. The samplers run on the standardised data
    and trace ``A``, ``sigma_x``, ``sigma_a``, ``offset`` (and the pointwise log-likelihood)
    back in the data's units; :func:`~bnpjax.models.ibp_lg.predict` returns data units too.
    Multiplying ``X`` by ``c > 0`` therefore leaves the law of ``Z`` and ``alpha`` unchanged
    and multiplies ``A``, ``sigma_x`` and ``sigma_a`` by ``c``: the chains are the same draw
    for draw, up to rounding.

    A shift is a change of units only for the model with an offset of its own, the default:
    then ``X + b`` (``b`` a number or one per column) leaves the law of everything else
    exactly unchanged and moves the offset by ``b``; the chains are those on ``X``. With the
    offset a feature and its complement explain the data equally well (``z -> 1 - z``,
    ``a -> -a``, ``offset -> offset + a``); the samplers' complement moves go between the
    two, so that a feature held by nearly every row (a second background) is not kept for
    long (without them, float32 chains on bars held one in 27% to 43% of their draws;
    docs/guides/inputs.md). ``sample_offset=False`` is the model without an offset: there
    ``X + c`` holds one more feature, the constant image ``c``; pass the background level as
    ``center``; the factories warn when the data sit far from it.

    Parameters
    ----------
    X : array_like, shape (N, D)
        The data; NaN is accepted only where ``mask`` is False.
    mask : array_like of bool, shape (N, D), optional
        True where observed (default: every entry). Every row needs an observed entry; a
        column with none keeps its offset at the background level.
    center : None, float, "mode" or "mean"
        The background level at which ``sample_offset=False`` holds the offset (no effect
        when the offset is sampled, the default, except in columns with nothing observed):
        None keeps the data's origin (0); a number;
        ``"mode"``, the half-sample mode of the observed entries
        (:func:`bnpjax.infer.scaling.half_sample_mode`, the level most entries sit at); or
        ``"mean"``. A data-derived level is only an estimate: on the bars data the mode lies
        0.15 above the true background of 0.
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
    standardize = check_flag(standardize, "standardize")
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
    loc, scale, background = _standardisation(np.asarray(X, np.float64), mask, center,
                                              standardize)  # fmt: skip
    return IBPLGData(
        device_array(np.where(mask, (np.asarray(X, np.float64) - loc) / scale, 0.0), dtype),
        device_array(mask, dtype),
        device_array(np.flatnonzero(mask), jnp.int32),
        device_array(loc, dtype),
        device_array(scale, dtype),
        device_array(background, dtype),
    )


def _standardisation(X, mask, center, standardize: bool):
    """``(loc, scale, background)`` of :func:`make_data`: the column means, the root mean
    square about them, and the standardised level of ``center``."""
    D = X.shape[1]
    if not standardize:
        if center is not None:
            raise ValueError("center needs standardize=True (the data are kept as given)")
        return np.zeros(D), 1.0, np.zeros(D)
    values = X[mask]
    if isinstance(center, str) or center is None:
        if center not in ("mode", "mean", None):
            raise ValueError(f"center must be None, a number, 'mode' or 'mean', got {center!r}")
        level = location_scale(values, center)[0]
    else:
        if not (isinstance(center, int | float | np.integer | np.floating)
                and np.isfinite(center)):  # fmt: skip
            raise ValueError(f"center must be None, a number, 'mode' or 'mean', got {center!r}")
        level = float(center)
    counts = mask.sum(0)
    # a column with nothing observed takes the overall mean (a sampled offset is held at the
    # background level there: it has no data)
    loc = np.where(counts > 0, np.where(mask, X, 0.0).sum(0) / np.maximum(counts, 1),
                   values.mean())  # fmt: skip
    _, scale = location_scale((X - loc)[mask], None)
    return loc, scale, (level - loc) / scale


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
    offset_sd=None,
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
    offset_sd : float, optional
        The sd of the N(0, offset_sd^2) prior of each column's offset, in standardised units
        (about the column means). None, the default, is the flat prior, under which the fit
        does not depend on where the data's origin is; a proper prior (for Geweke's test,
        which draws from it) ties the offset towards the column means.

    Returns
    -------
    IBPLGHyper

    Raises
    ------
    ValueError
        Naming the argument that is not a pair of positive numbers, or an ``offset_sd``
        that is not positive.
    """
    values = [
        *_pair(alpha_prior, "alpha_prior"),
        *_pair(sigma_x_prior, "sigma_x_prior"),
        *_pair(sigma_a_prior, "sigma_a_prior"),
    ]
    if offset_sd is None:
        values.append(0.0)
    elif is_positive_finite(offset_sd):
        values.append(1.0 / float(offset_sd) ** 2)
    else:
        raise ValueError(f"offset_sd must be None (a flat prior) or positive, got {offset_sd!r}")
    dtype = jnp.result_type(float)
    return IBPLGHyper(*(device_array(v, dtype) for v in values))
