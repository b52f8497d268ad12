"""Seeded synthetic data sets with known parameters."""

from __future__ import annotations

import numpy as np

__all__ = ["linear_regression"]


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
