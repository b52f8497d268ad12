"""``bnpjax demo ilfm`` and ``bnpjax fit ilfm``: the infinite latent feature relational
model (``bnpjax.models.ilfm``) for link prediction."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import add_header_argument, add_id_arguments, read_table, zero_based
from bnpjax.cli.output import (
    UsageError,
    save_figure,
    summary,
    timing,
    write_idata,
    write_with_trace,
)
from bnpjax.cli.parser import sample
from bnpjax.infer.checks import check_allocation

#: chains on every core (bnpjax.cli._use_cores): checked and measured faster split
CPU_CORES = True
#: two CPU devices per core: the demo's 4 chains x 4 temperatures on a 2-core CPU sample in
#: 9.9-10.6 s over 4 devices against 12.9-13.3 s over 2, the same draws (three alternating
#: pairs of fresh processes, 2026-12-01); WMMSB's, the FM's, M3F's and the IBP's demos gain
#: nothing from it and keep one device per core
CPU_DEVICES_PER_CORE = 2
DEMO_HELP = "latent feature relational model: link prediction on a planted network"
FIT_HELP = "ILFM link prediction on an edge list or adjacency file"
# replica exchange over DEMO_TEMPERATURES, 4 x (300 + 700): without it, chains stay in other
# configurations of the planted features (2026-11-28, 4 x (1000 + 2000): seed 0 R-hat of K+
# 1.002, seed 2 2.18, one chain in four at the planted configuration); with it they move
# between configurations every few hundred sweeps: seed 0 R-hat 1.007, ESS 491, 210 s; seed 1
# 1.003; seed 2 1.010 with one key, 1.105 with this command's (2026-11-29, docs/benchmarks.md)
DEMO_DEFAULTS = (700, 300, 4)
#: the demo's inverse temperatures (replica exchange, bnpjax.infer.tempering)
DEMO_TEMPERATURES = (1.0, 0.8, 0.64, 0.512)
#: the demo's start: this many k-means clusters of the entities' link profiles
DEMO_INIT_FEATURES = 2
#: HMC leapfrog steps of the demo's weight move
DEMO_LEAPFROG = 25
#: merge-split moves of identical features per sweep (bnpjax.models.ilfm.merge_split): with 4,
#: max R-hat on seeds 0-3 1.004, 1.011, 1.055, 1.047 (min ESS 684, 758, 67, 33); with 16,
#: 1.005, 1.007, 1.026, 1.034 (713, 824, 448, 136) for 30 % more sampling time (2026-11-29)
DEMO_MERGE_SPLIT = 16
DATA_ALIASES = ()
DATA_HELP = (
    "edge list (rows 'source target [relation]', ids from 0 or --one-based) or adjacency "
    "file (see --format)"
)


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
    # start from DEMO_INIT_FEATURES k-means clusters of the link profiles and let the births
    # add features: chains from 3 random features kept surplus ones (K+ 4-6, R-hat of K+
    # 2.9 at 4 x (200 + 300), 2026-11-26); from 2 clusters they all reach the planted 3
    # (4 x (300 + 1000): R-hat 1.006 for K+, 1.012 for the biases, ESS 399 for K+)
    # 25 leapfrog steps, not 10: the biases and the weights of two complementary features
    # trade off exactly, a ridge that short HMC trajectories cross slowly (bias R-hat 1.011
    # with 10 at 4 x 1500 draws, 1.002 with 25 at 4 x 1000, sampling about as fast)
    # merge-split moves: with the default weight prior (sd 1, the data's weights have sd 2.5)
    # the posterior puts mass on an exact copy of a planted feature, which flips alone add and
    # remove one entity at a time: K+ R-hat 1.040, ESS 70 without, 1.009, ESS 582 with them
    # (seed 0, 4 x (300 + 2000), 2026-11-26); the data of seeds 1 and 2 trap chains in other
    # configurations of features, which feature moves with fitted weights did not leave
    # (docs/benchmarks.md), and tempered copies of each chain do (DEMO_DEFAULTS)
    algorithm = ilfm.gibbs(
        data,
        capacity=8,
        init_strategy="cluster",
        num_init_features=DEMO_INIT_FEATURES,
        num_leapfrog=DEMO_LEAPFROG,
        merge_split=DEMO_MERGE_SPLIT,
        temperatures=DEMO_TEMPERATURES,
        # the demo's file holds what it shows: not the pairs' pointwise log-likelihood (4 x 700
        # draws of the 3,840 observed pairs, 42 MB; bnpjax fit ilfm keeps it)
        pointwise_log_likelihood=False,
    )
    idata = sample(algorithm, args)
    probabilities = ilfm.predict(idata, data)
    auc = roc_auc(Y[held], probabilities[held])
    best = roc_auc(Y[held], truth[held])
    k_plus = idata.posterior["num_features"].values
    print(f"held-out AUC {auc:.3f} (the true link probabilities give {best:.3f})")
    counts = np.bincount(k_plus.ravel())
    share = ", ".join(f"K+={i}: {c / k_plus.size:.2f}" for i, c in enumerate(counts) if c)
    print(f"features: {k_plus.mean():.2f} on average (3 planted); posterior of K+ ({share})")
    swaps = idata.sample_stats["swap_acceptance"].values.mean(axis=(0, 1))
    rates = ", ".join(f"{rate:.2f}" for rate in swaps)
    print(
        f"replica exchange over inverse temperatures {DEMO_TEMPERATURES}: swaps accepted "
        f"between neighbours {rates} of the time (the draws are those at temperature 1)"
    )
    print(summary(idata, ["num_features", "alpha", "bias"]).to_string())
    print(timing(idata, digits=1))
    stem = Path(args.out_dir) / "bnpjax_demo_ilfm"
    nc, png = write_with_trace(
        idata,
        stem,
        ["num_features", "alpha"],
        truth={"num_features": 3},
        title="ILFM: number of features K+ and IBP concentration alpha",
    )
    links_png = save_figure(
        stem.parent / f"{stem.name}_links.png",
        plot_links,
        Y[0],
        probabilities[0],
        heldout=held[0],
        truth=truth[0],
        title=f"ILFM, relation 0 of 3: held-out AUC {auc:.3f} (true probabilities {best:.3f})",
    )
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc}, {png} and {links_png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument(
        "--format", choices=["edges", "adjacency"], default=None,
        help="edges: rows 'source target [relation]', every pair not listed is an observed 0; "
        "adjacency: an (N, N) text matrix or an (N, N) / (R, N, N) .npy array with NaN where "
        "unobserved (default: adjacency for .npy, else edges)",
    )  # fmt: skip
    parser.add_argument(
        "--num-entities", type=int, default=None, help="entities (default: largest id + 1)"
    )
    parser.add_argument("--undirected", action="store_true", help="edges hold in both directions")
    parser.add_argument(
        "--mode",
        choices=["global", "single"],
        default="global",
        help="global: one feature matrix for every relation; single: one model per relation",
    )
    parser.add_argument(
        "--capacity", type=int, default=16, help="initial feature buffer (grows when full)"
    )
    parser.add_argument(
        "--init",
        choices=["random", "cluster"],
        default="random",
        help="starting features: random, or k-means clusters of the link rows",
    )
    parser.add_argument(
        "--init-features",
        type=int,
        default=None,
        help="features at the start (default: 3, or 4 in single mode with one relation)",
    )
    parser.add_argument(
        "--merge-split",
        type=int,
        default=0,
        help="moves per sweep that merge two features held by the same entities or split one "
        "into two copies (they help the number of features mix)",
    )
    parser.add_argument(
        "--nest",
        type=int,
        default=0,
        help="moves per sweep that take a feature out of one holding all its entities or put "
        "a disjoint one in (nested features, like copies, change no link)",
    )
    parser.add_argument(
        "--ridge",
        action="store_true",
        help="draw the biases and weights along the directions no link sees (features that "
        "together cover every entity trade off exactly with the bias) from their prior",
    )
    parser.add_argument(
        "--mass",
        choices=["unit", "fisher"],
        default="unit",
        help="the HMC move's mass: unit, or each relation's Fisher information at pair weights "
        "adapted during warmup (larger steps where the links leave the weights loose)",
    )
    parser.add_argument(
        "--sigma-w-prior",
        default=None,
        metavar="SHAPE,SCALE",
        help="an inverse-Gamma prior of the weights' variance, e.g. 2,2: the weights' scale is "
        "then sampled (default: fixed at 1)",
    )
    parser.add_argument(
        "--temperatures",
        default=None,
        help="replica exchange: comma-separated inverse temperatures, 1 first and decreasing "
        "(e.g. 1,0.8,0.64,0.51); each chain runs one copy per temperature, swapping states, so "
        "that chains leave configurations of features they would otherwise keep (each sweep "
        "costs one per temperature)",
    )
    add_id_arguments(parser, "entity ids (and relation ids)")
    add_header_argument(parser)


def _temperatures(text: str | None) -> tuple[float, ...] | None:
    from bnpjax.infer.tempering import check_temperatures

    if text is None:
        return None
    try:
        return check_temperatures(text.split(","), "--temperatures")
    except ValueError as err:
        raise UsageError(str(err)) from None


def _hyper(text: str | None):
    from bnpjax.models import ilfm

    if text is None:
        return None
    parts = text.split(",")
    try:
        prior = tuple(float(part) for part in parts)
        if len(prior) != 2:
            raise ValueError(f"two numbers, got {len(prior)}")
        return ilfm.make_hyper(sigma_w_prior=prior)
    except ValueError as err:
        raise UsageError(f"--sigma-w-prior must be SHAPE,SCALE (positive numbers): {err}") from None


def _read_links(args) -> np.ndarray:
    """Links (R, N, N) with NaN where unobserved, from an edge list or an adjacency file."""
    path = args.data
    fmt = args.format or ("adjacency" if path.endswith(".npy") else "edges")
    if fmt == "adjacency":
        if path.endswith(".npy"):
            return np.asarray(np.load(path), float)
        return read_table(path, header=False if args.no_header else None).values
    table = read_table(path, header=False if args.no_header else None)
    if len(table.columns) not in (2, 3):
        raise UsageError("--data: an edge list has 2 or 3 columns: source, target [, relation]")
    (pairs,) = zero_based([table], [0, 1], args)
    if len(table.columns) == 3:
        low = 1 if args.one_based else 0
        table.require_integers([2], low, f"is not a relation id (an integer from {low})")
        relation = table.values[:, 2].astype(np.int64) - low
    else:
        relation = np.zeros(len(pairs), np.int64)
    N = int(pairs.max()) + 1 if args.num_entities is None else args.num_entities
    if pairs.max() >= N:
        raise UsageError(f"--num-entities {N} is smaller than the largest id + 1")
    shape = (int(relation.max()) + 1, N, N)
    # the links, their mask and the model's copy of both: refuse before allocating
    named = "--num-entities" if args.num_entities is not None else f"--data (ids up to {N - 1})"
    check_allocation(shape, np.float64, named, copies=4)
    Y = np.zeros(shape)
    Y[relation, pairs[:, 0], pairs[:, 1]] = 1.0
    if args.undirected:
        Y[relation, pairs[:, 1], pairs[:, 0]] = 1.0
    return Y


def fit(args) -> int:
    from bnpjax.models import ilfm

    for option in ("init_features", "capacity", "num_entities", "merge_split", "nest"):
        value = getattr(args, option)
        zero_allowed = option in ("init_features", "merge_split", "nest")
        if value is not None and value < (0 if zero_allowed else 1):
            low = "0" if zero_allowed else "1"
            raise UsageError(f"--{option.replace('_', '-')} must be at least {low}, got {value}")
    if args.init_features is not None and args.init_features > args.capacity:
        raise UsageError(
            f"--init-features ({args.init_features}) exceeds --capacity ({args.capacity}): "
            "the start must fit the buffer; raise --capacity"
        )
    temperatures = _temperatures(args.temperatures)
    hyper = _hyper(args.sigma_w_prior)
    data = ilfm.make_data(_read_links(args))
    algorithm = ilfm.gibbs(
        data,
        hyper,
        capacity=args.capacity,
        mode=args.mode,
        init_strategy=args.init,
        num_init_features=args.init_features,
        merge_split=args.merge_split,
        nest=args.nest,
        ridge=args.ridge,
        mass=args.mass,
        temperatures=temperatures,
    )
    idata = sample(algorithm, args)
    scale = ["sigma_w"] if args.sigma_w_prior else []
    print(summary(idata, ["num_features", "alpha", *scale]).to_string())
    out = write_idata(idata, args.out)
    R, N = data.Y.shape[:2]
    observed = int(np.asarray(data.mask).sum())
    print(f"wrote {out} ({N} entities, {R} relations, {observed} observed pairs)")
    return 0
