"""The batched Gaussian row draws of M3F (bnpjax.models.m3f.linalg): chunked and square-root
(QR) paths against the one-batch Cholesky, float32 robustness, and noise that does not
depend on the buffer size."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnpjax.models import m3f
from bnpjax.models.m3f import linalg


def test_factor_rows_drawn_in_chunks_match_the_batched_draw(monkeypatch):
    """Above ROW_BLOCK_BYTES the factor rows are drawn chunk by chunk: the conditional means
    must equal the all-at-once ones, and the draws must have covariance B^{-1} (checked
    against an explicit inverse, within 5 Monte Carlo standard errors)."""
    rng = np.random.default_rng(3)
    N, M, K = 7, 6, 2
    users, items = np.nonzero(rng.random((N, M)) < 0.6)
    data = m3f.make_data(users, items, rng.integers(1, 4, users.size), N, M, 3)
    U = jnp.asarray(rng.normal(size=(N, K)))
    b = jnp.asarray(rng.gamma(2.0, 1.0, users.size))
    xi = jnp.asarray(rng.normal(size=users.size))
    out = jnp.zeros((M, K))
    args = (U, data.users, b, xi, data.item_buckets, 1.3, out)
    _, batched = linalg._gaussian_rows(jax.random.key(0), *args)
    monkeypatch.setattr(linalg, "ROW_BLOCK_BYTES", 2 * K * K * 8)  # two rows per chunk
    draw = jax.jit(lambda key: linalg._gaussian_rows(key, *args))
    _, chunked = draw(jax.random.key(0))
    np.testing.assert_allclose(chunked, batched, rtol=1e-10, atol=1e-12)
    # one Cholesky call site, inside one loop: two factorizations that XLA may run at once
    # deadlocked jaxlib's CPU kernels on a 2-thread pool (bnpjax.models.m3f.linalg)
    compiled = draw.lower(jax.random.key(0)).compile().as_text()
    assert len(re.findall(r"custom_call_target=\"lapack_[sd]potrf", compiled)) == 1
    n = 20_000
    draws = np.asarray(jax.vmap(lambda k: draw(k)[0])(jax.random.split(jax.random.key(1), n)))
    for j in range(M):
        mask = np.asarray(data.items) == j
        Uj = np.asarray(U)[np.asarray(data.users)[mask]]
        B = np.eye(K) / 1.3**2 + (Uj * np.asarray(b)[mask][:, None]).T @ Uj
        cov = np.linalg.inv(B)
        se = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
        assert np.all(np.abs(np.cov(draws[:, j].T) - cov) < 5 * se), (j, np.cov(draws[:, j].T), cov)
        se_mean = np.sqrt(np.diag(cov) / n)
        assert np.all(np.abs(draws[:, j].mean(0) - np.asarray(batched[j])) < 5 * se_mean)


# users 28, 34 and 37 rate none of the 6 items: they stay in, as the empty bucket the draws
# must also handle, so make_data's warning about them is expected here
@pytest.mark.filterwarnings("ignore:num_users = 40, but 3 users have no ratings")
def test_square_root_factor_matches_cholesky_and_survives_float32(monkeypatch):
    """The QR (square-root) path draws the same rows as the Cholesky path from the same noise
    (float64, several buckets, pieces of a few rows), and in float32 it stays finite and close
    to the float64 conditional where an augmentation weight of 1e8 makes the Cholesky of B
    break down (B's entries near 1e8 round off by about 6, more than its small eigenvalues)."""
    rng = np.random.default_rng(4)
    N, M, K = 40, 6, 5
    users, items = np.nonzero(rng.random((N, M)) < 0.5)
    data = m3f.make_data(users, items, rng.integers(1, 4, users.size), N, M, 3)
    U = rng.normal(size=(N, K))
    b = rng.gamma(2.0, 1.0, users.size)
    xi = rng.normal(size=users.size)
    args = (jnp.asarray(U), data.users, jnp.asarray(b), jnp.asarray(xi), data.item_buckets)
    sd = jnp.asarray([1.3, 1.3, 1.3, 1.3, 0.7])  # a vector of prior sds, as with item biases
    draws = {}
    for method in ("cholesky", "qr"):
        monkeypatch.setattr(linalg, "FACTORIZATION", method)
        draws[method] = linalg._gaussian_rows(jax.random.key(0), *args, sd, jnp.zeros((M, K)))
    monkeypatch.setattr(linalg, "ROW_BLOCK_BYTES", 2 * (2 * 64 + 2 * K) * K * 8)
    pieces = linalg._gaussian_rows(jax.random.key(0), *args, sd, jnp.zeros((M, K)))
    for got in (draws["qr"], pieces):
        for a, c in zip(got, draws["cholesky"], strict=True):
            np.testing.assert_allclose(a, c, rtol=1e-9, atol=1e-10)

    # float32: one pair per item with b = 1e8
    big = b.copy()
    first = np.unique(np.asarray(data.items), return_index=True)[1]
    big[first] = 1e8
    args32 = (
        jnp.asarray(U, jnp.float32),
        data.users,
        jnp.asarray(big, jnp.float32),
        jnp.asarray(xi, jnp.float32),
        data.item_buckets,
        1.0,
        jnp.zeros((M, K), jnp.float32),
    )
    monkeypatch.setattr(linalg, "ROW_BLOCK_BYTES", 1 << 30)
    monkeypatch.setattr(linalg, "FACTORIZATION", "auto")
    _, mean32 = linalg._gaussian_rows(jax.random.key(0), *args32)
    assert np.all(np.isfinite(mean32))
    for j in range(M):
        mask = np.asarray(data.items) == j
        Uj = U[np.asarray(data.users)[mask]]
        B = np.eye(K) + (Uj * big[mask][:, None]).T @ Uj
        exact = np.linalg.solve(B, Uj.T @ xi[mask])
        # relative to the conditional sd, the float32 mean is accurate to a few percent
        sd_j = np.sqrt(np.diag(np.linalg.inv(B)))
        assert np.all(np.abs(np.asarray(mean32[j]) - exact) < 0.05 * sd_j), (j, mean32[j], exact)


def test_column_noise_does_not_depend_on_the_buffer_size():
    """The driver reruns a chunk with a larger buffer when a chain runs out of columns: the
    columns that existed before must get the same noise, or the rerun is another chain."""
    small = linalg.column_normals(jax.random.key(4), 9, 5, jnp.float32)
    large = linalg.column_normals(jax.random.key(4), 9, 12, jnp.float32)
    np.testing.assert_array_equal(small, large[:, :5])
