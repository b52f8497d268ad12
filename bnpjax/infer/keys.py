"""The keys of a run: one key per chain, each split into an init key and a run key; step ``t``
of a chain uses ``fold_in(run_key, t)`` (see :mod:`bnpjax.infer.driver`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["chain_keys", "check_key", "seed_of"]


def check_key(key) -> jax.Array:
    """``key`` as a JAX array if it is one PRNG key: a typed key (``jax.random.key``, shape
    ()) or a legacy ``jax.random.PRNGKey`` (uint32, shape (2,)); else ``ValueError``."""
    try:
        key = key if isinstance(key, jax.Array) else jnp.asarray(key)
    except (TypeError, ValueError):
        raise ValueError(
            f"key must be a jax.random.key or jax.random.PRNGKey, got {type(key).__name__}"
        ) from None
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        if key.shape != ():
            raise ValueError(f"key must be a single jax.random.key, got shape {key.shape}")
        return key
    if key.dtype != jnp.uint32 or key.shape != (2,):
        raise ValueError(
            "key must be a jax.random.key or a uint32 jax.random.PRNGKey of shape (2,), got "
            f"an array of dtype {key.dtype} and shape {key.shape}"
        )
    return key


def chain_keys(key, num_chains: int):
    key = check_key(key)
    chain_keys = jax.random.split(key, num_chains)
    pairs = jax.vmap(jax.random.split)(chain_keys)
    return pairs[:, 0], pairs[:, 1]


def seed_of(key) -> list[int]:
    """The raw key words, for the record (typed keys and legacy uint32 pairs alike)."""
    key = jnp.asarray(key)
    raw = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return np.asarray(raw).ravel().tolist()
