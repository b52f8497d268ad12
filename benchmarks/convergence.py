"""Does every sampler converge from its default start on real-size data? R-hat and ESS per
model, with the library's defaults.

For each case: the model's factory with its default settings (the ones ``bnpjax fit`` and
the quickstart use; only the data-size arguments are given), its default random start,
``--chains`` chains (4 by default) of ``num_warmup`` + ``num_samples`` sweeps, then
:func:`bnpjax.infer.convergence_report` on what the run reports (scalars and small vectors
with identified labels: ``lp``, ``num_features``, noise scales, ``alpha``, biases, ...; the
per-feature arrays of nonparametric models are left out because their labels switch).

Printed per case: the largest split R-hat and the variable it belongs to, the smallest bulk
or tail ESS and its variable, the sampling seconds (compile excluded) and ESS per second, and
the sweep after which every R-hat is below 1.01 (R-hat recomputed on the first 10%, 20%, ...
of the kept draws; ``never`` when even the whole run is above), with the seconds of sampling
that takes and the wall seconds with compilation and the start. For the IBP cases the bulk
ESS per second of K+, and with ``--reference`` the same for the NumPy reference of the
collapsed sweep (``benchmarks/ibp_reference.py``, PyIBP's; PyIBP itself is not on the
package index) on the same data, chains and sweeps, and the ratio. A final table in
Markdown, for docs/benchmarks.md.

The cases (``--cases`` picks some):

* ``linreg``: linear regression, 1000 x 10 synthetic data.
* ``ibp_bars`` / ``ibp_bars_sm``: IBP linear-Gaussian model on bars (N = 100, D = 36),
  collapsed Gibbs / collapsed Gibbs with split-merge moves.
* ``ibp_1000`` / ``ibp_1000_sm``: the same on N = 1000 bars images.
* ``ibp_1000_parallel`` / ``ibp_10000_parallel``: the row-parallel sampler
  (``ibp_lg.parallel_gibbs``, with its feature moves and warm start) on N = 1000 and
  N = 10,000 bars images.
* ``ilfm_nations``: ILFM on the nations relations (14 countries, 56 relations);
  ``ilfm_nations_pt`` the same with replica exchange over ``ILFM_TEMPERATURES``.
* ``ilfm_planted`` / ``ilfm_planted_pt``: the ``bnpjax demo ilfm`` data (40 entities, 3
  relations, 3 planted features; seed ``ILFM_PLANTED_SEED``, on whose data chains of the plain
  sampler stay in different configurations of features) and settings, without and with
  replica exchange; ``ilfm_planted_nest`` with replica exchange and 16 take-out-or-put-in
  moves per sweep, ``ilfm_planted_nest_sd`` also with the weights' prior sd 2.5 (the
  generator's); ``ilfm_planted_scale`` with nest moves, the ridge move and the weights'
  scale sampled (``sigma_w^2 ~ InvGamma(2, 2)``), ``ilfm_planted_scale_long`` the same with
  60 leapfrog steps instead of the demo's 25, ``ilfm_planted_fisher`` with the HMC move's
  Fisher mass and 10 leapfrog steps.
* ``fm_ml100k``: FM regression, rank 10, ML-100K u1 (80,000 ratings, one-hot users and items).
* ``m3f_ml100k`` / ``ipm3f_ml100k``: Gibbs M3F (rank 10) and Gibbs iPM3F, C = 0.1,
  margin 9 (the authors' defaults), ML-100K u1.
* ``wmmsb_fb_uc``: WMMSB collapsed Gibbs, K = 10, on fb_uc (1899 nodes, counts, every
  unlisted pair an observed zero).

Real data come from ``BNPJAX_DATA`` (a case whose data are absent is skipped with its reason).
Run from the repository root. The default cases (``DEFAULT_CASES``: linreg, ibp_bars,
ibp_1000, ilfm_nations, fm_ml100k, m3f_ml100k) took about 6 min on 2 CPU cores (2026-11-25);
ibp_bars_sm took 6 min and ibp_1000_sm is longer still; ipm3f_ml100k and wmmsb_fb_uc were not
timed::

    BNPJAX_DATA=/path/to/data python benchmarks/convergence.py
    python benchmarks/convergence.py --cases linreg,ibp_bars,ibp_bars_sm --chains 4
    python benchmarks/convergence.py --quick       # smoke test: a few sweeps per case
    python benchmarks/convergence.py --cases ibp_1000 --reference   # against PyIBP's sweep
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import jax
import numpy as np

from bnpjax.infer.diagnostics import convergence_report
from bnpjax.infer.driver import run

R_HAT_MAX = 1.01


def _linreg():
    from bnpjax.datasets import linear_regression as simulate
    from bnpjax.models import linear_regression

    d = simulate(0, num_obs=1000, num_features=10)
    data = linear_regression.make_data(d["X"], d["y"])
    return linear_regression.gibbs(data), "synthetic 1000 x 10", (1000, 500)


def _ibp_data(num_obs):
    from bnpjax.datasets import bars
    from bnpjax.models import ibp_lg

    return ibp_lg.make_data(bars(0, num_obs=num_obs)["X"])


def _ibp(num_obs, split_merge, parallel=False):
    def build():
        from bnpjax.models import ibp_lg

        data = _ibp_data(num_obs)
        factory = ibp_lg.split_merge if split_merge else ibp_lg.collapsed_gibbs
        if parallel:
            factory = ibp_lg.parallel_gibbs
        algorithm = factory(data, trace_features=False, pointwise_log_likelihood=False)
        sizes = (500, 500) if num_obs <= 100 else (200, 200)
        return algorithm, f"bars N={num_obs}, D=36", sizes

    return build


def _ilfm_nations():
    from bnpjax.datasets import nations
    from bnpjax.models import ilfm

    d = nations()
    data = ilfm.make_data(d.Y, d.mask)
    algorithm = ilfm.gibbs(data, pointwise_log_likelihood=False)
    return algorithm, f"nations {d.Y.shape[1]} x {d.Y.shape[1]} x {d.Y.shape[0]}", (300, 300)


#: the replica-exchange ladder of the *_pt cases: 4 rungs, 1 to 0.51, geometric
ILFM_TEMPERATURES = (1.0, 0.8, 0.64, 0.512)
#: the demo's seed whose data trap chains of the plain sampler (2026-11-28)
ILFM_PLANTED_SEED = 2


def _ilfm_nations_pt():
    from bnpjax.datasets import nations
    from bnpjax.models import ilfm

    d = nations()
    data = ilfm.make_data(d.Y, d.mask)
    algorithm = ilfm.gibbs(data, pointwise_log_likelihood=False, temperatures=ILFM_TEMPERATURES)
    return algorithm, f"nations, {len(ILFM_TEMPERATURES)} temperatures", (300, 300)


def _ilfm_planted(
    temperatures, nest=0, sigma_w=1.0, sigma_w_prior=None, ridge=False, num_leapfrog=None,
    mass="unit",
):  # fmt: skip
    def build():
        from bnpjax.cli import ilfm as demo
        from bnpjax.datasets import planted_relations
        from bnpjax.models import ilfm

        sim = planted_relations(ILFM_PLANTED_SEED, num_entities=40, num_relations=3)
        data = ilfm.make_data(sim["Y"], mask=~sim["heldout"])
        leapfrog = num_leapfrog or demo.DEMO_LEAPFROG
        hyper = ilfm.make_hyper(sigma_w=sigma_w, sigma_w_prior=sigma_w_prior)
        algorithm = ilfm.gibbs(
            data, hyper=hyper, capacity=8, init_strategy="cluster",
            num_init_features=demo.DEMO_INIT_FEATURES, num_leapfrog=leapfrog,
            merge_split=demo.DEMO_MERGE_SPLIT, nest=nest, ridge=ridge, mass=mass,
            pointwise_log_likelihood=False, temperatures=temperatures,
        )  # fmt: skip
        rungs = "" if temperatures is None else f", {len(temperatures)} temperatures"
        extra = (
            (f", {nest} nest moves" if nest else "")
            + (f", weights' prior sd {sigma_w}" if sigma_w != 1.0 else "")
            + (f", sigma_w^2 ~ InvGamma{sigma_w_prior}" if sigma_w_prior else "")
            + (", ridge move" if ridge else "")
            + (f", {leapfrog} leapfrog steps" if num_leapfrog else "")
            + (f", {mass} mass" if mass != "unit" else "")
        )
        return algorithm, f"demo ilfm data, seed {ILFM_PLANTED_SEED}{rungs}{extra}", (300, 700)

    return build


def _ml100k():
    from bnpjax.datasets import movielens

    ml = movielens("ml-100k")
    train, _ = ml.splits["u1"]
    users = train[:, 0].astype(int) - 1
    items = train[:, 1].astype(int) - 1
    return ml, users, items, train[:, 2]


def _fm_ml100k():
    import scipy.sparse as sp

    from bnpjax.models import fm

    ml, users, items, ratings = _ml100k()
    num_users, num_items = int(ml.ratings[:, 0].max()), int(ml.ratings[:, 1].max())
    n = len(users)
    rows = np.repeat(np.arange(n), 2)
    cols = np.stack([users, num_users + items], 1).ravel()
    X = sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, num_users + num_items))
    data = fm.make_data(X, ratings.astype(float), group_shapes=[num_users, num_items])
    algorithm = fm.gibbs(data, rank=10, pointwise_log_likelihood=False)
    return algorithm, "ML-100K u1, one-hot", (300, 200)


def _m3f(ipm3f):
    def build():
        from bnpjax.models import m3f

        ml, users, items, ratings = _ml100k()
        num_users, num_items = int(ml.ratings[:, 0].max()), int(ml.ratings[:, 1].max())
        levels = ratings.astype(int)
        data = m3f.make_data(users, items, levels, num_users, num_items, 5)
        hyper = m3f.make_hyper(5)
        if ipm3f:
            algorithm = m3f.ipm3f_gibbs(data, hyper, keep_factors=False)
        else:
            algorithm = m3f.gibbs(data, hyper, rank=10, keep_factors=False)
        return algorithm, "ML-100K u1, C=0.1, margin 9", (100, 100)

    return build


def _wmmsb_fb_uc():
    from bnpjax.datasets import load_network
    from bnpjax.models import wmmsb

    net = load_network("fb_uc")
    data = wmmsb.make_network(
        net.num_nodes, net.src, net.dst, net.weight, directed=net.directed, zeros="dense"
    )
    hyper = wmmsb.make_hyper(10)
    algorithm = wmmsb.collapsed_gibbs(data, hyper)
    return algorithm, f"fb_uc {net.num_nodes} nodes, K=10", (100, 100)


CASES = {
    "linreg": _linreg,
    "ibp_bars": _ibp(100, False),
    "ibp_bars_sm": _ibp(100, True),
    "ibp_1000": _ibp(1000, False),
    "ibp_1000_sm": _ibp(1000, True),
    "ibp_1000_parallel": _ibp(1000, False, parallel=True),
    "ibp_10000_parallel": _ibp(10000, False, parallel=True),
    "ilfm_nations": _ilfm_nations,
    "ilfm_nations_pt": _ilfm_nations_pt,
    "ilfm_planted": _ilfm_planted(None),
    "ilfm_planted_pt": _ilfm_planted(ILFM_TEMPERATURES),
    "ilfm_planted_nest": _ilfm_planted(ILFM_TEMPERATURES, nest=16),
    "ilfm_planted_nest_sd": _ilfm_planted(ILFM_TEMPERATURES, nest=16, sigma_w=2.5),
    "ilfm_planted_scale": _ilfm_planted(
        ILFM_TEMPERATURES, nest=16, sigma_w_prior=(2.0, 2.0), ridge=True
    ),
    "ilfm_planted_scale_long": _ilfm_planted(
        ILFM_TEMPERATURES, nest=16, sigma_w_prior=(2.0, 2.0), ridge=True, num_leapfrog=60
    ),
    "ilfm_planted_fisher": _ilfm_planted(
        ILFM_TEMPERATURES,
        nest=16,
        sigma_w_prior=(2.0, 2.0),
        ridge=True,
        num_leapfrog=10,
        mass="fisher",
    ),
    "fm_ml100k": _fm_ml100k,
    "m3f_ml100k": _m3f(False),
    "ipm3f_ml100k": _m3f(True),
    "wmmsb_fb_uc": _wmmsb_fb_uc,
}


PREFIXES = np.linspace(0.1, 1.0, 10)


DEFAULT_CASES = ["linreg", "ibp_bars", "ibp_1000", "ilfm_nations", "fm_ml100k", "m3f_ml100k"]


def _converged_after(result, report, fractions=PREFIXES):
    """The smallest kept prefix (a fraction of the draws) over which every R-hat of the
    report's variables is at most 1.01; None if even the whole run is above."""
    names = [v.name for v in report.variables]
    for f in fractions:
        length = max(round(f * report.num_draws), 4)
        trace = {
            g: {k: v[:, :length] for k, v in group.items() if k in names}
            for g, group in result.trace.items()
            if g in ("posterior", "sample_stats")
        }
        sub = convergence_report(trace, names)
        if all(v.r_hat <= R_HAT_MAX for v in sub.variables):
            return f
    return None


