"""Compile time against run time, per model and per compiled program, in fresh processes.

Every measurement is a fresh Python process (``--worker``), so that nothing compiled before
is reused except through the persistent compilation cache (:mod:`bnpjax.compilation_cache`).
Each case runs twice in a new, empty cache folder: the first process compiles everything
(``empty``), the second finds the programs on disk (``warm``). ``--opt-levels`` (comma-separated)
names the XLA options: ``bnpjax`` (the default) is what a user gets, bnpjax's options for the
driver's programs on the CPU (LLVM level 1, the classic emitters and each kernel's own options,
:mod:`bnpjax.infer.programs`); ``default`` is XLA's own options everywhere
(``BNPJAX_XLA_CPU_OPT_LEVEL=default``, which also drops the kernels' own options); ``1``
repeats the case under ``XLA_FLAGS=--xla_backend_optimization_level=1`` (LLVM's
optimisation level 1 for every program; the test suite uses 1). Each setting has a cache folder
of its own.

Per compiled program of the driver (``init``, the ``warmup`` chunk when warmup has its own
program, the ``sample`` chunk) the worker records the seconds spent tracing and lowering the
program to XLA, or loading it as a former process traced it (``trace_s``,
:mod:`bnpjax.infer.traced_programs`), compiling it or loading it from the cache (``compile_s``) and
running it (``run_s``). FM cases also time the prediction (``predict``: the first call, which
compiles, against a second one) and run a second fit of the same shapes in the same process
(``refit_s``: no compilation). ``other_compile_s`` is what JAX compiled outside the driver's
programs (eager operations while the data are laid out, the prediction), from JAX's own
monitoring events. ``first_fit_s`` is the wall time of the first fit, compile included, the
time a user waits.

Cases: ``fm100k`` (ML-100K u1, user and item one-hot, rank 10, 200 sweeps, 150 kept),
``fm1m`` (the ML-1M ratings here, 90/10 split seed 0, rank 32, same sweeps), and
``fm100k-folds`` (ML-100K u1, then u2 in the same process, with the FM layout's sizes
bucketed and not, :func:`bnpjax.models.fm.make_data`'s ``bucket_shapes``: what the second
fold compiles, its fit and run time per sweep; ``--peer`` adds myFM's fits), and
``demo-MODEL`` for every ``bnpjax demo`` (its default settings, plots written to a temporary
folder). ``--peer`` adds myFM (``pip install myfm``) on the FM cases, also in fresh processes:
it has nothing to compile, so its first fit is its only fit. Each repeat runs myFM, then
bnpjax with an empty and a warm cache, and the ratios are given per repeat as well as of
the medians.

    python benchmarks/compile_time.py                         # FM cases, what a user gets
    python benchmarks/compile_time.py --cases fm100k --opt-levels bnpjax,default --peer
    python benchmarks/compile_time.py --cases fm100k-folds --peer
    python benchmarks/compile_time.py --cases demo-ibp,demo-fm,demo-linreg,demo-m3f,demo-ilfm
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

OPT_FLAG = "--xla_backend_optimization_level"
DEMOS = ("fm", "ibp", "ilfm", "linreg", "m3f", "wmmsb")


# --------------------------------------------------------------------------------------------
# the worker: one fresh process, one case


def _instrument():
    """Record per driver program the trace/lower, compile and run seconds, and JAX's own
    compile events. Wraps ``bnpjax.infer.driver._compiled`` (the driver's only way to a
    program) with the same logic plus timers."""
    import jax

    from bnpjax.infer import driver, programs, traced_programs

    events: dict[str, float] = {}
    counts: dict[str, int] = {}

    def on_duration(name, seconds, **_):
        events[name] = events.get(name, 0.0) + seconds

    def on_event(name, **_):
        counts[name] = counts.get(name, 0) + 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.monitoring.register_event_listener(on_event)
    per_program: dict[str, dict[str, float]] = {}
    original = driver._compiled

    def timed(name, fn, static_key, args, timings, out_shardings=None, options=()):
        # a chunk's static key: (kernel, draws per chunk, thin, warmup program, apart)
        label = name if name != "chunk" else ("warmup" if static_key[3] else "sample")
        options = tuple(tuple(pair) for pair in options)
        key = (name, static_key, programs._aval_key(args), options)
        if key in programs._COMPILED:
            return original(name, fn, static_key, args, timings, out_shardings, options)
        t0 = time.perf_counter()
        # traced, or loaded from the programs a former process traced (the driver's way)
        lowered = traced_programs.lower(name, fn, static_key, args, out_shardings, options)
        t1 = time.perf_counter()
        program = programs.compile_lowered(lowered, options)  # the driver's and the kernel's
        t2 = time.perf_counter()
        programs._COMPILED[key] = program
        programs._COMPILE_COUNT += 1
        timings["compile_s"] = timings.get("compile_s", 0.0) + t2 - t0
        entry = per_program.setdefault(label, {"trace_s": 0.0, "compile_s": 0.0, "programs": 0})
        entry["trace_s"] += t1 - t0
        entry["compile_s"] += t2 - t1
        entry["programs"] += 1
        return program

    driver._compiled = timed
    run = driver.run

    def timed_run(*args, **kwargs):  # run seconds per program, from the driver's timings
        result = run(*args, **kwargs)
        warmup_label = "warmup" if "warmup" in per_program else "sample"
        phases = (("init", "init_s"), (warmup_label, "warmup_s"), ("sample", "sampling_s"))
        for label, key in phases:
            entry = per_program.setdefault(label, {"trace_s": 0.0, "compile_s": 0.0, "programs": 0})
            entry["run_s"] = entry.get("run_s", 0.0) + result.timings.get(key, 0.0)
        return result

    driver.run = timed_run
    return per_program, events, counts


def _fm_setting(name):
    sys.path.insert(0, os.path.dirname(__file__))
    from fm_movielens import setting_data

    return setting_data({"fm100k": "ml100k", "fm1m": "ml1m"}[name])


def _worker_fm(case: str, peer: bool) -> dict:
    import numpy as np

    setting = _fm_setting(case)
    X, y, X_test, y_test, rank = (setting[k] for k in ("X", "y", "X_test", "y_test", "rank"))
    if peer:
        import myfm

        t0 = time.perf_counter()
        model = myfm.MyFMRegressor(rank=rank, random_seed=0).fit(
            X, y, n_iter=200, n_kept_samples=150
        )
        fit_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        yhat = model.predict(X_test)
        return {
            "first_fit_s": fit_s,
            "predict_s": time.perf_counter() - t0,
            "rmse": float(np.sqrt(np.mean((yhat - y_test) ** 2))),
        }
    per_program, events, counts = _instrument()
    from bnpjax.fm import FMRegressor

    t0 = time.perf_counter()
    model = FMRegressor(rank=rank, random_state=0).fit(X, y, n_iter=200, n_kept_samples=150)
    first = time.perf_counter() - t0
    timings = dict(model.timings_)
    driver_compile = sum(p["trace_s"] + p["compile_s"] for p in per_program.values())
    t0 = time.perf_counter()
    yhat = model.predict(X_test)
    predict_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    model.predict(X_test)
    predict_again = time.perf_counter() - t0
    t0 = time.perf_counter()
    FMRegressor(rank=rank, random_state=1).fit(X, y, n_iter=200, n_kept_samples=150)
    refit = time.perf_counter() - t0
    for label, run_key in (("init", "init_s"), ("warmup", "warmup_s"), ("sample", "sampling_s")):
        if label in per_program:
            per_program[label]["run_s"] = timings.get(run_key, 0.0)
    if "warmup" not in per_program:  # warmup ran with the sampling program
        per_program["sample"]["run_s"] += timings.get("warmup_s", 0.0)
    per_program["predict"] = {
        "trace_s": 0.0,
        "compile_s": predict_first - predict_again,
        "run_s": predict_again,
        "programs": 1,
    }
    backend = events.get("/jax/core/compile/backend_compile_duration", 0.0)
    return {
        "first_fit_s": first,
        "refit_s": refit,
        "programs": per_program,
        "driver_compile_s": driver_compile,
        "jax_backend_compile_s": backend,
        "cache_hits": counts.get("/jax/compilation_cache/cache_hits", 0),
        "cache_misses": counts.get("/jax/compilation_cache/cache_misses", 0),
        "rmse": float(np.sqrt(np.mean((yhat - y_test) ** 2))),
        "sweeps": 200,
    }


def _worker_folds(bucket: bool, peer: bool) -> dict:
    """ML-100K u1 then u2 in one process (``fm100k-folds``): what the second fold compiles
    with the colour blocks' sizes bucketed or not, its run time per sweep, myFM on u2."""
    import numpy as np

    sys.path.insert(0, os.path.dirname(__file__))
    from fm_movielens import one_hot_design

    from bnpjax.datasets import movielens

    data = movielens("ml-100k")
    num_users, num_items = (int(data.ratings[:, k].max()) for k in (0, 1))
    per_program, events, counts = _instrument()
    from bnpjax.fm import FMRegressor

    out = {}
    for fold in ("u1", "u2"):
        train, test = data.splits[fold]
        X, y = one_hot_design(train, num_users, num_items), train[:, 2].astype(float)
        X_test = one_hot_design(test, num_users, num_items)
        if peer:
            import myfm

            t0 = time.perf_counter()
            model = myfm.MyFMRegressor(rank=10, random_seed=0)
            model.fit(X, y, n_iter=200, n_kept_samples=150)
            out[fold] = {"fit_s": time.perf_counter() - t0}
            continue
        before = {k: dict(v) for k, v in per_program.items()}
        backend = events.get("/jax/core/compile/backend_compile_duration", 0.0)
        hits = counts.get("/jax/compilation_cache/cache_hits", 0)
        misses = counts.get("/jax/compilation_cache/cache_misses", 0)
        t0 = time.perf_counter()
        model = FMRegressor(rank=10, random_state=0, bucket_shapes=bucket)
        model.fit(X, y, n_iter=200, n_kept_samples=150)
        fit_s = time.perf_counter() - t0
        yhat = model.predict(X_test)
        old = {k: before.get(k, {}) for k in per_program}
        programs = sum(v["programs"] - old[k].get("programs", 0) for k, v in per_program.items())
        driver = sum(
            v["trace_s"]
            + v["compile_s"]
            - old[k].get("trace_s", 0.0)
            - old[k].get("compile_s", 0.0)
            for k, v in per_program.items()
        )
        out[fold] = {
            "fit_s": fit_s,
            "driver_programs": programs,
            "driver_compile_s": driver,
            "backend_compile_s": events.get("/jax/core/compile/backend_compile_duration", 0.0)
            - backend,
            "cache_hits": counts.get("/jax/compilation_cache/cache_hits", 0) - hits,
            "cache_misses": counts.get("/jax/compilation_cache/cache_misses", 0) - misses,
            "ms_per_sweep": 1e3 * model.timings_.get("sampling_s", 0.0) / 150,
            "rmse": float(np.sqrt(np.mean((yhat - test[:, 2]) ** 2))),
        }
    return out


