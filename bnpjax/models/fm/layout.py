"""The layout engine of the FM sampler: designs as colour blocks and relation chunks.

Two features that never share a row of the design are conditionally independent given the
rest, so every feature of such a set can be drawn at once (Rendle 2012; the Gibbs sweep in
:mod:`bnpjax.models.fm.gibbs`). :func:`colour_features` finds these sets by a DSatur
colouring of the co-occurrence graph (Brelaz 1979); :func:`colour_blocks` stores each colour
as one entry per covered row with degree buckets for the per-feature sums; relation blocks
(Rendle 2013; myFM's ``RelationBlock``) are validated and cut into chunks of conditionally
independent features by :func:`relation_design`. Everything here runs on the host, once per
data set.

References
----------
Brelaz, D. (1979). New methods to color the vertices of a graph. Communications of the
ACM 22(4), 251-256.

Rendle, S. (2013). Scaling factorization machines to relational data. PVLDB 6(5), 337-348.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import check_dtype_range, check_real_array
from bnpjax.ops._dtypes import device_array

__all__ = [
    "SEGMENT_WIDTH",
    "SEGMENT_WIDTHS",
    "FMBlock",
    "FMChunks",
    "FMRelation",
    "RelationBlock",
    "bucket_size",
    "colour_blocks",
    "colour_features",
    "relation_design",
    "relation_widths",
    "to_coo",
]


class FMBlock(NamedTuple):
    """One colour: features that never share a row. ``rows`` (nnz_c,) sorted row ids (all
    rows, in order, when the colour covers every row), ``local`` (nnz_c,) the entry's feature
    as a position in ``features``, ``values`` (nnz_c,), ``features`` (p_c,) global ids ordered
    by decreasing number of entries. ``buckets``: the entries of each feature for the
    per-feature sums, as index matrices (features of similar degree padded to a common width
    with the index ``nnz_c``, a zero entry); their rows follow ``features`` in order.

    Bucketed (``segment_feature`` given, :func:`colour_blocks` with ``bucket_shapes``): the
    sizes are padded to :func:`bucket_size` so that similar designs share the compiled
    programs. ``features`` ends with out-of-range ids ``p`` (reads fill, writes drop),
    ``rows`` with out-of-range rows ``n, n + 1, ...`` of value 0 (unless the colour covers
    every row), and ``buckets`` holds each feature's entries cut into segments (padding: the
    zero entry), one index matrix (S_w, w) per width w of ``SEGMENT_WIDTHS`` that some
    feature fills (the narrowest always): the whole pieces of width w of what is left of
    each feature's entries after the wider widths;
    ``segment_feature`` holds, for each of them, the position of each segment's feature
    (padding: ``len(features)``, dropped by the sum)."""

    rows: jax.Array
    local: jax.Array
    values: jax.Array
    features: jax.Array
    buckets: tuple[jax.Array, ...]
    segment_feature: tuple[jax.Array, ...] | None = None


class RelationBlock(NamedTuple):
    """myFM's relation block: row ``d`` of the design continues with row
    ``original_to_block[d]`` of ``data`` (``scipy.sparse`` or dense, one row per entity)."""

    original_to_block: np.ndarray
    data: object


class FMChunks(NamedTuple):
    """Chunks of one width: ``rows`` (C, P) block rows of the entries (padding: the extra
    block row ``B``), ``slot`` (C, P) the entry's feature within its chunk (padding: ``F``),
    ``values`` (C, P) (padding: 0), ``features`` (C, F) global feature ids (padding: ``p``,
    out of range, so that writes to it are dropped)."""

    rows: jax.Array
    slot: jax.Array
    values: jax.Array
    features: jax.Array


class FMRelation(NamedTuple):
    """A relation block laid out for the sweep (Rendle 2013). ``index`` (n,) block row of
    each design row; ``counts`` (B + 1,) design rows per block row (0 for the padding row);
    ``rows``, ``cols``, ``values``: the block's entries (cols as global feature ids);
    ``chunks``: the entries again, cut into chunks of conditionally independent features."""

    index: jax.Array
    counts: jax.Array
    rows: jax.Array
    cols: jax.Array
    values: jax.Array
    chunks: tuple[FMChunks, ...]


def to_coo(X, name: str = "X", *, allow_no_columns: bool = False):
    """Validate a design matrix (``scipy.sparse`` of any format or a dense 2-D array) and
    return its nonzero entries ``(rows, cols, values, shape)`` in row-major order. A design
    with no columns is allowed when relation blocks carry all the features."""
    import scipy.sparse as sp

    if sp.issparse(X):
        if X.dtype.kind not in "biuf":
            raise ValueError(f"{name} must hold real numbers, got a sparse matrix of {X.dtype}")
        X = sp.csr_matrix(X, dtype=float)
        X.sum_duplicates()
        X.eliminate_zeros()
        shape = X.shape
        values = np.asarray(X.data, float)
        cols = np.asarray(X.indices, np.int64)
        rows = np.repeat(np.arange(shape[0]), np.diff(X.indptr))
    else:
        dense = check_real_array(X, name)
        if dense.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {dense.shape}")
        shape = dense.shape
        rows, cols = np.nonzero(dense)
        values = dense[rows, cols]
        if not np.all(np.isfinite(dense)):
            raise ValueError(f"{name} contains NaN or infinite values")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if shape[0] == 0 or (shape[1] == 0 and not allow_no_columns):
        raise ValueError(f"{name} is empty (shape {shape})")
    check_dtype_range(values, name)
    if values.size == 0 and not allow_no_columns:
        raise ValueError(
            f"{name} has no nonzero entry (shape {shape}): the factorization machine has no "
            "feature to fit"
        )
    return rows.astype(np.int64), cols.astype(np.int64), values, shape


def colour_features(rows, cols, num_rows: int, num_features: int) -> np.ndarray:
    """Colour the co-occurrence graph of the features (an edge joins two features that are
    nonzero in a common row) so that no two features of one colour share a row. DSatur
    (Brelaz 1979): repeatedly colour the feature whose neighbours already use the most
    distinct colours (ties: highest degree) with the smallest free colour. DSatur is exact on
    bipartite graphs, so a user x item one-hot design gets two colours; plain greedy by degree
    need not. Returns the colour of each feature (features in no row get colour 0)."""
    import heapq

    import scipy.sparse as sp

    pattern = sp.csr_matrix(
        (np.ones(len(rows), np.float32), (rows, cols)), shape=(num_rows, num_features)
    )
    pattern.data[:] = 1.0
    graph = (pattern.T @ pattern).tocsr()
    graph.setdiag(0)
    graph.eliminate_zeros()
    indptr, indices = graph.indptr, graph.indices
    degree = np.diff(indptr)
    two = _two_colours_as_dsatur(graph, degree)
    if two is not None:
        return two
    colour = np.full(num_features, -1, np.int64)
    saturation: dict[int, set] = {}
    heap = [(0, -int(d), int(i)) for i, d in enumerate(degree)]
    heapq.heapify(heap)
    while heap:
        neg_sat, _, i = heapq.heappop(heap)
        used = saturation.get(i, set())
        if colour[i] >= 0 or -neg_sat != len(used):
            continue  # stale entry
        c = 0
        while c in used:
            c += 1
        colour[i] = c
        saturation.pop(i, None)
        for j in indices[indptr[i] : indptr[i + 1]]:
            if colour[j] < 0:
                seen = saturation.setdefault(int(j), set())
                if c not in seen:
                    seen.add(c)
                    heapq.heappush(heap, (-len(seen), -int(degree[j]), int(j)))
    return colour


#: components searched level by level in NumPy before the rest go to ``scipy.sparse.csgraph``
#: (each search costs tens of microseconds of NumPy calls; many tiny components are faster
#: in compiled code, whose import is then the smaller cost)
NUMPY_SEARCHES = 256


def _distances_from_starts(graph, degree) -> np.ndarray:
    """Each feature's distance from its component's start, the component's feature of highest
    degree (the smallest index among ties). Breadth-first searches over whole levels at a
    time in NumPy, rather than ``scipy.sparse.csgraph``, whose import (it loads
    ``scipy.sparse.linalg``) took 0.09 s of a fresh process's first FM fit, longer than the
    searches; past ``NUMPY_SEARCHES`` components, csgraph. Features in no row are their own
    components, at distance 0."""
    indptr, indices = graph.indptr, graph.indices
    num = degree.size
    order = np.lexsort((np.arange(num), -degree))
    distance = np.where(degree == 0, 0, -1)
    position = 0
    for _ in range(NUMPY_SEARCHES):  # a search per component, from its first in the order
        while position < num and distance[order[position]] >= 0:
            position += 1
        if position == num:
            return distance
        frontier = order[position : position + 1]
        distance[frontier] = 0
        level = 0
        while frontier.size:
            level += 1
            begin = indptr[frontier]
            counts = indptr[frontier + 1] - begin
            # the positions in ``indices`` of every frontier feature's neighbours
            first = np.repeat(begin - (np.cumsum(counts) - counts), counts)
            neighbours = indices[first + np.arange(first.size)]
            frontier = np.unique(neighbours[distance[neighbours] < 0])
            distance[frontier] = level
    from scipy.sparse import csgraph

    _, component = csgraph.connected_components(graph, directed=False)
    _, first_position = np.unique(component[order], return_index=True)
    starts = order[first_position]
    found = csgraph.dijkstra(graph, unweighted=True, indices=starts, min_only=True)
    return found.astype(np.int64)


def _two_colours_as_dsatur(graph, degree) -> np.ndarray | None:
    """DSatur's colouring when the graph is bipartite (a user x item design, the usual case),
    without its loop over features (0.07 of the 0.12 s that ``make_data`` took on ML-100K):
    DSatur colours a component completely before it starts the next, starting each with its
    uncoloured feature of highest degree (the smallest index among ties) in colour 0, and on
    a bipartite component it then gives every feature the parity of its distance from that
    start. So: the components' starts, the distances from them (breadth-first searches), their
    parities, and None (DSatur's loop decides) when an edge joins two of one parity."""
    distance = _distances_from_starts(graph, degree)
    colour = distance % 2
    rows = np.repeat(np.arange(degree.size), degree)
    if np.any(colour[rows] == colour[graph.indices]):
        return None
    return colour


#: entries per segment of a bucketed colour's per-feature sums (:func:`colour_blocks`)
SEGMENT_WIDTH = 16
#: the widths of a bucketed colour's segments, widest first (:func:`colour_blocks`)
SEGMENT_WIDTHS = (128, SEGMENT_WIDTH)


def bucket_size(m: int, low: int = 8) -> int:
    """The smallest size ``>= m`` (and ``>= low``) of the form ``a 2^e``, ``a`` in 4..7: a
    geometric set with steps of at most 25 %, so that data of similar size share a size."""
    m = max(int(m), int(low), 1)
    if m <= 4:
        return m
    e = (m - 1).bit_length() - 3  # 2^(e+2) < m <= 2^(e+3)
    return -(-m // (1 << e)) << e


def colour_blocks(
    rows, cols, values, num_rows: int, num_features: int, *, bucket_shapes: bool = False,
    total_features: int | None = None,
) -> tuple[FMBlock, ...]:  # fmt: skip
    """Lay out the COO design ``(rows, cols, values)`` (``num_rows`` x ``num_features``) as
    colour blocks: the features of a colour never share a row (:func:`colour_features`), so
    a colour is one entry per covered row, its features ordered by decreasing degree, with
    the degree buckets of its per-feature sums.

    With ``bucket_shapes`` every data-dependent size of a colour is padded to
    :func:`bucket_size` (its features, its entries unless it covers every row, and the
    segments of ``SEGMENT_WIDTHS`` entries that replace the degree buckets), so that another
    fold or a grown data set of similar size reuses the compiled sweep. Padding contributes
    exact zeros: padded entries have value 0 and rows out of range, padded segments point to
    a zero entry, padded features have out-of-range ids; only the summation order of the
    per-feature sums differs from the unpadded layout.

    Parameters
    ----------
    rows, cols, values : numpy.ndarray
        the design's nonzero entries, as :func:`to_coo` returns them.
    num_rows, num_features : int
        the shape of the design.
    bucket_shapes : bool
        pad the sizes to the geometric set of :func:`bucket_size` (see above).
    total_features : int, optional
        the number of features with those of the relation blocks (default
        ``num_features``): the id of the padding features, out of range of every feature.

    Returns
    -------
    tuple of FMBlock
        one block per colour.
    """
    n, p = num_rows, num_features
    blocks = []
    dtype = jnp.result_type(float)
    colour = colour_features(rows, cols, n, p) if p else np.zeros(0, np.int64)
    entry_colour = colour[cols]
    for c in range(int(colour.max(initial=-1)) + 1):
        take = entry_colour == c
        r, f, v = rows[take], cols[take], values[take]
        order = np.argsort(r, kind="stable")
        r, f, v = r[order], f[order], v[order]
        if len(r) == n:  # covers every row: kept dense, in row order (see _add_rows)
            assert np.array_equal(r, np.arange(n))
        features = np.flatnonzero(colour == c)
        degree = np.bincount(f, minlength=p)[features]
        by_degree = np.argsort(-degree, kind="stable")
        features, degree = features[by_degree], degree[by_degree]
        position = np.full(p, -1, np.int64)
        position[features] = np.arange(len(features))
        local = position[f]
        if bucket_shapes:
            pad_id = p if total_features is None else int(total_features)
            blocks.append(_bucketed_block(r, local, v, features, degree, n, pad_id, dtype))
            continue
        blocks.append(
            FMBlock(
                rows=device_array(r, jnp.int32),
                local=device_array(local, jnp.int32),
                values=device_array(v, dtype),
                features=device_array(features, jnp.int32),
                buckets=_degree_buckets(local, degree),
            )
        )
    return tuple(blocks)


def _segments(entries, degree, width, num_features, num_entries):
    """Each feature's ``entries`` (grouped by feature, ``degree`` each) cut into segments of
    ``width``, as an index matrix (S, ``width``) padded with the zero entry ``num_entries``,
    and each segment's feature (padding segments: ``num_features``); S padded to
    :func:`bucket_size`."""
    pieces = -(-degree // width)  # segments per feature (none for a feature without entries)
    total = int(pieces.sum())
    S = bucket_size(total)
    owner = np.repeat(np.arange(len(degree)), pieces)
    first = np.concatenate([[0], np.cumsum(degree)[:-1]])[owner]  # the feature's first entry
    piece = np.arange(total) - np.concatenate([[0], np.cumsum(pieces)[:-1]])[owner]
    offset = piece[:, None] * width + np.arange(width)[None, :]
    valid = offset < degree[owner][:, None]
    position = np.minimum(first[:, None] + offset, max(len(entries) - 1, 0))
    index = np.full((S, width), num_entries, np.int64)
    index[:total] = np.where(valid, entries[position] if len(entries) else 0, num_entries)
    owner = np.concatenate([owner, np.full(S - total, num_features)])
    return device_array(index, jnp.int32), device_array(owner, jnp.int32)


def _bucketed_block(rows, local, values, features, degree, n, p, dtype) -> FMBlock:
    """One colour with its sizes padded to :func:`bucket_size` (:class:`FMBlock`)."""
    nnz = len(rows)
    if nnz != n:  # padding rows n, n + 1, ...: distinct, sorted, out of range (writes drop)
        pad = bucket_size(nnz) - nnz
        rows = np.concatenate([rows, n + np.arange(pad)])
        local = np.concatenate([local, np.zeros(pad, np.int64)])
        values = np.concatenate([values, np.zeros(pad)])
    num = bucket_size(len(features))
    padded_features = np.concatenate([features, np.full(num - len(features), p)])
    entries = np.argsort(local[:nnz], kind="stable")  # real entries by feature
    starts = np.concatenate([[0], np.cumsum(degree)])
    # each feature's entries in whole pieces of the widest width first, what is left in
    # narrower ones: the padding stays under the narrowest width per feature, and the many
    # entries of frequent features are summed in wide segments, whose per-segment sums (one
    # (D + 1)^2 matrix each) are fewer (SEGMENT_WIDTHS)
    offset = np.arange(nnz) - np.repeat(starts[:-1], degree)  # an entry's place in its feature
    buckets, owners, done = [], [], np.zeros_like(degree)
    for width in SEGMENT_WIDTHS:
        # the whole pieces of this width that are left of each feature (all that is left,
        # at the narrowest width)
        take = degree - done if width == SEGMENT_WIDTHS[-1] else (degree - done) // width * width
        if width != SEGMENT_WIDTHS[-1] and not take.any():
            continue
        start = np.repeat(done, degree)
        tier = (offset >= start) & (offset < start + np.repeat(take, degree))
        index, owner = _segments(entries[tier], take, width, num, len(rows))
        buckets.append(index)
        owners.append(owner)
        done = done + take
    return FMBlock(
        rows=device_array(rows, jnp.int32),
        local=device_array(local, jnp.int32),
        values=device_array(values, dtype),
        features=device_array(padded_features, jnp.int32),
        buckets=tuple(buckets),
        segment_feature=tuple(owners),
    )


def _degree_buckets(local: np.ndarray, degree: np.ndarray) -> tuple[jax.Array, ...]:
    """Index matrices of each feature's entries (features in order, degrees decreasing),
    grouped so that a bucket's width is below twice its smallest degree: padding costs less
    than a factor 2, and per-feature sums become dense reductions instead of scatters."""
    nnz = len(local)
    entries = np.argsort(local, kind="stable")
    starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
    buckets, first = [], 0
    while first < len(degree):
        width = max(int(degree[first]), 1)
        last = first
        while last < len(degree) and 2 * max(int(degree[last]), 1) > width:
            last += 1
        offsets = np.arange(width)[None, :]
        position = starts[first:last, None] + offsets
        valid = offsets < degree[first:last, None]
        index = np.where(valid, entries[np.minimum(position, max(nnz - 1, 0))], nnz)
        buckets.append(device_array(index, jnp.int32))
        first = last
    return tuple(buckets)


def _relation_entries(block, num_rows: int, position: int, *, offset: int):
    """Validate one relation block; returns its index, entries and shape."""
    name = f"X_rel[{position}]"
    if isinstance(block, tuple) and len(block) == 2:
        block = RelationBlock(*block)
    index = getattr(block, "original_to_block", None)
    matrix = getattr(block, "data", None)
    if index is None or matrix is None:
        raise ValueError(f"{name} must be a RelationBlock(original_to_block, data)")
    rows, cols, values, (num_block_rows, width) = to_coo(matrix, f"{name}.data")
    index = np.asarray(index)
    if index.shape != (num_rows,):
        raise ValueError(
            f"{name}.original_to_block must have one entry per row of X ({num_rows}), "
            f"got shape {index.shape}"
        )
    if index.size and (
        not np.issubdtype(index.dtype, np.integer)
        or index.min() < 0
        or index.max() >= num_block_rows
    ):
        raise ValueError(
            f"{name}.original_to_block must hold integer row numbers of {name}.data "
            f"(0..{num_block_rows - 1})"
        )
    return index.astype(np.int64), rows, cols + offset, values, num_block_rows, width


def _pack_chunks(rows, cols, values, num_block_rows, offset, width, num_features, dtype):
    """Cut a relation block's features into chunks of conditionally independent features
    (any subset of a colour is one): colour them by shared block rows, split each colour
    greedily (features by decreasing degree) into chunks of at most
    ``max(largest degree, 16)`` entries and 64 features, and pad the chunks to power-of-two
    sizes, one ``FMChunks`` per (entries, features) size."""
    local = cols - offset
    colour = colour_features(rows, local, num_block_rows, width)
    degree = np.bincount(local, minlength=width)
    by_feature = np.argsort(local, kind="stable")
    starts = np.concatenate([[0], np.cumsum(degree)])
    capacity, max_features = max(int(degree.max(initial=0)), 16), 64
    chunks, current, size = [], [], 0
    for c in range(int(colour.max(initial=0)) + 1):
        members = np.flatnonzero(colour == c)
        for f in members[np.argsort(-degree[members], kind="stable")]:
            cost = max(int(degree[f]), 1)
            if current and (size + cost > capacity or len(current) == max_features):
                chunks.append(current)
                current, size = [], 0
            current.append(int(f))
            size += cost
        if current:
            chunks.append(current)
            current, size = [], 0

    def power_of_two(m, low):
        return max(low, 1 << max(m - 1, 0).bit_length())

    by_shape: dict[tuple[int, int], list] = {}
    for chunk in chunks:
        entries = int(sum(degree[f] for f in chunk))
        # two feature widths only: every distinct shape is one more scan to compile
        shape = (power_of_two(entries, 8), 4 if len(chunk) <= 4 else max_features)
        by_shape.setdefault(shape, []).append(chunk)
    out = []
    for P, F in sorted(by_shape, reverse=True):
        group = by_shape[P, F]
        # fewer slots than entries would be wasted, but a chunk may hold more features than
        # entries: a column with no entry in the block (an item nobody rated) is a feature
        F = min(F, max(P, max(len(chunk) for chunk in group)))
        r = np.full((len(group), P), num_block_rows, np.int64)
        slot = np.full((len(group), P), F, np.int64)
        v = np.zeros((len(group), P))
        ids = np.full((len(group), F), num_features, np.int64)
        for m, chunk in enumerate(group):
            ids[m, : len(chunk)] = np.asarray(chunk) + offset
            fill = 0
            for k, f in enumerate(chunk):
                take = by_feature[starts[f] : starts[f + 1]]
                r[m, fill : fill + len(take)] = rows[take]
                slot[m, fill : fill + len(take)] = k
                v[m, fill : fill + len(take)] = values[take]
                fill += len(take)
        out.append(
            FMChunks(
                rows=device_array(r, jnp.int32),
                slot=device_array(slot, jnp.int32),
                values=device_array(v, dtype),
                features=device_array(ids, jnp.int32),
            )
        )
    return tuple(out)


def relation_design(
    block, num_rows: int, *, offset: int, position: int = 0, num_features: int | None = None
) -> FMRelation:
    """Validate a relation block and lay it out for prediction (``chunks`` empty), or for the
    sweep when ``num_features`` (the total number of features) is given."""
    index, rows, cols, values, num_block_rows, width = _relation_entries(
        block, num_rows, position, offset=offset
    )
    dtype = jnp.result_type(float)
    chunks = ()
    if num_features is not None:
        chunks = _pack_chunks(
            rows, cols, values, num_block_rows, offset, width, num_features, dtype
        )
    counts = np.bincount(index, minlength=num_block_rows + 1).astype(float)
    return FMRelation(
        index=device_array(index, jnp.int32),
        counts=device_array(counts, dtype),
        rows=device_array(rows, jnp.int32),
        cols=device_array(cols, jnp.int32),
        values=device_array(values, dtype),
        chunks=chunks,
    )


def relation_widths(X_rel) -> list[int]:
    """Number of columns of each relation block (its features follow those of ``X``)."""
    widths = []
    for position, block in enumerate(X_rel):
        matrix = block[1] if isinstance(block, tuple) else getattr(block, "data", None)
        if matrix is None or len(np.shape(matrix)) != 2:
            raise ValueError(f"X_rel[{position}] must be a RelationBlock(original_to_block, data)")
        widths.append(int(np.shape(matrix)[1]))
    return widths
