"""Bucketed FM layouts (``make_data(bucket_shapes=True)``, the default): the same draws as the
unpadded layout, one compilation for two data sets whose sizes fall in one bucket, and
predictions that the padding never changes.

The draws are compared to float rounding, not bit for bit: the per-feature sums of a bucketed
colour add segments of 128 or 16 entries and then the segments, where the unpadded layout adds each
feature's entries in one reduction, so their summation order differs (padding adds exact
zeros). The tests run in float64 (tests/conftest.py), where one sum's relative rounding is
about 1e-16 times its number of terms; the Gibbs sweep passes it through Cholesky solves of
conditioning far below 1e4 on these small problems, and successive sweeps with common random
numbers do not amplify it (a Gibbs map with shared noise contracts towards the conditional
means). ``rtol=1e-9`` (with ``atol=1e-10`` for draws near 0) leaves a margin of more than
1e3 over that and still fails on any real difference in the chain, which moves draws at
order 1e-2 or more.
"""

import jax
import numpy as np
import scipy.sparse as sp
from geweke_cases.fm import relation_design

from bnpjax.infer import compile_count, run
from bnpjax.models import fm
from bnpjax.models.fm.conditionals import _group_row_sums, _predict_parts

RTOL, ATOL = 1e-9, 1e-10


def _design(seed, n=300, users=30, items=20, extra=True):
    """One-hot users and items (two colours that cover every row) and, with ``extra``, a
    real-valued column present in some rows (a colour that does not: padded entries)."""
    rng = np.random.default_rng(seed)
    u = rng.integers(0, users, n)
    i = np.minimum(rng.geometric(0.12, n) - 1, items - 1)  # skewed item degrees
    rows, cols, vals = [np.arange(n)] * 2, [u, users + i], [np.ones(n)] * 2
    if extra:
        take = np.flatnonzero(rng.random(n) < 0.4)
        rows, cols = [*rows, take], [*cols, np.full(len(take), users + items)]
        vals = [*vals, rng.normal(size=len(take))]
    p = users + items + int(extra)
    X = sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(n, p))  # fmt: skip
    y = rng.normal(size=n) + 0.5 * u / users
    return X, y


def _shapes(data):
    return [x.shape for x in jax.tree_util.tree_leaves(data)]


def _draws(data, rank=3, **settings):
    algorithm = fm.gibbs(data, rank=rank, **settings)
    result = run(algorithm, jax.random.key(5), 20, progress_bar=False)
    return result.trace["posterior"]


def _assert_same_draws(padded, plain):
    assert padded.keys() == plain.keys()
    for name in plain:
        np.testing.assert_allclose(padded[name], plain[name], rtol=RTOL, atol=ATOL, err_msg=name)


def test_bucketed_draws_equal_the_unpadded_draws():
    X, y = _design(0)
    padded = fm.make_data(X, y)
    plain = fm.make_data(X, y, bucket_shapes=False)
    assert _shapes(padded) != _shapes(plain)  # the padding is there
    assert all(b.segment_feature is not None for b in padded.blocks)
    # the real-valued column's colour covers some rows only: its entries are padded too
    assert any(b.rows.shape[0] > p.rows.shape[0] != y.shape[0]
               for b, p in zip(padded.blocks, plain.blocks, strict=True))  # fmt: skip
    _assert_same_draws(_draws(padded), _draws(plain))


def test_bucketed_draws_equal_the_unpadded_draws_with_a_relation_block():
    X, block, _ = relation_design()
    y = np.random.default_rng(3).normal(size=X.shape[0])
    padded = fm.make_data(X, y, X_rel=[block], group_shapes=[3, 7])
    plain = fm.make_data(X, y, X_rel=[block], group_shapes=[3, 7], bucket_shapes=False)
    assert _shapes(padded) != _shapes(plain)
    _assert_same_draws(_draws(padded), _draws(plain))


