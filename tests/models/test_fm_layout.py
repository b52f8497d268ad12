"""The FM layout engine: the colouring separates features that share a row, relation blocks
lay out the same design as the expanded matrix, and bad designs and blocks are rejected
naming the argument."""

import jax
import numpy as np
import pytest
import scipy.sparse as sp
from geweke_cases.fm import HYPER, relation_design, small_design

from bnpjax.models import fm
from bnpjax.models.fm.conditionals import _predict_parts


def _synthetic(seed, n=200, users=60, items=40):
    rng = np.random.default_rng(seed)
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)
    entries = (np.repeat(np.arange(n), 2), np.stack([u, users + i], 1).ravel())
    return sp.csr_matrix((np.ones(2 * n), entries), shape=(n, users + items))


def test_colouring_separates_features_that_share_a_row():
    X = small_design(3)
    rows, cols, _, (n, p) = fm.to_coo(X)
    colour = fm.colour_features(rows, cols, n, p)
    for r in range(n):
        present = cols[rows == r]
        assert len(set(colour[present])) == len(present)
    # a user x item one-hot design is bipartite: two colours (greedy by degree gave four
    # here), each holding exactly one feature of every row
    X = _synthetic(0)
    rows, cols, _, (n, p) = fm.to_coo(X)
    colour = fm.colour_features(rows, cols, n, p)
    assert colour.max() == 1
    for c in (0, 1):
        assert np.array_equal(np.sort(rows[colour[cols] == c]), np.arange(n))


def test_relation_block_matches_the_expanded_design():
    X, block, expanded = relation_design()
    y = np.linspace(-1, 1, 12)
    # unstandardised: the sweep's state (and so yhat below) is then in the units of y
    with_block = fm.make_data(X, y, X_rel=[block], standardize=False)
    plain = fm.make_data(expanded, y, standardize=False)
    assert sum(c.rows.shape[0] for c in with_block.relations[0].chunks) >= 3
    state = fm.prior_sample(jax.random.key(0), plain, HYPER, rank=3)
    for a, b in zip(_predict_parts(with_block, state.b, state.w, state.V),
                    _predict_parts(plain, state.b, state.w, state.V), strict=True):  # fmt: skip
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # the sweep keeps its cached residual exact: the RMSE it reports is that of a fresh
    # prediction from the state it returns
    algorithm = fm.gibbs(with_block, HYPER, rank=3)
    # compiled: run op by op, this one sweep took 19 s against 8 s
    new, info = jax.jit(algorithm.step)(jax.random.key(1), algorithm.init(jax.random.key(2)))
    yhat, _ = _predict_parts(plain, new.b, new.w, new.V)
    np.testing.assert_allclose(info.rmse, np.sqrt(np.mean((y - yhat) ** 2)), rtol=1e-4)


def test_a_block_with_many_empty_columns_is_laid_out():
    # implicit feedback over every item, some of which nobody rated: a chunk of such columns
    # has more features than entries (the layout failed with a broadcast error)
    block = np.zeros((3, 40))
    block[:, 0] = 1.0
    n = 6
    data = fm.make_data(
        sp.csr_matrix(np.eye(n)), np.zeros(n), X_rel=[fm.RelationBlock(np.arange(n) % 3, block)]
    )
    ids = np.concatenate([np.ravel(c.features) for c in data.relations[0].chunks])
    assert np.array_equal(np.sort(ids[ids < n + 40]), np.arange(n, n + 40))


def test_bad_designs_and_blocks_are_rejected_naming_the_argument():
    X = sp.random(10, 5, density=0.5, format="csr", random_state=0)
    y = np.arange(10.0)
    with pytest.raises(ValueError, match="NaN"):
        fm.make_data(np.full((10, 5), np.nan), y)
    bad = X.copy()
    bad.data[0] = np.inf
    with pytest.raises(ValueError, match="X contains NaN or infinite"):
        fm.make_data(bad, y)
    with pytest.raises(ValueError, match="y must have shape"):
        fm.make_data(X, y[:-1])
    with pytest.raises(ValueError, match="y contains NaN"):
        fm.make_data(X, np.r_[y[:-1], np.nan])
    with pytest.raises(ValueError, match="group_shapes"):
        fm.make_data(X, y, group_shapes=[2, 2])
    with pytest.raises(ValueError, match="2-D"):
        fm.make_data(np.ones(10), y)
    with pytest.raises(ValueError, match="group_shapes must be a sequence of integers"):
        fm.make_data(X, y, group_shapes=[2.5, 2.5])  # int() would truncate to [2, 2]
    item_X = sp.csr_matrix((np.ones(12), (np.arange(12), np.arange(12) % 3)), shape=(12, 3))
    users = np.arange(12) % 4
    y = np.zeros(12)
    with pytest.raises(ValueError, match=r"X_rel\[0\].original_to_block must have one entry"):
        fm.make_data(item_X, y, X_rel=[fm.RelationBlock(users[:-1], sp.eye(4))])
    with pytest.raises(ValueError, match=r"X_rel\[0\].original_to_block must hold integer"):
        fm.make_data(item_X, y, X_rel=[fm.RelationBlock(users + 1, sp.eye(4))])
    with pytest.raises(ValueError, match=r"X_rel\[0\].data contains NaN"):
        fm.make_data(item_X, y, X_rel=[fm.RelationBlock(users, np.full((4, 2), np.nan))])


def _dsatur_loop(monkeypatch, rows, cols, num_rows, num_features):
    from bnpjax.models.fm import layout

    with monkeypatch.context() as patch:
        patch.setattr(layout, "_two_colours_as_dsatur", lambda graph, degree: None)
        return layout.colour_features(rows, cols, num_rows, num_features)


@pytest.mark.parametrize("searches", [None, 1])
@pytest.mark.parametrize("seed", range(12))
def test_the_bipartite_shortcut_gives_dsatur_colours(monkeypatch, seed, searches):
    """User x item designs (several components, features in no row) take the shortcut and
    get DSatur's colours; a third one-hot group (odd cycles) falls back to DSatur's loop.
    With one search in NumPy, the other components' distances come from csgraph."""
    from bnpjax.models.fm import layout

    if searches:
        monkeypatch.setattr(layout, "NUMPY_SEARCHES", searches)
    rng = np.random.default_rng(seed)
    n, users, items = int(rng.integers(2, 300)), int(rng.integers(1, 40)), int(rng.integers(1, 40))
    u, i, g = rng.integers(0, users, n), rng.integers(0, items, n), rng.integers(0, 4, n)
    two = (np.repeat(np.arange(n), 2), np.stack([u, users + i], 1).ravel(), n, users + items + 2)
    three = (np.repeat(np.arange(n), 3), np.stack([u, users + i, users + items + g], 1).ravel(),
             n, users + items + 4)  # fmt: skip
    for design in (two, three):
        np.testing.assert_array_equal(
            layout.colour_features(*design), _dsatur_loop(monkeypatch, *design)
        )
    pattern = sp.csr_matrix((np.ones(2 * n), (two[0], two[1])), shape=(n, two[3]))
    graph = (pattern.T @ pattern).tocsr()
    graph.setdiag(0)
    graph.eliminate_zeros()
    assert layout._two_colours_as_dsatur(graph, np.diff(graph.indptr)) is not None
    # a triangle is not bipartite: the shortcut declines
    triangle = sp.csr_matrix(np.ones((3, 3)) - np.eye(3))
    assert layout._two_colours_as_dsatur(triangle, np.full(3, 2)) is None
