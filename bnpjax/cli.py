"""The ``bnpjax`` command (also ``python -m bnpjax``).

::

    bnpjax --version
    bnpjax demo [MODEL]                  # end-to-end run on generated data
    bnpjax fit MODEL --data PATH --out result.nc [options]
    bnpjax fit fm --train ratings.csv --test ratings_test.csv --rank 10
    bnpjax fit ilfm --data edges.tsv [--undirected] [--mode single] [--init cluster]

Models register a demo in :data:`DEMOS` and a fit command in :data:`FIT_COMMANDS`. Errors in
arguments or data files print one line on stderr and exit with status 2, without traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["DEMOS", "FIT_COMMANDS", "main"]


class UsageError(Exception):
    """A bad argument or input file: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise UsageError(f"{self.prog}: {message}")


# --------------------------------------------------------------------------------------------
# shared helpers


def _sampling_arguments(parser, *, samples=1000, warmup=500, chains=4, model_defaults=False):
    # demos leave unset values to their model's defaults (DEMO_DEFAULTS)
    samples, warmup, chains = (None, None, None) if model_defaults else (samples, warmup, chains)
    parser.add_argument("--num-samples", type=int, default=samples, help="kept draws per chain")
    parser.add_argument("--num-warmup", type=int, default=warmup, help="warmup steps per chain")
    parser.add_argument("--num-chains", type=int, default=chains)
    parser.add_argument("--thin", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _sample(algorithm, args):
    """Run ``algorithm`` with the command's sampling arguments (seed, draws, warmup, chains,
    thinning, progress bar)."""
    import jax

    import bnpjax

    return bnpjax.sample(
        algorithm,
        jax.random.key(args.seed),
        args.num_samples,
        num_warmup=args.num_warmup,
        num_chains=args.num_chains,
        thin=args.thin,
        progress_bar=not args.no_progress,
    )


def _summary(idata, var_names=None):
    from bnpjax.infer.arviz_adapter import _arviz

    az = _arviz()
    return az.summary(idata, var_names=var_names, kind="all", round_to=4)[
        ["mean", "sd", "hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat"]
    ]


def _write_outputs(idata, stem: Path, var_names=None) -> tuple[Path, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bnpjax.infer.arviz_adapter import _arviz

    az = _arviz()
    stem.parent.mkdir(parents=True, exist_ok=True)
    nc = stem.with_suffix(".nc")
    idata.to_netcdf(str(nc))
    axes = az.plot_trace(idata, var_names=var_names, compact=True)
    png = stem.parent / f"{stem.name}_trace.png"
    fig = axes.ravel()[0].figure
    fig.tight_layout()
    fig.savefig(png, dpi=90)
    plt.close(fig)
    return nc, png


# --------------------------------------------------------------------------------------------
# the reference model: conjugate Normal-Gamma regression


def _demo_linreg(args) -> int:
    import numpy as np

    from bnpjax.datasets import linear_regression
    from bnpjax.models import linear_regression as lr

    start = time.perf_counter()
    sim = linear_regression(args.seed, num_obs=100, num_features=3, noise_scale=0.5)
    data = lr.make_data(sim["X"], sim["y"], sim["mask"])
    names = [f"x{i}" for i in range(3)]
    algorithm = lr.gibbs(data, feature_names=names)
    print("bnpjax demo: conjugate Normal-Gamma linear regression (the driver's reference model)")
    print(f"data: 100 observations, 3 features, true beta {np.round(sim['beta'], 3)}, sigma 0.5")
    idata = _sample(algorithm, args)
    table = _summary(idata, ["beta", "sigma", "tau"])
    exact = lr.posterior_moments(data)
    table["exact_mean"] = np.concatenate(
        [exact["beta_mean"], [exact["sigma_mean"], exact["tau_mean"]]]
    ).round(4)
    table["truth"] = np.concatenate([sim["beta"], [0.5, 4.0]]).round(4)
    print(table.to_string())
    nc, png = _write_outputs(idata, Path(args.out_dir) / "bnpjax_demo_linreg", ["beta", "sigma"])
    attrs = idata.attrs
    print(
        f"compile {attrs.get('compile_s', 0.0):.2f} s, sampling "
        f"{attrs.get('warmup_s', 0.0) + attrs.get('sampling_s', 0.0):.2f} s, "
        f"total {time.perf_counter() - start:.1f} s"
    )
    print(f"wrote {nc} and {png}")
    return 0


def _read_table(path: str):
    """A numeric CSV/TSV with a header row; empty cells and NaN become missing."""
    import numpy as np

    file = Path(path)
    if not file.is_file():
        raise UsageError(f"--data: no such file: {path}")
    delimiter = "\t" if file.suffix in {".tsv", ".tab"} else ","
    try:
        with file.open() as handle:
            header = handle.readline().strip().split(delimiter)
        values = np.genfromtxt(file, delimiter=delimiter, skip_header=1, dtype=float, ndmin=2)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise UsageError(f"--data: cannot read {path}: {err}") from err
    if values.size == 0 or values.shape[1] != len(header):
        raise UsageError(f"--data: {path} needs a header and numeric rows of {len(header)} fields")
    return [h.strip() for h in header], values


def _fit_linreg_arguments(parser):
    parser.add_argument("--target", help="response column (default: the last column)")


def _fit_linreg(args) -> int:
    import numpy as np

    from bnpjax.models import linear_regression as lr

    header, values = _read_table(args.data)
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
    idata = _sample(lr.gibbs(data, feature_names=names), args)
    print(_summary(idata, ["beta", "sigma"]).to_string())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(out))
    print(f"wrote {out} ({int((~mask).sum())} rows with a missing target left out)")
    return 0


# --------------------------------------------------------------------------------------------
# the Indian buffet process linear-Gaussian model


def _demo_ibp(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    from bnpjax.datasets import bars
    from bnpjax.models import ibp_lg

    start = time.perf_counter()
    sim = bars(args.seed)
    data = ibp_lg.make_data(sim["X"], sim["mask"])
    print("bnpjax demo ibp: linear-Gaussian latent features with an IBP prior on 'bars'")
    print("data: 100 images of 6x6 pixels, 4 true features, sigma_X = 0.5")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    recovered = {}
    for name, factory in (
        ("collapsed", ibp_lg.collapsed_gibbs),
        ("parallel", ibp_lg.parallel_gibbs),
    ):
        idata = _sample(factory(data), args)
        k = idata.posterior["num_features"].values
        counts = np.bincount(k.ravel())
        mode = int(counts.argmax())
        share = ", ".join(f"K+={i}: {c / k.size:.2f}" for i, c in enumerate(counts) if c)
        print(f"{name} Gibbs: posterior of K+ ({share}); mode {mode}")
        print(_summary(idata, ["sigma_x", "sigma_a", "alpha"]).to_string())
        attrs = idata.attrs
        print(
            f"  compile {attrs.get('compile_s', 0.0):.1f} s, sampling "
            f"{attrs.get('warmup_s', 0.0) + attrs.get('sampling_s', 0.0):.1f} s"
        )
        # the highest-density draw among those with the modal K+, features matched to the truth
        lp = np.where(k == mode, idata.sample_stats["lp"].values, -np.inf)
        chain, draw = np.unravel_index(np.argmax(lp), lp.shape)
        post = idata.posterior
        A = ibp_lg.posterior_mean_features(
            post["Z"].values[chain, draw],
            sim["X"],
            float(post["sigma_x"].values[chain, draw]),
            float(post["sigma_a"].values[chain, draw]),
        )
        cost = np.abs(sim["A"][:, None, :] - A[None, :, :]).mean(-1)
        rows, cols = linear_sum_assignment(cost)
        recovered[name] = (A[cols[np.argsort(rows)]], cost[rows, cols].mean())
        print(f"  matched features: mean absolute error {recovered[name][1]:.3f}")
        nc = out_dir / f"bnpjax_demo_ibp_{name}.nc"
        idata.to_netcdf(str(nc))
    fig, axes = plt.subplots(3, 4, figsize=(6, 4.8))
    panels = [("true", sim["A"])] + [(n, a) for n, (a, _) in recovered.items()]
    for r, (label, features) in enumerate(panels):
        for c in range(4):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(features):
                ax.imshow(features[c].reshape(6, 6), cmap="gray", vmin=-0.2, vmax=1.2)
            if c == 0:
                ax.set_ylabel(label)
    fig.suptitle("bars: true and recovered features (matched up to permutation)")
    fig.tight_layout()
    png = out_dir / "bnpjax_demo_ibp_features.png"
    fig.savefig(png, dpi=90)
    plt.close(fig)
    print(f"total {time.perf_counter() - start:.1f} s")
    print(
        f"wrote {out_dir / 'bnpjax_demo_ibp_collapsed.nc'}, "
        f"{out_dir / 'bnpjax_demo_ibp_parallel.nc'} and {png}"
    )
    return 0


def _fit_ibp_arguments(parser):
    parser.add_argument("--sampler", choices=["collapsed", "parallel"], default="collapsed")
    parser.add_argument("--kappa", type=int, default=10, help="max new features per row")
    parser.add_argument("--capacity", type=int, default=16, help="initial feature buffer")


def _fit_ibp(args) -> int:
    import numpy as np

    from bnpjax.models import ibp_lg

    header, values = _read_table(args.data)
    mask = np.isfinite(values)
    data = ibp_lg.make_data(values, mask)
    factory = ibp_lg.collapsed_gibbs if args.sampler == "collapsed" else ibp_lg.parallel_gibbs
    idata = _sample(factory(data, kappa=args.kappa, capacity=args.capacity), args)
    k = idata.posterior["num_features"].values.ravel()
    counts = np.bincount(k)
    print(
        f"posterior mode of K+: {int(counts.argmax())} "
        f"({counts.max() / k.size:.2f} of {k.size} draws)"
    )
    print(_summary(idata, ["num_features", "sigma_x", "sigma_a", "alpha"]).to_string())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(out))
    print(f"wrote {out} ({int((~mask).sum())} missing entries imputed, columns {header})")
    return 0


# --------------------------------------------------------------------------------------------
# Bayesian factorization machines


def _ratings_design(users, items, num_users, num_items):
    """One-hot user and item columns of a ratings table (ids are 0-based positions)."""
    import numpy as np
    import scipy.sparse as sp

    n = len(users)
    rows = np.repeat(np.arange(n), 2)
    cols = np.stack([users, num_users + items], axis=1).ravel()
    return sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, num_users + num_items))


