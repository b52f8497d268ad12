"""``bnpjax demo fm`` and ``bnpjax fit fm``: Bayesian factorization machines by Gibbs
sampling (``bnpjax.models.fm``) on ratings with one-hot user and item columns."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import add_header_argument, add_id_arguments, read_table, zero_based
from bnpjax.cli.output import UsageError, summary, write_idata, write_with_trace
from bnpjax.cli.parser import sample

#: chains on every core (bnpjax.cli._use_cores): checked and measured faster split
CPU_CORES = True
DEMO_HELP = "Bayesian factorization machine on generated ratings"
FIT_HELP = "Bayesian FM on a ratings CSV (user, item, target)"
DEMO_DEFAULTS = (500, 100, 4)
DATA_ALIASES = ("--train",)
DATA_HELP = "training CSV: user id, item id and a target column (ids from 0, or --one-based)"

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
    # the demo's file holds what it shows: not the training ratings' pointwise log-likelihood
    # (4 x 500 draws of the 6,400 training ratings, 51 MB; bnpjax fit fm keeps it)
    algorithm = fm.gibbs(
        data, rank=rank, pointwise_log_likelihood=False, **_test_arguments(X[test])
    )
    idata = sample(algorithm, args)
    yhat = idata.sample_stats["yhat_test"].mean(("chain", "draw")).values
    rmse_truth = float(np.sqrt(np.mean((yhat - truth[test]) ** 2)))
    rmse_y = float(np.sqrt(np.mean((yhat - y[test]) ** 2)))
    noise_sd = np.sqrt(idata.posterior["noise_var"].values)
    print(f"test RMSE against the ratings: {rmse_y:.3f} (noise floor 0.5)")
    print(f"test RMSE against the noiseless signal: {rmse_truth:.3f}")
    print(f"posterior noise sd: {noise_sd.mean():.3f} +- {noise_sd.std():.3f} (truth 0.5)")
    # what the demo reports and traces (b, the noise) and the linear weights' prior mean and
    # variance that b trades off against (bnpjax.sample also checks lp and warns)
    print(summary(idata, ["b", "noise_var", "mu_w", "var_w"]).to_string())
    nc, png = write_with_trace(
        idata,
        Path(args.out_dir) / "bnpjax_demo_fm",
        ["b", "noise_var"],
        truth={"b": 3.0, "noise_var": 0.25},
        title="factorization machine: global bias b and noise variance",
    )
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument(
        "--test", help="held-out CSV with the same columns: a test metric is printed"
    )
    parser.add_argument("--rank", type=int, default=10, help="dimension of the factors V")
    parser.add_argument(
        "--task",
        choices=list(_LIKELIHOODS),
        default="regression",
        help="regression: Gaussian; classification: probit on 0/1 targets; ordinal: ordered "
        "probit on integer levels",
    )
    parser.add_argument(
        "--target",
        default=None,
        help="target column, a name or a number from 1 (default: the third)",
    )
    add_id_arguments(parser)
    add_header_argument(parser)


def _read_ratings(args):
    """The training and test tables (test None), their 0-based (user, item) ids, the target
    column."""
    header = False if args.no_header else None
    train = read_table(args.data, "--data", header=header)
    if len(train.columns) < 3:
        raise UsageError("--train: needs columns user, item and a target")
    j = 2 if args.target is None else train.index(args.target, "--target")
    tables = [train]
    if args.test:
        tables.append(read_table(args.test, "--test", header=header))
        if tables[1].columns != train.columns:
            raise UsageError(f"--test: columns {tables[1].columns} differ from --train's")
    ids = zero_based(tables, [0, 1], args)
    for table in tables:
        table.require_present([j], "is a missing target")
    return tables, ids, j


def _check_targets(tables, j, likelihood):
    """Class labels 0/1 (probit) or integer levels from the training minimum (ordinal), cell
    by cell; returns that minimum (ordinal levels count from it) or 0."""
    if likelihood == "probit":
        for table in tables:
            table.require(np.isin(table.values[:, j], (0, 1)), [j], "is not a class label 0 or 1")
    if likelihood != "ordinal":
        return 0.0
    low = float(tables[0].values[:, j].min())
    for table in tables:
        y = table.values[:, j]
        table.require(
            (y == np.round(y)) & (y >= low), [j], f"is not a level (an integer >= {low:g})"
        )
    levels = np.unique(tables[0].values[:, j])
    if levels.size != levels[-1] - levels[0] + 1:
        missing = sorted(set(range(int(levels[0]), int(levels[-1]) + 1)) - set(levels))
        raise UsageError(
            f"--task ordinal: the target takes the levels {levels.tolist()[:10]}, with gaps "
            f"(never {missing[:10]}); an ordinal target takes consecutive integers: renumber "
            "the levels, or use --task regression"
        )
    return low


def _test_metric(idata, likelihood, y_test) -> str:
    """The held-out metric of the task, from the traced test predictions ``yhat_test``."""
    from scipy.special import ndtr

    from bnpjax.metrics import rmse, roc_auc

    latent = idata.sample_stats["yhat_test"].values  # (chain, draw, n_test)
    if likelihood == "gaussian":
        return f"test RMSE: {rmse(y_test, latent.mean((0, 1))):.4f}"
    if likelihood == "probit":
        p = ndtr(latent).mean((0, 1))
        accuracy = np.mean((p > 0.5) == (y_test > 0.5))
        auc = f"{roc_auc(y_test, p):.4f}" if 0 < y_test.sum() < len(y_test) else "n/a (one class)"
        return f"test accuracy: {accuracy:.4f}, AUC: {auc}"
    cut = idata.posterior["cutpoints"].values  # (chain, draw, L - 1)
    below = ndtr(cut[..., None, :] - latent[..., None])  # P(y <= k), (chain, draw, n, L - 1)
    cdf = below.mean((0, 1))
    median = (cdf < 0.5).sum(-1)  # the predictive median level, the MAE-optimal guess
    probs = np.diff(np.concatenate([np.zeros((len(y_test), 1)), cdf, np.ones((len(y_test), 1))], 1))
    accuracy = np.mean(probs.argmax(-1) == y_test)
    return f"test MAE: {np.mean(np.abs(median - y_test)):.4f}, accuracy: {accuracy:.4f}"


def fit(args) -> int:
    from bnpjax.models import fm

    tables, ids, j = _read_ratings(args)
    num_users = int(max(i[:, 0].max() for i in ids)) + 1
    num_items = int(max(i[:, 1].max() for i in ids)) + 1

    def design(pairs):
        return _ratings_design(pairs[:, 0], pairs[:, 1], num_users, num_items)

    likelihood = _LIKELIHOODS[args.task]
    low = _check_targets(tables, j, likelihood)
    y = tables[0].values[:, j] - low
    y_test = tables[1].values[:, j] - low if len(tables) > 1 else None
    data = fm.make_data(design(ids[0]), y, likelihood=likelihood)
    test_kw = {} if y_test is None else _test_arguments(design(ids[1]))
    idata = sample(fm.gibbs(data, rank=args.rank, likelihood=likelihood, **test_kw), args)
    print(summary(idata, ["b", "noise_var"] if likelihood == "gaussian" else ["b"]).to_string())
    if y_test is not None:
        print(_test_metric(idata, likelihood, y_test))
    out = write_idata(idata, args.out)
    print(f"wrote {out} ({num_users} users, {num_items} items, {len(y)} training rows)")
    return 0
