"""The run's keys: the host-side threefry split gives JAX's words, for typed and legacy
keys and any number of chains; other key implementations take JAX's split; an integer seed
gives ``jax.random.key``'s key."""

import jax
import numpy as np
import pytest

from bnpjax.infer import keys


def _jax_chain_keys(key, num_chains):
    pairs = jax.vmap(jax.random.split)(jax.random.split(key, num_chains))
    return pairs[:, 0], pairs[:, 1]


def _words(key):
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(key))
    return np.asarray(key)


@pytest.mark.parametrize("seed", [0, 1, 977, 2**31 - 1, 2**40 + 3])
@pytest.mark.parametrize("num_chains", [1, 2, 3, 8])
@pytest.mark.parametrize("typed", [True, False])
def test_host_split_gives_jax_words(seed, num_chains, typed):
    key = jax.random.key(seed) if typed else jax.random.PRNGKey(seed)
    assert keys._host_split_applies(key)
    got, want = keys.chain_keys(key, num_chains), _jax_chain_keys(key, num_chains)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(_words(g), _words(w))


def test_host_split_is_not_a_constant():
    """The hash's output changes with the key and the counter (a copy that ignored either
    would pass a test of one key)."""
    first, _ = keys.chain_keys(jax.random.key(0), 4)
    other, _ = keys.chain_keys(jax.random.key(1), 4)
    words = _words(first)
    assert len({tuple(row) for row in words}) == 4
    assert not np.array_equal(words, _words(other))


def test_other_implementations_take_jax_split():
    key = jax.random.key(3, impl="rbg")
    assert not keys._host_split_applies(key)
    got, want = keys.chain_keys(key, 2), _jax_chain_keys(key, 2)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(_words(g), _words(w))


@pytest.mark.parametrize("seed", [0, 5, 2**31 - 1, 2**31, 2**62])
def test_key_from_seed_is_jax_key(seed):
    got, want = keys.key_from_seed(seed), jax.random.key(seed)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(_words(got), _words(want))
