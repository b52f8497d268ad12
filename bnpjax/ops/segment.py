r"""Sparse matrices as coordinate lists, and the segment reductions that act on them.

A sparse :math:`n \times m` matrix :math:`A` is stored as its nonzero entries
:math:`(r_e, c_e, a_e)`, :math:`e = 1..\mathrm{nnz}`; duplicates are allowed and sum, as in scipy.
Every product is a gather followed by a segment sum, e.g.

.. math::

    (A x)_i = \sum_{e : r_e = i} a_e x_{c_e}, \qquad (A^\top y)_j = \sum_{e : c_e = j} a_e y_{r_e},

costing :math:`O(\mathrm{nnz})` and compiling to a scatter-add that works under ``jit``,
``vmap`` and ``grad``. Empty rows and columns give 0.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.ops._dtypes import as_inexact

__all__ = [
    "SparseCOO",
    "col_sums",
    "csr_row_ids",
    "from_dense",
    "from_scipy",
    "matmat",
    "matvec",
    "rmatmat",
    "rmatvec",
    "row_sums",
    "segment_logsumexp",
    "segment_sum",
    "to_dense",
    "transpose",
]


@dataclasses.dataclass(frozen=True, eq=False)
class SparseCOO:
    """A sparse matrix in coordinate form; a pytree whose ``shape`` is static.

    ``rows``, ``cols`` (integer) and ``values`` (shape ``(nnz, ...)``; trailing axes, if any,
    are carried through the reductions) are the pytree leaves. ``shape = (n_rows, n_cols)`` is
    auxiliary data, so it stays a tuple of Python ints under ``jit`` and can size the outputs
    (a NamedTuple would turn it into traced leaves). Two matrices with different shapes are
    different pytree structures and compile separately; ``vmap`` batches ``values`` (and the
    indices, if given batched) but never ``shape``.
    """

    rows: jax.Array
    cols: jax.Array
    values: jax.Array
    shape: tuple[int, int]

    def __post_init__(self):
        # Aux data must be hashable and compare by value, whatever the caller passed (an
        # np.int64 tuple, a list).
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))

    @property
    def nnz(self) -> int:
        """Number of stored entries (duplicates counted)."""
        return self.values.shape[0]

    @property
    def dtype(self):
        """Dtype of ``values``."""
        return self.values.dtype


jax.tree_util.register_dataclass(
    SparseCOO, data_fields=["rows", "cols", "values"], meta_fields=["shape"]
)


def _index_dtype(shape):
    return np.int32 if max(shape, default=0) < 2**31 else np.int64


@functools.partial(jax.jit, static_argnames=("num_segments", "indices_are_sorted"))
def segment_sum(values, segment_ids, num_segments: int, indices_are_sorted: bool = False):
    r"""Return :math:`s_g = \sum_{e : \mathrm{id}_e = g} v_e` for :math:`g = 0..G-1`.

    A thin wrapper of :func:`jax.ops.segment_sum` (``values`` of shape ``(nnz, ...)``, result
    ``(num_segments, ...)``); ids outside ``[0, num_segments)`` are dropped and empty segments
    are 0. ``num_segments`` is static. ``indices_are_sorted`` is a promise that may speed up
    accelerators.
    """
    return jax.ops.segment_sum(
        values, segment_ids, num_segments=num_segments, indices_are_sorted=indices_are_sorted
    )


@functools.partial(jax.jit, static_argnames="num_segments")
def segment_logsumexp(log_values, segment_ids, num_segments: int) -> jax.Array:
    r"""Return :math:`\log\sum_{e : \mathrm{id}_e = g} \exp(\ell_e)` per segment, stably.

    .. math::

        \mathrm{lse}_g = m_g + \log\sum_{e : \mathrm{id}_e = g} \exp(\ell_e - m_g), \qquad
        m_g = \max_{e : \mathrm{id}_e = g} \ell_e,

    so large log values do not overflow. Empty segments, and segments whose entries are all
    ``-inf``, give ``-inf``. ``log_values`` has shape ``(nnz, ...)``.
    """
    (log_values,) = as_inexact(log_values)
    top = jax.ops.segment_max(log_values, segment_ids, num_segments=num_segments)
    # Empty or all -inf segments have top = -inf; shifting by it would make nan instead of -inf.
    top = jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0))
    total = segment_sum(jnp.exp(log_values - top[segment_ids]), segment_ids, num_segments)
    return jnp.log(total) + top


@functools.partial(jax.jit, static_argnames="nnz")
def csr_row_ids(indptr, nnz: int) -> jax.Array:
    r"""Expand a CSR row pointer to the row index of every entry.

    Entry :math:`e` lies in row :math:`i` iff ``indptr[i] <= e < indptr[i + 1]``, so row
    :math:`i` is repeated ``indptr[i + 1] - indptr[i]`` times (0 for an empty row). ``nnz``
    (``= indptr[-1]``) is static so that the result has a known length under ``jit``. Returns
    int32 ids of shape ``(nnz,)``.
    """
    indptr = jnp.asarray(indptr)
    n_rows = indptr.shape[0] - 1
    return jnp.repeat(
        jnp.arange(n_rows, dtype=jnp.int32), jnp.diff(indptr), total_repeat_length=nnz
    )


def from_scipy(matrix, dtype=None) -> SparseCOO:
    """Convert a scipy.sparse matrix or array (CSR, CSC, COO, ...) to :class:`SparseCOO`.

    Host-side boundary function (not traceable): the entries are those of ``matrix.tocoo()``,
    kept as stored, so duplicate entries stay separate and sum in every reduction, as in scipy.
    ``dtype`` overrides the value dtype (default: that of ``matrix.data``, subject to JAX's
    x64 setting). scipy is imported here only, so the rest of the module does not need it.
    """
    import scipy.sparse

    if not scipy.sparse.issparse(matrix):
        raise TypeError(f"expected a scipy.sparse matrix or array, got {type(matrix).__name__}")
    coo = matrix.tocoo()
    shape = tuple(int(s) for s in coo.shape)
    index_dtype = _index_dtype(shape)
    return SparseCOO(
        rows=jnp.asarray(np.asarray(coo.row, dtype=index_dtype)),
        cols=jnp.asarray(np.asarray(coo.col, dtype=index_dtype)),
        values=jnp.asarray(coo.data, dtype=dtype),
        shape=shape,
    )


def from_dense(dense, nnz: int | None = None) -> SparseCOO:
    """Convert a dense 2-D array to :class:`SparseCOO`, keeping its nonzero entries (row-major).

    With ``nnz=None`` the number of nonzeros is read on the host, so ``dense`` must be concrete.
    With a static ``nnz`` the conversion is traceable: the first ``nnz`` nonzeros are kept and,
    if there are fewer, the list is padded with explicit zeros at ``(0, 0)``, which change no
    reduction. Nonzeros beyond ``nnz`` are dropped.
    """
    if nnz is None:
        host = np.asarray(dense)
        if host.ndim != 2:
            raise ValueError(f"expected a 2-D array, got shape {host.shape}")
        index_dtype = _index_dtype(host.shape)
        rows, cols = np.nonzero(host)
        return SparseCOO(
            rows=jnp.asarray(rows.astype(index_dtype)),
            cols=jnp.asarray(cols.astype(index_dtype)),
            values=jnp.asarray(host[rows, cols]),
            shape=host.shape,
        )
    dense = jnp.asarray(dense)
    if dense.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {dense.shape}")
    rows, cols = jnp.nonzero(dense, size=nnz, fill_value=0)
    is_entry = jnp.arange(nnz) < jnp.count_nonzero(dense)
    values = jnp.where(is_entry, dense[rows, cols], 0)
    index_dtype = _index_dtype(dense.shape)
    return SparseCOO(rows.astype(index_dtype), cols.astype(index_dtype), values, dense.shape)


@jax.jit
def to_dense(matrix: SparseCOO) -> jax.Array:
    r"""Return the dense array :math:`A_{ij} = \sum_{e : (r_e, c_e) = (i, j)} a_e`."""
    out = jnp.zeros(matrix.shape + matrix.values.shape[1:], matrix.values.dtype)
    return out.at[matrix.rows, matrix.cols].add(matrix.values)


@jax.jit
def transpose(matrix: SparseCOO) -> SparseCOO:
    r"""Return :math:`A^\top` (rows and columns swapped; no data moves)."""
    return SparseCOO(matrix.cols, matrix.rows, matrix.values, matrix.shape[::-1])


@jax.jit
def matvec(matrix: SparseCOO, x) -> jax.Array:
    r"""Return :math:`(A x)_i = \sum_{e : r_e = i} a_e x_{c_e}`, shape ``(n_rows,)``."""
    values, x = as_inexact(matrix.values, x)
    return segment_sum(values * x[matrix.cols], matrix.rows, matrix.shape[0])


@jax.jit
def rmatvec(matrix: SparseCOO, y) -> jax.Array:
    r"""Return :math:`(A^\top y)_j = \sum_{e : c_e = j} a_e y_{r_e}`, shape ``(n_cols,)``."""
    values, y = as_inexact(matrix.values, y)
    return segment_sum(values * y[matrix.rows], matrix.cols, matrix.shape[1])


@jax.jit
def matmat(matrix: SparseCOO, dense) -> jax.Array:
    r"""Return :math:`(A B)_{il} = \sum_{e : r_e = i} a_e B_{c_e l}` for dense ``B (n_cols, k)``.

    Gathers ``nnz`` rows of ``B``, so memory is :math:`O(\mathrm{nnz}\, k)`. Result
    ``(n_rows, k)``.
    """
    values, dense = as_inexact(matrix.values, dense)
    return segment_sum(values[:, None] * dense[matrix.cols], matrix.rows, matrix.shape[0])


@jax.jit
def rmatmat(matrix: SparseCOO, dense) -> jax.Array:
    r"""Return :math:`(A^\top C)_{jl} = \sum_{e : c_e = j} a_e C_{r_e l}` for dense ``C``.

    ``C`` has shape ``(n_rows, k)``; the result ``(n_cols, k)``.
    """
    return matmat(transpose(matrix), dense)


@jax.jit
def row_sums(matrix: SparseCOO) -> jax.Array:
    r"""Return :math:`\sum_j A_{ij}` for every row, shape ``(n_rows,)`` (0 for empty rows)."""
    return segment_sum(matrix.values, matrix.rows, matrix.shape[0])


@jax.jit
def col_sums(matrix: SparseCOO) -> jax.Array:
    r"""Return :math:`\sum_i A_{ij}` for every column, shape ``(n_cols,)`` (0 for empty ones)."""
    return segment_sum(matrix.values, matrix.cols, matrix.shape[1])
