"""Weighted networks of Dulac's WMMSB experiments (``<data_home>/networks/<name>/``).

Each folder's PROVENANCE.md gives the source, the format and checksums. Every loader returns a
:class:`Network` with 0-based node ids, one row per observed link (weight > 0, no self-loops)
and ``directed`` as the data say:

=============  =======  =========  =========  ===========================================
name           nodes    links      directed   weight
=============  =======  =========  =========  ===========================================
fb_uc          1,899    20,296     yes        messages
manufacturing  167      5,783      yes        e-mails (the one self-loop is dropped)
moreno_names   1,773    9,131      no         verse co-occurrences
hep-th         8,361    15,751     no         round((w + 1)^2) of Newman's weight w
netscience     1,589    2,742      no         round((w + 1)^2) of Newman's weight w
lesmis         77       254        no         co-appearances
=============  =======  =========  =========  ===========================================

Newman's co-authorship weights ``w`` (a sum over papers of ``1 / (authors - 1)``) are real
numbers; the thesis turned them into counts with ``round((w + 1)^2)`` (this reproduces the
thesis corpus table: hep-th mean 5.24, sd 16.0, max 1226), and so do we.
"""

from __future__ import annotations

import os
import warnings
from typing import NamedTuple

import numpy as np

from bnpjax.datasets.home import DataNotFoundError, get_data_home
from bnpjax.infer.checks import check_flag, check_integer
from bnpjax.infer.edges import (
    check_edge_list,
    edges_from_sparse,
    is_sparse_matrix,
    numeric_vector,
)

__all__ = ["NETWORKS", "Network", "load_network", "read_edge_list"]


class Network(NamedTuple):
    """A weighted network as the loaders return it, one row per observed link.

    ``name``: the data set (or file) name; ``num_nodes``: number of nodes ``N`` (isolated nodes
    listed by the source included); ``src``, ``dst``: ``(L,)`` int64 0-based node ids of each
    link, ``src != dst`` (undirected links in either orientation; a pair listed twice is
    refused by ``make_network``); ``weight``: ``(L,)`` int64 counts ``>= 1`` (pairs not
    listed are zeros); ``directed``: whether ``(i, j)`` and ``(j, i)`` are different pairs;
    ``labels``: the source's node names, ``labels[k]`` naming node ``k`` (``range(N)`` for
    a matrix or an edge list given in memory). Feed it to
    :func:`bnpjax.models.wmmsb.make_network`.
    """

    name: str
    num_nodes: int
    src: np.ndarray  # (L,) int64, 0-based
    dst: np.ndarray  # (L,) int64
    weight: np.ndarray  # (L,) int64 counts >= 1
    directed: bool
    labels: list[str]

    @property
    def n_nodes(self) -> int:
        """Deprecated name of :attr:`num_nodes` (kept for one release)."""
        warnings.warn(
            "Network.n_nodes is deprecated: use Network.num_nodes", FutureWarning, stacklevel=2
        )
        return self.num_nodes


#: name -> (directed, Newman real weights)
NETWORKS = {
    "fb_uc": (True, False),
    "manufacturing": (True, False),
    "moreno_names": (False, False),
    "hep-th": (False, True),
    "netscience": (False, True),
    "lesmis": (False, False),
}


def newman_counts(w) -> np.ndarray:
    """``round((w + 1)^2)``: the thesis' conversion of real collaboration weights to counts."""
    return np.round((np.asarray(w, float) + 1.0) ** 2).astype(np.int64)


