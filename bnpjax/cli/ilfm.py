"""``bnpjax demo ilfm`` and ``bnpjax fit ilfm``: the infinite latent feature relational
model (``bnpjax.models.ilfm``) for link prediction."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.output import UsageError, save_figure, summary, write_idata, write_with_trace
from bnpjax.cli.parser import sample
from bnpjax.infer.checks import check_allocation

DEMO_HELP = "latent feature relational model: link prediction on a planted network"
FIT_HELP = "ILFM link prediction on an edge list or adjacency file"
DEMO_DEFAULTS = (300, 200, 2)
DATA_ALIASES = ()


def demo(args) -> int:
    from bnpjax.datasets import planted_relations
    from bnpjax.metrics import roc_auc
    from bnpjax.models import ilfm
    from bnpjax.plots import plot_links

    start = time.perf_counter()
    sim = planted_relations(args.seed, num_entities=40, num_relations=3)
    Y, truth, held = sim["Y"], sim["probabilities"], sim["heldout"]
    data = ilfm.make_data(Y, mask=~held)
    print("bnpjax demo: infinite latent feature relational model (link prediction)")
    print("data: 40 entities, 3 relations, 3 planted features; 20% of the pairs held out")
    idata = sample(ilfm.gibbs(data, capacity=8), args)
    probabilities = ilfm.predict(idata, data)
    auc = roc_auc(Y[held], probabilities[held])
    best = roc_auc(Y[held], truth[held])
    k_plus = idata.posterior["num_features"].values
    print(f"held-out AUC {auc:.3f} (the true link probabilities give {best:.3f})")
    print(f"features: {k_plus.mean():.2f} on average (3 planted)")
    stem = Path(args.out_dir) / "bnpjax_demo_ilfm"
    nc, png = write_with_trace(idata, stem, ["num_features", "alpha"])
    links_png = save_figure(
        stem.parent / f"{stem.name}_links.png", plot_links, Y[0], probabilities[0]
    )
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc}, {png} and {links_png}")
    return 0


def add_fit_arguments(parser) -> None:
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


def _read_links(args) -> np.ndarray:
    """Links (R, N, N) with NaN where unobserved, from an edge list or an adjacency file."""
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
    shape = (int(relation.max()) + 1, N, N)
    # the links, their mask and the model's copy of both: refuse before allocating
    check_allocation(shape, np.float64, f"--data (ids up to {N - 1})", copies=4)
    Y = np.zeros(shape)
    Y[relation, edges[:, 0], edges[:, 1]] = 1.0
    if args.undirected:
        Y[relation, edges[:, 1], edges[:, 0]] = 1.0
    return Y


def fit(args) -> int:
    from bnpjax.models import ilfm

    data = ilfm.make_data(_read_links(args))
    algorithm = ilfm.gibbs(
        data,
        capacity=args.capacity,
        mode=args.mode,
        init_strategy=args.init,
        num_init_features=args.init_features,
    )
    idata = sample(algorithm, args)
    print(summary(idata, ["num_features", "alpha"]).to_string())
    out = write_idata(idata, args.out)
    R, N = data.Y.shape[:2]
    observed = int(np.asarray(data.mask).sum())
    print(f"wrote {out} ({N} entities, {R} relations, {observed} observed pairs)")
    return 0
