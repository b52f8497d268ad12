"""Resident memory (RSS) of a long-lived process that fits: many data shapes, many refits of
the same shapes, and one long chain.

    PYTHONPATH=. python benchmarks/memory.py shapes [--num 160]  # a new shape per fit
    PYTHONPATH=. python benchmarks/memory.py refits [--num 100]  # the same shapes again
    PYTHONPATH=. python benchmarks/memory.py steps [--num 20000] # one chain, in 20 pieces

Each prints one JSON line per measurement (``{"mode", "i", "rss_mb", "programs"}``) and a
last line with the growth. ``--clear`` calls ``clear_compile_cache()`` and
``jax.clear_caches()`` at the end, to show what they give back. RSS is read from
``/proc/self/status`` (Linux) after ``gc.collect()`` and glibc's ``malloc_trim(0)``, so freed
heap is returned to the system before it is measured.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import time
from collections import OrderedDict

import jax
import numpy as np

import bnpjax.infer.programs as programs
from bnpjax.infer import clear_compile_cache, run
from bnpjax.models import linear_regression as lr


class _ClearingOnEvict(OrderedDict):
    """The driver's program cache, clearing JAX's tracing caches whenever it evicts: they hold
    the jaxprs of every shape ever traced (keyed on JAX's own functions, which never die)."""

    def popitem(self, last=True):
        item = super().popitem(last)
        jax.clear_caches()
        return item


def rss_mb() -> float:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:  # not glibc
        pass
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def _data(n: int, p: int = 2, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return lr.make_data(X, X @ np.arange(1.0, p + 1) + rng.normal(size=n))


def _report(mode, i, start, **extra):
    line = {"mode": mode, "i": i, "rss_mb": round(rss_mb(), 1), "programs": len(programs._COMPILED)}
    line.update(extra, s=round(time.perf_counter() - start, 1))
    print(json.dumps(line), flush=True)
    return line["rss_mb"]


def shapes(num: int, every: int):
    """A linear regression on ``20 + i`` rows for i < num: a new program per fit."""
    start = time.perf_counter()
    first = _report("shapes", 0, start)
    for i in range(num):
        run(lr.gibbs(_data(20 + i)), jax.random.key(i), 20, progress_bar=False)
        if (i + 1) % every == 0:
            last = _report("shapes", i + 1, start)
    return first, last


def refits(num: int, every: int, num_shapes: int = 4):
    """``num`` rounds of fits on the same ``num_shapes`` shapes (new data values each time)."""
    start = time.perf_counter()
    for k in range(num_shapes):  # compile once
        run(lr.gibbs(_data(20 + k)), jax.random.key(0), 20, progress_bar=False)
    first = _report("refits", 0, start)
    for i in range(num):
        for k in range(num_shapes):
            run(lr.gibbs(_data(20 + k, seed=i)), jax.random.key(i), 20, progress_bar=False)
        if (i + 1) % every == 0:
            last = _report("refits", i + 1, start)
    return first, last


def steps(num: int, pieces: int = 20):
    """One chain of ``num`` steps, continued from its final state in ``pieces`` runs that keep
    no draws (``thin`` = the piece): the memory of the chain itself, not of its trace."""
    start = time.perf_counter()
    algorithm = lr.gibbs(_data(200))
    per = num // pieces
    state, done = None, 0
    first = None
    for _ in range(pieces):
        result = run(algorithm, jax.random.key(0), 1, thin=per, initial_state=state,
                     start_step=done, progress_bar=False)  # fmt: skip
        state, done = result.final_state, done + per
        rss = _report("steps", done, start)
        first = rss if first is None else first
    return first, rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["shapes", "refits", "steps"])
    parser.add_argument("--num", type=int, default=None)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--clear", action="store_true")
    parser.add_argument(
        "--clear-on-evict",
        action="store_true",
        help="call jax.clear_caches() whenever the driver evicts a program (the proposed fix)",
    )
    args = parser.parse_args()
    if args.clear_on_evict:
        programs._COMPILED = _ClearingOnEvict(programs._COMPILED)
    default = {"shapes": 160, "refits": 100, "steps": 20000}[args.mode]
    num = args.num or default
    if args.mode == "steps":
        first, last = steps(num)
    else:
        first, last = globals()[args.mode](num, args.every)
    summary = {"mode": args.mode, "num": num, "first_mb": first, "last_mb": last,
               "growth_mb": round(last - first, 1)}  # fmt: skip
    if args.clear:
        clear_compile_cache()
        jax.clear_caches()
        summary["after_clear_mb"] = round(rss_mb(), 1)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
