"""Runs over several devices and the growth of cost with data (bnpjax.infer.sharding).

Part 1, devices: for each model, the same fit on 1, 2 and 4 forced host devices (each in a
fresh process, ``XLA_FLAGS=--xla_force_host_platform_device_count=N``), chains split over the
devices (and FM's and the row-parallel IBP's rows with ``--data``): whether the draws equal the
one-device run's (discrete equal, continuous max relative difference) and seconds per sweep,
with the ratio to one device. On a CPU the forced devices share its cores, so the ratio
measures the partitioning's overhead, not a speed-up; on a multi-GPU node pass ``--real`` to
use the real devices.

Part 2, data: seconds per sweep of FM (ratings) and row-parallel IBP (rows) at growing sizes
on one device, peak memory and bytes per rating / row, and the fitted growth exponent next
to the algorithm's (1: both sweeps are linear in the data).

    python benchmarks/scaling.py                 # both parts, small sizes (a few minutes)
    python benchmarks/scaling.py --part data --fm-sizes 100000 1000000 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

import numpy as np


def _fm(num_ratings, seed=0):
    from bnpjax.datasets import factorization_ratings
    from bnpjax.models import fm

    sim = factorization_ratings(
        seed, num_users=max(50, num_ratings // 50), num_items=max(40, num_ratings // 80),
        num_ratings=num_ratings, test_fraction=0.0,
    )  # fmt: skip
    nu, ni = int(sim["users"].max()) + 1, int(sim["items"].max()) + 1
    import scipy.sparse as sp

    rows = np.arange(num_ratings)
    X = sp.csr_matrix(
        (np.ones(2 * num_ratings), (np.r_[rows, rows], np.r_[sim["users"], nu + sim["items"]])),
        shape=(num_ratings, nu + ni),
    )
    return fm.gibbs(fm.make_data(X, sim["y"]), rank=8)


def _ibp(num_rows, seed=0):
    from bnpjax.datasets import bars
    from bnpjax.models import ibp_lg

    return ibp_lg.parallel_gibbs(ibp_lg.make_data(bars(seed, num_obs=num_rows)["X"]), capacity=16)


def _lr(num_rows, seed=0):
    from bnpjax.models import linear_regression

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(num_rows, 5))
    return linear_regression.gibbs(linear_regression.make_data(X, X @ np.arange(5.0)))


MODELS = {"fm": (_fm, 20000), "ibp_lg_parallel": (_ibp, 2000), "linear_regression": (_lr, 2000)}


def _time_run(kernel, devices, num_chains, steps, repeats):
    import jax

    from bnpjax.infer.driver import run

    kw = dict(num_chains=num_chains, progress_bar=False, chunk_size=steps, devices=devices)
    first = run(kernel, jax.random.key(0), steps, **kw)  # compiles
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = run(kernel, jax.random.key(0), steps, **kw)
        jax.block_until_ready(result.final_state)
        times.append(time.perf_counter() - t0)
    return first, statistics.median(times) / steps


def worker(args):
    """One process: every model on this process's devices; prints JSON."""
    import jax

    from bnpjax.infer import make_mesh

    out = {}
    for name in args.models:
        factory, size = MODELS[name]
        kernel = factory(size)
        n = jax.device_count()
        rows = args.data and name != "linear_regression"
        devices = make_mesh(1, n) if rows else None
        result, per_sweep = _time_run(kernel, devices, args.chains, args.steps, args.repeats)
        np.savez(f"{args.out}_{name}_{n}.npz", **{
            f"{g}/{v}": a for g, d in result.trace.items() for v, a in d.items()
        })  # fmt: skip
        out[name] = per_sweep
    print(json.dumps(out))


