"""Does the split-merge move unstick the collapsed Gibbs sampler of the IBP linear-Gaussian
model? R-hat and ESS per second on bars, with and without it.

Two starts (``--start``):

* ``merged`` (default): bars (``bnpjax.datasets.bars``, ``--num-obs`` images of 36 pixels,
  four planted features). Half the chains start from the planted ``Z``; the other half from
  the planted ``Z`` with two features merged into one column (the union of their holders)
  and the fourth column dropped, so three features whose weights are the posterior mean given
  that ``Z``; alpha = 1, sigma_X = 0.5, sigma_A = 1 at the start.
* ``default``: every chain from the factory's random start (10 features, each entry on with
  probability 1/2).

Every hyperparameter is sampled. The kernels: ``ibp_lg.collapsed_gibbs`` and
``ibp_lg.split_merge`` (``--num-moves`` proposals before each collapsed sweep), same keys.

Printed per kernel: split R-hat and bulk ESS (ArviZ) of K+, lp and sigma_X over all chains;
ESS per second of sampling (compile excluded); K+ of each chain at a few sweeps; for the
merged start, how many merged-start chains reached four features and when.

Run from the repository root::

    python benchmarks/ibp_split_merge.py                      # merged start, N = 100 (~2 min)
    python benchmarks/ibp_split_merge.py --start default --num-obs 1000 --num-samples 300 \
        --capacity 32                                         # ~8 min on 2 CPU cores
"""

from __future__ import annotations

import argparse
import platform
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.datasets import bars
from bnpjax.infer.driver import run
from bnpjax.models import ibp_lg
from bnpjax.models.ibp_lg.conditionals import posterior_A


def _start(data, Z, capacity, num_chains):
    """Chain states: the first half from ``Z_merged``, the rest from the planted ``Z``."""
    N = Z.shape[0]
    merged = np.zeros((N, capacity))
    merged[:, 0] = np.maximum(Z[:, 0], Z[:, 1])
    merged[:, 1:3] = Z[:, 2:4]
    planted = np.zeros((N, capacity))
    planted[:, :4] = Z
    states = []
    for c in range(num_chains):
        Zc = jnp.asarray(merged if c < num_chains // 2 else planted, data.X.dtype)
        _, mean = posterior_A(Zc, data.X, (0.5 / 1.0) ** 2)
        A = mean * (Zc.sum(0) > 0)[:, None]
        one = jnp.ones((), data.X.dtype)
        states.append(ibp_lg.IBPLGState(Zc, A, one, 0.5 * one, one, data.X, 0 * data.X[0]))
    return jax.tree.map(lambda *xs: jnp.stack(xs), *states)


def _measure(name, algorithm, data, start, args):
    t0 = time.perf_counter()
    result = run(
        algorithm,
        jax.random.key(args.seed),
        args.num_samples,
        num_chains=args.num_chains,
        initial_state=start,
        progress_bar=False,
    )
    wall = time.perf_counter() - t0
    seconds = result.timings["sampling_s"]
    k = np.asarray(result.trace["sample_stats"]["num_features"])
    lp = np.asarray(result.trace["sample_stats"]["lp"])
    sx = np.asarray(result.trace["posterior"]["sigma_x"])
    half = args.num_chains // 2
    reached = [np.flatnonzero(k[c] >= 4) for c in range(half)]
    first = [r[0] for r in reached if r.size]
    line = [f"{name:16s}"]
    for label, x in (("K+", k), ("lp", lp), ("sigma_X", sx)):
        ess = float(az.ess(x.astype(float)))
        rhat = float(az.rhat(x.astype(float)))
        line.append(f"{label}: R-hat {rhat:5.2f} ESS {ess:7.1f} ({ess / seconds:6.1f}/s)")
    print(" | ".join(line))
    marks = [m for m in (1, 10, 50, 100, 200, 500, 1000, 2000) if m <= k.shape[1]]
    print(
        f"{'':16s} K+ per chain at sweeps {marks}: "
        + "; ".join(" ".join(str(int(k[c, m - 1])) for m in marks) for c in range(k.shape[0]))
    )
    text = f"{'':16s} sampling {seconds:.1f} s (wall {wall:.1f} s with compile); "
    if args.start == "merged":
        text += f"merged-start chains reaching K+ >= 4: {len(first)}/{half}"
        text += f", median first sweep {int(np.median(first))}" if first else ""
        text += f"; mean K+ {k[:half].mean():.2f} merged-start, {k[half:].mean():.2f} planted"
    else:
        text += f"mean K+ {k.mean():.2f}, per chain {np.round(k.mean(1), 2).tolist()}"
    print(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=1000)
    parser.add_argument("--num-chains", type=int, default=4)
    parser.add_argument("--num-moves", type=int, default=10)
    parser.add_argument("--capacity", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--start",
        choices=["merged", "default"],
        default="merged",
        help="merged: half the chains from two planted features merged (bars, N = --num-obs); "
        "default: every chain from the factory's random start",
    )
    parser.add_argument("--num-obs", type=int, default=100)
    args = parser.parse_args(argv)
    print(
        f"# {platform.machine()} {platform.processor() or ''} jax {jax.__version__} "
        f"{jax.default_backend()} ({jax.device_count()} device), {time.strftime('%Y-%m-%d')}"
    )
    d = bars(0, num_obs=args.num_obs)
    data = ibp_lg.make_data(d["X"])
    if args.start == "merged":
        start = _start(data, d["Z"], args.capacity, args.num_chains)
        what = "half from two planted features merged, half from the planted Z"
    else:
        start = None
        what = "each from the default random start (10 features, each entry on w.p. 1/2)"
    print(
        f"# bars N={args.num_obs}, D=36; {args.num_chains} chains x {args.num_samples} "
        f"sweeps, {what}"
    )
    common = {"capacity": args.capacity, "trace_features": False}
    if args.start == "merged":
        common["sigma_x"] = 0.5
    _measure("collapsed_gibbs", ibp_lg.collapsed_gibbs(data, **common), data, start, args)
    kernel = ibp_lg.split_merge(data, num_moves=args.num_moves, **common)
    _measure("split_merge", kernel, data, start, args)


if __name__ == "__main__":
    main()
