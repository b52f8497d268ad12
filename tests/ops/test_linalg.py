"""Sherman-Morrison updates against dense inverses, sparse COO reductions against scipy.sparse."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.sparse as sp  # noqa: E402
from scipy import special  # noqa: E402

from bnpjax.ops import (  # noqa: E402
    SparseCOO,
    col_sums,
    csr_row_ids,
    from_dense,
    from_scipy,
    matmat,
    matvec,
    rank_one_update,
    rmatmat,
    rmatvec,
    row_sums,
    segment_logsumexp,
    segment_sum,
    sherman_morrison,
    to_dense,
    transpose,
)

TOL = 1e-10


def random_spd(rng, n, cond=10.0):
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return (q * np.geomspace(1.0, cond, n)) @ q.T


def assert_inverse_close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_allclose(got, want, rtol=TOL, atol=TOL * np.max(np.abs(want)))


# ----------------------------------------------------------------------------- rank one


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_rank_one_update_matches_dense(sign):
    rng = np.random.default_rng(0)
    n = 6
    m = random_spd(rng, n)
    u = rng.normal(size=n)
    if sign < 0:
        m = m + np.outer(u, u)  # removing u must leave a positive definite matrix
    inv, logdet = np.linalg.inv(m), np.linalg.slogdet(m)[1]
    new_inv, new_logdet = rank_one_update(inv, logdet, u, sign)
    target = m + sign * np.outer(u, u)
    assert_inverse_close(new_inv, np.linalg.inv(target))
    np.testing.assert_allclose(new_logdet, np.linalg.slogdet(target)[1], rtol=TOL, atol=TOL)


def test_ibp_remove_then_add_round_trip():
    # M = Z^T Z + (sigma_X^2 / sigma_A^2) I, remove row z_i then put it back.
    rng = np.random.default_rng(1)
    z = (rng.random((30, 8)) < 0.4).astype(np.float64)
    ratio = 0.25
    m = z.T @ z + ratio * np.eye(8)
    inv, logdet = np.linalg.inv(m), np.linalg.slogdet(m)[1]
    for i in (0, 7, 29):
        inv_minus, logdet_minus = rank_one_update(inv, logdet, z[i], -1.0)
        m_minus = np.delete(z, i, axis=0)
        m_minus = m_minus.T @ m_minus + ratio * np.eye(8)
        assert_inverse_close(inv_minus, np.linalg.inv(m_minus))
        np.testing.assert_allclose(logdet_minus, np.linalg.slogdet(m_minus)[1], rtol=TOL)
        inv_back, logdet_back = rank_one_update(inv_minus, logdet_minus, z[i], 1.0)
        assert_inverse_close(inv_back, inv)
        np.testing.assert_allclose(logdet_back, logdet, rtol=TOL)


def test_rank_one_update_batched_and_vmap():
    rng = np.random.default_rng(2)
    ms = np.stack([random_spd(rng, 4) for _ in range(3)])
    us = rng.normal(size=(3, 4))
    signs = np.array([1.0, 1.0, -0.1])
    invs, logdets = np.linalg.inv(ms), np.linalg.slogdet(ms)[1]
    got_inv, got_logdet = rank_one_update(invs, logdets, us, signs)
    vm_inv, vm_logdet = jax.vmap(rank_one_update)(invs, logdets, us, signs)
    for b in range(3):
        target = ms[b] + signs[b] * np.outer(us[b], us[b])
        for inv_b, logdet_b in ((got_inv[b], got_logdet[b]), (vm_inv[b], vm_logdet[b])):
            assert_inverse_close(inv_b, np.linalg.inv(target))
            np.testing.assert_allclose(logdet_b, np.linalg.slogdet(target)[1], rtol=TOL)


def test_rank_one_update_loses_definiteness():
    eye = np.eye(3)
    _, logdet = rank_one_update(eye, 0.0, np.array([1.0, 0.0, 0.0]), -1.0)
    assert logdet == -np.inf  # I - e1 e1^T is singular
    inv, logdet = rank_one_update(eye, 0.0, np.array([1.0, 1.0, 0.0]), -1.0)
    assert np.isnan(logdet)  # determinant 1 - 2 < 0
    target = eye - np.outer([1.0, 1.0, 0.0], [1.0, 1.0, 0.0])
    assert_inverse_close(inv, np.linalg.inv(target))


def test_rank_one_update_float32():
    rng = np.random.default_rng(3)
    m = random_spd(rng, 5).astype(np.float32)
    u = rng.normal(size=5).astype(np.float32)
    inv = np.linalg.inv(m).astype(np.float32)
    logdet = np.float32(np.linalg.slogdet(m)[1])
    new_inv, new_logdet = rank_one_update(inv, logdet, u)
    assert new_inv.dtype == new_logdet.dtype == jnp.float32
    target = m.astype(np.float64) + np.outer(u, u)
    np.testing.assert_allclose(new_inv, np.linalg.inv(target), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(new_logdet, np.linalg.slogdet(target)[1], rtol=1e-5)


def test_sherman_morrison_general():
    rng = np.random.default_rng(4)
    m = rng.normal(size=(5, 5)) + 4 * np.eye(5)
    u, v = rng.normal(size=5), rng.normal(size=5)
    got = sherman_morrison(np.linalg.inv(m), u, v)
    assert_inverse_close(got, np.linalg.inv(m + np.outer(u, v)))
    # batched, with shared vectors broadcast
    ms = np.stack([m, m.T, m + np.eye(5)])
    got = sherman_morrison(np.linalg.inv(ms), u, v)
    for b in range(3):
        assert_inverse_close(got[b], np.linalg.inv(ms[b] + np.outer(u, v)))


# ----------------------------------------------------------------------------- sparse


def random_sparse(rng, n_rows=30, n_cols=20, nnz=120):
    """COO with empty rows (3, 4, last) and columns (0, 11), and many duplicate entries."""
    rows = rng.choice([r for r in range(n_rows - 1) if r not in (3, 4)], size=nnz)
    cols = rng.choice([c for c in range(n_cols) if c not in (0, 11)], size=nnz)
    rows[:10], cols[:10] = rows[10:20], cols[10:20]  # exact duplicates
    return sp.coo_matrix((rng.normal(size=nnz), (rows, cols)), shape=(n_rows, n_cols))


@pytest.fixture(scope="module")
def sparse_case():
    rng = np.random.default_rng(5)
    a = random_sparse(rng)
    return a, rng.normal(size=a.shape[1]), rng.normal(size=a.shape[0]), rng.normal(size=(20, 3))


def noncanonical_csr(a):
    """CSR built from raw arrays, keeping duplicates (scipy's own conversion would sum them)."""
    order = np.lexsort((a.col, a.row))
    indptr = np.concatenate([[0], np.cumsum(np.bincount(a.row, minlength=a.shape[0]))])
    return sp.csr_matrix((a.data[order], a.col[order], indptr), shape=a.shape)


@pytest.mark.parametrize("fmt", ["coo", "coo_array", "csr", "csc", "csr_duplicates"])
def test_sparse_reductions_match_scipy(sparse_case, fmt):
    a, x, y, b = sparse_case
    mat = {
        "coo": a,
        "coo_array": sp.coo_array(a),
        "csr": a.tocsr(),
        "csc": a.tocsc(),
        "csr_duplicates": noncanonical_csr(a),
    }[fmt]
    coo = from_scipy(mat)
    assert coo.shape == a.shape and coo.nnz == mat.nnz  # entries kept as stored
    if fmt in ("coo", "coo_array", "csr_duplicates"):
        assert coo.nnz == 120 > a.tocsr().nnz  # the duplicates really are there
    dense = a.toarray()
    assert dense[[3, 4, -1]].sum() == 0 and dense[:, [0, 11]].sum() == 0
    np.testing.assert_allclose(to_dense(coo), dense, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(matvec(coo, x), a @ x, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rmatvec(coo, y), a.T @ y, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(matmat(coo, b), a @ b, rtol=1e-12, atol=1e-12)
    c = np.outer(y, [1.0, -2.0])
    np.testing.assert_allclose(rmatmat(coo, c), a.T @ c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(row_sums(coo), np.asarray(a.sum(axis=1)).ravel(), atol=1e-12)
    np.testing.assert_allclose(col_sums(coo), np.asarray(a.sum(axis=0)).ravel(), atol=1e-12)
    np.testing.assert_allclose(to_dense(transpose(coo)), dense.T, atol=1e-14)


def test_sparse_is_pytree_with_static_shape(sparse_case):
    a, x, _, _ = sparse_case
    coo = from_scipy(a)
    leaves, treedef = jax.tree_util.tree_flatten(coo)
    assert len(leaves) == 3
    assert jax.tree_util.tree_unflatten(treedef, leaves).shape == a.shape

    @jax.jit
    def f(m, v):
        # shape must be static inside jit to size the output
        return matvec(m, v), jnp.zeros(m.shape[0])

    got, zeros = f(coo, x)
    assert zeros.shape == (a.shape[0],)
    np.testing.assert_allclose(got, a @ x, rtol=1e-12, atol=1e-12)
    xs = np.stack([x, 2 * x, -x])
    np.testing.assert_allclose(jax.vmap(lambda v: matvec(coo, v))(xs), xs @ a.T, atol=1e-12)
    # batched values over a shared pattern
    batched = SparseCOO(coo.rows, coo.cols, jnp.stack([coo.values, 3 * coo.values]), coo.shape)
    rs = jax.vmap(row_sums, in_axes=(SparseCOO(None, None, 0, coo.shape),))(batched)
    np.testing.assert_allclose(rs[1], 3 * np.asarray(a.sum(axis=1)).ravel(), atol=1e-12)


def test_from_dense_host_and_traced():
    rng = np.random.default_rng(6)
    dense = rng.normal(size=(7, 5)) * (rng.random((7, 5)) < 0.3)
    dense[2] = 0.0
    coo = from_dense(dense)
    assert coo.nnz == np.count_nonzero(dense)
    np.testing.assert_array_equal(to_dense(coo), dense)
    padded = jax.jit(lambda d: from_dense(d, nnz=20))(dense)
    assert padded.nnz == 20 and padded.shape == dense.shape
    np.testing.assert_array_equal(to_dense(padded), dense)
    np.testing.assert_allclose(matvec(padded, np.ones(5)), dense.sum(1), atol=1e-14)
    float32 = from_dense(dense.astype(np.float32))
    assert float32.dtype == jnp.float32 and matvec(float32, np.ones(5, np.float32)).dtype == (
        jnp.float32
    )


def test_csr_row_ids(sparse_case):
    a = sparse_case[0].tocsr()
    want = np.repeat(np.arange(a.shape[0]), np.diff(a.indptr))
    np.testing.assert_array_equal(csr_row_ids(a.indptr, a.nnz), want)
    np.testing.assert_array_equal(jax.jit(csr_row_ids, static_argnums=1)(a.indptr, a.nnz), want)
    np.testing.assert_array_equal(csr_row_ids(np.array([0, 0, 0]), 0), np.zeros(0))
    np.testing.assert_array_equal(csr_row_ids(np.array([0, 0, 2, 2, 3, 3]), 3), [1, 1, 3])


def test_segment_sum_and_logsumexp():
    rng = np.random.default_rng(7)
    ids = np.array([0, 0, 2, 2, 2, 4, 0])
    values = rng.normal(size=(7, 2))
    got = segment_sum(values, ids, 6)
    want = np.zeros((6, 2))
    np.add.at(want, ids, values)
    np.testing.assert_allclose(got, want, atol=1e-14)

    logv = np.array([1e4, 1e4 + np.log(3), -5.0, 2.0, -np.inf, -np.inf, 7.0])
    got = np.asarray(segment_logsumexp(logv, ids, 6))
    for g in range(6):
        members = logv[ids == g]
        want = special.logsumexp(members) if members.size else -np.inf
        if np.isneginf(want):
            assert got[g] == -np.inf
        else:
            np.testing.assert_allclose(got[g], want, rtol=1e-14)
    got32 = segment_logsumexp(logv.astype(np.float32), ids, 6)
    assert got32.dtype == jnp.float32 and np.isfinite(np.asarray(got32)[0])
