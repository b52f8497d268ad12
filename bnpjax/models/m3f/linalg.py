"""Batched Gaussian row draws: every row of a factor block from its conditional at once.

Given the pair terms ``b`` and ``xi`` of the augmented hinge loss, each row ``e`` of a factor
block (an item's ``V_j`` given the users' factors, or a user's ``U_i`` given the items') is
Gaussian with precision ``B_e = I / sigma^2 + sum_pairs b F F^T`` and linear term
``h_e = sum_pairs xi F``. Rows are grouped in degree buckets, factored by one batched Cholesky
(float64), by a QR square root (float32, where forming ``B`` loses its small eigenvalues), or
in chunks when the work arrays would exceed ``ROW_BLOCK_BYTES``.

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML, Appendix B and Table 3.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

__all__ = ["FACTORIZATION", "ROW_BLOCK_BYTES", "column_normals"]


def _extend(x):
    """Append the dummy pair (index nnz) with value 0."""
    return jnp.concatenate([x, jnp.zeros((1, *x.shape[1:]), x.dtype)])


# Above this many bytes of per-row work arrays (the K x K precision matrices and the gathered
# factor rows) a factor block is drawn in chunks of rows. iPM3F's buffer can reach K ~ 1000,
# where all M matrices at once need M K^2 8 bytes: 14 GB on ML-100K, 30 GB on ML-1M.
ROW_BLOCK_BYTES = 1 << 30


def column_normals(key, num_rows: int, num_columns: int, dtype) -> jax.Array:
    """Standard normals ``(num_rows, num_columns)`` whose column ``s`` depends only on ``key``
    and ``s``: when the driver grows a feature buffer and reruns a chunk, every column that
    existed before gets the same noise, so the rerun retraces the same chain (a draw of shape
    ``(rows, capacity)`` would reshuffle all of it)."""
    return jax.vmap(
        lambda s: jax.random.normal(jax.random.fold_in(key, s), (num_rows,), dtype), out_axes=1
    )(jnp.arange(num_columns))


def _bucket_row_bytes(bucket, K, itemsize) -> int:
    width = int(bucket.pairs.shape[1])
    return (K * K + 2 * width * K) * itemsize


def _gaussian_rows(key, other, other_ids, b, xi, buckets, sigma, out):
    """Draw every row ``e`` of ``out`` from N(B_e^{-1} h_e, B_e^{-1}) with
    B_e = I / sigma^2 + sum_pairs b F F^T and h_e = sum_pairs xi F, F = other[other_ids[pair]]
    (module docstring). B and h are built per bucket of similar degree, then all rows share
    ONE batched Cholesky B = R R^T and two dependent triangular solves,
    mean = R^{-T} R^{-1} h and row = mean + R^{-T} eps (the second solve takes both right-hand
    sides at once). Returns ``(rows, conditional means)``. (One LAPACK call at a time: jaxlib's
    batched CPU kernels block thread-pool workers, and independent calls running concurrently
    on a small pool were seen to deadlock.) The noise ``eps`` of row ``e`` is row ``e`` of
    :func:`column_normals`. When the work arrays of all rows would exceed ``ROW_BLOCK_BYTES``,
    the rows are drawn in chunks by :func:`_gaussian_rows_chunked`. In float32 (by default;
    ``FACTORIZATION``) the factor comes from a QR decomposition instead, without forming
    ``B``: :func:`_gaussian_rows_square_root`."""
    num_out, K = out.shape
    itemsize = out.dtype.itemsize
    noise = column_normals(key, num_out, K, out.dtype)
    if _use_square_root(out.dtype):
        return _gaussian_rows_square_root(noise, other, other_ids, b, xi, buckets, sigma, out)
    total = sum(int(bk.ids.shape[0]) * _bucket_row_bytes(bk, K, itemsize) for bk in buckets)
    if total > ROW_BLOCK_BYTES:
        return _gaussian_rows_chunked(noise, other, other_ids, b, xi, buckets, sigma, out)
    ids_ext = _extend(other_ids)
    b_ext, xi_ext = _extend(b), _extend(xi)
    eye = jnp.eye(K, dtype=out.dtype) / sigma**2
    Bs, hs = [], []
    for bucket in buckets:
        G = other[ids_ext[bucket.pairs]]  # (n, w, K)
        weight = b_ext[bucket.pairs]
        Bs.append(jnp.einsum("nwk,nw,nwl->nkl", G, weight, G) + eye)
        hs.append(jnp.einsum("nwk,nw->nk", G, xi_ext[bucket.pairs]))
    ids = jnp.concatenate([bucket.ids for bucket in buckets])
    B, h = jnp.concatenate(Bs), jnp.concatenate(hs)
    draw, mean = _draw_from_factor(jnp.linalg.cholesky(B), h, noise[ids])
    return out.at[ids].set(draw), out.at[ids].set(mean)


def _draw_from_factor(L, h, eps):
    """Given the lower Cholesky factors ``L`` of the precisions ``B = L L^T``, the linear
    terms ``h`` and standard normals ``eps`` (all batched over rows): the draws
    ``mean + L^{-T} eps`` and the means ``B^{-1} h = L^{-T} L^{-1} h``, by two dependent
    triangular solves (the second takes both right-hand sides at once)."""
    z = solve_triangular(L, h[..., None], lower=True)
    both = solve_triangular(L, jnp.concatenate([z, eps[..., None]], -1), lower=True, trans="T")
    mean = both[..., 0]
    return mean + both[..., 1], mean


# "auto": the square-root (QR) factorization below float64, the Cholesky of B in float64;
# "cholesky" or "qr" force one (tests compare them).
FACTORIZATION = "auto"


def _use_square_root(dtype) -> bool:
    if FACTORIZATION not in ("auto", "cholesky", "qr"):
        raise ValueError(f"FACTORIZATION must be 'auto', 'cholesky' or 'qr', got {FACTORIZATION!r}")
    if FACTORIZATION == "auto":
        return jnp.dtype(dtype).itemsize < 8
    return FACTORIZATION == "qr"


def _gaussian_rows_square_root(noise, other, other_ids, b, xi, buckets, sigma, out):
    """:func:`_gaussian_rows` in square-root form, for float32.

    Why: an augmentation draw :math:`\\omega_{ijr}` can reach :math:`10^8` (a pair whose
    :math:`|\\zeta|` is near 0), and then :math:`B = \\sigma^{-2} I + \\sum b F F^\\top` has
    entries near :math:`10^8` whose float32 rounding (about 6 each) swamps its small
    eigenvalues; the Cholesky factor of such a ``B`` turns NaN (seen on MovieLens at
    ``C >= 0.1``). Here ``B`` is never formed: with the stacked matrix
    :math:`A = [\\sqrt{b_1} F_1; \\ldots; \\sqrt{b_w} F_w; \\mathrm{diag}(1/\\sigma)]`,
    :math:`A^\\top A = B`, and the QR decomposition :math:`A = Q R` gives :math:`B = R^\\top
    R`; with the rows of ``R`` signed to a positive diagonal, :math:`L = R^\\top` IS the
    Cholesky factor of ``B`` (it is unique), so the draws are the same as the Cholesky
    path's, from the same noise. QR is backward stable in ``A``, whose condition number is
    the square root of ``B``'s, so float32 keeps about half of its digits where the
    Cholesky of ``B`` kept none. About twice the flops of forming ``B`` and factoring it.

    ``A`` has ``w + K`` rows for a row of ``w`` pairs, so the buckets cannot share one batched
    call: ONE loop runs over pieces of buckets (at most about ``ROW_BLOCK_BYTES`` of work
    arrays each), and a switch picks the bucket's branch, so no two factorizations can run
    at once (see :func:`_gaussian_rows_chunked` on the deadlock that this avoids)."""
    num_out, K = out.shape
    nnz = b.shape[0]
    dtype = out.dtype
    itemsize = dtype.itemsize
    ids_ext = _extend(other_ids)
    root_b, xi_ext = jnp.sqrt(_extend(b)), _extend(xi)
    prior_root = jnp.eye(K, dtype=dtype) / jnp.asarray(sigma, dtype)
    noise_ext = _extend(noise)
    branches, branch_of_piece, piece_in_branch = [], [], []
    for k, bucket in enumerate(buckets):
        rows, width = int(bucket.ids.shape[0]), int(bucket.pairs.shape[1])
        per_piece = max(1, min(rows, ROW_BLOCK_BYTES // ((2 * width + 2 * K) * K * itemsize)))
        num_pieces = -(-rows // per_piece)
        extra = num_pieces * per_piece - rows
        pairs = jnp.pad(bucket.pairs, ((0, extra), (0, 0)), constant_values=nnz)
        ids = jnp.pad(bucket.ids, (0, extra), constant_values=num_out)
        pairs = pairs.reshape(num_pieces, per_piece, width)
        ids = ids.reshape(num_pieces, per_piece)

        def branch(s, carry, pairs=pairs, ids=ids, size=per_piece):
            draws, means = carry
            p, e = pairs[s], ids[s]
            G = other[ids_ext[p]]  # (size, w, K)
            A = jnp.concatenate(
                [G * root_b[p][..., None], jnp.broadcast_to(prior_root, (size, K, K))], axis=1
            )
            R = jnp.linalg.qr(A, mode="r")
            sign = jnp.where(jnp.diagonal(R, axis1=-2, axis2=-1) < 0, -1.0, 1.0).astype(dtype)
            L = jnp.swapaxes(R * sign[..., :, None], -1, -2)
            h = jnp.einsum("nwk,nw->nk", G, xi_ext[p])
            draw, mean = _draw_from_factor(L, h, noise_ext[e])
            return draws.at[e].set(draw, mode="drop"), means.at[e].set(mean, mode="drop")

        branches.append(branch)
        branch_of_piece += [k] * num_pieces
        piece_in_branch += list(range(num_pieces))
    branch_of_piece = jnp.asarray(branch_of_piece, jnp.int32)
    piece_in_branch = jnp.asarray(piece_in_branch, jnp.int32)

    def piece(t, carry):
        return jax.lax.switch(branch_of_piece[t], branches, piece_in_branch[t], carry)

    return jax.lax.fori_loop(0, int(branch_of_piece.shape[0]), piece, (out, out))


def _gaussian_rows_chunked(noise, other, other_ids, b, xi, buckets, sigma, out):
    """:func:`_gaussian_rows` with at most about ``ROW_BLOCK_BYTES`` of work arrays at a time:
    the rows, in bucket order (ascending degree), are cut into equal chunks; each chunk's pairs
    are padded to the widest row in it, and ONE loop over the chunks builds each chunk's B, h
    (a switch over the chunk widths) and draws its rows. The same conditionals and the same
    noise per row; the rows are conditionally independent given ``other``.

    Why one loop with one Cholesky call site: jaxlib's batched CPU Cholesky waits inside an
    XLA thread-pool worker for work queued on that same pool, so two factorizations that XLA
    is free to run at once (e.g. from separate loops, which XLA flattens when they have a
    single iteration) deadlocked on a 2-thread pool."""
    num_out, K = out.shape
    nnz = b.shape[0]
    itemsize = out.dtype.itemsize
    ids_ext = _extend(other_ids)
    b_ext, xi_ext = _extend(b), _extend(xi)
    eye = jnp.eye(K, dtype=out.dtype) / sigma**2
    noise_ext = _extend(noise)  # padded rows read the dummy row
    widths = [int(bucket.pairs.shape[1]) for bucket in buckets]
    counts = [int(bucket.ids.shape[0]) for bucket in buckets]
    total = sum(counts)
    row_bytes = (K * K + 2 * max(widths) * K) * itemsize
    per_chunk = max(1, min(total, ROW_BLOCK_BYTES // row_bytes))
    num_chunks = -(-total // per_chunk)
    size = -(-total // num_chunks)  # equal chunks: the padding stays under one chunk's worth
    # every row's bucket (static) and its global position
    bucket_of_row = np.repeat(np.arange(len(buckets)), counts)
    first_row = np.concatenate([[0], np.cumsum(counts)[:-1]])
    # chunks grouped by their width (that of their widest, i.e. last, row)
    groups: dict[int, list[int]] = {}
    for t in range(num_chunks):
        last = min((t + 1) * size, total) - 1
        groups.setdefault(widths[bucket_of_row[last]], []).append(t)
    branch_of_chunk = np.zeros(num_chunks, np.int32)
    index_in_branch = np.zeros(num_chunks, np.int32)
    branch_tables = []
    for g, (width, chunks) in enumerate(sorted(groups.items())):
        pair_rows, id_rows = [], []
        for t in chunks:
            lo, hi = t * size, min((t + 1) * size, total)
            parts_p, parts_i = [], []
            for k in np.unique(bucket_of_row[lo:hi]):
                a = max(lo, first_row[k]) - first_row[k]
                z = min(hi, first_row[k] + counts[k]) - first_row[k]
                pad = ((0, 0), (0, width - widths[k]))
                parts_p.append(jnp.pad(buckets[k].pairs[a:z], pad, constant_values=nnz))
                parts_i.append(buckets[k].ids[a:z])
            extra = size - (hi - lo)
            # padded rows: the dummy pair (weight 0) and an id past the end (dropped on write)
            parts_p.append(jnp.full((extra, width), nnz, jnp.int32))
            parts_i.append(jnp.full((extra,), num_out, jnp.int32))
            pair_rows.append(jnp.concatenate(parts_p))
            id_rows.append(jnp.concatenate(parts_i))
            branch_of_chunk[t], index_in_branch[t] = g, len(pair_rows) - 1
        branch_tables.append((jnp.stack(pair_rows), jnp.stack(id_rows)))

    def build(s, tables):
        pairs, ids = tables
        p, e = pairs[s], ids[s]
        G = other[ids_ext[p]]
        B = jnp.einsum("nwk,nw,nwl->nkl", G, b_ext[p], G) + eye
        h = jnp.einsum("nwk,nw->nk", G, xi_ext[p])
        return B, h, e

    branches = [functools.partial(build, tables=tables) for tables in branch_tables]
    branch_of_chunk = jnp.asarray(branch_of_chunk)
    index_in_branch = jnp.asarray(index_in_branch)

    def chunk(t, carry):
        draws, means = carry
        B, h, e = jax.lax.switch(branch_of_chunk[t], branches, index_in_branch[t])
        draw, mean = _draw_from_factor(jnp.linalg.cholesky(B), h, noise_ext[e])
        return draws.at[e].set(draw, mode="drop"), means.at[e].set(mean, mode="drop")

    return jax.lax.fori_loop(0, num_chunks, chunk, (out, out))