def _demo_fm(args) -> int:
    import numpy as np

    from bnpjax.models import fm

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    num_users, num_items, rank, n, noise = 200, 150, 3, 8000, 0.5
    users, items = rng.integers(0, num_users, n), rng.integers(0, num_items, n)
    w = 0.3 * rng.normal(size=num_users + num_items)
    V = 0.7 * rng.normal(size=(num_users + num_items, rank))
    truth = 3.0 + w[users] + w[num_users + items] + np.sum(V[users] * V[num_users + items], 1)
    y = truth + noise * rng.normal(size=n)
    X = _ratings_design(users, items, num_users, num_items)
    train, test = np.arange(n) < int(0.8 * n), np.arange(n) >= int(0.8 * n)
    print("bnpjax demo: Bayesian factorization machine (Gibbs) on generated ratings")
    print(f"data: {num_users} users x {num_items} items, {n} ratings, rank {rank}, noise sd 0.5")
    data = fm.make_data(X[train], y[train])
    rows, cols, values, shape = fm.to_coo(X[test])
    algorithm = fm.gibbs(data, rank=rank, test=(rows, cols, values), num_test=shape[0])
    idata = _sample(algorithm, args)
    yhat = idata.sample_stats["yhat_test"].mean(("chain", "draw")).values
    rmse_truth = float(np.sqrt(np.mean((yhat - truth[test]) ** 2)))
    rmse_y = float(np.sqrt(np.mean((yhat - y[test]) ** 2)))
    noise_sd = np.sqrt(idata.posterior["noise_var"].values)
    print(f"test RMSE against the ratings: {rmse_y:.3f} (noise floor 0.5)")
    print(f"test RMSE against the noiseless signal: {rmse_truth:.3f}")
    print(f"posterior noise sd: {noise_sd.mean():.3f} +- {noise_sd.std():.3f} (truth 0.5)")
    nc, png = _write_outputs(idata, Path(args.out_dir) / "bnpjax_demo_fm", ["b", "noise_var"])
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def _fit_fm_arguments(parser):
    parser.add_argument("--test", help="held-out ratings CSV with the same columns")
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument(
        "--task", choices=["regression", "classification", "ordinal"], default="regression"
    )
    parser.add_argument("--target", default=None, help="target column (default: the third)")