def measure(name, args):
    try:
        algorithm, label, (num_samples, num_warmup) = CASES[name]()
    except (FileNotFoundError, OSError) as err:
        print(f"{name}: skipped ({err})")
        return None
    if args.quick:
        num_samples, num_warmup = 20, 10
    elif args.sweeps:
        num_warmup, num_samples = args.sweeps
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = run(
            algorithm,
            jax.random.key(args.seed),
            num_samples,
            num_warmup=num_warmup,
            num_chains=args.chains,
            progress_bar=False,
        )
    wall = time.perf_counter() - t0
    report = convergence_report(result)
    worst_r = max(report.variables, key=lambda v: v.r_hat)
    worst_e = min(report.variables, key=lambda v: min(v.ess_bulk, v.ess_tail))
    ess = min(worst_e.ess_bulk, worst_e.ess_tail)
    timings = result.timings
    sampling = timings.get("sampling_s", float("nan"))
    warmup = timings.get("warmup_s", 0.0)
    after = _converged_after(result, report)
    if after is None:
        settled = "never"
    else:
        sweeps = num_warmup + round(after * num_samples)
        # with compilation and the start: the wall time a user waits for a converged run
        startup = timings.get("compile_s", 0.0) + timings.get("init_s", 0.0)
        settled = (
            f"{sweeps} sweeps ({warmup + after * sampling:.0f} s; "
            f"{startup + warmup + after * sampling:.0f} s wall)"
        )
    row = {
        "case": name,
        "data": label,
        "run": f"{args.chains} x ({num_warmup} + {num_samples})",
        # a quantity constant within each chain but not across them has an infinite R-hat
        "r_hat": (f"{worst_r.r_hat:.3f}" if worst_r.r_hat < 100 else "> 100")
        + f" ({worst_r.worst})",
        "ess": f"{ess:.0f} ({worst_e.worst})",
        "sampling_s": f"{sampling:.1f}",
        "ess_per_s": f"{ess / sampling:.1f}",
        "settled": settled,
        "wall_s": f"{wall:.0f}",
    }
    print(
        f"{name}: {label}; {row['run']} sweeps; R-hat max {row['r_hat']}; ESS min {row['ess']}; "
        f"sampling {row['sampling_s']} s, {row['ess_per_s']} ESS/s; every R-hat <= 1.01 "
        f"after {settled}; wall {row['wall_s']} s",
        flush=True,
    )
    if "num_features" not in result.trace["sample_stats"]:  # no feature count (FM, M3F)
        return row
    row["k_plus_ess_per_s"] = _k_plus_ess(result.trace) / sampling
    row["k_plus_mean"] = float(np.mean(result.trace["sample_stats"]["num_features"]))
    if name.startswith("ibp_"):
        print(f"{name}: K+ bulk ESS per second {row['k_plus_ess_per_s']:.1f}", flush=True)
    return row


