"""Seeded synthetic data sets with known parameters."""

from __future__ import annotations

import numpy as np

__all__ = ["BARS_FEATURES", "bars", "linear_regression"]


def linear_regression(
    seed: int = 0,
    *,
    num_obs: int = 100,
    num_features: int = 3,
    noise_scale: float = 0.5,
    missing_fraction: float = 0.0,
) -> dict[str, np.ndarray]:
    """``y = X beta + N(0, noise_scale^2)`` with ``X ~ N(0, 1)`` and ``beta ~ N(0, 1)``.

    A fraction ``missing_fraction`` of the responses is hidden (``mask`` False, ``y`` NaN).
    Returns ``X``, ``y``, ``mask``, the true ``beta`` and ``sigma``.
    """
    if num_obs < 1 or num_features < 1:
        raise ValueError("num_obs and num_features must be positive")
    if not 0 <= missing_fraction < 1:
        raise ValueError(f"missing_fraction must lie in [0, 1), got {missing_fraction}")
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(num_obs, num_features))
    beta = rng.normal(size=num_features)
    y = X @ beta + noise_scale * rng.normal(size=num_obs)
    mask = rng.random(num_obs) >= missing_fraction
    if not mask.any():
        mask[0] = True
    y = np.where(mask, y, np.nan)
    return {"X": X, "y": y, "mask": mask, "beta": beta, "sigma": np.asarray(noise_scale)}


def _bars_features() -> np.ndarray:
    shapes = np.zeros((4, 6, 6))
    shapes[0, :3, :3] = [[0, 1, 0], [1, 1, 1], [0, 1, 0]]  # a cross, top left
    shapes[1, :3, 3:] = [[1, 1, 1], [1, 0, 1], [1, 1, 1]]  # a ring, top right
    shapes[2, 3:, :3] = [[1, 0, 0], [1, 1, 0], [1, 1, 1]]  # a triangle, bottom left
    shapes[3, 3:, 3:] = [[1, 1, 1], [0, 1, 0], [0, 1, 0]]  # a T, bottom right
    return shapes.reshape(4, 36)


#: The four 6x6 binary basis images of :func:`bars`, flattened to (4, 36).
BARS_FEATURES = _bars_features()


def bars(
    seed: int = 0,
    *,
    num_obs: int = 100,
    noise_scale: float = 0.5,
    feature_prob: float = 0.5,
    missing_fraction: float = 0.0,
) -> dict[str, np.ndarray]:
    """The synthetic benchmark of Griffiths & Ghahramani (2005): ``X = Z A + noise`` with four
    6x6 binary basis images ``A`` (:data:`BARS_FEATURES`: a cross, a ring, a triangle and a T,
    one per quadrant), each present in an image with probability ``feature_prob``, Gaussian
    noise of sd ``noise_scale``. ``N = num_obs`` images of 36 pixels.

    Returns ``X`` (N, 36), ``Z`` (N, 4), ``A`` (4, 36), ``mask`` (False for a random
    ``missing_fraction`` of the entries, whose ``X`` is NaN) and ``sigma``.
    """
    if num_obs < 1:
        raise ValueError(f"num_obs must be positive, got {num_obs}")
    if not 0 <= missing_fraction < 1:
        raise ValueError(f"missing_fraction must lie in [0, 1), got {missing_fraction}")
    rng = np.random.default_rng(seed)
    Z = (rng.random((num_obs, 4)) < feature_prob).astype(float)
    A = BARS_FEATURES.copy()
    X = Z @ A + noise_scale * rng.normal(size=(num_obs, 36))
    mask = rng.random(X.shape) >= missing_fraction
    mask[np.arange(num_obs), rng.integers(0, 36, num_obs)] = True  # no empty rows
    return {
        "X": np.where(mask, X, np.nan),
        "Z": Z,
        "A": A,
        "mask": mask,
        "sigma": np.asarray(noise_scale),
    }