def _folds(args) -> None:
    """The ``fm100k-folds`` case: one fresh process per setting (no persistent cache)."""
    rows = {}
    if args.peer:
        rows["myFM"] = _spawn("fm100k-folds", "off", "bnpjax", peer=True)
    for bucket in ("on", "off"):
        rows[f"bnpjax, bucketing {bucket}"] = _spawn(f"fm100k-folds-{bucket}", "off", "bnpjax")
    print("\n== ML-100K u1 then u2 in one process, rank 10, 200 sweeps (150 kept)")
    print(f"{'':24} {'fold':4} {'fit s':>6} {'programs':>8} {'compile s':>9} {'ms/sweep':>8} "
          f"{'RMSE':>6}")  # fmt: skip
    for label, result in rows.items():
        for fold, r in result.items():
            if fold not in ("u1", "u2"):
                continue
            nan = float("nan")
            print(f"{label:24} {fold:4} {r['fit_s']:6.2f} {r.get('driver_programs', 0):8d} "
                  f"{r.get('driver_compile_s', nan):9.2f} {r.get('ms_per_sweep', nan):8.2f} "
                  f"{r.get('rmse', nan):6.4f}")  # fmt: skip


def _worker_demo(model: str) -> dict:
    import contextlib
    import io

    per_program, events, counts = _instrument()
    from bnpjax.cli import main

    with tempfile.TemporaryDirectory() as out_dir:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(["demo", model, "--out-dir", out_dir])
        total = time.perf_counter() - t0
    if status:
        raise RuntimeError(f"bnpjax demo {model} exited with {status}")
    return {
        "first_fit_s": total,
        "programs": per_program,
        "driver_compile_s": sum(p["trace_s"] + p["compile_s"] for p in per_program.values()),
        "jax_backend_compile_s": events.get("/jax/core/compile/backend_compile_duration", 0.0),
        "cache_hits": counts.get("/jax/compilation_cache/cache_hits", 0),
        "cache_misses": counts.get("/jax/compilation_cache/cache_misses", 0),
    }


