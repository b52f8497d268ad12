"""A long-lived process that fits many data shapes keeps its memory bounded (issue 28): once
the driver's program cache is full, what an evicted program held is given back. Before, JAX's
tracing caches (keyed on its own functions, which never die) kept the jaxprs of every shape
ever traced, about 14 MB per linear-regression shape (``benchmarks/memory.py shapes``)."""

import ctypes
import gc
from pathlib import Path

import jax
import numpy as np
import pytest

import bnpjax.infer.programs as programs
from bnpjax.infer import run
from bnpjax.models import linear_regression as lr


def _rss_mb() -> float:
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand freed heap back before measuring
    except OSError:
        pass
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_fitting_many_shapes_keeps_memory_bounded(monkeypatch):
    monkeypatch.setattr(programs, "MAX_COMPILED_PROGRAMS", 2)  # one fit's init and chunk

    def fit(n):
        rng = np.random.default_rng(n)
        X = rng.normal(size=(n, 2))
        run(lr.gibbs(lr.make_data(X, X @ [1.0, 2.0])), jax.random.key(0), 4, progress_bar=False)

    fit(20)  # fills the cache
    before = _rss_mb()
    for n in range(21, 25):  # each evicts the previous fit's two programs
        fit(n)
    growth = _rss_mb() - before
    assert growth < 25, f"{growth:.0f} MB for 4 new shapes with 2 programs kept"
