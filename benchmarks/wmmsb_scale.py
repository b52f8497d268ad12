"""Stochastic CVB0 on planted sparse networks of 10^4 to 10^6 nodes: held-out AUC against the
planted truth's, seconds per pass, peak memory.

Each network (``--sizes``) is an undirected planted-partition network: ``K`` blocks
(``--K``), mean degree ``--degree``, a fraction ``--within`` of every node's links inside its
block; the link probability is ``p_in`` within a block and ``p_out`` across. The data never
hold an ``N x N`` array: links as an edge list (a ``scipy.sparse`` matrix), every other pair
an observed zero drawn on the fly. 10% of the links and as many non-links are held out. The
fit is ``wmmsb.scvb0`` (MMSB, ``likelihood="bernoulli"``, rank ``K``) for ``--passes``
visits per node; a pass is ``N / batch`` steps, and the held-out AUC is printed after each
tenth of them (the passes needed). The truth's AUC scores the held-out pairs by their
planted probability. Peak memory is the process's maximum resident set size.

    python benchmarks/wmmsb_scale.py --sizes 10000 100000
    python benchmarks/wmmsb_scale.py --sizes 1000000 --passes 3
"""

from __future__ import annotations

import argparse
import itertools
import resource

import jax
import numpy as np
import scipy.sparse as sp

from bnpjax.infer import fit_run
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb


