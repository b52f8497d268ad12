"""``bnpjax demo linreg`` and ``bnpjax fit linreg``: conjugate Normal-Gamma regression, the
driver's reference model (``bnpjax.models.linear_regression``)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import read_table
from bnpjax.cli.output import UsageError, summary, timing, write_idata, write_with_trace
from bnpjax.cli.parser import sample

DEMO_HELP = "conjugate Normal-Gamma regression, the driver's reference model"
FIT_HELP = "Bayesian linear regression on a CSV"
DEMO_DEFAULTS = (1000, 500, 4)
DATA_ALIASES = ()


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
    nc, png = write_with_trace(idata, Path(args.out_dir) / "bnpjax_demo_linreg", ["beta", "sigma"])
    print(f"{timing(idata)}, total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument("--target", help="response column (default: the last column)")


def fit(args) -> int:
    from bnpjax.models import linear_regression as lr

    header, values = read_table(args.data)
    target = args.target if args.target is not None else header[-1]
    if target not in header:
        raise UsageError(f"--target: no column {target!r} in {args.data} (has {header})")
    j = header.index(target)
    X = np.delete(values, j, axis=1)
    if X.shape[1] == 0:
        raise UsageError("--data: needs at least one feature column besides the target")
    y = values[:, j]
    mask = np.isfinite(y)
    data = lr.make_data(X, y, mask)
    names = [h for i, h in enumerate(header) if i != j]
    idata = sample(lr.gibbs(data, feature_names=names), args)
    print(summary(idata, ["beta", "sigma"]).to_string())
    out = write_idata(idata, args.out)
    print(f"wrote {out} ({int((~mask).sum())} rows with a missing target left out)")
    return 0
