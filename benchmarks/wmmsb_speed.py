"""Seconds per full-data CVB0 iteration of ``bnpjax.models.wmmsb`` against a straightforward
per-pair NumPy implementation of the same update, in one process.

Networks: planted-block directed networks with ``N`` nodes (``--sizes``, default 1000 and
10000), mean degree ``--degree`` (Poisson counts), ``K`` classes (``--ks``, default 10 and 20);
every non-link is an observed zero. bnpjax runs the synchronous CVB0 pass of
``wmmsb.cvb0(..., store_gamma=False)`` (links listed, zeros as a dense mask: matrix products;
``--zeros list``: every zero pair listed and updated like a link, in vectorised chunks, the
per-pair arithmetic of the reference)
through its compiled step; compile time is measured apart, the run time is the median
over ``--repeats`` iterations. The reference visits every pair in a Python loop and does the
same update with NumPy/SciPy per pair (``reference_cvb0_step``); it is timed on
``--ref-pairs`` pairs (links and zeros in their proportions) and scaled to all pairs.

Before timing, both implementations do one iteration from the same state on a small network
with the exact "-ij" counts (``store_gamma=True``, every pair listed), and the largest
difference of their gammas is printed (the unit tests assert the same check).

    python benchmarks/wmmsb_speed.py                       # N = 1e3, 1e4; K = 10, 20
    python benchmarks/wmmsb_speed.py --sizes 1000 --ks 10 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np
from scipy.special import gammaln, logsumexp

from bnpjax.models import wmmsb


def _log_pred(y, NY, NP, r, p, likelihood):
    if likelihood == "bernoulli":
        prob = (NY + r) / (NP + r + p)
        return np.log(prob) if y > 0 else np.log1p(-prob)
    a = NY + r
    q = p / (p * NP + 1.0)
    return gammaln(y + a) - gammaln(a) - gammaln(y + 1.0) + a * np.log1p(-q) + y * np.log(q)


def reference_cvb0_step(data, hyper, state, likelihood="nb", exclude=True, pairs=None):
    """One synchronous CVB0 pass, pair by pair (zero-order CVB0 form of Dulac 2020, eq1).

    ``exclude``: subtract the pair's previous gamma from the counts (needs ``state.gamma``
    and ``state.zgamma``); ``pairs``: optionally only these ``(src, dst, y)`` (timing).
    Returns the new gammas and statistics (and the Beta-Gamma r, p) as NumPy arrays."""
    n_node = np.asarray(state.n_node, np.float64)
    n_y = np.asarray(state.n_y, np.float64)
    n_phi = np.asarray(state.n_phi, np.float64)
    r = np.asarray(state.r, np.float64)
    p = np.asarray(state.p, np.float64)
    alpha = np.asarray(hyper.alpha, np.float64)
    K = alpha.shape[0]
    if pairs is None:
        src = np.concatenate([np.asarray(data.src), np.asarray(data.zsrc)])
        dst = np.concatenate([np.asarray(data.dst), np.asarray(data.zdst)])
        y = np.concatenate([np.asarray(data.y), np.zeros(data.zsrc.shape[0])])
        w = np.concatenate([np.asarray(data.w), np.asarray(data.zw)])
    else:
        src, dst, y = pairs
        w = np.ones(src.shape[0])
    old = None
    if exclude:
        old = np.concatenate([np.asarray(state.gamma), np.asarray(state.zgamma)]).astype(float)
    new_node = np.zeros_like(n_node)
    new_y = np.zeros_like(n_y)
    new_phi = np.zeros_like(n_phi)
    gammas = np.zeros((src.shape[0], K, K))
    for e in range(src.shape[0]):
        i, j, yy, ww = int(src[e]), int(dst[e]), float(y[e]), float(w[e])
        ni, nj, ny, nphi = n_node[i], n_node[j], n_y, n_phi
        if exclude:
            g = old[e] * ww
            ni, nj = ni - g.sum(1), nj - g.sum(0)
            ny, nphi = n_y - yy * g, n_phi - g
        logits = np.log(ni + alpha)[:, None] + np.log(nj + alpha)[None, :]
        logits = logits + _log_pred(yy, ny, nphi, r, p, likelihood)
        gamma = np.exp(logits - logsumexp(logits))
        gammas[e] = gamma
        new_node[i] += ww * gamma.sum(1)
        new_node[j] += ww * gamma.sum(0)
        new_y += ww * yy * gamma
        new_phi += ww * gamma
    if likelihood == "bg":
        r = (float(hyper.r0) * float(hyper.c0) + new_y) / (float(hyper.c0) - new_phi * np.log1p(-p))
        a = float(hyper.c) * float(hyper.eps) + new_y
        b = float(hyper.c) * (1 - float(hyper.eps)) + new_phi * r
        p = a / (a + b)
    P = data.src.shape[0] if pairs is None else src.shape[0]
    return {
        "gamma": gammas[:P],
        "zgamma": gammas[P:],
        "n_node": new_node,
        "n_y": new_y,
        "n_phi": new_phi,
        "r": r,
        "p": p,
    }


def planted(N, K, degree, seed=0):
    """Directed planted-block network as an edge list (Poisson counts, mean degree)."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, N)
    num = rng.poisson(degree * N)
    src = rng.integers(0, N, num)
    same = rng.random(num) < 0.8  # 80% of the links within blocks
    members = [np.flatnonzero(z == k) for k in range(K)]
    dst = np.where(
        same,
        np.array([rng.choice(members[z[s]]) if len(members[z[s]]) else s for s in src]),
        rng.integers(0, N, num),
    )
    keep = src != dst
    keys, counts = np.unique(src[keep] * N + dst[keep], return_counts=True)
    return keys // N, keys % N, counts


