"""The keys of a run: one key per chain, each split into an init key and a run key; step ``t``
of a chain uses ``fold_in(run_key, t)`` (see :mod:`bnpjax.infer.driver`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["chain_keys", "check_key", "key_from_seed", "seed_of"]


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


#: Threefry-2x32's rotation constants, in the order its 20 rounds use them
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def _threefry_2x32(key1, key2, count1, count2):
    """The Threefry-2x32 hash (20 rounds; Salmon et al. 2011) in numpy: what JAX's
    ``threefry2x32`` primitive computes, for keys ``(key1, key2)`` (uint32 arrays broadcast
    against the counts)."""
    ks = [key1, key2, key1 ^ key2 ^ np.uint32(0x1BD11BDA)]
    x = [count1 + ks[0], count2 + ks[1]]
    for block in range(5):
        for rotation in _ROTATIONS[block % 2]:
            x[0] = x[0] + x[1]
            x[1] = (x[1] << np.uint32(rotation)) | (x[1] >> np.uint32(32 - rotation))
            x[1] = x[0] ^ x[1]
        x[0] = x[0] + ks[(block + 1) % 3]
        x[1] = x[1] + ks[(block + 2) % 3] + np.uint32(block + 1)
    return x


def _split_on_host(words, num: int):
    """``jax.random.split`` of raw threefry key words ``(..., 2)`` into ``num`` keys each
    ``(..., num, 2)``, as JAX computes it with ``jax_threefry_partitionable`` on (the counts
    are ``0..num-1`` as 64-bit numbers: high words 0)."""
    counts = np.arange(num, dtype=np.uint32)
    high, low = _threefry_2x32(words[..., :1], words[..., 1:], np.zeros_like(counts), counts)
    return np.stack([high, low], axis=-1)


def _host_split_applies(key) -> bool:
    """Whether :func:`chain_keys` can split ``key`` on the host: threefry keys (the default
    implementation) split the partitionable way (JAX's default since 0.5)."""
    if not jax.config.jax_threefry_partitionable:
        return False
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return str(jax.random.key_impl(key)) == "threefry2x32"
    return str(jax.config.jax_default_prng_impl) == "threefry2x32"


def key_from_seed(seed: int) -> jax.Array:
    """``jax.random.key(seed)``; for threefry keys and seeds below ``2**31`` the key's words
    ``(0, seed)`` are written directly, without compiling JAX's seeding program."""
    impl = str(jax.config.jax_default_prng_impl)
    if impl != "threefry2x32" or not 0 <= seed < 2**31:
        return jax.random.key(seed)
    return jax.random.wrap_key_data(np.array([0, seed], np.uint32), impl=impl)


def chain_keys(key, num_chains: int):
    """The init and run keys of each chain: ``split(key, num_chains)``, then each chain's key
    split in two. For threefry keys the hashes run in numpy on the host: the same words as
    ``jax.random.split`` (``tests/infer/test_keys.py``), without compiling JAX's split and
    slicing programs, about 0.25 s of a first fit with an empty compilation cache."""
    key = check_key(key)
    if not _host_split_applies(key):
        chain_keys = jax.random.split(key, num_chains)
        pairs = jax.vmap(jax.random.split)(chain_keys)
        return pairs[:, 0], pairs[:, 1]
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    words = np.asarray(jax.random.key_data(key) if typed else key, np.uint32)
    pairs = _split_on_host(_split_on_host(words, num_chains), 2)  # (chains, 2, 2)
    if typed:
        impl = jax.random.key_impl(key)
        return tuple(jax.random.wrap_key_data(pairs[:, i], impl=impl) for i in range(2))
    return tuple(jnp.asarray(pairs[:, i]) for i in range(2))


def seed_of(key) -> list[int]:
    """The raw key words, for the record (typed keys and legacy uint32 pairs alike)."""
    key = jnp.asarray(key)
    raw = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return np.asarray(raw).ravel().tolist()
