"""``bnpjax demo fm`` and ``bnpjax fit fm``: Bayesian factorization machines by Gibbs
sampling (``bnpjax.models.fm``) on ratings with one-hot user and item columns."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import read_table
from bnpjax.cli.output import UsageError, summary, write_idata, write_with_trace
from bnpjax.cli.parser import sample

DEMO_HELP = "Bayesian factorization machine on generated ratings"
FIT_HELP = "Bayesian FM on a ratings CSV (user, item, rating; ids from 0)"
DEMO_DEFAULTS = (150, 100, 2)
DATA_ALIASES = ("--train",)

_LIKELIHOODS = {"regression": "gaussian", "classification": "probit", "ordinal": "ordinal"}


def _ratings_design(users, items, num_users, num_items):
    """One-hot user and item columns of a ratings table (ids are 0-based positions)."""
    import scipy.sparse as sp

    n = len(users)
    rows = np.repeat(np.arange(n), 2)
    cols = np.stack([users, num_users + items], axis=1).ravel()
    return sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, num_users + num_items))


def _test_arguments(X_test) -> dict:
    from bnpjax.models import fm

    rows, cols, values, shape = fm.to_coo(X_test)
    return dict(test=(rows, cols, values), num_test=shape[0])


def demo(args) -> int:
    from bnpjax.datasets import factorization_ratings
    from bnpjax.models import fm

    start = time.perf_counter()
    num_users, num_items, rank = 200, 150, 3
    sim = factorization_ratings(args.seed, num_users=num_users, num_items=num_items, rank=rank)
    y, truth, test = sim["y"], sim["signal"], sim["test"]
    X = _ratings_design(sim["users"], sim["items"], num_users, num_items)
    print("bnpjax demo: Bayesian factorization machine (Gibbs) on generated ratings")
    print(
        f"data: {num_users} users x {num_items} items, {y.size} ratings, rank {rank}, noise sd 0.5"
    )
    data = fm.make_data(X[~test], y[~test])
    idata = sample(fm.gibbs(data, rank=rank, **_test_arguments(X[test])), args)
    yhat = idata.sample_stats["yhat_test"].mean(("chain", "draw")).values
    rmse_truth = float(np.sqrt(np.mean((yhat - truth[test]) ** 2)))
    rmse_y = float(np.sqrt(np.mean((yhat - y[test]) ** 2)))
    noise_sd = np.sqrt(idata.posterior["noise_var"].values)
    print(f"test RMSE against the ratings: {rmse_y:.3f} (noise floor 0.5)")
    print(f"test RMSE against the noiseless signal: {rmse_truth:.3f}")
    print(f"posterior noise sd: {noise_sd.mean():.3f} +- {noise_sd.std():.3f} (truth 0.5)")
    nc, png = write_with_trace(idata, Path(args.out_dir) / "bnpjax_demo_fm", ["b", "noise_var"])
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument("--test", help="held-out ratings CSV with the same columns")
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--task", choices=list(_LIKELIHOODS), default="regression")
    parser.add_argument("--target", default=None, help="target column (default: the third)")


def _read_ratings(args):
    """The training table, the test table (or None) and the target column."""
    header, train = read_table(args.data)
    if train.shape[1] < 3:
        raise UsageError("--train: needs columns user, item and a target (with a header)")
    j = 2 if args.target is None else header.index(args.target) if args.target in header else -1
    if j < 0:
        raise UsageError(f"--target: no column {args.target!r} in {args.data} (has {header})")
    test = None
    if args.test:
        test_header, test = read_table(args.test)
        if test_header != header:
            raise UsageError(f"--test: columns {test_header} differ from --train's {header}")
    for table, name in ((train, "--train"), (test, "--test")):
        if table is None:
            continue
        ids = table[:, :2]
        if not np.all(np.isfinite(ids)) or np.any(ids != np.round(ids)) or np.any(ids < 0):
            raise UsageError(f"{name}: user and item ids must be non-negative integers")
        if not np.all(np.isfinite(table[:, j])):
            raise UsageError(f"{name}: the target column has missing values")
    return train, test, j


def fit(args) -> int:
    from bnpjax.models import fm

    train, test, j = _read_ratings(args)
    tables = [train] if test is None else [train, test]
    num_users = int(max(t[:, 0].max() for t in tables)) + 1
    num_items = int(max(t[:, 1].max() for t in tables)) + 1

    def design(table):
        users, items = table[:, 0].astype(int), table[:, 1].astype(int)
        return _ratings_design(users, items, num_users, num_items)

    likelihood = _LIKELIHOODS[args.task]
    y = train[:, j]
    if likelihood == "ordinal":
        levels = np.unique(y)
        if levels.size != levels[-1] - levels[0] + 1 or np.any(levels != np.round(levels)):
            missing = sorted(set(range(int(levels[0]), int(levels[-1]) + 1)) - set(levels))
            raise UsageError(
                f"--task ordinal: the target takes the levels {levels.tolist()[:10]}, with gaps "
                f"(never {missing[:10]}); an ordinal target takes consecutive integers: "
                "renumber the levels, or use --task regression"
            )
        y = y - float(y.min())
    data = fm.make_data(design(train), y, likelihood=likelihood)
    test_kw = {} if test is None else _test_arguments(design(test))
    idata = sample(fm.gibbs(data, rank=args.rank, likelihood=likelihood, **test_kw), args)
    print(summary(idata, ["b", "noise_var"] if likelihood == "gaussian" else ["b"]).to_string())
    if test is not None and likelihood == "gaussian":
        yhat = idata.sample_stats["yhat_test"].mean(("chain", "draw")).values
        print(f"test RMSE: {np.sqrt(np.mean((yhat - test[:, j]) ** 2)):.4f}")
    out = write_idata(idata, args.out)
    print(f"wrote {out} ({num_users} users, {num_items} items, {len(y)} training rows)")
    return 0
