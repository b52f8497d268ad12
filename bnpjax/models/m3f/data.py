"""Data, hyperparameters, states and infos of Gibbs M3F and Gibbs iPM3F.

:func:`make_data` validates ordinal ratings once and lays the observed pairs out for the
batched factor draws: users and items are grouped in buckets of similar degree (widths powers
of two). :func:`make_hyper` holds the authors' defaults (Xu, Zhu & Zhang 2013).

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import (
    check_dtype_range,
    check_integer,
    check_integer_array,
    check_positive,
)
from bnpjax.ops._dtypes import device_array

__all__ = [
    "Bucket",
    "IPM3FState",
    "M3FData",
    "M3FHyper",
    "M3FInfo",
    "M3FState",
    "make_data",
    "make_hyper",
]


class Bucket(NamedTuple):
    """Entities (users or items) of similar degree: ``ids`` (n_b,) and ``pairs`` (n_b, w),
    the indices of their observed pairs padded with ``nnz`` (a dummy pair of zero weight)."""

    ids: jax.Array
    pairs: jax.Array


class M3FData(NamedTuple):
    """Observed pairs (0-based ``users``, ``items``; ``ratings`` in 1..L), ``signs``
    :math:`T^r_{ij}` (nnz, L-1), ``margin`` :math:`\\ell` (a scalar, or one per pair and
    threshold), and the pairs grouped by user and by item in buckets."""

    users: jax.Array
    items: jax.Array
    ratings: jax.Array
    signs: jax.Array
    margin: jax.Array
    user_buckets: tuple[Bucket, ...]
    item_buckets: tuple[Bucket, ...]
    user_degree: jax.Array  # (num_users,) pairs per user; its length is a static shape
    item_degree: jax.Array  # (num_items,)

    #: the ratings split over devices (:mod:`bnpjax.infer.sharding`): given the factors,
    #: the augmentation of each rating is drawn on its own and the factors' conditionals are
    #: sums over ratings
    sharded_axes = (("users", 0), ("items", 0), ("ratings", 0), ("signs", 0))


class M3FHyper(NamedTuple):
    """The regularization constant ``C``, prior sds ``sigma_u``, ``sigma_v``, the threshold
    prior's means ``rho`` (L-1,) and sd ``varsigma``, and the prior sd ``sigma_b`` of the item
    biases (used by ``gibbs(item_bias=True)``)."""

    C: jax.Array
    sigma_u: jax.Array
    sigma_v: jax.Array
    rho: jax.Array
    varsigma: jax.Array
    sigma_b: jax.Array


class M3FState(NamedTuple):
    """A Gibbs M3F draw: factors ``U``, ``V``, thresholds ``theta``, the augmentation
    :math:`\\omega = 1/\\lambda` per (pair, threshold) and the item biases."""

    U: jax.Array  # (num_users, rank)
    V: jax.Array  # (num_items, rank)
    theta: jax.Array  # (num_users, L-1)
    omega: jax.Array  # (nnz, L-1) = 1 / lambda
    bias: jax.Array  # (num_items,) item biases (zero, and never drawn, without item_bias)

    sharded_axes = (("omega", 0),)  # per rating, with the data's (bnpjax.infer.sharding)


class IPM3FState(NamedTuple):
    """A Gibbs iPM3F draw: binary features ``Z`` in a buffer of ``capacity`` columns (the
    active ones are the non-empty columns), weights ``V``, thresholds, the augmentation and
    the (fixed or sampled) ``alpha`` and weight sd ``sigma_v``."""

    Z: jax.Array  # (num_users, capacity) in {0, 1}
    V: jax.Array  # (num_items, capacity); columns of inactive features carry no meaning
    theta: jax.Array  # (num_users, L-1)
    omega: jax.Array  # (nnz, L-1)
    alpha: jax.Array  # () IBP concentration (fixed, or sampled with alpha_prior)
    sigma_v: jax.Array  # () weight sd (fixed, or sampled with weight_precision_prior)

    sharded_axes = (("omega", 0),)  # per rating, with the data's (bnpjax.infer.sharding)


class M3FInfo(NamedTuple):
    """What one sweep reports: the log pseudo-posterior, the training MAE, the number of
    (active) features, whether the feature buffer ran short and how many columns it needs,
    and the factors of the Rao-Blackwellized score."""

    lp: jax.Array  # log pseudo-posterior of (U or Z, V, theta), hinge form, up to a constant
    train_mae: jax.Array  # MAE of the rating-level rule on the training pairs
    num_features: jax.Array  # rank (M3F) or K+ (iPM3F)
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array
    # (F, G) with F_i . G_j = E[x_ij | the other factor block, theta, lambda] at this sweep:
    # (E[U | V, theta, lambda], V) for M3F, (Z, E[V | Z, theta, lambda]) for iPM3F; their
    # average over draws is the Rao-Blackwellized posterior-mean score (``score_test_rb``)
    score_factors: tuple


def _buckets(owner: np.ndarray, num: int) -> tuple[Bucket, ...]:
    """Group entities ``0..num-1`` by degree (number of pairs with ``owner == e``) into
    buckets of widths 1, 2, 4, ...: an entity of degree ``d`` goes to the smallest width
    ``>= d``. Its pairs are listed in its row, padded with ``nnz``."""
    nnz = owner.shape[0]
    degree = np.bincount(owner, minlength=num)
    by_owner = np.argsort(owner, kind="stable")
    starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
    width_of = 2 ** np.ceil(np.log2(np.maximum(degree, 1))).astype(np.int64)
    out = []
    for width in np.unique(width_of):
        ids = np.nonzero(width_of == width)[0]
        offsets = np.arange(width)[None, :]
        position = np.minimum(starts[ids, None] + offsets, max(nnz - 1, 0))
        pairs = np.where(offsets < degree[ids, None], by_owner[position], nnz)
        out.append(Bucket(device_array(ids, jnp.int32), device_array(pairs, jnp.int32)))
    return tuple(out)


def make_data(
    users, items, ratings, num_users: int, num_items: int, num_levels: int, *, margin=9.0
) -> M3FData:
    """Validate ordinal ratings and lay them out for the samplers.

    Users and items without any rating are kept: their factors (and a user's thresholds) are
    then drawn from the prior, so a test pair of theirs is predicted from the prior (a cold
    start). Users without ratings raise a ``UserWarning`` naming the first ones (often a sign
    of 1-based ids). The pairs are grouped by user and by item in buckets of power-of-two
    degree widths; the compiled sweep depends on that layout, so other ratings of the same
    size recompile once when their degree profile falls into other buckets.

    Parameters
    ----------
    users, items : array_like of int
        0-based ids of the observed pairs (< ``num_users``, < ``num_items``); each
        (user, item) pair at most once.
    ratings : array_like of int
        Ratings in ``1..num_levels``.
    num_users, num_items : int
        Numbers of users and items.
    num_levels : int
        Number of rating levels L (at least 2).
    margin : float or array_like, optional
        The hinge margin :math:`\\ell` (the authors' 9), or one per (pair, threshold).

    Returns
    -------
    M3FData

    Raises
    ------
    ValueError
        Naming the argument, on NaN/inf, non-integers, out-of-range ids or ratings, duplicate
        pairs, mismatched lengths, or a ``num_levels`` below the largest rating.
    """
    num_users = check_integer(num_users, "num_users")
    num_items = check_integer(num_items, "num_items")
    num_levels = check_integer(num_levels, "num_levels", 2)
    u = check_integer_array(users, "users")
    v = check_integer_array(items, "items")
    y = check_integer_array(ratings, "ratings")
    if not (u.shape == v.shape == y.shape):
        raise ValueError(
            f"users, items and ratings must have the same length, got {u.size}, {v.size}, {y.size}"
        )
    if u.size == 0:
        raise ValueError("ratings is empty")
    if u.min() < 0 or u.max() >= num_users:
        raise ValueError(f"users must lie in 0..{num_users - 1} (num_users), got {u.min()}..")
    if v.min() < 0 or v.max() >= num_items:
        raise ValueError(f"items must lie in 0..{num_items - 1} (num_items), got {v.min()}..")
    if y.min() < 1:
        raise ValueError(f"ratings must lie in 1..num_levels, got a rating {y.min()}")
    if y.max() > num_levels:
        raise ValueError(
            f"num_levels = {num_levels} does not match the data: ratings go up to {y.max()}"
        )
    if np.unique(u * num_items + v).size != u.size:
        raise ValueError("users, items: a (user, item) pair occurs more than once")
    margin = np.asarray(margin, float)
    if not np.all(np.isfinite(margin)):
        raise ValueError("margin must be finite")
    check_dtype_range(margin, "margin")
    if margin.ndim == 0 and margin < 0:
        # (per-pair margins, the Geweke construction's, may take any sign)
        raise ValueError(f"margin must be >= 0 (the hinge margin ell), got {float(margin)}")
    if margin.shape not in ((), (u.size, num_levels - 1)):
        raise ValueError(f"margin must be a scalar or of shape ({u.size}, {num_levels - 1})")
    unrated_users = np.flatnonzero(np.bincount(u, minlength=num_users) == 0)
    if unrated_users.size:
        warnings.warn(
            f"num_users = {num_users}, but {unrated_users.size} users have no ratings (ids "
            f"{unrated_users[:5].tolist()}{', ...' if unrated_users.size > 5 else ''}): their "
            "factors and thresholds are drawn from the prior; are the ids 0-based?",
            UserWarning,
            stacklevel=2,
        )
    dtype = jnp.result_type(float)
    r = np.arange(1, num_levels)
    signs = np.where(r[None, :] >= y[:, None], 1.0, -1.0)
    return M3FData(
        users=device_array(u, jnp.int32),
        items=device_array(v, jnp.int32),
        ratings=device_array(y, jnp.int32),
        signs=device_array(signs, dtype),
        margin=device_array(margin, dtype),
        user_buckets=_buckets(u, num_users),
        item_buckets=_buckets(v, num_items),
        user_degree=device_array(np.bincount(u, minlength=num_users), jnp.int32),
        item_degree=device_array(np.bincount(v, minlength=num_items), jnp.int32),
    )


def make_hyper(
    num_levels: int,
    *,
    C: float = 0.1,
    margin: float = 9.0,
    sigma_u: float = 1.0,
    sigma_v: float = 1.0,
    rho=None,
    varsigma: float | None = None,
    sigma_b: float | None = None,
) -> M3FHyper:
    """Hyperparameters of Gibbs M3F and iPM3F, with the authors' defaults.

    Parameters
    ----------
    num_levels : int
        Number of rating levels L.
    C : float
        Regularization constant of the hinge loss.
    margin : float
        The margin :math:`\\ell` the defaults of ``rho``, ``varsigma`` and ``sigma_b`` scale
        with (the data's margin is set in :func:`make_data`).
    sigma_u, sigma_v : float
        Prior sds of the user and item factors (iPM3F: of the feature weights).
    rho : array_like, optional
        Threshold prior means, L-1 values; default ``linspace(-1.5 (L-2) ell, 1.5 (L-2) ell,
        L-1)``.
    varsigma : float, optional
        Threshold prior sd; default :math:`1.5\\,\\ell`.
    sigma_b : float, optional
        Prior sd of the item biases; default :math:`\\ell`.

    Returns
    -------
    M3FHyper

    References
    ----------
    Xu, Zhu & Zhang (2013), the defaults of the authors' code (chokkyvista/iPM3F).
    """
    num_levels = check_integer(num_levels, "num_levels", 2)
    margin = check_positive(margin, "margin")  # the defaults below scale with it
    if rho is None:
        half = 1.5 * (num_levels - 2) * margin
        rho = np.linspace(-half, half, num_levels - 1)
    rho = np.asarray(rho, float)
    if rho.shape != (num_levels - 1,) or not np.all(np.isfinite(rho)):
        raise ValueError(f"rho must be {num_levels - 1} finite values")
    check_dtype_range(rho, "rho")
    varsigma = 1.5 * margin if varsigma is None else varsigma
    sigma_b = margin if sigma_b is None else sigma_b
    for name, value in (
        ("sigma_b", sigma_b),
        ("C", C),
        ("sigma_u", sigma_u),
        ("sigma_v", sigma_v),
        ("varsigma", varsigma),
    ):
        check_positive(value, name)
    dtype = jnp.result_type(float)
    return M3FHyper(
        *(device_array(x, dtype) for x in (C, sigma_u, sigma_v, rho, varsigma, sigma_b))
    )


# --------------------------------------------------------------------------------------------
# argument checks shared by the factories


def _gamma_prior(prior, name: str) -> tuple[float, float] | None:
    """``None`` or a (shape, rate) pair of positive finite numbers."""
    if prior is None:
        return None
    if isinstance(prior, (str, bytes)):
        raise ValueError(f"{name} must be None or a (shape, rate) pair, got {prior!r}")
    try:
        shape, rate = (float(v) for v in prior)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be None or a (shape, rate) pair, got {prior!r}") from None
    if not (np.isfinite(shape) and np.isfinite(rate) and shape > 0 and rate > 0):
        raise ValueError(f"{name} must hold a positive shape and rate, got {prior!r}")
    return shape, rate


def _check_common(data, hyper):
    if not isinstance(data, M3FData):
        raise ValueError("data must come from bnpjax.models.m3f.make_data")
    if hyper is None:
        hyper = make_hyper(int(data.signs.shape[1]) + 1)
    if not isinstance(hyper, M3FHyper):
        raise ValueError("hyper must come from bnpjax.models.m3f.make_hyper")
    if hyper.rho.shape[0] != data.signs.shape[1]:
        raise ValueError(
            f"hyper has {hyper.rho.shape[0] + 1} levels but data has {data.signs.shape[1] + 1}"
        )
    return hyper


def _sizes(data) -> dict:
    return dict(num_users=data.user_degree.shape[0], num_items=data.item_degree.shape[0])


def _test_arrays(test, data):
    """Held-out pairs ``(users, items)`` (a third entry, the ratings, is ignored) as int32."""
    if test is None:
        return None
    users, items = test[0], test[1]
    users = check_integer_array(users, "test users")
    items = check_integer_array(items, "test items")
    if users.shape != items.shape:
        raise ValueError("test users and items must have the same length")
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    if users.size and (users.min() < 0 or users.max() >= N or items.min() < 0 or items.max() >= M):
        raise ValueError("test ids out of range of num_users / num_items")
    return device_array(users, jnp.int32), device_array(items, jnp.int32)


def _item_factors(item_factors, num_items) -> np.ndarray:
    V = np.asarray(item_factors, dtype=float)
    if V.ndim != 2 or V.shape[0] != num_items or V.shape[1] < 1:
        raise ValueError(
            f"item_factors must be (num_items, rank) = ({num_items}, rank), got shape {V.shape}"
        )
    if not np.all(np.isfinite(V)):
        raise ValueError("item_factors contains NaN or infinite values")
    return V
