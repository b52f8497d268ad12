"""Scale check of the BFM Gibbs sampler: a synthetic problem with ``--rows`` ratings of
``--users`` x ``--items`` one-hot features (default 10M rows, 1M features), rank ``--rank``.

Prints the time of the design layout (colouring and buckets), the compile time, seconds per
sweep (median over ``--sweeps`` sweeps after one warm-up chunk) and the peak resident memory
of the process. Run from the repository root::

    python benchmarks/fm_scale.py                       # 10M rows (a few minutes on 2 cores)
    python benchmarks/fm_scale.py --rows 1000000 --users 60000 --items 40000
"""

from __future__ import annotations

import argparse
import platform
import resource
import statistics
import time

import jax
import numpy as np
import scipy.sparse as sp

from bnpjax.infer import run
from bnpjax.models import fm


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--users", type=int, default=600_000)
    parser.add_argument("--items", type=int, default=400_000)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--sweeps", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}; {platform.platform()}; {jax.devices()}")
    rng = np.random.default_rng(args.seed)
    n, U, Ii = args.rows, args.users, args.items
    # skewed popularity, as in rating data
    users = np.minimum((rng.pareto(1.5, n) * U / 20).astype(np.int64), U - 1)
    items = np.minimum((rng.pareto(1.2, n) * Ii / 30).astype(np.int64), Ii - 1)
    V = 0.3 * rng.normal(size=(U + Ii, 2))
    y = 3.0 + np.sum(V[users] * V[U + items], axis=1) + 0.5 * rng.normal(size=n)
    X = sp.csr_matrix(
        (np.ones(2 * n, np.float32), np.stack([users, U + items], 1).ravel(), 2 * np.arange(n + 1)),
        shape=(n, U + Ii),
    )
    start = time.perf_counter()
    data = fm.make_data(X, y)
    layout_s = time.perf_counter() - start
    del X
    print(
        f"{n} rows, {U + Ii} features, {len(data.blocks)} colours, layout {layout_s:.1f} s, "
        f"buckets {[len(b.buckets) for b in data.blocks]}"
    )
    # no pointwise log-likelihood in the trace: this measures the sweep alone
    algorithm = fm.gibbs(data, rank=args.rank, pointwise_log_likelihood=False)
    result = run(algorithm, jax.random.key(0), 1, progress_bar=False)
    print(f"compile {result.timings.get('compile_s', 0.0):.1f} s")
    times = []
    state = result.final_state
    for sweep in range(args.sweeps):
        result = run(
            result.algorithm,
            jax.random.key(0),
            1,
            initial_state=state,
            start_step=sweep + 1,
            progress_bar=False,
        )
        state = result.final_state
        times.append(result.timings["sampling_s"])
    rmse = float(result.trace["sample_stats"]["rmse"][0, -1])
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"seconds per sweep (median of {args.sweeps}): {statistics.median(times):.2f}")
    print(f"training RMSE after {args.sweeps + 1} sweeps: {rmse:.3f} (noise sd 0.5)")
    print(f"peak resident memory: {peak:.2f} GiB")


if __name__ == "__main__":
    main()