def worker(case: str, peer: bool) -> None:
    if case.startswith("fm100k-folds"):
        out = _worker_folds(not case.endswith("-off"), peer)
    elif case.startswith("demo-"):
        out = _worker_demo(case[5:])
    else:
        out = _worker_fm(case, peer)
    print("RESULT " + json.dumps(out))


# --------------------------------------------------------------------------------------------
# the parent: fresh processes, cache folders, table


def _spawn(case: str, cache: str, opt: str, peer: bool = False) -> dict:
    env = dict(os.environ, BNPJAX_CACHE_DIR=cache, JAX_PLATFORMS="cpu")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    flags = " ".join(f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(OPT_FLAG))
    env.pop("BNPJAX_XLA_CPU_OPT_LEVEL", None)
    if opt == "default":  # XLA's own level everywhere
        env["BNPJAX_XLA_CPU_OPT_LEVEL"] = "default"
    elif opt != "bnpjax":  # this level everywhere (eager operations too)
        flags = f"{flags} {OPT_FLAG}={opt}"
    env["XLA_FLAGS"] = flags.strip()
    command = [sys.executable, __file__, "--worker", case] + (["--peer"] if peer else [])
    t0 = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"worker {case} failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    result = json.loads(line[len("RESULT ") :])
    result["process_s"] = wall
    return result


