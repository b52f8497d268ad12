"""Which nodes and pairs a stochastic CVB0 step visits, in ``O(batch)`` work per step.

Kept apart from the update itself: the epoch's node order (a keyed Feistel permutation,
so a pass visits every node once without sorting all ``N`` of them) and the test of whether a
drawn partner is a special pair (explicit or held out), a binary search in the CSR lists.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bnpjax.infer.base import concrete_or_none
from bnpjax.models.wmmsb.data import _mix32, pair_uniform

__all__: list[str] = []


def _is_special(data, i, j, search_steps):
    """Whether the pairs ``(i, j)`` (canonical: ``i < j`` when undirected) are special
    (explicit or unobserved): a binary search in row ``i`` of the CSR ``special_ptr`` /
    ``special_dst`` (``search_steps`` >= log2 of the longest row + 1)."""
    M = data.special_dst.shape[0]
    if M == 0:
        return jnp.zeros(i.shape, bool)
    end = data.special_ptr[i + 1]

    def body(_, bounds):
        lo, hi = bounds
        mid = (lo + hi) // 2
        less = data.special_dst[jnp.clip(mid, 0, M - 1)] < j
        open_ = lo < hi
        return jnp.where(open_ & less, mid + 1, lo), jnp.where(open_ & ~less, mid, hi)

    lo, _ = lax.fori_loop(0, search_steps, body, (data.special_ptr[i], end))
    return (lo < end) & (data.special_dst[jnp.clip(lo, 0, M - 1)] == j)


def _feistel(x, round_keys, half):
    """A bijection of ``[0, 4**half)`` (uint32): a 4-round Feistel network whose round
    function is the pair hash's mixer keyed by ``round_keys``."""
    mask = jnp.uint32((1 << half) - 1)
    left, right = x >> jnp.uint32(half), x & mask
    for r in range(4):
        left, right = right, left ^ (_mix32(right ^ round_keys[r]) & mask)
    return (left << jnp.uint32(half)) | right


def _epoch_nodes(seed, t, num_nodes, batch):
    r"""The nodes of step ``t``: epoch ``e = t // S`` (``S = num_nodes // batch`` steps)
    visits ``S * batch`` distinct nodes in the order of a pseudo-random permutation keyed
    by ``(seed, e)``, ``batch`` at a time, so a pass reaches every node once (up to the
    ``num_nodes mod batch`` left over, different ones each epoch) and a step's nodes are
    distinct. The permutation is a Feistel network on ``[0, 4^h) \supseteq [0, N)``
    restricted to ``[0, N)`` by cycle walking: ``O(batch)`` work per step, where
    ``jax.random.choice(..., replace=False)`` sorts all ``N`` nodes (0.04 s a step at
    ``N = 10^5``, 0.5 s at ``10^6``)."""
    steps = max(1, num_nodes // batch)
    epoch = (t // steps).astype(jnp.uint32)
    pos = (t % steps).astype(jnp.uint32) * jnp.uint32(batch) + jnp.arange(batch, dtype=jnp.uint32)
    half = max(1, (int(num_nodes - 1).bit_length() + 1) // 2)
    round_keys = [
        _mix32(_mix32(seed ^ jnp.uint32(0x632BE5AB * (r + 1) & 0xFFFFFFFF)) ^ epoch)
        for r in range(4)
    ]
    n = jnp.uint32(num_nodes)
    x = _feistel(pos, round_keys, half)
    x = lax.while_loop(
        lambda x: jnp.any(x >= n),
        lambda x: jnp.where(x >= n, _feistel(x, round_keys, half), x),
        x,
    )
    return x.astype(jnp.int32)


def _search_steps(data):
    """Binary-search steps that find any pair in the longest CSR row of special pairs."""
    ptr = concrete_or_none(data.special_ptr)
    longest = int(np.max(np.diff(np.asarray(ptr)))) if ptr is not None else 2**30
    return max(1, int(np.ceil(np.log2(longest + 1))) + 1)


def _minibatch_pairs(data, key, nodes, *, draws, max_degree, search_steps):
    r"""The pairs a stochastic step reads for the drawn ``nodes`` (``(B,)``, distinct, a
    uniform random subset): each node's explicit pairs (all of them up to ``max_degree``,
    else ``max_degree`` drawn uniformly with replacement) and ``draws`` uniform partners,
    kept when the pair is an observed zero.

    Returns ``(links, zeros)``: ``links = (i, j, y, w)`` of shape ``(B, max_degree)`` with
    ``w`` the node-level weight (1, ``degree / max_degree`` for a subsampled node, 0 for an
    empty slot), so that summing ``w`` times a function of the pair over a node's slots is
    unbiased for its sum over the node's explicit pairs; ``zeros = (i, j, kept)`` of shape
    ``(B, draws)``, pairs canonical (``i < j`` when undirected). The design of
    :func:`bnpjax.models.wmmsb.scvb0`: the weights turning these into unbiased sums over a
    node's pairs or over all pairs are given where they are used.
    """
    N = data.degree.shape[0]
    batch = nodes.shape[0]
    dtype = data.y.dtype
    k_partner, k_dir, k_links = jax.random.split(key, 3)
    start = data.adj_ptr[nodes]
    deg = data.adj_ptr[nodes + 1] - start
    slot = jnp.arange(max_degree)
    big = deg > max_degree
    drawn = jnp.floor(
        jax.random.uniform(k_links, (batch, max_degree), dtype) * deg[:, None]
    ).astype(jnp.int32)
    offset = jnp.where(big[:, None], jnp.minimum(drawn, deg[:, None] - 1), slot[None, :])
    valid_slot = big[:, None] | (slot[None, :] < deg[:, None])
    pid = data.adj[jnp.clip(start[:, None] + offset, 0, data.adj.shape[0] - 1)]
    factor = jnp.where(big, deg / max_degree, 1.0).astype(dtype)[:, None]
    lw = jnp.where(valid_slot, data.w[pid] * factor, 0.0).astype(dtype)
    links = (data.src[pid], data.dst[pid], data.y[pid], lw)
    other = jax.random.randint(k_partner, (batch, draws), 0, N - 1)
    other = other + (other >= nodes[:, None])
    out = jax.random.bernoulli(k_dir, 0.5, (batch, draws)) | ~data.directed
    me = jnp.broadcast_to(nodes[:, None], other.shape)
    zi = jnp.where(out, me, other)
    zj = jnp.where(out, other, me)
    zi, zj = (
        jnp.where(data.directed, zi, jnp.minimum(zi, zj)),
        jnp.where(data.directed, zj, jnp.maximum(me, other)),
    )
    kept = ~_is_special(data, zi, zj, search_steps) & (
        pair_uniform(zi, zj, N, data.hash_seed) < data.keep
    )
    return links, (zi, zj, kept.astype(dtype))