def check_same_gamma():
    rng = np.random.default_rng(0)
    N = 30
    Y = rng.poisson(0.3, (N, N))
    np.fill_diagonal(Y, 0)
    data = wmmsb.make_data(Y, directed=True, zeros="list")
    hyper = wmmsb.make_hyper(4, likelihood="bg")
    algorithm = wmmsb.cvb0(data, hyper, likelihood="bg", store_gamma=True)
    state = algorithm.init(jax.random.key(0))
    new, _ = jax.jit(algorithm.step)(jax.random.key(1), state)
    ref = reference_cvb0_step(data, hyper, state, "bg")
    diff = max(
        float(np.max(np.abs(np.asarray(new.gamma) - ref["gamma"]))),
        float(np.max(np.abs(np.asarray(new.zgamma) - ref["zgamma"]))),
    )
    print(f"same-gamma check (N={N}, K=4, bg, exact -ij counts): max |gamma diff| = {diff:.2e}")
    return diff


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 20])
    parser.add_argument("--degree", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ref-pairs", type=int, default=20000)
    parser.add_argument("--likelihood", default="bg", choices=wmmsb.LIKELIHOODS)
    parser.add_argument(
        "--zeros",
        default="dense",
        choices=["dense", "list"],
        help="dense: zeros by matrix products; list: every zero pair's K x K update, vectorised",
    )
    args = parser.parse_args(argv)
    print(f"backend {jax.default_backend()}, devices {jax.devices()}")
    diff = check_same_gamma()
    assert diff < 1e-4, diff
    print("     N    K     links   compile s   bnpjax s/iter   NumPy s/iter (scaled)   ratio")
    for N in args.sizes:
        for K in args.ks:
            src, dst, y = planted(N, K, args.degree)
            data = wmmsb.make_network(N, src, dst, y, directed=True, zeros=args.zeros)
            hyper = wmmsb.make_hyper(K, likelihood=args.likelihood)
            algorithm = wmmsb.cvb0(data, hyper, likelihood=args.likelihood, store_gamma=False)
            t0 = time.perf_counter()
            state = jax.jit(algorithm.init)(jax.random.key(0))
            step = jax.jit(algorithm.step).lower(jax.random.key(0), state).compile()
            compile_s = time.perf_counter() - t0
            times = []
            for t in range(args.repeats):
                t0 = time.perf_counter()
                state, _ = step(jax.random.key(t), state)
                jax.block_until_ready(state)
                times.append(time.perf_counter() - t0)
            ours = statistics.median(times)
            # reference on a sample of pairs in their proportions, scaled to all pairs
            rng = np.random.default_rng(1)
            num_pairs = N * (N - 1)
            m = min(args.ref_pairs, num_pairs)
            n_links = min(m, max(1, round(m * len(src) / num_pairs)))
            pick = rng.choice(len(src), n_links, replace=False)
            zi = rng.integers(0, N, m - n_links)
            zj = (zi + rng.integers(1, N, m - n_links)) % N
            pairs = (
                np.concatenate([src[pick], zi]),
                np.concatenate([dst[pick], zj]),
                np.concatenate([y[pick], np.zeros(m - n_links)]),
            )
            t0 = time.perf_counter()
            reference_cvb0_step(data, hyper, state, args.likelihood, exclude=False, pairs=pairs)
            ref = (time.perf_counter() - t0) / m * num_pairs
            print(
                f"{N:6d} {K:4d} {len(src):9d} {compile_s:11.2f} {ours:15.4f} "
                f"{ref:22.1f} {ref / ours:9.0f}x",
                flush=True,
            )


if __name__ == "__main__":
    main()