def read_edge_list(
    path, *, directed: bool, name: str | None = None, header: bool | None = None
) -> Network:
    """Read a ``source<TAB>target<TAB>weight`` file (``#`` comments; a missing third column
    means weight 1; whitespace or commas separate) into a :class:`Network`. Node names are
    relabelled 0..N-1 in order of first appearance (sorted when they are all integers).
    Weights must be non-negative integers; zero-weight rows and self-loops are refused.

    ``header``: whether the first row names the columns. None (the default) reads it as a
    header when its third cell is not a number, or when its two names are not integers while
    every other row's are (``source,target`` above integer ids); False keeps it as an edge
    (nodes may be named anything); True drops it."""
    if header is not None:
        header = check_flag(header, "header")
    rows = []
    with open(path) as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line or line.startswith(("#", "%")):
                continue
            parts = line.replace(",", " ").split()
            if len(parts) not in (2, 3):
                raise ValueError(f"{path}:{number}: expected 'source target [weight]'")
            rows.append((number, parts if len(parts) == 3 else [*parts, "1"]))
    if header is None and rows:
        first, rest = rows[0][1], rows[1:]
        header = not _is_number(first[2]) or (
            bool(rest)
            and not (_is_integer(first[0]) and _is_integer(first[1]))
            and all(_is_integer(r[0]) and _is_integer(r[1]) for _, r in rest)
        )
    if header:
        rows = rows[1:]
    if not rows:
        raise ValueError(f"{path}: no edges")
    for number, r in rows:
        if not _is_number(r[2]):
            raise ValueError(f"{path}:{number}: the weight {r[2]!r} is not a number")
    numbers_of_rows = [number for number, _ in rows]
    rows = [r for _, r in rows]
    names = [r[0] for r in rows] + [r[1] for r in rows]
    try:
        ids = sorted({int(n) for n in names})
        labels = [str(i) for i in ids]
    except ValueError:
        labels = list(dict.fromkeys(names))
    index = {name_: k for k, name_ in enumerate(labels)}
    src = np.array([index[str(int(r[0])) if _is_integer(r[0]) else r[0]] for r in rows])
    dst = np.array([index[str(int(r[1])) if _is_integer(r[1]) else r[1]] for r in rows])
    weight = np.array([float(r[2]) for r in rows])
    bad = ~np.isfinite(weight) | (weight <= 0) | (weight != np.round(weight))
    if np.any(bad):
        line = numbers_of_rows[int(np.argmax(bad))]
        raise ValueError(f"{path}:{line}: weights must be positive integers (counts)")
    if np.any(src == dst):
        line = numbers_of_rows[int(np.argmax(src == dst))]
        raise ValueError(f"{path}:{line}: self-loops are excluded from the model")
    return Network(
        name or os.path.basename(str(path)),
        len(labels),
        src.astype(np.int64),
        dst.astype(np.int64),
        weight.astype(np.int64),
        directed,
        labels,
    )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_integer(text: str) -> bool:
    return text.lstrip("-").isdigit()


def _read_tsv(path):
    table = np.loadtxt(path, comments="#", delimiter="\t", ndmin=2)
    return table[:, 0].astype(np.int64), table[:, 1].astype(np.int64), table[:, 2]


def _network_from_edges(source, directed, num_nodes):
    """A :class:`Network` from a ``scipy.sparse`` matrix or an ``(src, dst[, weight])``
    edge list of 0-based ids, validated (:func:`bnpjax.infer.edges.check_edge_list`) and
    never densified; undirected pairs come out as ``(min, max)``."""
    if is_sparse_matrix(source):
        if num_nodes is not None and num_nodes != source.shape[0]:
            raise ValueError(f"num_nodes={num_nodes!r} disagrees with the matrix {source.shape}")
        N, src, dst, weight, directed = edges_from_sparse(source, directed=directed, name="name")
    else:
        try:
            parts = tuple(source)
        except TypeError:
            parts = ()
        if len(parts) not in (2, 3):
            raise ValueError(
                "name must be a network name, a file, a scipy.sparse matrix or an edge list "
                f"(src, dst[, weight]), got {type(source).__name__}"
            )
        if directed is None:
            raise ValueError("directed must be given (True or False) with an edge list")
        src = numeric_vector("name (src)", parts[0])
        dst = numeric_vector("name (dst)", parts[1], src.shape[0])
        if num_nodes is None:
            num_nodes = int(max(src.max(initial=0), dst.max(initial=0))) + 1
        N = check_integer(num_nodes, "num_nodes", 2)
        src, dst, weight = check_edge_list(
            N,
            src,
            dst,
            parts[2] if len(parts) == 3 else None,
            directed=bool(directed),
            names=("name (src)", "name (dst)", "name (weight)"),
            allow_zero=False,
        )
    if np.any(weight <= 0):
        keep = weight > 0
        src, dst, weight = src[keep], dst[keep], weight[keep]
    return Network("edges", N, src, dst, weight, bool(directed), range(N))