def _median(values):
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default="fm100k,fm1m")
    parser.add_argument("--opt-levels", default="bnpjax")
    parser.add_argument("--repeats", type=int, default=1, help="cache folders per case")
    parser.add_argument("--peer", action="store_true", help="myFM on the FM cases")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.peer)
        return
    import jax

    import bnpjax

    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, jax {jax.__version__}, "
          f"bnpjax {bnpjax.__version__}")  # fmt: skip
    print("s: seconds; every row is a median over --repeats fresh processes")
    for case in args.cases.split(","):
        if case == "fm100k-folds":
            _folds(args)
            continue
        with_peer = args.peer and case.startswith("fm")
        for opt in args.opt_levels.split(","):
            runs: dict[str, list] = {"empty": [], "warm": []}
            peer: list | None = [] if with_peer else None
            for _ in range(args.repeats):
                # myFM, then bnpjax with an empty and a warm cache, repeat after repeat: the
                # shared machine's pace drifts by a factor of two within minutes, so each
                # repeat's ratio compares runs made side by side
                if peer is not None:
                    peer.append(_spawn(case, "off", "default", peer=True))
                with tempfile.TemporaryDirectory() as cache:
                    runs["empty"].append(_spawn(case, cache, opt))
                    runs["warm"].append(_spawn(case, cache, opt))
            _report(case, opt, runs, peer)


def _report(case, opt, runs, peer) -> None:
    print(f"\n== {case}, LLVM opt level {opt}")
    print(f"{'cache':6} {'program':8} {'n':>2} {'trace s':>8} {'compile s':>9} {'run s':>7}")
    for state, results in runs.items():
        labels = list(results[0]["programs"])
        for label in labels:
            rows = [r["programs"][label] for r in results]
            print(
                f"{state:6} {label:8} {rows[0]['programs']:>2} "
                f"{_median([x['trace_s'] for x in rows]):8.2f} "
                f"{_median([x['compile_s'] for x in rows]):9.2f} "
                f"{_median([x.get('run_s', float('nan')) for x in rows]):7.2f}"
            )
    for state, results in runs.items():
        first = _median([r["first_fit_s"] for r in results])
        line = (
            f"RESULT {case} opt={opt} cache={state}: first fit {first:.2f} s, driver compile "
            f"{_median([r['driver_compile_s'] for r in results]):.2f} s, XLA backend compile "
            f"{_median([r['jax_backend_compile_s'] for r in results]):.2f} s, cache hits "
            f"{results[0]['cache_hits']}, misses {results[0]['cache_misses']}"
        )
        if "refit_s" in results[0]:
            line += f", refit {_median([r['refit_s'] for r in results]):.2f} s"
        if "sweeps" in results[0]:
            run = _median([r["programs"]["sample"]["run_s"] for r in results])
            line += f", {1e3 * run / results[0]['sweeps']:.1f} ms/sweep"
        if "rmse" in results[0]:
            line += f", test RMSE {_median([r['rmse'] for r in results]):.4f}"
        if peer:
            theirs = _median([p["first_fit_s"] for p in peer])
            paired = [
                r["first_fit_s"] / p["first_fit_s"] for r, p in zip(results, peer, strict=True)
            ]
            line += (
                f"; myFM {theirs:.2f} s (RMSE {peer[0]['rmse']:.4f}), ratio of medians "
                f"{first / theirs:.2f}, per repeat "
                + "/".join(f"{x:.2f}" for x in paired)
                + f" (median {_median(paired):.2f})"
            )
        print(line)


if __name__ == "__main__":
    main()
