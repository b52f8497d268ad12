"""What thinning costs: compile and sampling seconds of thinned runs through the driver.

For each case, in one fresh process with the persistent compilation cache off (so that every
program is compiled): a run of ``--sweeps`` sweeps kept at ``thin=1`` and one at each
``--thin`` (with ``--warmup`` warmup sweeps), one chain, then ``--repeats`` more runs of each
(no compilation) for the median sampling seconds. Printed per case and thin: the programs
compiled and their seconds in the first run, and the median sampling seconds.

Cases: ``m3f`` (the M3F demo's generated ratings, rank 6, C 0.3), ``fm`` (the FM demo's
generated ratings, rank 3), ``ibp_parallel`` (the row-parallel IBP sampler on bars).

    python benchmarks/thinned_runs.py
    python benchmarks/thinned_runs.py --cases ibp_parallel --thin 20 --sweeps 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

CASES = ("m3f", "fm", "ibp_parallel")


def _kernel(case: str):
    import demo_kernels

    if case == "m3f":
        from bnpjax.models import m3f

        data, hyper = demo_kernels.m3f_data()
        return m3f.gibbs(data, hyper, rank=6)
    if case == "fm":
        from bnpjax.models import fm

        return fm.gibbs(demo_kernels.fm_data(), rank=3)
    from bnpjax.models import ibp_lg

    return ibp_lg.parallel_gibbs(demo_kernels.bars_data())


def worker(case: str, thins: list[int], sweeps: int, warmup: int, repeats: int) -> dict:
    import jax

    import bnpjax.infer

    kernel = _kernel(case)
    out = {}
    for thin in [1, *thins]:
        before = bnpjax.infer.compile_count()
        first = bnpjax.infer.run(kernel, jax.random.key(0), sweeps // thin, num_warmup=warmup,
                                 thin=thin, progress_bar=False)  # fmt: skip
        programs = bnpjax.infer.compile_count() - before
        times = []
        for r in range(repeats):
            result = bnpjax.infer.run(kernel, jax.random.key(r + 1), sweeps // thin,
                                      num_warmup=warmup, thin=thin, progress_bar=False)  # fmt: skip
            times.append(result.timings.get("warmup_s", 0.0) + result.timings["sampling_s"])
        out[thin] = {"programs": programs, "compile_s": first.timings.get("compile_s", 0.0),
                     "sampling_s": statistics.median(times)}  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--thin", nargs="+", type=int, default=[5])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        out = worker(args.worker, args.thin, args.sweeps, args.warmup, args.repeats)
        print(json.dumps(out))
        return
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M')}; one chain, {args.sweeps} sweeps + "
          f"{args.warmup} warmup, compilation cache off")  # fmt: skip
    env = dict(os.environ, BNPJAX_CACHE_DIR="off")
    for case in args.cases:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", case, "--thin", *map(str, args.thin),
             "--sweeps", str(args.sweeps), "--warmup", str(args.warmup),
             "--repeats", str(args.repeats)],
            env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
        rows = json.loads(done.stdout.strip().splitlines()[-1])
        base = rows["1"]["sampling_s"]
        for thin, row in rows.items():
            print(
                f"{case} thin {thin}: {row['programs']} programs compiled in "
                f"{row['compile_s']:.2f} s; sampling {row['sampling_s']:.3f} s "
                f"(ratio to thin 1: {row['sampling_s'] / base:.3f})"
            )


if __name__ == "__main__":
    main()
