"""Units-free fits: the location and scale by which a model's ``make_data`` standardises
continuous data, so that multiplying or shifting the data changes the posterior only by the
same transformation.

A model standardises its data once, ``x' = (x - loc) / scale``, runs its kernel on ``x'``
with hyperpriors and starting values that are then on the unit scale whatever the data's
units, and maps what it traces back (weights times ``scale``, the data's origin plus
``loc``). ``loc`` and ``scale`` are computed on the host in float64, before the data are
cast to the run's dtype, so data of order 1e6 or 1e-6 lose nothing in float32.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CENTERS", "half_sample_mode", "location_scale"]

#: how the location is chosen: ``"mean"``; ``"mode"`` (:func:`half_sample_mode`, where most
#: values sit; for latent feature models, whose zero is an entry no feature touches); ``None``
#: keeps the data's origin (scale only).
CENTERS = ("mean", "mode", None)


def half_sample_mode(values) -> float:
    """The half-sample mode: the centre of the densest half of the values, halved again until
    at most three are left.

    It estimates the mode of a continuous sample in O(n log n), and moves with the data under
    any shift and positive scaling. For data that are mostly background plus sparse features
    (``X = Z A + noise``), it is the background level.

    Parameters
    ----------
    values : array_like
        Finite real values (flattened); at least one.

    Returns
    -------
    float

    References
    ----------
    Bickel, D. R. and Frühwirth, R. (2006). On a fast, robust estimator of the mode.
    Computational Statistics & Data Analysis 50(12), 3500-3530, section 2.
    """
    x = np.sort(np.asarray(values, np.float64).ravel())
    if x.size == 0:
        raise ValueError("half_sample_mode needs at least one value")
    while x.size > 3:
        half = (x.size + 1) // 2
        widths = x[half - 1 :] - x[: x.size - half + 1]
        start = int(np.argmin(widths))
        x = x[start : start + half]
    if x.size == 3:
        low, high = x[1] - x[0], x[2] - x[1]
        x = x[:2] if low < high else x[1:] if high < low else x
    return float(x.mean())


def location_scale(values, center: str | None = "mean") -> tuple[float, float]:
    """``(loc, scale)`` that standardise ``values``: ``(values - loc) / scale``.

    Parameters
    ----------
    values : array_like
        Finite real values (the observed entries); at least one.
    center : {"mean", "mode", None}
        The location (see :data:`CENTERS`); None gives ``loc = 0``.

    Returns
    -------
    (float, float)
        ``scale`` is the root mean square of ``values - loc``; when that is 0 (constant
        data), the size of the values, or 1 when they are all 0. Both are in float64.
    """
    if center not in CENTERS:
        raise ValueError(f"center must be one of {CENTERS}, got {center!r}")
    x = np.asarray(values, np.float64).ravel()
    if x.size == 0:
        raise ValueError("location_scale needs at least one value")
    loc = 0.0 if center is None else float(x.mean()) if center == "mean" else half_sample_mode(x)
    deviation = x - loc
    size = float(np.max(np.abs(deviation)))
    # the root mean square, computed relative to the largest deviation so it cannot overflow
    scale = size * float(np.sqrt(np.mean((deviation / size) ** 2))) if size > 0 else 0.0
    if not (np.isfinite(scale) and scale > 0):
        scale = float(np.max(np.abs(x))) or 1.0
    return loc, scale