def _fit_fm(args) -> int:
    import numpy as np

    from bnpjax.models import fm

    header, train = _read_table(args.data)
    if train.shape[1] < 3:
        raise UsageError("--train: needs columns user, item and a target (with a header)")
    j = 2 if args.target is None else header.index(args.target) if args.target in header else -1
    if j < 0:
        raise UsageError(f"--target: no column {args.target!r} in {args.data} (has {header})")
    tables = [train]
    if args.test:
        test_header, test = _read_table(args.test)
        if test_header != header:
            raise UsageError(f"--test: columns {test_header} differ from --train's {header}")
        tables.append(test)
    for table, name in zip(tables, ("--train", "--test"), strict=False):
        ids = table[:, :2]
        if not np.all(np.isfinite(ids)) or np.any(ids != np.round(ids)) or np.any(ids < 0):
            raise UsageError(f"{name}: user and item ids must be non-negative integers")
        if not np.all(np.isfinite(table[:, j])):
            raise UsageError(f"{name}: the target column has missing values")
    num_users = int(max(t[:, 0].max() for t in tables)) + 1
    num_items = int(max(t[:, 1].max() for t in tables)) + 1
    X = _ratings_design(train[:, 0].astype(int), train[:, 1].astype(int), num_users, num_items)
    likelihood = {"regression": "gaussian", "classification": "probit", "ordinal": "ordinal"}[
        args.task
    ]
    y = train[:, j]
    offset = 0.0
    if likelihood == "ordinal":
        offset = float(y.min())
        y = y - offset
    data = fm.make_data(X, y, likelihood=likelihood)
    test_kw = {}
    if args.test:
        Xt = _ratings_design(test[:, 0].astype(int), test[:, 1].astype(int), num_users, num_items)
        rows, cols, values, shape = fm.to_coo(Xt)
        test_kw = dict(test=(rows, cols, values), num_test=shape[0])
    idata = _sample(fm.gibbs(data, rank=args.rank, likelihood=likelihood, **test_kw), args)
    print(_summary(idata, ["b", "noise_var"] if likelihood == "gaussian" else ["b"]).to_string())
    if args.test and likelihood == "gaussian":
        yhat = idata.sample_stats["yhat_test"].mean(("chain", "draw")).values
        print(f"test RMSE: {np.sqrt(np.mean((yhat - test[:, j]) ** 2)):.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(out))
    print(f"wrote {out} ({num_users} users, {num_items} items, {len(y)} training rows)")
    return 0


# --------------------------------------------------------------------------------------------
# the infinite latent feature relational model


def _demo_ilfm(args) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from bnpjax.metrics import roc_auc
    from bnpjax.models import ilfm

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    N, R = 40, 3
    F = np.zeros((N, 3))
    F[:20, 0] = F[20:, 1] = 1.0
    F[rng.random(N) < 0.3, 2] = 1.0  # a third feature that cuts across the two groups
    W = rng.normal(0.0, 2.5, (R, 3, 3))
    truth = 1 / (1 + np.exp(-(np.einsum("ik,rkl,jl->rij", F, W, F) - 1.0)))
    Y = (rng.random(truth.shape) < truth).astype(float)
    off = ~np.eye(N, dtype=bool)[None]
    held = (rng.random(Y.shape) < 0.2) & off
    data = ilfm.make_data(Y, mask=~held)
    print("bnpjax demo: infinite latent feature relational model (link prediction)")
    print(f"data: {N} entities, {R} relations, 3 planted features; 20% of the pairs held out")
    idata = _sample(ilfm.gibbs(data, capacity=8), args)
    probabilities = ilfm.posterior_link_probabilities(idata, data)
    auc = roc_auc(Y[held], probabilities[held])
    best = roc_auc(Y[held], truth[held])
    k_plus = idata.posterior["num_features"].values
    print(f"held-out AUC {auc:.3f} (the true link probabilities give {best:.3f})")
    print(f"features: {k_plus.mean():.2f} on average (3 planted)")
    stem = Path(args.out_dir) / "bnpjax_demo_ilfm"
    nc, png = _write_outputs(idata, stem, ["num_features", "alpha"])
    fig, axes = plt.subplots(1, 2, figsize=(8, 4))
    for ax, matrix, title in zip(
        axes, (Y[0], probabilities[0]), ("links, relation 0", "posterior P(link)"), strict=True
    ):
        ax.imshow(matrix, cmap="Greys", vmin=0, vmax=1)
        ax.set_title(title)
    matrix_png = stem.parent / f"{stem.name}_links.png"
    fig.tight_layout()
    fig.savefig(matrix_png, dpi=90)
    plt.close(fig)
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc}, {png} and {matrix_png}")
    return 0


