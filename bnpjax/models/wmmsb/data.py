"""Data and hyperparameters of the WMMSB: :class:`WMMSBData` (the observed pairs of a network),
:class:`WMMSBHyper`, and their constructors :func:`make_network` (edge lists),
:func:`make_data` (dense count matrices) and :func:`make_hyper`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import concrete_or_none
from bnpjax.infer.checks import (
    check_dtype_range,
    check_flag,
    check_integer,
    check_real_array,
    renamed_arguments,
)
from bnpjax.infer.edges import (
    check_edge_list,
    edges_from_sparse,
    is_sparse_matrix,
    numeric_vector,
)
from bnpjax.ops._dtypes import device_array

__all__ = [
    "LIKELIHOODS",
    "WMMSBData",
    "WMMSBHyper",
    "hash_uniform",
    "make_data",
    "make_hyper",
    "make_network",
    "pair_keys",
    "pair_uniform",
]

#: The observation models: "nb" (WMMSB, Gamma-Poisson blocks with fixed ``r``, ``p``), "bg"
#: (WMMSB-bg, Beta-Gamma priors on the block's ``r`` and ``p``), "bernoulli" (the MMSB).
LIKELIHOODS = ("nb", "bg", "bernoulli")


class WMMSBData(NamedTuple):
    """Observed pairs of a network (all arrays; ``num_nodes = degree.shape[0]`` is static).

    Explicit pairs (``src``, ``dst``, ``y``, ``w``): the links and any pair given with its
    value (Geweke data hold every pair here). Implicit zeros (``zsrc``, ``zdst``, ``zw``): the
    observed non-links, enumerated only when the network is small enough (full-batch
    methods); stochastic CVB0 draws them on the fly instead: a pair is an observed zero iff it
    is not special (an explicit or an unobserved pair, listed by ``special_ptr`` /
    ``special_dst`` as CSR rows, undirected pairs as ``(min, max)``) and
    ``pair_uniform(i, j, N, hash_seed) < keep``. Without listed or dense zeros every
    array is of size ``O(N + E)`` (``E`` explicit plus unobserved pairs). ``w`` is 1 for a
    real pair and 0 for padding.
    ``adj_ptr``/``adj`` list the explicit pairs of each node (CSR), ``max_degree`` padded.
    """

    degree: jax.Array  # (N,) explicit pairs per node (float)
    src: jax.Array
    dst: jax.Array
    y: jax.Array
    w: jax.Array
    zsrc: jax.Array
    zdst: jax.Array
    zw: jax.Array
    adj_ptr: jax.Array  # (N + 1,) int32
    adj: jax.Array  # (2 P,) int32 explicit pair ids, grouped by node
    special_ptr: jax.Array  # (N + 1,) int32: special pairs (i, .) in special_dst[ptr[i]:ptr[i+1]]
    special_dst: jax.Array  # (M,) int32 sorted within each row
    keep: jax.Array  # () float
    hash_seed: jax.Array  # () uint32
    directed: jax.Array  # () bool
    num_zeros: jax.Array  # () float, number of observed implicit zeros (exact or estimated)

    #: the pairs split over devices (:mod:`bnpjax.infer.sharding`): CVB0 updates every
    #: pair's responsibilities from the previous step's counts, which are sums over pairs
    sharded_axes = (
        ("src", 0), ("dst", 0), ("y", 0), ("w", 0), ("zsrc", 0), ("zdst", 0), ("zw", 0)
    )  # fmt: skip
    zmask: jax.Array  # (N, N) 1.0 at observed zeros (zeros="dense"), else (0, 0)


class WMMSBHyper(NamedTuple):
    """``alpha`` (rank,) Dirichlet; ``r``, ``p`` (nb: NB(r, p) prior predictive; bernoulli: the
    Beta(a = r, b = p) prior); ``r0``, ``c0``, ``c``, ``eps`` (bg priors)."""

    alpha: jax.Array
    r: jax.Array
    p: jax.Array
    r0: jax.Array
    c0: jax.Array
    c: jax.Array
    eps: jax.Array


@renamed_arguments(K="rank")
def make_hyper(
    rank: int,
    *,
    likelihood: str = "nb",
    alpha=None,
    r: float | None = None,
    p: float | None = None,
    r0: float = 1.0,
    c0: float = 1.0,
    c: float = 1.0,
    eps: float = 0.5,
) -> WMMSBHyper:
    """Hyperparameters of the WMMSB.

    Parameters
    ----------
    rank : int
        Number of communities ``K``.
    likelihood : {"nb", "bg", "bernoulli"}
        The observation model (sets the default ``p``).
    alpha : float or array of shape (rank,), optional
        Dirichlet concentration of the memberships; default ``1 / rank``.
    r, p : float, optional
        nb: the NB(r, p) prior predictive of a pair (defaults 1, 0.5); bernoulli: the
        Beta(a = r, b = p) prior of a block (defaults 1, 1).
    r0, c0, c, eps : float
        bg: ``r ~ Gamma(r0 c0, rate c0)`` and ``p ~ Beta(c eps, c (1 - eps))`` per block.

    Returns
    -------
    WMMSBHyper
    """
    rank = check_integer(rank, "rank", 1)
    _check_likelihood(likelihood)
    if alpha is None:
        alpha = np.full(rank, 1.0 / rank)
    else:
        try:
            alpha = np.broadcast_to(np.asarray(alpha, float), rank)
        except (TypeError, ValueError):
            raise ValueError(
                f"alpha must be a number or an array of shape (rank,) = ({rank},), got "
                f"{np.shape(alpha) if np.ndim(alpha) else repr(alpha)}"
            ) from None
    if r is None:
        r = 1.0
    if p is None:
        p = 1.0 if likelihood == "bernoulli" else 0.5
    values = {"r": r, "p": p, "r0": r0, "c0": c0, "c": c}
    for name, value in values.items():
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
        check_dtype_range(np.float64(value), name)
    if not np.all(np.isfinite(alpha) & (alpha > 0)):
        raise ValueError("alpha must be positive")
    check_dtype_range(alpha, "alpha")
    if likelihood != "bernoulli" and not p < 1:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    if not 0 < eps < 1:
        raise ValueError(f"eps must lie in (0, 1), got {eps}")
    dtype = jnp.result_type(float)
    return WMMSBHyper(
        device_array(alpha, dtype), *(device_array(v, dtype) for v in (r, p, r0, c0, c, eps))
    )


def _mix32(x):
    """The 32-bit finaliser of MurmurHash3 on uint32 arrays (NumPy or JAX alike)."""
    xp = jnp if isinstance(x, jax.Array) else np
    with np.errstate(over="ignore"):
        x = x * xp.uint32(0x9E3779B1)
        x = x ^ (x >> xp.uint32(16))
        x = x * xp.uint32(0x85EBCA6B)
        x = x ^ (x >> xp.uint32(13))
        x = x * xp.uint32(0xC2B2AE35)
        x = x ^ (x >> xp.uint32(16))
    return x


def hash_uniform(keys, hash_seed):
    """A fixed uint32 mixing hash of pair keys, as uniforms in [0, 1) (24 bits).

    The same formula in NumPy and JAX (works on both), so membership of implicit zeros in a
    training subsample is decided identically on host and device; subsamples at growing
    ``keep`` are nested. ``hash_seed`` is an integer in ``[0, 2**32)``.
    """
    xp = jnp if isinstance(keys, jax.Array) else np
    x = xp.asarray(keys).astype(xp.uint32) ^ xp.asarray(hash_seed).astype(xp.uint32)
    return (_mix32(x) >> xp.uint32(8)).astype(xp.float32) / np.float32(2**24)


@renamed_arguments(n_nodes="num_nodes")
def pair_uniform(src, dst, num_nodes: int, hash_seed):
    """The uniform in [0, 1) that decides whether pair ``(src, dst)`` (canonical: ``min,
    max`` when undirected) is a kept zero: ``hash_uniform(src * N + dst)`` while that key
    fits an int32 (``N <= 46340``, the layouts that list or mask the zeros); beyond, where
    ``src * N + dst`` wraps modulo ``2**32`` and distinct pairs would share a key (and a
    decision), a hash of the two words: ``mix(mix(src ^ seed) ^ dst)``.
    """
    xp = jnp if isinstance(src, jax.Array) else np
    src = xp.asarray(src).astype(xp.uint32)
    dst = xp.asarray(dst).astype(xp.uint32)
    if num_nodes <= _MAX_EXACT_KEY_NODES:
        with np.errstate(over="ignore"):
            return hash_uniform(src * xp.uint32(num_nodes) + dst, hash_seed)
    seed = xp.asarray(hash_seed).astype(xp.uint32)
    x = _mix32(_mix32(src ^ seed) ^ dst)
    return (x >> xp.uint32(8)).astype(xp.float32) / np.float32(2**24)


@renamed_arguments(n_nodes="num_nodes")
def pair_keys(src, dst, num_nodes: int, directed: bool):
    """``i * N + j`` for directed pairs, ``min * N + max`` for undirected: int32 for
    ``N < 46341`` (exact keys), else uint32 modulo ``2**32`` (the pair hash's input; JAX or
    NumPy alike)."""
    xp = jnp if isinstance(src, jax.Array) else np
    kind = xp.int32 if num_nodes <= _MAX_EXACT_KEY_NODES else xp.uint32
    src = xp.asarray(src).astype(kind)
    dst = xp.asarray(dst).astype(kind)
    if not directed:
        src, dst = xp.minimum(src, dst), xp.maximum(src, dst)
    with np.errstate(over="ignore"):
        return src * kind(num_nodes) + dst


#: Pair keys ``i * N + j`` fit an int32 up to this many nodes.
_MAX_EXACT_KEY_NODES = 46_340


_int_array = numeric_vector


def _check_counts(name, y, likelihood):
    if np.any(y < 0):
        raise ValueError(f"{name} must be non-negative counts")
    if np.any(y != np.round(y)):
        raise ValueError(f"{name} must be integer counts (round real weights first)")
    if likelihood == "bernoulli" and np.any(y > 1):
        raise ValueError(f"{name} must be 0/1 for the bernoulli (MMSB) likelihood")


def _check_likelihood(likelihood):
    if not isinstance(likelihood, str) or likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")


def _check_node_ids(name, ids, num_nodes):
    if np.any(ids != np.round(ids)) or np.any(ids < 0) or np.any(ids >= num_nodes):
        raise ValueError(f"{name} holds node ids outside 0..{num_nodes - 1} or non-integers")


def _network_source(num_nodes, src, dst, weight, directed):
    """``(N, src, dst, weight, directed)`` from the forms :func:`make_network` takes: a node
    count and an edge list, a ``scipy.sparse`` matrix, or a
    :class:`bnpjax.datasets.Network`."""
    if directed is not None:
        directed = check_flag(directed, "directed")
    if is_sparse_matrix(num_nodes):
        if src is not None or dst is not None or weight is not None:
            raise ValueError("src/dst/weight: give either a sparse matrix or an edge list")
        return edges_from_sparse(num_nodes, directed=directed, name="num_nodes (matrix)")
    if all(hasattr(num_nodes, a) for a in ("num_nodes", "src", "dst", "weight", "directed")):
        net = num_nodes
        if src is not None or dst is not None:
            raise ValueError("src/dst: give either a Network or an edge list")
        directed = net.directed if directed is None else directed
        weight = net.weight if weight is None else weight
        num_nodes, src, dst = net.num_nodes, net.src, net.dst
    if src is None or dst is None:
        raise ValueError("src and dst (the edge list) are required with a node count")
    if directed is None:
        raise ValueError("directed must be given (True or False) for an edge list")
    check_integer(num_nodes, "num_nodes", 2)
    src, dst, y = check_edge_list(int(num_nodes), src, dst, weight, directed=bool(directed))
    return int(num_nodes), src, dst, y, bool(directed)


def _special_rows(src, dst, num_nodes):
    """CSR rows ``(ptr, dst)`` of the sorted unique pairs ``(src, dst)``."""
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    if src.shape[0] > 1:
        new = np.concatenate([[True], (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])])
        src, dst = src[new], dst[new]
    ptr = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=num_nodes))])
    return ptr, dst


@renamed_arguments(n_nodes="num_nodes", seed="hash_seed")
def make_network(
    num_nodes,
    src=None,
    dst=None,
    weight=None,
    *,
    directed: bool | None = None,
    unobserved=None,
    keep: float = 1.0,
    hash_seed: int = 0,
    zeros: str | None = None,
    likelihood: str = "nb",
    pad_to: int = 1,
) -> WMMSBData:
    """Validate an edge list (or a sparse matrix) and build :class:`WMMSBData`.

    Nothing of size ``N x N`` is built unless ``zeros`` asks for it: with ``zeros="none"``
    (the default above 20000 nodes) memory is ``O(N + E)``, so 10^6 nodes and 10^7 edges fit
    (stochastic CVB0 then draws the zeros).

    Parameters
    ----------
    num_nodes : int, scipy.sparse matrix or Network
        Number of nodes (at least 2; at most 46340 with listed or dense zeros); or a square
        ``scipy.sparse`` count matrix (read without densifying; stored zeros dropped;
        ``directed`` defaults to "not symmetric"; undirected: symmetric or each pair once);
        or a :class:`bnpjax.datasets.Network` (its ``directed`` by default).
    src, dst : array of int
        0-based node ids of the observed explicit pairs (no self-loops, no duplicates; for
        undirected data ``i-j`` and ``j-i`` are the same pair).
    weight : array of int, optional
        Non-negative integer counts of the pairs (default 1; 0/1 for "bernoulli").
    directed : bool
        Whether ``(i, j)`` and ``(j, i)`` are different pairs (required for an edge list).
    unobserved : array of shape (M, 2), optional
        Held-out or missing pairs: never counted as observations (neither links nor zeros).
    keep : float
        Every other pair is an observed zero if ``pair_uniform(i, j, num_nodes,
        hash_seed) < keep``.
    hash_seed : int
        The uint32 seed of that deterministic pair hash, in ``[0, 2**32)``.
    zeros : {"list", "dense", "none"}, optional
        How full-batch methods see the observed zeros: every zero pair listed (exact CVB0
        and collapsed Gibbs), an ``N x N`` mask (CVB0 by matrix products; the default up to
        20000 nodes) or not at all (stochastic CVB0 only).
    likelihood : {"nb", "bg", "bernoulli"}
        Checked against the weights.
    pad_to : int
        Pad the pair lists to a multiple of ``pad_to`` (weight 0).

    Returns
    -------
    WMMSBData

    Raises
    ------
    ValueError
        Naming the argument: ids out of range, self-loops, negative or non-integer counts,
        duplicate pairs, a bad setting.
    """
    _check_likelihood(likelihood)
    pad_to = check_integer(pad_to, "pad_to", 1)
    if check_integer(hash_seed, "hash_seed", 0) >= 2**32:
        raise ValueError(
            f"hash_seed must be an integer in [0, 2**32) (a uint32 hash seed), got {hash_seed!r}"
        )
    N, src, dst, y, directed = _network_source(num_nodes, src, dst, weight, directed)
    _check_counts("weight", y, likelihood)
    if not (np.isfinite(keep) and 0 < keep <= 1):
        raise ValueError(f"keep must lie in (0, 1], got {keep}")
    if zeros is None:
        zeros = "dense" if N <= 20_000 else "none"
    if zeros not in ("list", "dense", "none"):
        raise ValueError(f"zeros must be 'list', 'dense' or 'none', got {zeros!r}")
    if zeros != "none" and N > _MAX_EXACT_KEY_NODES:
        raise ValueError(
            f"num_nodes must be at most {_MAX_EXACT_KEY_NODES} with zeros={zeros!r} (N x N "
            "zeros); use zeros='none' (stochastic CVB0)"
        )
    keys = src * np.int64(N) + dst
    bsrc = bdst = np.zeros(0, np.int64)
    if unobserved is not None:
        u = np.asarray(unobserved)
        if u.ndim != 2 or u.shape[1] != 2:
            raise ValueError(f"unobserved must be an (M, 2) array of pairs, got {u.shape}")
        _int_array("unobserved", u.reshape(-1))
        if np.any(u < 0) or np.any(u >= N) or np.any(u != np.round(u)):
            raise ValueError(f"unobserved holds node ids outside 0..{N - 1}")
        bsrc, bdst = u[:, 0].astype(np.int64), u[:, 1].astype(np.int64)
        if not directed:
            bsrc, bdst = np.minimum(bsrc, bdst), np.maximum(bsrc, bdst)
        drop = np.isin(keys, bsrc * np.int64(N) + bdst)
        src, dst, y, keys = src[~drop], dst[~drop], y[~drop], keys[~drop]
    special_ptr, special_dst = _special_rows(
        np.concatenate([src, bsrc]), np.concatenate([dst, bdst]), N
    )
    num_special = special_dst.shape[0]
    num_pairs = N * (N - 1) if directed else N * (N - 1) // 2
    zmask = np.zeros((0, 0), np.float32)
    zsrc = zdst = np.zeros(0, np.int64)
    if zeros != "none":
        zmask = ~np.eye(N, dtype=bool) if directed else np.triu(np.ones((N, N), bool), 1)
        rows = np.repeat(np.arange(N), np.diff(special_ptr))
        zmask[rows, special_dst] = False
        if keep < 1:
            zmask &= hash_uniform(np.arange(N * N, dtype=np.int64).reshape(N, N), hash_seed) < keep
        num_zeros = float(zmask.sum())
        if zeros == "list":
            zsrc, zdst = np.nonzero(zmask)
            zmask = np.zeros((0, 0), np.float32)
    else:
        num_zeros = float((num_pairs - num_special) * keep)
    if num_zeros + src.shape[0] == 0:
        raise ValueError("no observed pair is left")
    degree = np.bincount(src, minlength=N) + np.bincount(dst, minlength=N)
    order = np.argsort(np.concatenate([src, dst]), kind="stable")
    adj = np.concatenate([np.arange(src.shape[0])] * 2)[order]
    adj_ptr = np.concatenate([[0], np.cumsum(degree)])

    def pad(a, fill=0):
        extra = (-a.shape[0]) % pad_to
        return np.concatenate([a, np.full(extra, fill, a.dtype)])

    dtype = jnp.result_type(float)
    w = np.ones(src.shape[0])
    zw = np.ones(zsrc.shape[0])
    return WMMSBData(
        degree=device_array(degree, dtype),
        src=device_array(pad(src), jnp.int32),
        dst=device_array(pad(dst, 1), jnp.int32),
        y=device_array(pad(y.astype(float)), dtype),
        w=device_array(pad(w), dtype),
        zsrc=device_array(pad(zsrc), jnp.int32),
        zdst=device_array(pad(zdst, 1), jnp.int32),
        zw=device_array(pad(zw), dtype),
        adj_ptr=device_array(adj_ptr, jnp.int32),
        adj=device_array(pad(adj), jnp.int32),
        special_ptr=device_array(special_ptr, jnp.int32),
        special_dst=device_array(special_dst, jnp.int32),
        keep=device_array(keep, dtype),
        hash_seed=device_array(hash_seed, jnp.uint32),
        directed=device_array(bool(directed)),
        num_zeros=device_array(num_zeros, dtype),
        zmask=device_array(zmask, dtype),
    )


def make_data(
    Y,
    mask=None,
    *,
    directed: bool | None = None,
    likelihood: str = "nb",
    explicit: bool = False,
    zeros: str = "list",
) -> WMMSBData:
    """Validate a dense count matrix and build :class:`WMMSBData`.

    Parameters
    ----------
    Y : array of shape (N, N)
        Non-negative integer counts (0/1 for "bernoulli"). The diagonal is outside the model:
        it must be zero (or masked).
    mask : bool array of shape (N, N), optional
        True = observed; unobserved entries are never counted as observations.
    directed : bool, optional
        Default: directed unless ``Y`` (and ``mask``) are symmetric; undirected data must be
        symmetric and use the upper triangle.
    likelihood : {"nb", "bg", "bernoulli"}
    explicit : bool
        Keep every observed pair in the explicit list (the Geweke layout) instead of the
        implicit zeros.
    zeros : {"list", "dense", "none"}
        As in :func:`make_network`.

    Returns
    -------
    WMMSBData
    """
    _check_likelihood(likelihood)
    explicit = check_flag(explicit, "explicit")
    if directed is not None:
        directed = check_flag(directed, "directed")
    if np.asarray(Y).dtype == bool:
        raise ValueError("Y must be numeric counts, got booleans (pass Y.astype(int))")
    Y = check_real_array(Y, "Y", finite=False)
    if Y.ndim != 2 or Y.shape[0] != Y.shape[1] or Y.shape[0] < 2:
        raise ValueError(f"Y must be a square (N, N) matrix with N >= 2, got shape {Y.shape}")
    N = Y.shape[0]
    observed = np.ones((N, N), bool)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != Y.shape:
            raise ValueError(f"mask must have the shape of Y {Y.shape}, got {mask.shape}")
        if mask.dtype != bool and not np.all((mask == 0) | (mask == 1)):
            raise ValueError("mask must be boolean (True = observed)")
        observed = mask.astype(bool)
    if not np.all(np.isfinite(Y[observed])):
        raise ValueError("Y must be finite where observed (mask out missing entries)")
    _check_counts("Y", Y[observed], likelihood)
    if np.any(np.diag(Y)[np.diag(observed)] != 0):
        raise ValueError("Y has self-loops on the diagonal: they are excluded; zero or mask them")
    Yz = np.where(observed, Y, 0)
    symmetric = np.array_equal(Yz, Yz.T) and np.array_equal(observed, observed.T)
    if directed is None:
        directed = not symmetric
    elif not directed and not symmetric:
        raise ValueError("undirected Y and mask must be symmetric")
    off = ~np.eye(N, dtype=bool) if directed else np.triu(np.ones((N, N), bool), 1)
    pick = off & observed & ((Yz != 0) | explicit)
    ii, jj = np.nonzero(pick)
    ui, uj = np.nonzero(off & ~observed)
    return make_network(
        N,
        ii,
        jj,
        Yz[ii, jj],
        directed=directed,
        unobserved=np.stack([ui, uj], 1),
        likelihood=likelihood,
        zeros="none" if explicit else zeros,
    )


def _num_nodes(data: WMMSBData) -> int:
    return data.degree.shape[0]


def _check_common(data, hyper, likelihood):
    """Types of ``data``/``hyper``, the likelihood name and (bernoulli) 0/1 links. The 0/1
    check reads ``data.y`` on the host; it is skipped while ``data`` is traced (the Geweke
    harness builds the kernel inside compiled code from data it drew itself)."""
    if not isinstance(data, WMMSBData):
        raise ValueError("data must come from bnpjax.models.wmmsb.make_data or make_network")
    if not isinstance(hyper, WMMSBHyper):
        raise ValueError("hyper must come from bnpjax.models.wmmsb.make_hyper")
    _check_likelihood(likelihood)
    y_host = concrete_or_none(data.y)
    if likelihood == "bernoulli" and y_host is not None and np.any(y_host > 1):
        raise ValueError("data: the bernoulli likelihood needs 0/1 links (binarise y first)")
    p_host = concrete_or_none(hyper.p)
    if likelihood != "bernoulli" and p_host is not None and not np.all(p_host < 1):
        raise ValueError(
            f"hyper has p = {float(np.max(p_host)):g}, outside (0, 1) as the {likelihood!r} "
            "likelihood needs (a hyper made for likelihood='bernoulli'?); build it with "
            f"make_hyper(rank, likelihood={likelihood!r})"
        )


def _resolve_hyper(hyper, rank, likelihood):
    """``hyper``, or ``make_hyper(rank, likelihood=...)`` when it is None (then ``rank`` is
    required); a given ``rank`` must agree with ``hyper``."""
    if hyper is None:
        if rank is None:
            raise ValueError("rank (the number of communities) is required when hyper is None")
        return make_hyper(rank, likelihood=likelihood)
    if isinstance(hyper, WMMSBHyper) and rank is not None and hyper.alpha.shape[0] != rank:
        raise ValueError(f"rank={rank!r} disagrees with hyper (rank {hyper.alpha.shape[0]})")
    return hyper


def _check_zeros_held(data, method):
    """Full-batch methods must see every observed zero (listed, or dense for CVB0)."""
    num_zeros = concrete_or_none(data.num_zeros)
    listed = data.zsrc.shape[0] + (concrete_or_none(data.zmask.sum()) or 0.0)
    if num_zeros is not None and float(num_zeros) > float(listed):
        raise ValueError(
            f"data: {method} needs the observed zeros listed (make_network(..., zeros='list'"
            f"{'' if method == 'collapsed Gibbs' else ' or dense'}))"
        )


def _observed_pairs(data: WMMSBData):
    """Host arrays (src, dst, y) of every observed training pair: the explicit pairs, the
    listed zeros and the zeros of a dense mask (padding excluded)."""
    w, zw = np.asarray(data.w) > 0, np.asarray(data.zw) > 0
    parts = [
        (np.asarray(data.src)[w], np.asarray(data.dst)[w], np.asarray(data.y)[w]),
        (np.asarray(data.zsrc)[zw], np.asarray(data.zdst)[zw], np.zeros(int(zw.sum()))),
    ]
    if data.zmask.shape[0]:
        i, j = np.nonzero(np.asarray(data.zmask) > 0)
        parts.append((i, j, np.zeros(i.shape[0])))
    src, dst, y = (np.concatenate(a) for a in zip(*parts, strict=True))
    return src.astype(np.int32), dst.astype(np.int32), y


def _observed_spec(data: WMMSBData):
    """``(observed_data, coords)`` of an ArvizSpec for the observed pairs (variable ``y`` on
    the ``obs`` dim, labelled ``"i-j"``)."""
    src, dst, y = _observed_pairs(data)
    labels = [f"{i}-{j}" for i, j in zip(src.tolist(), dst.tolist(), strict=True)]
    return {"y": y}, {"obs": labels}
