"""Starting states of the ILFM sampler: a random one, or one feature per k-means cluster of
the entities' link profiles (Miller et al. 2009 started from an IRM run). The start does not
change the chain's stationary distribution, only how fast it gets there.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.infer.checks import check_integer
from bnpjax.models.ilfm.data import ILFMData

__all__ = ["INIT_STRATEGIES", "cluster_features"]

#: "random": ``num_init_features`` features, each held with probability 1/2, small weights;
#: "cluster": one feature per k-means cluster of the link profiles (:func:`cluster_features`)
INIT_STRATEGIES = ("random", "cluster")


def _entity_profiles(data: ILFMData) -> jax.Array:
    """Each entity's observed row and column of every relation, unobserved entries replaced by
    the relation's observed link rate: (N, 2 R N)."""
    N = data.Y.shape[1]
    rate = jnp.sum(data.Y, axis=(1, 2)) / jnp.maximum(jnp.sum(data.mask, axis=(1, 2)), 1.0)
    filled = jnp.where(data.mask > 0, data.Y, rate[:, None, None])
    return jnp.concatenate(
        [jnp.moveaxis(filled, 1, 0).reshape(N, -1), jnp.moveaxis(filled, 2, 0).reshape(N, -1)],
        axis=1,
    )


def cluster_features(key, data: ILFMData, num_clusters: int, iterations: int = 30) -> jax.Array:
    """A data-driven starting ``F``: one feature per k-means cluster of the link profiles.

    k-means++ seeding from ``key``, then ``iterations`` Lloyd steps, on each entity's observed
    row and column of every relation (unobserved entries at the relation's link rate). With
    one feature per entity this is a latent-class (IRM-like) partition, which the sampler then
    refines into overlapping features; clusters left empty give inactive slots.

    Parameters
    ----------
    key
        a ``jax.random.key``.
    data
        from :func:`make_data`.
    num_clusters
        the number of clusters (at most N are used).
    iterations
        Lloyd steps.

    Returns
    -------
    jax.Array
        (N, num_clusters) one-hot cluster memberships.

    References
    ----------
    Arthur, D. and Vassilvitskii, S. (2007). k-means++: the advantages of careful seeding.
    SODA, 1027-1035.
    """
    num_clusters = check_integer(num_clusters, "num_clusters")
    X = _entity_profiles(data)
    num_clusters = min(num_clusters, X.shape[0])

    def squared_distances(centres):
        cross = X @ centres.T
        return jnp.sum(X**2, 1)[:, None] - 2 * cross + jnp.sum(centres**2, 1)[None]

    def seed(c, key_c):
        centres, count = c
        unset = jnp.where(jnp.arange(num_clusters) < count, 0.0, jnp.inf)
        d2 = jnp.maximum(jnp.min(squared_distances(centres) + unset[None], axis=1), 0.0)
        d2 = jnp.where(count == 0, jnp.ones_like(d2), d2)
        pick = jax.random.categorical(key_c, jnp.log(jnp.maximum(d2, 1e-30)))
        return (centres.at[count].set(X[pick]), count + 1), None

    keys = jax.random.split(key, num_clusters)
    (centres, _), _ = jax.lax.scan(seed, (jnp.zeros((num_clusters, X.shape[1]), X.dtype), 0), keys)

    def lloyd(_, centres):
        labels = jnp.argmin(squared_distances(centres), axis=1)
        onehot = jax.nn.one_hot(labels, num_clusters, dtype=X.dtype)
        counts = onehot.sum(0)
        means = (onehot.T @ X) / jnp.maximum(counts, 1.0)[:, None]
        return jnp.where(counts[:, None] > 0, means, centres)

    centres = jax.lax.fori_loop(0, iterations, lloyd, centres)
    labels = jnp.argmin(squared_distances(centres), axis=1)
    return jax.nn.one_hot(labels, num_clusters, dtype=X.dtype)


def _block_weights(data: ILFMData, F: jax.Array, bias: jax.Array) -> jax.Array:
    """Weights matching the smoothed link rate of every feature block, ``logit((n1 + 1/2) /
    (n + 1)) - s_r`` (their least-squares start for a one-feature-per-entity ``F``)."""
    ones = jnp.einsum("ik,rij,jl->rkl", F, data.Y * data.mask, F)
    seen = jnp.einsum("ik,rij,jl->rkl", F, data.mask, F)
    p = (ones + 0.5) / (seen + 1.0)
    return jnp.log(p) - jnp.log1p(-p) - bias[:, None, None]