def _fit_ilfm_arguments(parser):
    parser.add_argument(
        "--format", choices=["edges", "adjacency"], default=None,
        help="edges: rows 'source target [relation]' (ids from 0), every pair not listed is "
        "an observed 0; adjacency: an (N, N) text matrix or an (N, N) / (R, N, N) .npy array "
        "with NaN where unobserved (default: adjacency for .npy, else edges)",
    )  # fmt: skip
    parser.add_argument("--num-entities", type=int, default=None, help="default: largest id + 1")
    parser.add_argument("--undirected", action="store_true", help="edges hold in both directions")
    parser.add_argument("--mode", choices=["global", "single"], default="global")
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--init", choices=["random", "cluster"], default="random")
    parser.add_argument(
        "--init-features", type=int, default=None, help="features at the start (10, single 4)"
    )


def _read_links(args):
    """Links (R, N, N) with NaN where unobserved, from an edge list or an adjacency file."""
    import numpy as np

    path = args.data
    fmt = args.format or ("adjacency" if path.endswith(".npy") else "edges")
    if fmt == "adjacency":
        Y = np.load(path) if path.endswith(".npy") else np.loadtxt(path, ndmin=2)
        return np.asarray(Y, float)
    try:
        edges = np.loadtxt(path, ndmin=2, comments="#", delimiter=None)
    except ValueError as err:
        raise UsageError(f"--data: {path} is not a numeric edge list: {err}") from err
    if edges.shape[1] not in (2, 3) or not np.all(edges == np.round(edges)) or np.any(edges < 0):
        raise UsageError("--data: an edge list has 2 or 3 columns of non-negative integer ids")
    edges = edges.astype(np.int64)
    N = int(edges[:, :2].max()) + 1 if args.num_entities is None else args.num_entities
    if edges[:, :2].max() >= N:
        raise UsageError(f"--num-entities {N} is smaller than the largest id + 1")
    relation = edges[:, 2] if edges.shape[1] == 3 else np.zeros(len(edges), np.int64)
    Y = np.zeros((int(relation.max()) + 1, N, N))
    Y[relation, edges[:, 0], edges[:, 1]] = 1.0
    if args.undirected:
        Y[relation, edges[:, 1], edges[:, 0]] = 1.0
    return Y


