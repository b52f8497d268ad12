"""Seeded synthetic data sets with known parameters.

Every generator takes an integer ``seed`` first (a :func:`numpy.random.default_rng` seed: data
are made on the host with NumPy, not with a JAX key) and keyword-only sizes, and returns a dict
of NumPy arrays holding the data and the true parameters. The same seed gives the same data.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "BARS_FEATURES",
    "bars",
    "factorization_ratings",
    "linear_regression",
    "ordinal_ratings",
    "planted_network",
    "planted_relations",
]


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


def factorization_ratings(
    seed: int = 0,
    *,
    num_users: int = 200,
    num_items: int = 150,
    rank: int = 3,
    num_ratings: int = 8000,
    noise_scale: float = 0.5,
    test_fraction: float = 0.2,
) -> dict[str, np.ndarray]:
    """Ratings from a second-order factorization machine on one-hot user and item columns.

    ``y = 3 + w_u + w_i + <v_u, v_i> + N(0, noise_scale^2)`` for ``num_ratings`` random
    (user, item) pairs (with repeats), ``w ~ N(0, 0.3^2)`` and ``v ~ N(0, 0.7^2 I_rank)``
    (Rendle, 2010, "Factorization machines", eq. 1). The last ``test_fraction`` of the
    ratings form the test split.

    Returns
    -------
    dict
        ``users``, ``items`` (int, ids from 0), ``y`` (noisy ratings), ``signal`` (the
        noiseless ratings), ``w`` (``num_users + num_items`` biases, users first), ``V``
        (``(num_users + num_items, rank)`` factors), ``test`` (bool, the held-out ratings).
    """
    if min(num_users, num_items, rank, num_ratings) < 1:
        raise ValueError("num_users, num_items, rank and num_ratings must be positive")
    if not 0 <= test_fraction < 1:
        raise ValueError(f"test_fraction must lie in [0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    users = rng.integers(0, num_users, num_ratings)
    items = rng.integers(0, num_items, num_ratings)
    w = 0.3 * rng.normal(size=num_users + num_items)
    V = 0.7 * rng.normal(size=(num_users + num_items, rank))
    columns = num_users + items
    signal = 3.0 + w[users] + w[columns] + np.sum(V[users] * V[columns], 1)
    y = signal + noise_scale * rng.normal(size=num_ratings)
    test = np.arange(num_ratings) >= int((1.0 - test_fraction) * num_ratings)
    return {"users": users, "items": items, "y": y, "signal": signal, "w": w, "V": V, "test": test}


def ordinal_ratings(
    seed: int = 0,
    *,
    num_users: int = 150,
    num_items: int = 120,
    rank: int = 3,
    density: float = 0.3,
    num_levels: int = 5,
    noise_scale: float = 0.3,
    test_fraction: float = 0.1,
) -> dict[str, np.ndarray]:
    """Ordinal ratings ``1..num_levels`` from known low-rank factors.

    Scores ``x = <U_u, V_i>`` with standard normal factors of size ``rank`` on a random
    ``density`` share of the (user, item) pairs, plus ``N(0, noise_scale^2)`` noise, cut at
    the quantiles ``1/L, ..., (L-1)/L`` of the noiseless scores (``L = num_levels``), so the
    levels are about equally frequent. A random ``test_fraction`` of the ratings is held out.

    Returns
    -------
    dict
        ``users``, ``items`` (int, ids from 0), ``levels`` (int in ``1..num_levels``), ``U``,
        ``V`` (the true factors) and ``test`` (bool, the held-out ratings).
    """
    if min(num_users, num_items, rank) < 1 or num_levels < 2:
        raise ValueError("num_users, num_items and rank must be positive, num_levels >= 2")
    if not 0 < density <= 1 or not 0 <= test_fraction < 1:
        raise ValueError("density must lie in (0, 1] and test_fraction in [0, 1)")
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(num_users, rank)), rng.normal(size=(num_items, rank))
    users, items = np.nonzero(rng.random((num_users, num_items)) < density)
    x = np.sum(U[users] * V[items], axis=1)
    cuts = np.quantile(x, np.arange(1, num_levels) / num_levels)
    levels = 1 + np.digitize(x + noise_scale * rng.normal(size=x.size), cuts)
    test = rng.random(users.size) < test_fraction
    return {"users": users, "items": items, "levels": levels, "U": U, "V": V, "test": test}


def planted_relations(
    seed: int = 0,
    *,
    num_entities: int = 40,
    num_relations: int = 3,
    weight_scale: float = 2.5,
    bias: float = -1.0,
    heldout_fraction: float = 0.2,
) -> dict[str, np.ndarray]:
    """Binary relations among entities with three planted binary features.

    Feature 0 marks the first half of the entities, feature 1 the second half, and feature 2
    a random 30% that cuts across both. ``P(Y[r, i, j] = 1) = sigmoid(F_i W_r F_j^T + bias)``
    with ``W_r ~ N(0, weight_scale^2)`` (the latent feature relational model of Miller,
    Griffiths & Jordan, 2009, "Nonparametric latent feature models for link prediction").
    A random ``heldout_fraction`` of the off-diagonal pairs is held out.

    Returns
    -------
    dict
        ``Y`` (``(num_relations, N, N)`` of 0/1), ``F`` (``(N, 3)``), ``W`` (``(R, 3, 3)``),
        ``probabilities`` (the true link probabilities, shape of ``Y``) and ``heldout``
        (bool, shape of ``Y``, never on the diagonal).
    """
    if num_entities < 2 or num_relations < 1:
        raise ValueError("num_entities must be at least 2 and num_relations positive")
    if not 0 <= heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must lie in [0, 1), got {heldout_fraction}")
    rng = np.random.default_rng(seed)
    half = num_entities // 2
    F = np.zeros((num_entities, 3))
    F[:half, 0] = F[half:, 1] = 1.0
    F[rng.random(num_entities) < 0.3, 2] = 1.0
    W = rng.normal(0.0, weight_scale, (num_relations, 3, 3))
    probabilities = 1 / (1 + np.exp(-(np.einsum("ik,rkl,jl->rij", F, W, F) + bias)))
    Y = (rng.random(probabilities.shape) < probabilities).astype(float)
    off_diagonal = ~np.eye(num_entities, dtype=bool)[None]
    heldout = (rng.random(Y.shape) < heldout_fraction) & off_diagonal
    return {"Y": Y, "F": F, "W": W, "probabilities": probabilities, "heldout": heldout}


def planted_network(
    seed: int = 0,
    *,
    num_nodes: int = 300,
    num_blocks: int = 4,
    between_rate: float = 0.02,
    within_rate: float = 0.8,
    heldout_fraction: float = 0.1,
) -> dict[str, np.ndarray]:
    """An undirected count network with planted assortative blocks.

    Every node belongs to one of ``num_blocks`` blocks (uniformly at random); the count
    between nodes ``i < j`` is Poisson with rate ``between_rate`` across blocks and
    ``between_rate + within_rate`` within a block. A random ``heldout_fraction`` of the pairs
    ``i < j`` is held out.

    Returns
    -------
    dict
        ``Y`` (``(N, N)`` int counts, strictly upper triangular), ``blocks`` (the block of
        every node), ``rates`` (``(num_blocks, num_blocks)``) and ``heldout`` (bool, strictly
        upper triangular).
    """
    if num_nodes < 2 or num_blocks < 1:
        raise ValueError("num_nodes must be at least 2 and num_blocks positive")
    if not 0 <= heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must lie in [0, 1), got {heldout_fraction}")
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, num_blocks, num_nodes)
    rates = np.full((num_blocks, num_blocks), between_rate) + np.diag(
        np.full(num_blocks, within_rate)
    )
    Y = np.triu(rng.poisson(rates[blocks][:, blocks]), 1)
    heldout = np.triu(rng.random((num_nodes, num_nodes)) < heldout_fraction, 1)
    return {"Y": Y, "blocks": blocks, "rates": rates, "heldout": heldout}