def load_network(
    name,
    data_home: str | os.PathLike | None = None,
    *,
    directed: bool | None = None,
    num_nodes: int | None = None,
) -> Network:
    """Load one of :data:`NETWORKS` (table in the module docstring), an edge-list file, a
    ``scipy.sparse`` count matrix or an edge list, as a :class:`Network`.

    Parameters
    ----------
    name : str, path, scipy.sparse matrix or tuple
        A name of :data:`NETWORKS`; a path to a ``source target [weight]`` file (read by
        :func:`read_edge_list`; ``directed`` required); a square sparse count matrix
        (``directed`` defaults to "not symmetric"; stored zeros dropped); or ``(src, dst)``
        / ``(src, dst, weight)`` arrays of 0-based node ids and positive integer counts
        (``directed`` required). Matrices and edge lists are never densified: 10^7 edges
        take ``O(E)`` memory.
    data_home : str or path, optional
        Where the named networks live (see :func:`bnpjax.datasets.get_data_home`).
    directed : bool, optional
        For files, matrices and edge lists.
    num_nodes : int, optional
        For edge lists: the number of nodes (default: the largest id + 1).

    Returns
    -------
    Network
        Labels: the source's node names; ``range(num_nodes)`` for matrices and edge lists.

    Raises
    ------
    ValueError
        A bad network (self-loops, negative or non-integer counts, ids out of range,
        duplicate pairs), naming the argument.
    """
    if not isinstance(name, str | os.PathLike):
        return _network_from_edges(name, directed, num_nodes)
    if name not in NETWORKS and os.path.isfile(name):
        if directed is None:
            raise ValueError("directed must be given (True or False) to read an edge-list file")
        return read_edge_list(name, directed=directed)
    if name not in NETWORKS:
        raise ValueError(f"name must be one of {sorted(NETWORKS)}, got {name!r}")
    directed, newman = NETWORKS[name]
    folder = get_data_home(data_home) / "networks" / name
    if name == "moreno_names":
        path = folder / "bible_names.csv"
        if not path.exists():
            raise DataNotFoundError(f"{path} not found")
        raw = np.loadtxt(path, delimiter=",", skiprows=1, dtype=str, ndmin=2)
        labels = list(dict.fromkeys(np.concatenate([raw[:, 0], raw[:, 1]])))
        index = {n: k for k, n in enumerate(labels)}
        src = np.array([index[n] for n in raw[:, 0]])
        dst = np.array([index[n] for n in raw[:, 1]])
        weight = raw[:, 2].astype(float)
    else:
        path = folder / "edges_weighted.tsv"
        if not path.exists():
            raise DataNotFoundError(f"{path} not found")
        src, dst, weight = _read_tsv(path)
        ids = np.union1d(src, dst)
        if name == "hep-th" or name == "netscience":  # isolated nodes are listed in nodes.tsv
            with open(folder / "nodes.tsv") as handle:
                listed = [int(line.split("\t")[0]) for line in handle if line[:1].isdigit()]
            ids = np.union1d(ids, np.asarray(listed, np.int64))
        src, dst = np.searchsorted(ids, src), np.searchsorted(ids, dst)
        labels = [str(i) for i in ids]
    weight = newman_counts(weight) if newman else np.round(weight).astype(np.int64)
    keep = src != dst
    return Network(name, len(labels), src[keep], dst[keep], weight[keep], directed, labels)