def _fit_ilfm(args) -> int:
    import numpy as np

    from bnpjax.models import ilfm

    Y = _read_links(args)
    data = ilfm.make_data(Y)
    algorithm = ilfm.gibbs(
        data,
        capacity=args.capacity,
        mode=args.mode,
        init_strategy=args.init,
        num_init_features=args.init_features,
    )
    idata = _sample(algorithm, args)
    print(_summary(idata, ["num_features", "alpha"]).to_string())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(out))
    R, N = data.Y.shape[:2]
    observed = int(np.asarray(data.mask).sum())
    print(f"wrote {out} ({N} entities, {R} relations, {observed} observed pairs)")
    return 0


# --------------------------------------------------------------------------------------------
# weighted mixed-membership stochastic blockmodel (CVB0; --num-samples = CVB0 passes)


def _wmmsb_fit(network, args, heldout=None):
    """CVB0 fit of a :class:`bnpjax.datasets.Network`; returns (stats, hyper, Dataset)."""
    import jax
    import numpy as np
    import xarray as xr

    from bnpjax.infer import run
    from bnpjax.models import wmmsb

    weight = network.weight if args.likelihood != "bernoulli" else np.ones_like(network.weight)
    data = wmmsb.make_network(
        network.n_nodes,
        network.src,
        network.dst,
        weight,
        directed=network.directed,
        unobserved=heldout,
        likelihood=args.likelihood,
        zeros="dense",
    )
    hyper = wmmsb.make_hyper(args.K, likelihood=args.likelihood)
    algorithm = wmmsb.cvb0(data, hyper, likelihood=args.likelihood, store_gamma=False)
    result = run(
        algorithm, jax.random.key(args.seed), args.num_samples, progress_bar=not args.no_progress
    )
    st = jax.tree_util.tree_map(lambda x: np.asarray(x[0]), result.final_state)
    stats = (st.n_node, st.n_y, st.n_phi, st.r, st.p)
    theta = np.asarray(wmmsb.memberships(st.n_node, hyper))
    block = np.asarray(wmmsb.block_means(st.n_y, st.n_phi, st.r, st.p, args.likelihood))
    ds = xr.Dataset(
        {
            "theta": (("node", "class"), theta),
            "block_rate": (("class", "class_to"), block),
            "loglik": (("iteration",), result.trace["sample_stats"]["loglik"][0]),
        },
        coords={"node": list(network.labels)},
        attrs={
            "model": f"wmmsb cvb0 {args.likelihood}",
            "K": args.K,
            "directed": int(network.directed),
        },
    )
    return stats, hyper, ds