def _k_plus_ess(trace):
    import arviz as az

    k_plus = np.asarray(trace["sample_stats"]["num_features"], float)
    return float(az.ess(az.convert_to_dataset({"k": k_plus}), method="bulk")["k"])


_REFERENCE_RUNS = {}


def reference(name, args, row):
    """The NumPy reference (benchmarks/ibp_reference.py, PyIBP's sweep) on the data of IBP
    case ``name``, with the same chains and sweeps: K+ bulk ESS per second of both and their
    ratio."""
    from ibp_reference import run_chains

    num_obs = int(row["data"].split("N=")[1].split(",")[0])
    num_warmup, num_samples = (int(v) for v in row["run"].split("(")[1].rstrip(")").split("+"))
    if args.reference_sweeps:
        num_warmup, num_samples = args.reference_sweeps
    settings = (num_obs, num_warmup, num_samples)
    if settings not in _REFERENCE_RUNS:  # one reference run serves every case on the data
        X = np.asarray(_ibp_data(num_obs).X, float)
        _REFERENCE_RUNS[settings] = run_chains(
            X, args.chains, num_warmup, num_samples, seed=args.seed
        )
    k_plus, sampling, total = _REFERENCE_RUNS[settings]
    ess = _k_plus_ess({"sample_stats": {"num_features": k_plus}})
    ratio = row["k_plus_ess_per_s"] / (ess / sampling)
    print(
        f"{name} reference (NumPy, PyIBP's sweep): {args.chains} x ({num_warmup} + "
        f"{num_samples}) sweeps; K+ mean {k_plus.mean():.2f} (bnpjax {row['k_plus_mean']:.2f}); "
        f"K+ bulk ESS {ess:.0f} in {sampling:.1f} s = {ess / sampling:.2f} ESS/s "
        f"({total:.0f} s with warmup); bnpjax {row['k_plus_ess_per_s']:.1f} ESS/s: "
        f"{ratio:.1f}x",
        flush=True,
    )
    return ratio


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases",
        default=",".join(DEFAULT_CASES),
        help=f"comma-separated case names, from {', '.join(CASES)}",
    )
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="a few sweeps per case")
    parser.add_argument(
        "--sweeps",
        type=int,
        nargs=2,
        metavar=("WARMUP", "SAMPLES"),
        help="warmup and kept sweeps per chain for every case (default: each case's own)",
    )
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also run the NumPy reference of the collapsed sweep (PyIBP's) on each IBP case",
    )
    parser.add_argument(
        "--reference-sweeps",
        type=int,
        nargs=2,
        metavar=("WARMUP", "SAMPLES"),
        help="the reference's warmup and kept sweeps per chain (default: the case's)",
    )
    args = parser.parse_args(argv)
    names = args.cases.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {list(CASES)}")
    print(
        f"# {time.strftime('%Y-%m-%d')}, {platform.machine()}, {jax.default_backend()} "
        f"({jax.device_count()} device), jax {jax.__version__}"
    )
    rows = [r for r in (measure(n, args) for n in names) if r is not None]
    if args.reference:
        for r in rows:
            if r["case"].startswith("ibp_"):
                reference(r["case"], args, r)
    header = ["case", "data", "chains x (warmup + draws)", "R-hat max", "ESS min",
              "sampling s", "ESS/s", "every R-hat <= 1.01 after"]  # fmt: skip
    keys = ["case", "data", "run", "r_hat", "ess", "sampling_s", "ess_per_s", "settled"]
    print()
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