def test_segments_hold_every_entry_once_with_its_feature():
    # users with 300 entries each: whole segments of 128, then the rest in segments of 16
    X, y = _design(1, n=1500, users=5, items=20)
    for block in fm.make_data(X, y).blocks:
        widths = [index.shape[1] for index in block.buckets]
        assert widths[-1] == fm.layout.SEGMENT_WIDTH and set(widths) <= set(
            fm.layout.SEGMENT_WIDTHS
        )
        nnz, seen = block.local.shape[0], []
        for index, owner in zip(block.buckets, block.segment_feature, strict=True):
            index, owner = np.asarray(index), np.asarray(owner)
            real = index < nnz
            assert np.all(np.diff(owner) >= 0)  # in feature order, for the sorted segment sum
            feature = np.broadcast_to(owner[:, None], index.shape)[real]
            np.testing.assert_array_equal(np.asarray(block.local)[index[real]], feature)
            seen.append(index[real])
        values = np.asarray(block.values)
        np.testing.assert_array_equal(np.sort(np.concatenate(seen)), np.flatnonzero(values != 0))
    assert any(len(b.buckets) == 2 for b in fm.make_data(X, y).blocks)  # the wide ones are used


def test_bucketed_draws_equal_the_unpadded_draws_with_wide_segments():
    # rank 15: the sums of [h, r] have 17 columns, so the wide segments are summed as they
    # are (conditionals.wide_segments), and the kernel compiles with YNNPACK's fusions
    X, y = _design(2, n=1500, users=5, items=20)
    padded = fm.make_data(X, y)
    assert any(b.buckets[0].shape[1] > fm.layout.SEGMENT_WIDTH for b in padded.blocks)
    plain = fm.make_data(X, y, bucket_shapes=False)
    assert fm.gibbs(padded, rank=15).compiler_options == ()
    assert fm.gibbs(padded, rank=3).compiler_options != ()
    _assert_same_draws(_draws(padded, rank=15), _draws(plain, rank=15))


def test_two_data_sets_in_one_bucket_compile_once():
    # two data sets of the same rows whose colours differ in features, entries and degree
    # profile: unpadded their shapes differ, bucketed they share every program
    first, second = _design(4, extra=False), _design(5, extra=False)  # one-hot, as ML-100K
    plain = [fm.make_data(X, y, bucket_shapes=False) for X, y in (first, second)]
    assert _shapes(plain[0]) != _shapes(plain[1])
    padded = [fm.make_data(X, y) for X, y in (first, second)]
    assert _shapes(padded[0]) == _shapes(padded[1])
    run(fm.gibbs(padded[0], rank=3), jax.random.key(0), 5, progress_bar=False)
    before = compile_count()
    result = run(fm.gibbs(padded[1], rank=3), jax.random.key(0), 5, progress_bar=False)
    assert compile_count() == before
    assert np.all(np.isfinite(result.trace["posterior"]["V"]))


def test_padding_never_changes_predictions():
    X, y = _design(4)
    padded = fm.make_data(X, y)
    plain = fm.make_data(X, y, bucket_shapes=False)
    rng = np.random.default_rng(0)
    p = X.shape[1]
    w, V = jax.numpy.asarray(rng.normal(size=p)), jax.numpy.asarray(rng.normal(size=(p, 3)))
    for a, b in zip(_predict_parts(padded, 0.3, w, V), _predict_parts(plain, 0.3, w, V),
                    strict=True):  # fmt: skip
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(_group_row_sums(padded, w), _group_row_sums(plain, w))


def test_bucket_sizes_are_a_small_geometric_set():
    sizes = [fm.layout.bucket_size(m) for m in range(1, 5000)]
    assert all(s >= m for m, s in zip(range(1, 5000), sizes, strict=True))
    assert all(s <= max(8, 1.25 * m) for m, s in zip(range(1, 5000), sizes, strict=True))
    # 8, four sizes in each octave from (8, 16] to (2048, 4096], and 5120
    assert sorted(set(sizes))[:6] == [8, 10, 12, 14, 16, 20]
    assert len(set(sizes)) == 1 + 4 * 9 + 1