def _wmmsb_plot(ds, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    order = np.lexsort((-ds.theta.values.max(1), ds.theta.values.argmax(1)))
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    axes[0].imshow(ds.block_rate.values, cmap="viridis")
    axes[0].set_title("posterior mean block rates")
    axes[1].imshow(ds.theta.values[order], aspect="auto", interpolation="nearest")
    axes[1].set_title("memberships (nodes sorted by class)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _demo_wmmsb(args) -> int:
    import numpy as np

    from bnpjax.datasets import Network
    from bnpjax.metrics import roc_auc
    from bnpjax.models import wmmsb

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    N, K = 300, 4
    z = rng.integers(0, K, N)
    rates = np.full((K, K), 0.02) + np.diag(np.full(K, 0.8))
    Y = np.triu(rng.poisson(rates[z][:, z]), 1)
    test = np.triu(rng.random((N, N)) < 0.1, 1)
    ii, jj = np.nonzero(Y * ~test)
    net = Network("planted", N, ii, jj, Y[ii, jj], False, [str(i) for i in range(N)])
    print("bnpjax demo: weighted MMSB (WMMSB-bg, CVB0) on a planted 4-block count network")
    print(f"data: {N} nodes, {int((Y > 0).sum())} weighted links, 10% of the pairs held out")
    args.K, args.likelihood = K, "bg"
    ti, tj = np.nonzero(test)
    stats, hyper, ds = _wmmsb_fit(net, args, heldout=np.stack([ti, tj], 1))
    score = wmmsb.link_probability(ti, tj, *stats, hyper, "bg")
    print(f"held-out AUC-ROC: {roc_auc(Y[ti, tj] > 0, np.asarray(score)):.3f}")
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(out / "bnpjax_demo_wmmsb.nc")
    _wmmsb_plot(ds, out / "bnpjax_demo_wmmsb.png")
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {out / 'bnpjax_demo_wmmsb.nc'} and {out / 'bnpjax_demo_wmmsb.png'}")
    return 0


def _fit_wmmsb_arguments(parser):
    parser.add_argument("--K", type=int, default=10, help="number of classes")
    parser.add_argument("--likelihood", choices=["bg", "nb", "bernoulli"], default="bg")
    parser.add_argument("--directed", action="store_true", help="edges are directed")


def _fit_wmmsb(args) -> int:
    from bnpjax.datasets import read_edge_list

    if args.K < 1:
        raise UsageError("--K must be at least 1")
    network = read_edge_list(args.data, directed=args.directed)
    _, _, ds = _wmmsb_fit(network, args)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ds.to_netcdf(out)
    _wmmsb_plot(ds, out.with_suffix(".png"))
    print(f"final mean training log-likelihood per pair: {float(ds.loglik[-1]):.4f}")
    print(f"wrote {out} and {out.with_suffix('.png')} ({network.n_nodes} nodes)")
    return 0


# --------------------------------------------------------------------------------------------
# Gibbs max-margin matrix factorization (M3F)


def _m3f_ratings(rng, num_users=150, num_items=120, rank=3, density=0.3):
    """Ordinal ratings 1..5 from known rank-3 factors (noisy scores cut at quantiles)."""
    import numpy as np

    U, V = rng.normal(size=(num_users, rank)), rng.normal(size=(num_items, rank))
    users, items = np.nonzero(rng.random((num_users, num_items)) < density)
    x = np.sum(U[users] * V[items], axis=1)
    levels = 1 + np.digitize(
        x + 0.3 * rng.normal(size=x.size), np.quantile(x, [0.2, 0.4, 0.6, 0.8])
    )
    return users, items, levels


def _m3f_run(train, test, num_users, num_items, args, num_levels=5):
    """Fit Gibbs M3F (or iPM3F) and return the InferenceData and the test levels."""

    from bnpjax.models import m3f

    data = m3f.make_data(*train, num_users, num_items, num_levels, margin=args.margin)
    hyper = m3f.make_hyper(num_levels, C=args.C, margin=args.margin)
    if args.sampler == "ipm3f":
        algorithm = m3f.ipm3f_gibbs(
            data,
            hyper=hyper,
            test=test,
            keep_factors=False,
            feature_step=getattr(args, "feature_step", "sequential"),
        )
    else:
        algorithm = m3f.gibbs(
            data,
            rank=args.rank,
            hyper=hyper,
            test=test,
            keep_factors=False,
            item_bias=getattr(args, "item_bias", False),
        )
    idata = _sample(algorithm, args)
    # the Rao-Blackwellized score: the same posterior mean as the drawn scores, less noise
    return idata, m3f.predict_levels(idata, test[0])


def _demo_m3f(args) -> int:
    import numpy as np

    from bnpjax.metrics import nmae_uniform

    start = time.perf_counter()
    rng = np.random.default_rng(args.seed)
    users, items, levels = _m3f_ratings(rng)
    test = rng.random(users.size) < 0.1
    args.sampler, args.rank, args.C, args.margin = "m3f", 6, 1.0, 1.0
    print("bnpjax demo m3f: Gibbs max-margin matrix factorization on generated ordinal ratings")
    print(f"data: 150 users x 120 items, {users.size} ratings 1..5 from rank-3 factors")
    train = (users[~test], items[~test], levels[~test])
    idata, predicted = _m3f_run(train, (users[test], items[test]), 150, 120, args)
    print(f"test NMAE {nmae_uniform(levels[test], predicted, num_levels=5):.4f} (guessing: 1)")
    nc, png = _write_outputs(idata, Path(args.out_dir) / "bnpjax_demo_m3f", ["theta"])
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def _fit_m3f_arguments(parser):
    parser.add_argument("--test", help="held-out ratings CSV (user, item, rating)")
    parser.add_argument("--sampler", choices=["m3f", "ipm3f"], default="m3f")
    parser.add_argument(
        "--feature-step",
        choices=["sequential", "parallel"],
        default="sequential",
        help="iPM3F: the authors' user-by-user feature sweep, or the row-parallel one",
    )
    parser.add_argument("--item-bias", action="store_true", help="M3F: an item bias in every score")
    parser.add_argument("--rank", type=int, default=10)
    parser.add_argument("--C", type=float, default=0.1, help="regularization constant")
    parser.add_argument("--margin", type=float, default=9.0, help="hinge margin ell")


def _fit_m3f(args) -> int:
    import numpy as np

    from bnpjax.metrics import nmae_uniform

    tables = [_read_table(args.data)[1]] + ([_read_table(args.test)[1]] if args.test else [])
    for table in tables:
        if table.shape[1] < 3 or not np.all(np.isfinite(table[:, :3])):
            raise UsageError("--data/--test: need columns user, item, rating without gaps")
    ids = np.concatenate([t[:, :2] for t in tables]).astype(int)
    num_users, num_items = int(ids[:, 0].max()) + 1, int(ids[:, 1].max()) + 1
    num_levels = int(max(t[:, 2].max() for t in tables))
    train = tuple(tables[0][:, c] for c in range(3))
    test = tuple(tables[-1][: None if args.test else 1, c].astype(int) for c in range(2))
    idata, predicted = _m3f_run(train, test, num_users, num_items, args, max(num_levels, 2))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(args.out))
    if args.test:
        nmae = nmae_uniform(tables[1][:, 2], predicted, num_levels=max(num_levels, 2))
        print(f"test NMAE {nmae:.4f}")
    print(f"wrote {args.out} ({num_users} users, {num_items} items)")
    return 0


#: name -> demo function taking the parsed arguments
DEMOS: dict[str, tuple[str, Callable]] = {
    "linreg": ("conjugate Normal-Gamma regression, the driver's reference model", _demo_linreg),
    "ibp": ("IBP linear-Gaussian latent features on 'bars', both samplers", _demo_ibp),
    "fm": ("Bayesian factorization machine on generated ratings", _demo_fm),
    "ilfm": ("latent feature relational model: link prediction on a planted network", _demo_ilfm),
    "wmmsb": ("weighted MMSB (CVB0) on a planted count network", _demo_wmmsb),
    "m3f": ("Gibbs max-margin matrix factorization on generated ordinal ratings", _demo_m3f),
}

#: sampling defaults per demo (num_samples, num_warmup, num_chains) where they differ
DEMO_DEFAULTS = {
    "ibp": (300, 300, 2),
    "fm": (150, 100, 2),
    "ilfm": (300, 200, 2),
    "wmmsb": (150, 0, 1),
    "m3f": (100, 50, 2),
}

#: name -> (help, add_arguments(parser), run(args))
FIT_COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "linreg": ("Bayesian linear regression on a CSV", _fit_linreg_arguments, _fit_linreg),
    "ibp": ("IBP latent features of a numeric CSV (rows = objects)", _fit_ibp_arguments, _fit_ibp),
    "fm": (
        "Bayesian FM on a ratings CSV (user, item, rating; ids from 0)",
        _fit_fm_arguments,
        _fit_fm,
    ),
    "ilfm": (
        "ILFM link prediction on an edge list or adjacency file",
        _fit_ilfm_arguments,
        _fit_ilfm,
    ),
    "wmmsb": (
        "weighted MMSB by CVB0 on an edge list (source target [count]); --num-samples = passes",
        _fit_wmmsb_arguments,
        _fit_wmmsb,
    ),
    "m3f": (
        "Gibbs M3F / iPM3F on ordinal ratings (user, item, rating; ids from 0)",
        _fit_m3f_arguments,
        _fit_m3f,
    ),
}

