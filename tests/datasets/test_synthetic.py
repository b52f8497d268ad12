"""The synthetic generators of the demos: seeded, the documented shapes and splits."""

import numpy as np
import pytest

from bnpjax import datasets


def _same(a, b):
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])


def test_factorization_ratings():
    sim = datasets.factorization_ratings(1, num_users=20, num_items=10, num_ratings=100)
    _same(sim, datasets.factorization_ratings(1, num_users=20, num_items=10, num_ratings=100))
    assert sim["users"].max() < 20 and sim["items"].max() < 10
    assert sim["V"].shape == (30, 3) and sim["test"].sum() == 20 and not sim["test"][:80].any()
    columns = 20 + sim["items"]
    V, w = sim["V"], sim["w"]
    signal = 3.0 + w[sim["users"]] + w[columns] + np.sum(V[sim["users"]] * V[columns], 1)
    np.testing.assert_allclose(sim["signal"], signal)


def test_ordinal_ratings():
    sim = datasets.ordinal_ratings(2, num_users=30, num_items=20, num_levels=4)
    _same(sim, datasets.ordinal_ratings(2, num_users=30, num_items=20, num_levels=4))
    assert set(np.unique(sim["levels"])) == {1, 2, 3, 4}
    assert sim["test"].shape == sim["levels"].shape == sim["users"].shape
    with pytest.raises(ValueError, match="num_levels"):
        datasets.ordinal_ratings(num_levels=1)


def test_planted_relations():
    sim = datasets.planted_relations(3, num_entities=10, num_relations=2)
    _same(sim, datasets.planted_relations(3, num_entities=10, num_relations=2))
    assert sim["Y"].shape == sim["probabilities"].shape == sim["heldout"].shape == (2, 10, 10)
    assert not sim["heldout"][:, np.arange(10), np.arange(10)].any()
    assert set(np.unique(sim["Y"])) <= {0.0, 1.0}


def test_planted_network():
    sim = datasets.planted_network(4, num_nodes=30, num_blocks=3)
    _same(sim, datasets.planted_network(4, num_nodes=30, num_blocks=3))
    Y, held = sim["Y"], sim["heldout"]
    assert not np.tril(Y).any() and not np.tril(held).any()
    np.testing.assert_allclose(np.diag(sim["rates"]), 0.82)
    with pytest.raises(ValueError, match="heldout_fraction"):
        datasets.planted_network(heldout_fraction=1.0)