def compare(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    worst, discrete_equal = 0.0, True
    for name in a.files:
        x, y = a[name], b[name]
        if x.dtype.kind in "fc" and not name.endswith(("/Z", "/num_features")):
            worst = max(worst, float(np.max(np.abs(x - y) / np.maximum(np.abs(x), 1.0))))
        else:
            discrete_equal &= bool(np.array_equal(x, y))
    return discrete_equal, worst


def part_devices(args):
    base = f"/tmp/bnpjax-scaling-{os.getpid()}"
    results = {}
    for n in args.devices:
        env = dict(os.environ)
        if not args.real:
            env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={n}"
        cmd = [
            sys.executable,
            __file__,
            "--worker",
            "--out",
            base,
            "--chains",
            str(args.chains),
            "--steps",
            str(args.steps),
            "--repeats",
            str(args.repeats),
            "--models",
            *args.models,
        ]
        if args.data:
            cmd.append("--data")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stderr[-3000:])
        results[n] = json.loads(done.stdout.strip().splitlines()[-1])
    split = "rows" if args.data else "chains"
    print(
        f"\n{split} over N devices ({args.chains} chains, {args.steps} sweeps, median of "
        f"{args.repeats}); forced host devices share this CPU's cores"
    )
    print(
        f"{'model':20s} {'N':>3s} {'s/sweep':>10s} {'ratio to 1':>10s} {'discrete =':>10s} "
        f"{'max rel diff':>12s}"
    )
    for name in args.models:
        for n in args.devices:
            same, worst = compare(f"{base}_{name}_{args.devices[0]}.npz", f"{base}_{name}_{n}.npz")
            t = results[n][name]
            print(
                f"{name:20s} {n:3d} {t:10.5f} {t / results[args.devices[0]][name]:10.2f} "
                f"{same!s:>10s} {worst:12.2e}"
            )


def size_worker(args):
    """One process, one model at one size: prints JSON (fresh process, so the peak is its own)."""
    import jax

    t0 = time.perf_counter()
    kernel = MODELS[args.model][0](args.size)
    build = time.perf_counter() - t0
    _, per_sweep = _time_run(kernel, None, 1, args.steps, args.repeats)
    nbytes = sum(getattr(x, "nbytes", 0) for x in jax.tree_util.tree_leaves(kernel.step))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result = {"s_per_sweep": per_sweep, "peak_mb": peak, "bytes": nbytes, "build_s": build}
    print(json.dumps(result))


def part_data(args):
    print("\ngrowth of cost with data, one device, 1 chain, each size in a fresh process")
    print(
        f"{'model':20s} {'size':>10s} {'s/sweep':>10s} {'peak RSS MB':>12s} "
        f"{'bytes/unit':>10s} {'data build s':>12s}"
    )
    for name, sizes in (("fm", args.fm_sizes), ("ibp_lg_parallel", args.ibp_sizes)):
        if name not in args.models:
            continue
        points = []
        for size in sizes:
            cmd = [sys.executable, __file__, "--size-worker", "--model", name, "--size", str(size)]
            cmd += ["--steps", str(args.steps), "--repeats", str(args.repeats)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                print(f"{name:20s} {size:10d} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            points.append((size, r["s_per_sweep"]))
            print(
                f"{name:20s} {size:10d} {r['s_per_sweep']:10.5f} {r['peak_mb']:12.0f} "
                f"{r['bytes'] / size:10.1f} {r['build_s']:12.1f}",
                flush=True,
            )
        if len(points) > 1:
            slope = np.polyfit(np.log([p[0] for p in points]), np.log([p[1] for p in points]), 1)[0]
            print(f"{name:20s} growth exponent {slope:.2f} (algorithm: 1)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("devices", "data", "both"), default="both")
    parser.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", action="store_true", help="split rows, not chains")
    parser.add_argument("--real", action="store_true", help="real devices, none forced")
    parser.add_argument("--fm-sizes", type=int, nargs="+", default=[10000, 100000, 1000000])
    parser.add_argument("--ibp-sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--size-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    if args.size_worker:
        return size_worker(args)
    print(
        f"{time.strftime('%Y-%m-%d')} {platform.machine()} {os.cpu_count()} cores, "
        f"python {platform.python_version()}"
    )
    if args.part in ("devices", "both"):
        part_devices(args)
    if args.part in ("data", "both"):
        part_data(args)


if __name__ == "__main__":
    main()