#: extra spellings of --data per model
DATA_ALIASES = {"fm": ("--train",)}

DEFAULT_DEMO = "linreg"


def _parser() -> argparse.ArgumentParser:
    from bnpjax import __version__

    parser = _Parser(prog="bnpjax", description="Exact compiled samplers on JAX.")
    parser.add_argument("--version", action="version", version=f"bnpjax {__version__}")
    commands = parser.add_subparsers(dest="command", parser_class=_Parser)

    demo = commands.add_parser("demo", help="run a model end to end on generated data")
    demo.add_argument(
        "model",
        nargs="?",
        default=DEFAULT_DEMO,
        choices=sorted(DEMOS),
        help=", ".join(f"{k}: {v[0]}" for k, v in DEMOS.items()),
    )
    demo.add_argument("--out-dir", default=".", help="where to write the .nc and .png files")
    _sampling_arguments(demo, model_defaults=True)

    fit = commands.add_parser("fit", help="fit a model to a data file")
    models = fit.add_subparsers(dest="model", parser_class=_Parser)
    for name, (help_text, add_arguments, _) in FIT_COMMANDS.items():
        sub = models.add_parser(name, help=help_text)
        sub.add_argument("--data", *DATA_ALIASES.get(name, ()), required=True, help="input file")
        sub.add_argument("--out", default="result.nc", help="InferenceData output (.nc)")
        add_arguments(sub)
        _sampling_arguments(sub)
    return parser


def _check_sampling(args) -> None:
    for name in ("num_samples", "num_chains", "thin"):
        value = getattr(args, name, None)  # None: a demo's own default
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    warmup = getattr(args, "num_warmup", None)
    if warmup is not None and warmup < 0:
        raise UsageError("--num-warmup must be non-negative")


def _one_line(message: str) -> str:
    return " ".join(message.split())


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = _parser().parse_args(argv)
        if args.command is None:
            _parser().print_help()
            return 0
        _check_sampling(args)
        if args.command == "demo":
            defaults = DEMO_DEFAULTS.get(args.model, (1000, 500, 4))
            if defaults is not None:
                for name, value in zip(
                    ("num_samples", "num_warmup", "num_chains"), defaults, strict=True
                ):
                    if getattr(args, name) is None:
                        setattr(args, name, value)
            return DEMOS[args.model][1](args)
        if args.model is None:
            raise UsageError(f"fit: choose a model: {', '.join(sorted(FIT_COMMANDS))}")
        return FIT_COMMANDS[args.model][2](args)
    except UsageError as err:
        print(_one_line(str(err)), file=sys.stderr)
        return 2
    except (ValueError, OSError) as err:
        print(_one_line(f"bnpjax: error: {err}"), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bnpjax: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
