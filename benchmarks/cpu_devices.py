"""Chains on one CPU device against chains spread over several (``bnpjax.infer.use_cpu_cores``).

Each setting runs in a fresh process per device count (XLA fixes the number of CPU devices at
start-up), fits the same kernel twice with the same shapes (the second fit is the warm
figure: no compilation) and prints the driver's sampling seconds per device count, their
ratio and whether the draws are the same.

    python benchmarks/cpu_devices.py                    # ilfm_pt and fm, 1 and 2 devices
    python benchmarks/cpu_devices.py --cases ilfm_pt --devices 1 4
    python benchmarks/cpu_devices.py --cases ibp_parallel --warmup 300 --draws 300

``ibp_parallel`` is the IBP demo's row-parallel sampler on 'bars' as the demo runs it: 2
chains, 20 sweeps per draw and per warmup step asked for (``--warmup 300`` is 6000 sweeps).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

CASES = ("ilfm_pt", "fm", "ibp_parallel")
FIELDS = {"ilfm_pt": "num_features", "fm": "b", "ibp_parallel": "num_features"}
#: chains and sweeps per draw (warmup steps asked for are multiplied by it, as the demo does)
RUNS = {"ilfm_pt": (4, 1), "fm": (4, 1), "ibp_parallel": (2, 20)}


def worker(case: str, devices: int, warmup: int, draws: int) -> dict:
    """One fresh process's measurement (run with ``--worker``)."""
    import bnpjax.infer

    bnpjax.infer.use_cpu_cores(devices)
    import demo_kernels
    import jax

    if case == "ilfm_pt":  # the ILFM demo's data and sampler
        kernel = demo_kernels.ilfm_kernel()
    elif case == "ibp_parallel":
        from bnpjax.models import ibp_lg

        kernel = ibp_lg.parallel_gibbs(demo_kernels.bars_data())
    else:  # the FM demo's generated ratings
        from bnpjax.models import fm

        kernel = fm.gibbs(demo_kernels.fm_data(), rank=3)
    timings, last = [], None
    num_chains, thin = RUNS[case]
    for _ in range(2):
        t0 = time.perf_counter()
        result = bnpjax.infer.run(kernel, jax.random.key(0), draws, num_warmup=warmup * thin,
                                  thin=thin, num_chains=num_chains, progress_bar=False)  # fmt: skip
        wall = time.perf_counter() - t0
        sampling = result.timings.get("warmup_s", 0.0) + result.timings.get("sampling_s", 0.0)
        timings.append({"wall_s": wall, "sampling_s": sampling,
                        "init_s": result.timings.get("init_s", 0.0),
                        "compile_s": result.timings.get("compile_s", 0.0)})  # fmt: skip
        last = np.asarray(result.trace["posterior"][FIELDS[case]])
    return {"case": case, "devices": result.settings["num_devices"], "runs": timings,
            "draws": np.asarray(last, float).ravel().tolist(),
            "cpu_devices": len(jax.devices("cpu"))}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--devices", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--worker", nargs=2, metavar=("CASE", "DEVICES"))
    args = parser.parse_args()
    if args.worker:
        out = worker(args.worker[0], int(args.worker[1]), args.warmup, args.draws)
        print(json.dumps(out))
        return
    print(f"# {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d')}; warm fit = the second fit in the process")  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "BNPJAX_CPU_DEVICES"}
    env["XLA_FLAGS"] = " ".join(
        f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f
    )
    for case in args.cases:
        rows = []
        for devices in args.devices:
            done = subprocess.run(
                [sys.executable, __file__, "--worker", case, str(devices),
                 "--warmup", str(args.warmup), "--draws", str(args.draws)],
                env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        base = rows[0]
        for row in rows:
            first, warm = row["runs"]
            ratio = warm["sampling_s"] / base["runs"][1]["sampling_s"]
            gap = float(np.max(np.abs(np.subtract(row["draws"], base["draws"]))))
            print(
                f"{case}: {row['cpu_devices']} CPU devices ({row['devices']} used): first fit "
                f"{first['wall_s']:.1f} s (compile {first['compile_s']:.1f} s), warm fit "
                f"{warm['wall_s']:.1f} s, init {warm['init_s']:.2f} s, sampling "
                f"{warm['sampling_s']:.1f} s; ratio to "
                f"{base['cpu_devices']} device(s) {ratio:.2f}; "
                f"largest difference of the draws of {FIELDS[case]} from the first: {gap:.1e}"
            )


if __name__ == "__main__":
    main()
