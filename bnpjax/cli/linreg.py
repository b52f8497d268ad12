"""``bnpjax demo linreg`` and ``bnpjax fit linreg``: conjugate Normal-Gamma regression, the
driver's reference model (``bnpjax.models.linear_regression``)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import add_header_argument, read_table
from bnpjax.cli.output import UsageError, summary, timing, write_idata, write_with_trace
from bnpjax.cli.parser import sample

DEMO_HELP = "conjugate Normal-Gamma regression, the driver's reference model"
FIT_HELP = "Bayesian linear regression on a CSV"
DEMO_DEFAULTS = (1000, 500, 4)
DATA_ALIASES = ()
DATA_HELP = "CSV of feature columns and a response column; empty response cells are left out"


def demo(args) -> int:
    from bnpjax.datasets import linear_regression
    from bnpjax.models import linear_regression as lr

    start = time.perf_counter()
    sim = linear_regression(args.seed, num_obs=100, num_features=3, noise_scale=0.5)
    data = lr.make_data(sim["X"], sim["y"], sim["mask"])
    algorithm = lr.gibbs(data, feature_names=[f"x{i}" for i in range(3)])
    print("bnpjax demo: conjugate Normal-Gamma linear regression (the driver's reference model)")
    print(f"data: 100 observations, 3 features, true beta {np.round(sim['beta'], 3)}, sigma 0.5")
    idata = sample(algorithm, args)
    table = summary(idata, ["beta", "sigma", "tau"])
    exact = lr.posterior_moments(data)
    table["exact_mean"] = np.concatenate(
        [exact["beta_mean"], [exact["sigma_mean"], exact["tau_mean"]]]
    ).round(4)
    table["truth"] = np.concatenate([sim["beta"], [0.5, 4.0]]).round(4)
    print(table.to_string())
    nc, png = write_with_trace(
        idata,
        Path(args.out_dir) / "bnpjax_demo_linreg",
        ["beta", "sigma"],
        truth={"beta": sim["beta"], "sigma": 0.5},
        title="linear regression: posterior of beta (x0, x1, x2) and sigma",
    )
    print(f"{timing(idata)}, total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument(
        "--target", help="response column, a name or a number from 1 (default: the last column)"
    )
    parser.add_argument(
        "--no-intercept",
        action="store_true",
        help="fit no intercept (default: an 'intercept' column of ones is added)",
    )
    add_header_argument(parser)


def fit(args) -> int:
    from bnpjax.models import linear_regression as lr

    table = read_table(args.data, header=False if args.no_header else None)
    j = len(table.columns) - 1 if args.target is None else table.index(args.target, "--target")
    features = [i for i in range(len(table.columns)) if i != j]
    if not features:
        raise UsageError("--data: needs at least one feature column besides the target")
    table.require_present(features, "is a missing feature value (only the target may be missing)")
    X, y = table.values[:, features], table.values[:, j]
    names = [table.columns[i] for i in features]
    if not args.no_intercept:
        X, names = np.column_stack([np.ones(len(y)), X]), ["intercept", *names]
    mask = np.isfinite(y)
    data = lr.make_data(X, y, mask)
    idata = sample(lr.gibbs(data, feature_names=names), args)
    print(summary(idata, ["beta", "sigma"]).to_string())
    out = write_idata(idata, args.out)
    intercept = "no intercept" if args.no_intercept else "with an intercept"
    print(
        f"wrote {out} ({table.columns[j]!r} on {len(features)} columns {intercept}; "
        f"{int((~mask).sum())} rows with a missing target left out)"
    )
    return 0
