"""``bnpjax demo m3f`` and ``bnpjax fit m3f``: Gibbs max-margin matrix factorization and its
nonparametric iPM3F (``bnpjax.models.m3f``) on ordinal ratings."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import add_header_argument, add_id_arguments, read_table, zero_based
from bnpjax.cli.output import UsageError, save_figure, timing, write_idata
from bnpjax.cli.parser import sample

#: chains on every core (bnpjax.cli._use_cores): the demo's 4 chains on a 2-core CPU, 23.9 s
#: on one device against 19.6 s on two, the same draws
CPU_CORES = True
DEMO_HELP = "Gibbs max-margin matrix factorization on generated ordinal ratings"
FIT_HELP = "Gibbs M3F / iPM3F on ordinal ratings (user, item, rating)"
# 4 x (200 + 1000) sweeps: every threshold's R-hat <= 1.01 and ESS >= 100 per chain at C = 0.3
# (at C = 1 the thresholds still had R-hat 1.06 at 4 x (200 + 500) with the scale moves;
# docs/benchmarks.md, convergence)
DEMO_DEFAULTS = (1000, 200, 4)
DATA_ALIASES = ()
DATA_HELP = "training CSV: user id, item id, rating 1..L (ids from 0, or --one-based)"


def _run(train, test, num_users, num_items, args, num_levels=5, pointwise=True):
    """Fit Gibbs M3F (or iPM3F); returns the InferenceData and the predicted test levels.
    ``pointwise``: trace the training ratings' pointwise log-likelihood (for LOO)."""
    from bnpjax.models import m3f

    data = m3f.make_data(*train, num_users, num_items, num_levels, margin=args.margin)
    hyper = m3f.make_hyper(num_levels, C=args.C, margin=args.margin)
    if args.sampler == "ipm3f":
        algorithm = m3f.ipm3f_gibbs(
            data, hyper=hyper, test=test, keep_factors=False, feature_step=args.feature_step,
            pointwise_log_likelihood=pointwise,
        )  # fmt: skip
    else:
        algorithm = m3f.gibbs(
            data,
            rank=args.rank,
            hyper=hyper,
            test=test,
            keep_factors=False,
            item_bias=args.item_bias,
            pointwise_log_likelihood=pointwise,
        )
    idata = sample(algorithm, args)
    # the Rao-Blackwellized score: the same posterior mean as the drawn scores, less noise
    return idata, m3f.predict_levels(idata, test[0])


def demo(args) -> int:
    from bnpjax.datasets import ordinal_ratings
    from bnpjax.infer.diagnostics import check_convergence
    from bnpjax.metrics import nmae_uniform
    from bnpjax.plots import plot_thresholds

    start = time.perf_counter()
    sim = ordinal_ratings(args.seed, num_users=150, num_items=120, rank=3, num_levels=5)
    users, items, levels, test = sim["users"], sim["items"], sim["levels"], sim["test"]
    # C = 0.3 rather than 1: a sharper hinge predicts a little better (test NMAE 0.17 vs 0.19)
    # but its augmented sweep mixes too slowly to converge in a demo's time
    args.sampler, args.rank, args.C, args.margin, args.item_bias = "m3f", 6, 0.3, 1.0, False
    print("bnpjax demo m3f: Gibbs max-margin matrix factorization on generated ordinal ratings")
    print(f"data: 150 users x 120 items, {users.size} ratings 1..5 from rank-3 factors")
    train = (users[~test], items[~test], levels[~test])
    # the demo's file holds what it shows: not the training ratings' pointwise log-likelihood
    # (4 x 1000 draws of 4,756 ratings: 76 of the file's 104 MB, about 0.4 s of the demo)
    idata, predicted = _run(train, (users[test], items[test]), 150, 120, args, pointwise=False)
    print(f"test NMAE {nmae_uniform(levels[test], predicted, num_levels=5):.4f} (guessing: 1)")
    # the thresholds the figure shows (all users', by the worst one) and the fit; the factors
    # are identified only up to rotation and not traced
    report = check_convergence(idata, ["theta", "lp", "train_mae"], warn=False)
    print("\n".join(report.lines()))
    print(timing(idata, digits=1))
    out = Path(args.out_dir)
    nc = write_idata(idata, out / "bnpjax_demo_m3f.nc")
    png = save_figure(
        out / "bnpjax_demo_m3f_thresholds.png",
        plot_thresholds,
        idata,
        title="Gibbs M3F: user thresholds",
    )
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument(
        "--test", help="held-out CSV (user, item, rating): the test NMAE is printed"
    )
    parser.add_argument(
        "--sampler",
        choices=["m3f", "ipm3f"],
        default="m3f",
        help="m3f: Gibbs M3F with a fixed rank; ipm3f: its nonparametric version (IBP features)",
    )
    parser.add_argument(
        "--feature-step",
        choices=["sequential", "parallel"],
        default="sequential",
        help="iPM3F: the authors' user-by-user feature sweep, or the row-parallel one",
    )
    parser.add_argument("--item-bias", action="store_true", help="M3F: an item bias in every score")
    parser.add_argument("--rank", type=int, default=10, help="M3F: number of latent factors")
    parser.add_argument("--C", type=float, default=0.1, help="regularization constant")
    parser.add_argument("--margin", type=float, default=9.0, help="hinge margin ell")
    add_id_arguments(parser)
    add_header_argument(parser)


def fit(args) -> int:
    from bnpjax.metrics import nmae_uniform

    if args.sampler == "m3f" and args.rank < 1:  # the option's name, not the library's
        raise UsageError(f"--rank must be at least 1, got {args.rank}")
    header = False if args.no_header else None
    tables = [read_table(args.data, header=header)]
    if args.test:
        tables.append(read_table(args.test, "--test", header=header))
    for table in tables:
        if len(table.columns) < 3:
            raise UsageError(f"{table.option}: needs columns user, item and rating")
        table.require_integers([2], 1, "is not a rating level (an integer from 1)")
    ids = zero_based(tables, [0, 1], args)
    pairs = np.concatenate(ids)
    num_users, num_items = int(pairs[:, 0].max()) + 1, int(pairs[:, 1].max()) + 1
    num_levels = max(int(max(t.values[:, 2].max() for t in tables)), 2)
    train = (ids[0][:, 0], ids[0][:, 1], tables[0].values[:, 2])
    test = (ids[-1][: None if args.test else 1, 0], ids[-1][: None if args.test else 1, 1])
    idata, predicted = _run(train, test, num_users, num_items, args, num_levels)
    write_idata(idata, args.out)
    if args.test:
        nmae = nmae_uniform(tables[1].values[:, 2], predicted, num_levels=num_levels)
        print(f"test NMAE {nmae:.4f}")
    print(f"wrote {args.out} ({num_users} users, {num_items} items)")
    return 0
