"""``bnpjax demo ibp`` and ``bnpjax fit ibp``: linear-Gaussian latent features with an
Indian buffet process prior (``bnpjax.models.ibp_lg``), collapsed and parallel Gibbs."""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import add_header_argument, read_table
from bnpjax.cli.output import save_figure, summary, timing, write_idata
from bnpjax.cli.parser import sample

#: chains on every core (bnpjax.cli._use_cores): checked and measured faster split
CPU_CORES = True
DEMO_HELP = "IBP linear-Gaussian latent features on 'bars', both samplers"
FIT_HELP = "IBP latent features of a numeric CSV (rows = objects)"
# 300 kept draws after 50 draws' worth of warmup sweeps: both samplers start where the
# posterior is (the parallel sampler from collapsed sweeps on all 100 rows, the collapsed one
# within a few dozen sweeps); 300 warmup draws gave the same diagnostics at twice the time
# (seeds 0-3, 2026-11-29: max R-hat 1.002-1.007, min ESS 271-481 with 50)
DEMO_DEFAULTS = (300, 50, 2)
DATA_ALIASES = ()
DATA_HELP = "CSV with one object per row (e.g. one image's pixels); empty cells are imputed"

_SAMPLERS = ("collapsed", "parallel")
#: sweeps per kept draw (and per warmup step) of the demo's samplers. The parallel sampler's
#: sweeps are several times cheaper than the collapsed sampler's on bars but move ``Z`` given
#: ``A``, so one sweep decorrelates far less (ESS 15 of 600 draws at 1, 2026-11-26). The
#: collapsed sampler, since its default start no longer overflows the buffer (1.1-1.5 s for
#: 2 x 600 sweeps), gets 6: max R-hat on seeds 0-3 at 1: 1.008-1.029; at 4: 1.002-1.011; at
#: 6: 1.003-1.004 (2026-11-29)
DEMO_THIN = {"collapsed": 6, "parallel": 20}
#: the demo's row-parallel sampler without the birth-death moves: they exist to remove a
#: feature whole at large N, where the warm start sees a subsample; here it sees every row, and
#: ten moves a sweep cost twice the sweep for no ESS (min ESS 395-479 without, 376-461 with
#: 3; sampling 6.2 against 10.5 s with the default 10; seeds 0-3, 2026-11-29)
DEMO_SETTINGS = {"collapsed": {}, "parallel": {"num_moves": 0}}


def _factory(sampler: str):
    from bnpjax.models import ibp_lg

    return {"collapsed": ibp_lg.collapsed_gibbs, "parallel": ibp_lg.parallel_gibbs}[sampler]


def _matched_features(idata, data, true_features):
    """Posterior mean features of the highest-density draw among those with the modal K+,
    matched to the true features (Hungarian assignment on mean absolute difference).
    Returns the matched features and their mean absolute error."""
    from scipy.optimize import linear_sum_assignment

    from bnpjax.models import ibp_lg

    post = idata.posterior
    k = post["num_features"].values
    lp = np.where(k == np.bincount(k.ravel()).argmax(), idata.sample_stats["lp"].values, -np.inf)
    chain, draw = np.unravel_index(np.argmax(lp), lp.shape)
    best = {
        name: post[name].values[chain, draw][None, None] for name in ("Z", "sigma_x", "sigma_a")
    }
    A = np.asarray(ibp_lg.feature_means({"posterior": best}, data)[0, 0])
    A = A[best["Z"][0, 0].sum(0) > 0]  # the active features
    cost = np.abs(true_features[:, None, :] - A[None, :, :]).mean(-1)
    rows, cols = linear_sum_assignment(cost)
    return A[cols[np.argsort(rows)]], cost[rows, cols].mean()


def demo(args) -> int:
    from bnpjax.datasets import bars
    from bnpjax.models import ibp_lg
    from bnpjax.plots import plot_features

    start = time.perf_counter()
    sim = bars(args.seed)
    data = ibp_lg.make_data(sim["X"], sim["mask"])
    print("bnpjax demo ibp: linear-Gaussian latent features with an IBP prior on 'bars'")
    print("data: 100 images of 6x6 pixels, 4 true features, sigma_X = 0.5")
    out_dir = Path(args.out_dir)
    panels, written = {"true": sim["A"]}, []
    for name in _SAMPLERS:
        run_args = copy.copy(args)
        run_args.thin = args.thin * DEMO_THIN[name]
        run_args.num_warmup = args.num_warmup * DEMO_THIN[name]
        idata = sample(_factory(name)(data, **DEMO_SETTINGS[name]), run_args)
        k = idata.posterior["num_features"].values
        counts = np.bincount(k.ravel())
        share = ", ".join(f"K+={i}: {c / k.size:.2f}" for i, c in enumerate(counts) if c)
        sweeps = f"; {run_args.thin} sweeps per draw" if run_args.thin > 1 else ""
        print(f"{name} Gibbs{sweeps}: posterior of K+ ({share}); mode {int(counts.argmax())}")
        print(summary(idata, ["num_features", "sigma_x", "sigma_a", "alpha"]).to_string())
        print(f"  {timing(idata, digits=1)}")
        panels[name], error = _matched_features(idata, data, sim["A"])
        print(f"  matched features: mean absolute error {error:.3f}")
        written.append(write_idata(idata, out_dir / f"bnpjax_demo_ibp_{name}.nc"))
    png = save_figure(out_dir / "bnpjax_demo_ibp_features.png", plot_features, panels)
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {written[0]}, {written[1]} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument(
        "--sampler",
        choices=list(_SAMPLERS),
        default="collapsed",
        help="collapsed: row by row with A integrated out (Griffiths and Ghahramani); "
        "parallel: all rows at once given A (the fast one on a GPU)",
    )
    parser.add_argument("--kappa", type=int, default=10, help="max new features per row")
    parser.add_argument(
        "--capacity", type=int, default=16, help="initial feature buffer (grows when full)"
    )
    add_header_argument(parser)


def fit(args) -> int:
    from bnpjax.models import ibp_lg

    table = read_table(args.data, header=False if args.no_header else None)
    header, values = table.columns, table.values
    mask = np.isfinite(values)
    data = ibp_lg.make_data(values, mask)
    idata = sample(_factory(args.sampler)(data, kappa=args.kappa, capacity=args.capacity), args)
    k = idata.posterior["num_features"].values.ravel()
    counts = np.bincount(k)
    print(
        f"posterior mode of K+: {int(counts.argmax())} "
        f"({counts.max() / k.size:.2f} of {k.size} draws)"
    )
    print(summary(idata, ["num_features", "sigma_x", "sigma_a", "alpha"]).to_string())
    out = write_idata(idata, args.out)
    print(f"wrote {out} ({int((~mask).sum())} missing entries imputed, columns {header})")
    return 0
