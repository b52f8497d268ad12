"""Is iPM3F's growth of K+ at large C the pseudo-posterior's or the sampler's? (issue 23)

On random subsets of MovieLens-100K users (all their ratings), two chains of Gibbs iPM3F per
setting, one from few features and one from many, run side by side; if they meet, the level
they meet at is the pseudo-posterior's, and how that level moves with C and with the number of
ratings says whether the runaway on the full data is the model's own regime.

    BNPJAX_DATA=... python benchmarks/ipm3f_regime.py --users 100 300 --C 0.01 0.13 \
        --starts 2 96 --sweeps 600

Prints, per setting, K+ of both chains at ten checkpoints, then the mean K+ of each chain over
the last half, R-hat of K+ over the two (split chains, ArviZ), the training MAE and seconds.
"""

import argparse
import time
import warnings

import jax
import numpy as np

from bnpjax.datasets import movielens
from bnpjax.infer.driver import run
from bnpjax.models import m3f


def _subset(ratings, num_users, seed):
    """Every rating of ``num_users`` random users, ids renumbered from 0."""
    rng = np.random.default_rng(seed)
    chosen = rng.choice(np.unique(ratings[:, 0]), num_users, replace=False)
    kept = ratings[np.isin(ratings[:, 0], chosen)]
    _, users = np.unique(kept[:, 0], return_inverse=True)
    _, items = np.unique(kept[:, 1], return_inverse=True)
    return users, items, kept[:, 2].astype(int)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--C", type=float, nargs="+", default=[0.01, 0.13])
    parser.add_argument("--starts", type=int, nargs=2, default=[2, 96])
    parser.add_argument("--sweeps", type=int, default=600)
    parser.add_argument("--margin", type=float, default=9.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--weight-precision-prior", type=float, nargs=2, default=None, metavar=("A", "B"),
        help="sample 1/sigma^2 of the weights from a Gamma(A, rate B) prior (default: fixed 1)",
    )  # fmt: skip
    args = parser.parse_args()

    import arviz as az

    ml = movielens("ml-100k", download=False)
    for num_users in args.users:
        users, items, levels = _subset(ml.ratings, num_users, args.seed)
        data = m3f.make_data(
            users, items, levels, users.max() + 1, items.max() + 1, 5, margin=args.margin
        )
        for C in args.C:
            hyper = m3f.make_hyper(5, C=C, margin=args.margin)
            paths, maes, sds, seconds = [], [], [], []
            for i, start in enumerate(args.starts):
                algorithm = m3f.ipm3f_gibbs(
                    data, hyper, feature_step="parallel", num_init_features=start,
                    capacity=start + 64, keep_factors=False, pointwise_log_likelihood=False,
                    weight_precision_prior=args.weight_precision_prior,
                )  # fmt: skip
                tic = time.perf_counter()
                with warnings.catch_warnings():  # two single chains: diagnosed below
                    warnings.simplefilter("ignore")
                    result = run(
                        algorithm, jax.random.key(args.seed + i), args.sweeps, num_warmup=0,
                        num_chains=1, progress_bar=False,
                    )  # fmt: skip
                seconds.append(time.perf_counter() - tic)
                paths.append(np.asarray(result.trace["posterior"]["num_features"])[0])
                maes.append(np.asarray(result.trace["sample_stats"]["train_mae"])[0])
                sds.append(np.asarray(result.trace["posterior"]["sigma_v"])[0])
            checkpoints = np.linspace(0, args.sweeps - 1, 10).astype(int)
            half = args.sweeps // 2
            r_hat = float(az.rhat(np.stack([p[half:] for p in paths]).astype(float)))
            print(
                f"users {num_users} ({len(levels)} ratings), C={C}, margin {args.margin}, "
                f"weight precision prior {args.weight_precision_prior}: "
                + "; ".join(
                    f"from {s}: K+ "
                    + " ".join(str(int(p[c])) for c in checkpoints)
                    + f" | last half {p[half:].mean():.1f} (sd {p[half:].std():.1f}),"
                    f" train MAE {m[half:].mean():.3f}, sigma_v {d[half:].mean():.2f}, {t:.0f} s"
                    for s, p, m, d, t in zip(args.starts, paths, maes, sds, seconds, strict=True)
                )
                + f" | R-hat of K+ over the two {r_hat:.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
