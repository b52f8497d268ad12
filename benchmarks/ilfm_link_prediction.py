"""ILFM / LFRM link prediction on Kemp's relational data, Miller, Griffiths & Jordan's protocol.

For each data set (``--datasets``: nations, kinship, umls) and setting (``--modes``: global =
one feature matrix for all relations, single = one model per relation, run together by
``vmap``) and each of ``--splits`` random splits: hold out 20% of the observed entries (the
diagonal and missing entries are never observed), run ``--iterations`` sweeps of
``bnpjax.models.ilfm.gibbs`` from a random start (the first ``--burn-in`` are warmup: the HMC
step size adapts there only), and score the held-out entries by the posterior-mean link
probability over the kept draws (AUC-ROC). Prints mean and sd of the AUC per setting next to
the published LFRM figures (Miller et al. 2009, Table 1, random initialisation) and the
seconds per sweep.

    python benchmarks/ilfm_link_prediction.py                       # full protocol
    python benchmarks/ilfm_link_prediction.py --datasets nations --splits 2 --iterations 300
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import NamedTuple

import jax
import numpy as np

from bnpjax.datasets import kinship, nations, umls
from bnpjax.infer import run
from bnpjax.metrics import roc_auc
from bnpjax.models import ilfm

LOADERS = {"nations": nations, "kinship": kinship, "umls": umls}
#: LFRM with random initialisation (Miller et al. 2009, Table 1); Countries = nations,
#: Alyawarra = kinship; the paper has no UMLS row in that table
PUBLISHED = {
    ("nations", "single"): 0.8529,
    ("nations", "global"): 0.7067,
    ("kinship", "single"): 0.9443,
    ("kinship", "global"): 0.7127,
}


def entity_covariates(dataset, args):
    """Miller et al.'s covariates for nations: the country attributes, unknown ones as 0,
    centred, entering as sender and receiver terms (``--covariates``)."""
    if not args.covariates or dataset.attributes is None or dataset.name != "nations":
        return None
    A = np.nan_to_num(dataset.attributes)
    return A - A.mean(axis=0)


class Run(NamedTuple):
    auc: float  # over all held-out entries
    relation_auc: float  # mean over relations of each relation's AUC
    seconds: float  # per sweep (all chains)
    features: float  # posterior mean K+ (per relation in the single setting)


def one_run(dataset, mode: str, split: int, args) -> Run:
    rng = np.random.default_rng(split)
    held = dataset.mask & (rng.random(dataset.mask.shape) < 0.2)
    data = ilfm.make_data(
        dataset.Y, dataset.mask & ~held, entity_covariates=entity_covariates(dataset, args)
    )
    algorithm = ilfm.gibbs(
        data,
        capacity=args.capacity,
        mode=mode,
        init_strategy=args.init,
        num_init_features=args.init_features,
        pointwise_log_likelihood=False,  # up to 0.9 M observed entries per draw (umls)
    )
    kept = args.iterations - args.burn_in
    result = run(
        algorithm,
        jax.random.key(split),
        kept // args.thin,
        num_warmup=args.burn_in,
        thin=args.thin,
        num_chains=args.chains,
        progress_bar=False,
    )
    probs = ilfm.predict(result.trace, data)
    auc = roc_auc(dataset.Y[held], probs[held])
    per_relation = [
        roc_auc(dataset.Y[r][held[r]], probs[r][held[r]])
        for r in range(dataset.Y.shape[0])
        if 0 < dataset.Y[r][held[r]].sum() < held[r].sum()
    ]
    seconds = (result.timings["warmup_s"] + result.timings["sampling_s"]) / args.iterations
    features = np.asarray(result.trace["posterior"]["num_features"]).mean()
    return Run(auc, float(np.mean(per_relation)), seconds, float(features))


def compare_weight_samplers(args) -> None:
    """ESS per second of the log joint, a bias and sum W^2: HMC against the seed's random-walk
    MH for the weights, on the full nations data (global model)."""
    from bnpjax.infer.arviz_adapter import _arviz

    az = _arviz()
    dataset = nations()
    data = ilfm.make_data(dataset.Y, dataset.mask)
    for weights in ("hmc", "random_walk"):
        algorithm = ilfm.gibbs(
            data, capacity=args.capacity, weights=weights, pointwise_log_likelihood=False
        )
        result = run(
            algorithm,
            jax.random.key(0),
            args.iterations - args.burn_in,
            num_warmup=args.burn_in,
            num_chains=2,
            progress_bar=False,
        )
        post, stats = result.trace["posterior"], result.trace["sample_stats"]
        seconds = result.timings["sampling_s"]
        quantities = {
            "lp": np.asarray(stats["lp"]),
            "bias[0]": np.asarray(post["bias"][..., 0]),
            "sum W^2": np.asarray((post["W"] ** 2).sum(axis=(2, 3, 4))),
        }
        ess = {k: float(az.ess(v)) for k, v in quantities.items()}
        print(
            f"weights={weights:11s} {1e3 * seconds / (args.iterations - args.burn_in):.0f} ms "
            f"per sweep (2 chains); ESS/s "
            + ", ".join(f"{k} {v / seconds:.1f}" for k, v in ess.items())
            + f"; acceptance {float(np.mean(stats['acceptance_rate'])):.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="nations,kinship")
    parser.add_argument("--modes", default="single,global")
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--burn-in", type=int, default=200)
    parser.add_argument("--thin", type=int, default=2)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--chains", type=int, default=1, help="restarts, run together by vmap")
    parser.add_argument("--init", default="random", choices=ilfm.INIT_STRATEGIES)
    parser.add_argument(
        "--init-features", type=int, default=None, help="default: ilfm.gibbs's (10, single 4)"
    )
    parser.add_argument(
        "--covariates", action="store_true", help="nations: country attributes as covariates"
    )
    parser.add_argument(
        "--compare-weights",
        action="store_true",
        help="only the HMC vs random-walk ESS/s comparison on nations",
    )
    args = parser.parse_args()
    if args.compare_weights:
        compare_weight_samplers(args)
        return
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}, jax {jax.__version__}, {jax.devices()}")
    print(
        f"protocol: 20% of observed entries held out, {args.iterations} sweeps "
        f"({args.burn_in} burn-in), thin {args.thin}, {args.splits} splits, {args.chains} "
        f"chain(s), {args.init} init with {args.init_features or 'default'} features"
    )
    for name in args.datasets.split(","):
        dataset = LOADERS[name.strip()]()
        for mode in args.modes.split(","):
            runs = [one_run(dataset, mode, s, args) for s in range(args.splits)]
            published = PUBLISHED.get((dataset.name, mode))
            ref = f"published LFRM {published:.4f}" if published else "no published figure"
            print(
                f"{dataset.name:8s} {mode:6s} AUC {_mean_sd([r.auc for r in runs])} ({ref}); "
                f"mean per-relation AUC {_mean_sd([r.relation_auc for r in runs])}; "
                f"K+ {statistics.mean(r.features for r in runs):.1f}; "
                f"{1e3 * statistics.median(r.seconds for r in runs):.0f} ms per sweep; "
                f"runs: {', '.join(f'{r.auc:.4f}' for r in runs)}",
                flush=True,
            )


def _mean_sd(values) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} +- {sd:.4f}"


if __name__ == "__main__":
    main()
