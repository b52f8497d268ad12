"""XLA's one-function CPU loops: bnpjax's demos and fits with XLA's own threshold (a loop
body of under 1024 bytes) and with bnpjax's (``bnpjax.compilation_cache.CPU_SMALL_LOOP_BYTES``,
set by ``import bnpjax``), side by side.

The threshold is read from ``XLA_FLAGS`` when JAX's backend starts, so each setting runs in
fresh processes (``BNPJAX_XLA_CPU_SMALL_LOOP_BYTES=default`` for XLA's). ``demo-MODEL``
cases time the whole ``bnpjax demo MODEL --no-progress`` command (one CPU device per core,
as the command runs), first with an empty compilation cache of the setting's own and then
``--repeats`` times with it warm (median printed). Other cases are those of
``cpu_library_fusions.py`` (the demos' data and kernels at shorter lengths, one device;
``--cores``: one per core), in one process with no cache: one fit that compiles, then the
median of ``--repeats`` fits. The settings alternate ``--rounds`` times, in turn first and
second, because this machine's pace drifts; each round's ratio is printed.

    python benchmarks/small_loops.py [--cases demo-ibp,demo-ilfm,...] [--repeats 2] [--rounds 2]
    python benchmarks/small_loops.py --cases ibp_collapsed,fm100k --cores
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

#: the XLA flags this process started with: ``import bnpjax`` adds its own to ``XLA_FLAGS``,
#: which the worker processes must not inherit
START_XLA_FLAGS = os.environ.get("XLA_FLAGS")
CASES = ("demo-ibp", "demo-ilfm", "demo-m3f", "demo-fm", "demo-linreg", "demo-wmmsb")
SETTINGS = {"XLA": "default", "bnpjax": None}


def _worker(case, repeats, cores):
    import warnings

    if cores:
        from bnpjax.infer.sharding import use_cpu_cores

        use_cpu_cores(None, quiet=True)

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from cpu_library_fusions import _fit, time_fits

    warnings.simplefilter("ignore")
    return time_fits(_fit(case), repeats)


def _environment(setting, cache):
    env = dict(os.environ, BNPJAX_CACHE_DIR=cache)
    env.pop("BNPJAX_XLA_CPU_SMALL_LOOP_BYTES", None)
    env.pop("XLA_FLAGS", None)
    if START_XLA_FLAGS is not None:
        env["XLA_FLAGS"] = START_XLA_FLAGS
    if SETTINGS[setting] is not None:
        env["BNPJAX_XLA_CPU_SMALL_LOOP_BYTES"] = SETTINGS[setting]
    return env


def _run_demo(model, setting, repeats):
    """Wall seconds of ``bnpjax demo model``: with an empty cache, then the median warm."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        env = _environment(setting, os.path.join(folder, "cache"))
        command = [sys.executable, "-m", "bnpjax", "demo", model, "--no-progress",
                   "--out-dir", folder]  # fmt: skip
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            out = subprocess.run(command, capture_output=True, text=True, env=env)
            times.append(time.perf_counter() - start)
            if out.returncode:
                raise RuntimeError(f"demo {model}, {setting}: failed\n{out.stderr[-2000:]}")
    return {"first_s": times[0], "median_s": statistics.median(times[1:])}


def _run(case, setting, repeats, cores):
    if case.startswith("demo-"):
        return _run_demo(case[len("demo-") :], setting, repeats)
    env = _environment(setting, "off")
    out = subprocess.run(
        [sys.executable, __file__, "--repeats", str(repeats), "--worker", case]
        + (["--cores"] if cores else []),
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    if out.returncode:
        raise RuntimeError(f"{case}, {setting}: failed\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--cores", action="store_true", help="one CPU device per core")
    parser.add_argument("--worker", metavar="CASE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.repeats, args.cores)))
        return
    import jax

    from bnpjax.compilation_cache import CPU_SMALL_LOOP_BYTES

    print(f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.machine()}, {os.cpu_count()} cores, "
          f"jax {jax.__version__}; bnpjax's threshold {CPU_SMALL_LOOP_BYTES} bytes; "
          f"fits on {'one device per core' if args.cores else 'one device'}, "
          "demos on one device per core")  # fmt: skip
    print(f"{'case':14s} {'round':>5s} {'XLA s':>8s} {'bnpjax s':>9s} {'ratio':>6s}   "
          "(median of warm runs; first runs, compile included, in brackets)")  # fmt: skip
    for case in args.cases.split(","):
        for round_ in range(args.rounds):
            order = list(SETTINGS) if round_ % 2 == 0 else list(SETTINGS)[::-1]
            try:
                figures = {s: _run(case, s, args.repeats, args.cores) for s in order}
            except RuntimeError as err:
                print(err)
                break
            xla, ours = figures["XLA"], figures["bnpjax"]
            print(
                f"{case:14s} {round_ + 1:5d} {xla['median_s']:8.3f} {ours['median_s']:9.3f} "
                f"{ours['median_s'] / xla['median_s']:6.2f}   "
                f"({xla['first_s']:.2f} / {ours['first_s']:.2f})",
                flush=True,
            )


if __name__ == "__main__":
    main()
