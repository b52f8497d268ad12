"""XLA's YNNPACK fusions on the CPU: every model's fit with them (XLA's choice in jaxlib 0.10)
and without (``bnpjax.infer.programs.WITHOUT_YNN_FUSIONS``), side by side, whatever the
kernel's own ``compiler_options`` (M3F's and the FM's ask for "without").

Each case runs in a fresh process per setting (the option is part of the compiled program, so
the two never share one); in it the fit runs once to compile and then ``--repeats`` times, and
the median of those later fits is printed, with the ratio without / with. Cases: the demos'
data and kernels at shorter lengths, and, where ``BNPJAX_DATA`` holds MovieLens, the FM fit
of ML-100K u1 at rank 10 (``fm100k``, 200 sweeps) and of the ML-1M ratings at rank 32
(``fm1m``, 200 sweeps; about a minute a fit).

    python benchmarks/cpu_library_fusions.py [--cases m3f,ilfm,...] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

CASES = ("linreg", "ibp_collapsed", "ibp_parallel", "ilfm", "m3f", "ipm3f", "fm", "fm100k")


def _fit(case):
    """A function that runs one fit of ``case`` (its data built once)."""
    import demo_kernels
    import jax
    import numpy as np

    import bnpjax

    options = dict(num_chains=2, progress_bar=False)
    if case == "linreg":
        from bnpjax.models import linear_regression as lr

        rng = np.random.default_rng(0)
        X = rng.normal(size=(500, 5))
        data = lr.make_data(X, X @ np.ones(5) + rng.normal(size=500))
        algorithm, lengths = lr.gibbs(data), dict(num_samples=2000, num_warmup=500)
    elif case.startswith("ibp"):
        from bnpjax.models import ibp_lg

        data = demo_kernels.bars_data()
        if case == "ibp_collapsed":
            algorithm, lengths = ibp_lg.collapsed_gibbs(data), dict(num_samples=200, num_warmup=100)
        else:
            algorithm = ibp_lg.parallel_gibbs(data)
            lengths = dict(num_samples=100, num_warmup=1000, thin=10)
    elif case == "ilfm":
        algorithm, lengths = demo_kernels.ilfm_kernel(), dict(num_samples=200, num_warmup=100)
    elif case in ("m3f", "ipm3f"):
        from bnpjax.models import m3f

        data, hyper = demo_kernels.m3f_data()
        if case == "m3f":
            algorithm = m3f.gibbs(data, rank=6, hyper=hyper, keep_factors=False)
        else:
            algorithm = m3f.ipm3f_gibbs(data, hyper=hyper, keep_factors=False)
        lengths = dict(num_samples=500, num_warmup=200)
    elif case == "fm":
        from bnpjax.models import fm

        data = demo_kernels.fm_data(train_only=True)
        algorithm, lengths = fm.gibbs(data, rank=3), dict(num_samples=300, num_warmup=100)
    elif case in ("fm100k", "fm1m"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from fm_movielens import setting_data

        from bnpjax.fm import FMRegressor

        setting = setting_data({"fm100k": "ml100k", "fm1m": "ml1m"}[case])

        def run():
            FMRegressor(rank=setting["rank"], random_state=0).fit(
                setting["X"], setting["y"], n_iter=200, n_kept_samples=150
            )

        return run
    else:
        raise ValueError(f"unknown case {case!r}")

    def run():
        bnpjax.sample(algorithm, jax.random.key(0), **lengths, **options)

    return run


def _worker(case, fusions, repeats):
    import warnings

    from bnpjax.infer import driver, programs

    warnings.simplefilter("ignore")
    forced = () if fusions else programs.WITHOUT_YNN_FUSIONS
    compiled = programs._compiled

    def with_options(*args, options=(), **kwargs):
        if len(args) > 6:  # the driver passes the kernel's options as the 7th argument
            args = args[:6]
        return compiled(*args, options=forced, **kwargs)

    driver._compiled = with_options
    return time_fits(_fit(case), repeats)


def time_fits(run, repeats):
    """Seconds of the first ``run()`` (it compiles) and the median of ``repeats`` later ones."""
    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    times.sort()
    return {"first_s": first, "median_s": times[len(times) // 2]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "FUSIONS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        case, fusions = args.worker
        print(json.dumps(_worker(case, fusions == "1", args.repeats)))
        return
    import jax

    print(f"{platform.machine()}, {os.cpu_count()} cores, jax {jax.__version__}")
    header = f"{'case':14s} {'with YNN s':>11s} {'without s':>10s} {'ratio':>6s}"
    print(f"{header}   (median of later fits)")
    for case in args.cases.split(","):
        figures = {}
        for fusions in ("1", "0"):
            out = subprocess.run(
                [sys.executable, __file__, "--repeats", str(args.repeats), "--worker", case,
                 fusions],
                capture_output=True, text=True,
            )  # fmt: skip
            if out.returncode:
                print(f"{case}: failed\n{out.stderr[-2000:]}")
                break
            figures[fusions] = json.loads(out.stdout.strip().splitlines()[-1])
        else:
            on, off = figures["1"]["median_s"], figures["0"]["median_s"]
            print(f"{case:14s} {on:11.3f} {off:10.3f} {off / on:6.2f}", flush=True)


if __name__ == "__main__":
    main()
