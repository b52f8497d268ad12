"""SGRLD (``wmmsb.sgrld``, the MMSB) on the planted sparse networks of
``benchmarks/wmmsb_scale.py``: held-out AUC of the posterior mean link probability (averaged
over the kept draws) against the planted truth's, seconds per pass, peak memory.

The networks, the held-out split and the truth's AUC are those of ``wmmsb_scale.py`` (same
``--seed``): undirected planted partitions, ``K`` blocks, mean degree ``--degree``, 10% of
the links and as many non-links held out. The sampler runs ``--passes`` visits per node
(a pass is ``N / batch`` steps) through ``bnpjax.sample``; the last ``--keep`` passes give
one draw each.

    python benchmarks/wmmsb_sgrld_scale.py --sizes 10000 100000
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import sys
import time

import jax
import numpy as np
import scipy.sparse as sp

import bnpjax
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from wmmsb_scale import planted, split


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--K", type=int, default=20)
    parser.add_argument("--degree", type=float, default=20.0)
    parser.add_argument("--within", type=float, default=0.8)
    parser.add_argument("--passes", type=int, default=40)
    parser.add_argument("--keep", type=int, default=10, help="last passes kept (one draw each)")
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--draws", type=int, default=64)
    parser.add_argument("--links-per-node", type=int, default=64)
    parser.add_argument("--step-size", type=float, default=0.1)
    parser.add_argument("--tau", type=float, default=1000.0)
    parser.add_argument("--kappa", type=float, default=0.55)
    parser.add_argument("--init", default=None, choices=["scvb0", "assortative", "prior"])
    parser.add_argument("--init-passes", type=int, default=40, help="SCVB0 passes of the start")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"backend {jax.default_backend()}, K={args.K}, degree {args.degree}")
    print("nodes      edges      AUC    truth  s/pass  peak MiB  total s")
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
        hyper = wmmsb.make_hyper(args.K, likelihood="bernoulli")
        kernel = wmmsb.sgrld(
            data,
            hyper,
            likelihood="bernoulli",
            step_size=args.step_size,
            tau=args.tau,
            kappa=args.kappa,
            batch=args.batch,
            draws=args.draws,
            links_per_node=args.links_per_node,
            init=args.init,
            init_passes=args.init_passes,
        )
        per_pass = max(1, N // args.batch)
        t0 = time.perf_counter()
        idata = bnpjax.sample(
            kernel,
            jax.random.key(args.seed),
            args.keep,
            num_warmup=(args.passes - args.keep) * per_pass,
            thin=per_pass,
            progress_bar=False,
            check_convergence=False,
        )
        total = time.perf_counter() - t0
        prob = wmmsb.predict(idata, data, (t_src, t_dst), hyper=hyper, likelihood="bernoulli")
        prob = prob.reshape(-1, t_y.shape[0])
        auc = roc_auc(t_y, prob.mean(0))
        each = [roc_auc(t_y, q) for q in prob]
        truth = roc_auc(t_y, np.where(z[t_src] == z[t_dst], p_in, p_out))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(
            f"{N:<10d} {src.shape[0]:<10d} {auc:.3f}  {truth:.3f}  {total / args.passes:6.2f}  "
            f"{peak:8.0f}  {total:7.1f} (compile included); one draw's AUC "
            f"{min(each):.3f}-{max(each):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
