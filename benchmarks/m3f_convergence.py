"""Convergence of Gibbs M3F on the data of ``bnpjax demo m3f``: R-hat and ESS of the per-user
thresholds, the log posterior, the training MAE and the held-out scores, test NMAE, and the
seconds of a warm run (compiled by a first, short run), for a given C, margin and rank.

    python benchmarks/m3f_convergence.py --C 0.3 --margin 1 --samples 1000 --warmup 200

Prints one line per setting; the figures are on the benchmarks page (issue 23).
"""

import argparse
import time
import warnings

import jax
import numpy as np

from bnpjax.datasets import ordinal_ratings
from bnpjax.infer.diagnostics import convergence_report
from bnpjax.infer.driver import run
from bnpjax.metrics import nmae_uniform
from bnpjax.models import m3f

NUM_USERS, NUM_ITEMS, NUM_LEVELS = 150, 120, 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--C", type=float, nargs="+", default=[0.3])
    parser.add_argument("--margin", type=float, default=1.0)
    parser.add_argument("--rank", type=int, default=6)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args()

    sim = ordinal_ratings(
        0, num_users=NUM_USERS, num_items=NUM_ITEMS, rank=3, num_levels=NUM_LEVELS
    )
    users, items, levels, test = sim["users"], sim["items"], sim["levels"], sim["test"]
    data = m3f.make_data(
        users[~test], items[~test], levels[~test], NUM_USERS, NUM_ITEMS, NUM_LEVELS,
        margin=args.margin,
    )  # fmt: skip
    for C in args.C:
        hyper = m3f.make_hyper(NUM_LEVELS, C=C, margin=args.margin)
        algorithm = m3f.gibbs(
            data, rank=args.rank, hyper=hyper, test=(users[test], items[test]),
            keep_factors=False,
        )  # fmt: skip
        with warnings.catch_warnings():  # the report below is the diagnosis
            warnings.simplefilter("ignore")
            # compiles the warmup and sampling programs, so that the timed run is warm
            run(
                algorithm, jax.random.key(1), 10, num_warmup=10, num_chains=args.chains,
                progress_bar=False,
            )  # fmt: skip
            start = time.perf_counter()
            result = run(
                algorithm, jax.random.key(0), args.samples, num_warmup=args.warmup,
                num_chains=args.chains, progress_bar=False,
            )  # fmt: skip
            seconds = time.perf_counter() - start
        report = convergence_report(result, ["theta", "lp", "train_mae", "score_test_rb"])
        summary = " | ".join(
            f"{v.name} R-hat {v.r_hat:.3f} ESS {min(v.ess_bulk, v.ess_tail):.0f} "
            f"({v.num_flagged} flagged)"
            for v in report.variables
        )
        scores = np.asarray(result.trace["sample_stats"]["score_test_rb"]).mean((0, 1))
        thresholds = np.asarray(result.trace["posterior"]["theta"]).mean((0, 1))
        predicted = np.asarray(m3f.levels_from_scores(scores, thresholds[users[test]]))
        nmae = nmae_uniform(levels[test], predicted, num_levels=NUM_LEVELS)
        print(
            f"C={C} margin={args.margin} rank={args.rank} "
            f"{args.chains}x({args.warmup}+{args.samples}): warm {seconds:.1f} s "
            f"({1000 * seconds / (args.samples + args.warmup):.1f} ms a sweep), "
            f"test NMAE {nmae:.4f} :: {summary}",
            flush=True,
        )


if __name__ == "__main__":
    main()