def planted(rng, N, K, degree, within):
    """Edges ``(src, dst)`` (``src < dst``) of an undirected planted-partition network and
    the block of each node; ``p_in``, ``p_out`` the pair link probabilities."""
    z = rng.integers(0, K, N)
    E = int(N * degree / 2)
    n_in = rng.binomial(E, within)
    # within-block pairs: a random node and a random member of its block
    order = np.argsort(z, kind="stable")
    start = np.searchsorted(z[order], np.arange(K))
    size = np.bincount(z, minlength=K)
    a = rng.integers(0, N, 2 * n_in)
    b = order[start[z[a]] + (rng.random(2 * n_in) * size[z[a]]).astype(np.int64)]
    c = rng.integers(0, N, 2 * (E - n_in))
    d = rng.integers(0, N, 2 * (E - n_in))
    cross = z[c] != z[d]
    src = np.concatenate([a, c[cross]])
    dst = np.concatenate([b, d[cross]])
    src, dst = np.minimum(src, dst), np.maximum(src, dst)
    keys = np.unique((src * N + dst)[src != dst])
    inside = z[keys // N] == z[keys % N]
    take = np.concatenate(
        [
            rng.permutation(np.flatnonzero(inside))[:n_in],
            rng.permutation(np.flatnonzero(~inside))[: E - n_in],
        ]
    )
    keys = keys[take]
    pairs_in = float(np.sum(size * (size - 1) / 2))
    p_in = inside[take].sum() / pairs_in
    p_out = (~inside[take]).sum() / (N * (N - 1) / 2 - pairs_in)
    return keys // N, keys % N, z, p_in, p_out


def split(rng, src, dst, N):
    """10% of the links and as many random non-links held out."""
    L = src.shape[0]
    test = rng.permutation(L)[: L // 10]
    links = set((src * N + dst).tolist())
    zi, zj = [], []
    while len(zi) < test.shape[0]:
        i, j = rng.integers(0, N, 2)
        if i != j and min(i, j) * N + max(i, j) not in links:
            zi.append(min(i, j))
            zj.append(max(i, j))
    train = np.ones(L, bool)
    train[test] = False
    t_src = np.concatenate([src[test], zi])
    t_dst = np.concatenate([dst[test], zj])
    t_y = np.concatenate([np.ones(test.shape[0]), np.zeros(len(zi))])
    return train, t_src, t_dst, t_y


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--K", type=int, default=20)
    parser.add_argument("--degree", type=float, default=20.0)
    parser.add_argument("--within", type=float, default=0.8)
    parser.add_argument("--passes", type=float, default=40.0)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--draws", type=int, default=64)
    parser.add_argument("--links-per-node", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tau", type=float, default=16.0, help="step size (tau + t)^-kappa")
    parser.add_argument("--kappa", type=float, default=0.5)
    parser.add_argument("--kappa-node", type=float, default=None, help="node step exponent")
    parser.add_argument(
        "--node-update",
        choices=["solve", "pass"],
        default="solve",
        help="node rows (pass: the MMSB stays at AUC 0.50 here, 10^4 zeros per node)",
    )
    args = parser.parse_args(argv)
    print(f"backend {jax.default_backend()}, K={args.K}, degree {args.degree}")
    print("nodes      edges      AUC    truth  s/pass  s/1% edges  peak MiB  compile s")
    rows = []
    for N in args.sizes:
        rng = np.random.default_rng(args.seed)
        src, dst, z, p_in, p_out = planted(rng, N, args.K, args.degree, args.within)
        train, t_src, t_dst, t_y = split(rng, src, dst, N)
        matrix = sp.coo_matrix(
            (np.ones(int(train.sum()), np.int64), (src[train], dst[train])), shape=(N, N)
        )
        data = wmmsb.make_network(
            matrix,
            directed=False,
            unobserved=np.stack([t_src, t_dst], 1),
            zeros="none",
            likelihood="bernoulli",
        )
        algorithm = wmmsb.scvb0(
            data,
            rank=args.K,
            likelihood="bernoulli",
            batch=args.batch,
            draws=args.draws,
            links_per_node=args.links_per_node,
            node_update=args.node_update,
            tau=args.tau,
            kappa=args.kappa,
            kappa_node=args.kappa_node,
            pointwise_log_likelihood=False,
        )
        chunk = max(1, round(args.passes * N / args.batch / 10))
        hyper = wmmsb.make_hyper(args.K, likelihood="bernoulli")

        def held_out_auc(state):
            score = wmmsb.expected_link_probability(
                state, hyper, t_src, t_dst, likelihood="bernoulli"
            )
            return roc_auc(t_y, np.asarray(score))

        # ten segments of passes / 10, each continuing the last one's state (its own key: the
        # driver numbers a call's steps from 0), the held-out AUC after each: the passes needed.
        # The first segment compiles; the cost of a pass is the mean of the other nine.
        key = jax.random.key(args.seed)
        state, seconds, trace = None, [], []
        for segment in range(10):
            result = fit_run(
                algorithm,
                jax.random.fold_in(key, segment),
                chunk,
                num_draws=1,
                progress_bar=False,
                chunk_size=chunk,
                initial_state=state,
            )
            state = result.state
            seconds.append(result.timings["run_s"])
            trace.append(((segment + 1) * chunk * args.batch / N, held_out_auc(state)))
            print(
                f"  {trace[-1][0]:.1f} passes: AUC {trace[-1][1]:.3f} ({seconds[-1]:.0f} s)",
                flush=True,
            )
        per_pass = float(np.mean(seconds[1:])) / (chunk * args.batch / N)
        compile_s = seconds[0] - float(np.mean(seconds[1:]))
        auc = trace[-1][1]
        truth = roc_auc(t_y, np.where(z[t_src] == z[t_dst], p_in, p_out))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{N:<10d} {src.shape[0]:<10d} {auc:.3f}  {truth:.3f}  {per_pass:6.2f}  "
            f"{per_pass / 100:10.3f}  {peak:8.0f}  {compile_s:8.1f}",
            flush=True,
        )
        rows.append((src.shape[0], per_pass))
    # growth of the cost of a pass with the number of edges (1: linear)
    for (e0, s0), (e1, s1) in itertools.pairwise(rows):
        print(f"edges {e0} -> {e1}: s/pass grows as edges^{np.log(s1 / s0) / np.log(e1 / e0):.2f}")


if __name__ == "__main__":
    main()
