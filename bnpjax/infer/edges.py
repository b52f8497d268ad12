"""Sparse networks as edge lists: validation and conversion from ``scipy.sparse`` matrices.

Model-free helpers shared by the network loaders (:mod:`bnpjax.datasets`) and the
relational models' ``make_network``: nothing here builds an ``N x N`` array, so memory stays
``O(E)`` for ``E`` edges (10^7 edges and 10^6 nodes fit in a few hundred MB).
"""

from __future__ import annotations

import numpy as np

from bnpjax.infer.checks import check_dtype_range

__all__ = ["check_edge_list", "edges_from_sparse", "is_sparse_matrix", "numeric_vector"]


def is_sparse_matrix(value) -> bool:
    """Whether ``value`` is a ``scipy.sparse`` matrix or array (scipy is imported lazily)."""
    if not hasattr(value, "tocoo"):
        return False
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - scipy is a dependency
        return False
    return sp.issparse(value)


def numeric_vector(name, value, n=None):
    """``value`` as a finite one-dimensional numeric NumPy array (of length ``n`` when
    given), in range for the run's dtype, or ValueError naming ``name``."""
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name} must have length {n}, got {arr.shape[0]}")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be numeric")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (no NaN/inf)")
    check_dtype_range(arr, name)
    return arr


def check_edge_list(
    num_nodes: int,
    src,
    dst,
    weight=None,
    *,
    directed: bool,
    names: tuple[str, str, str] = ("src", "dst", "weight"),
    allow_zero: bool = True,
):
    """Validate an edge list and return it canonical: int64 ``(src, dst, weight)``, undirected
    pairs as ``(min, max)``.

    Parameters
    ----------
    num_nodes : int
        Node ids must lie in ``0..num_nodes - 1``.
    src, dst : array of int
    weight : array of int, optional
        Non-negative integer counts (default 1).
    directed : bool
        Whether ``(i, j)`` and ``(j, i)`` are different pairs.
    names : tuple of str
        The argument names used in error messages.
    allow_zero : bool
        Whether a listed pair may carry the count 0 (an explicit observed non-link).

    Returns
    -------
    tuple of numpy arrays
        ``src``, ``dst`` (int64) and ``weight`` (int64).

    Raises
    ------
    ValueError
        Naming the argument: ids out of range or not integers, self-loops, negative or
        non-integer counts, duplicate pairs (for undirected data ``i-j`` and ``j-i``).
    """
    n_src, n_dst, n_w = names
    src = numeric_vector(n_src, src)
    dst = numeric_vector(n_dst, dst, src.shape[0])
    for name, ids in ((n_src, src), (n_dst, dst)):
        if np.any(ids < 0) or np.any(ids >= num_nodes) or np.any(ids != np.round(ids)):
            raise ValueError(f"{name} holds node ids outside 0..{num_nodes - 1} or non-integers")
    src, dst = src.astype(np.int64), dst.astype(np.int64)
    if weight is None:
        w = np.ones(src.shape[0], np.int64)
    else:
        w = numeric_vector(n_w, weight, src.shape[0])
        if np.any(w < 0) or (not allow_zero and np.any(w == 0)):
            what = "non-negative" if allow_zero else "positive"
            raise ValueError(f"{n_w} must be {what} counts")
        if np.any(w != np.round(w)):
            raise ValueError(f"{n_w} must be integer counts (round real weights first)")
        w = w.astype(np.int64)
    if np.any(src == dst):
        raise ValueError(
            f"{n_src}/{n_dst}: self-loops are excluded from the model; drop them first"
        )
    if not directed:
        src, dst = np.minimum(src, dst), np.maximum(src, dst)
    keys = src * np.int64(num_nodes) + dst
    if keys.shape[0] > 1:
        ordered = np.sort(keys)
        if np.any(ordered[1:] == ordered[:-1]):
            raise ValueError(f"{n_src}/{n_dst}: duplicate pairs (for undirected data, i-j and j-i)")
    return src, dst, w


def edges_from_sparse(matrix, *, directed: bool | None = None, name: str = "matrix"):
    """The edge list of a square ``scipy.sparse`` count matrix, without densifying it.

    Stored zeros are dropped (an unlisted pair is a zero anyway). Undirected data must be
    symmetric (the upper triangle is read) or hold each pair once, in either triangle.

    Parameters
    ----------
    matrix : scipy.sparse matrix or array of shape (N, N)
    directed : bool, optional
        Default: directed unless ``matrix`` is symmetric.
    name : str
        The argument name used in error messages.

    Returns
    -------
    tuple
        ``(num_nodes, src, dst, weight, directed)``, the arrays int64 and validated by
        :func:`check_edge_list` (undirected pairs as ``(min, max)``).
    """
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.shape[0] < 2:
        raise ValueError(f"{name} must be a square (N, N) matrix with N >= 2, got {matrix.shape}")
    N = int(matrix.shape[0])
    coo = matrix.tocoo()
    row = np.asarray(coo.row, np.int64)
    col = np.asarray(coo.col, np.int64)
    data = np.asarray(coo.data)
    if data.dtype == bool or not np.issubdtype(data.dtype, np.number):
        raise ValueError(f"{name} must hold numeric counts")
    keys = row * N + col
    if keys.shape[0] > 1 and np.unique(keys).shape[0] != keys.shape[0]:
        raise ValueError(f"{name} holds duplicate entries (a COO matrix with repeated pairs)")
    nonzero = data != 0
    row, col, data = row[nonzero], col[nonzero], data[nonzero]
    if directed is not True:
        forward = np.argsort(row * N + col)
        backward = np.argsort(col * N + row)
        symmetric = np.array_equal(row[forward], col[backward]) and np.array_equal(
            col[forward], row[backward]
        )
        symmetric = symmetric and np.array_equal(data[forward], data[backward])
        if directed is None:
            directed = not symmetric
        if not directed and symmetric:  # read the upper triangle
            upper = row < col
            row, col, data = row[upper], col[upper], data[upper]
    src, dst, w = check_edge_list(
        N, row, col, data, directed=bool(directed), names=(f"{name} rows", f"{name} columns", name)
    )
    return N, src, dst, w, bool(directed)
