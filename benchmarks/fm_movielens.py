"""Bayesian factorization machines on MovieLens: bnpjax against myFM, in one process.

Settings (``bnpjax.datasets.movielens``, data from ``$BNPJAX_DATA`` or ``../shared/data``):

* ``ml100k``: ML-100K split u1.base / u1.test, user and item one-hot, rank 10, ``n_iter=200``,
  ``n_kept_samples=150`` (myFM's documented setting; its docs report RMSE about 0.909).
* ``ml1m``: the ML-1M ratings here (users 1-2999 only, 487,650 ratings: the partial copy; the
  loader says so), a 90/10 random split with seed 0, user and item one-hot, rank 32, the same
  ``n_iter`` / ``n_kept_samples``.

Both libraries fit the same sparse design with the same priors (myFM's defaults; bnpjax uses
myFM's names and meaning) and predict the posterior mean over the kept samples. Reported per
setting: test RMSE of each (median over ``--repeats`` seeds), fit wall time (median; bnpjax's
first fit also pays a one-off compile, printed separately; later fits of the same shapes do
not recompile, which is checked), the ratio bnpjax / myFM of fit times, and the peak resident
memory of this process after each setting.

Run from the repository root (needs ``pip install myfm``, the ``bench`` extra)::

    python benchmarks/fm_movielens.py                    # both settings (about 15 min on 2 cores)
    python benchmarks/fm_movielens.py --settings ml100k --repeats 3
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

import bnpjax
from bnpjax.datasets import movielens
from bnpjax.fm import FMRegressor
from bnpjax.infer import compile_count


def one_hot_design(ratings: np.ndarray, num_users: int, num_items: int) -> sp.csr_matrix:
    n = len(ratings)
    rows = np.repeat(np.arange(n), 2)
    cols = np.stack([ratings[:, 0] - 1, num_users + ratings[:, 1] - 1], axis=1).ravel()
    return sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, num_users + num_items))


def setting_data(name: str):
    if name == "ml100k":
        data = movielens("ml-100k")
        train, test = data.splits["u1"]
        label = "ML-100K u1.base/u1.test, rank 10"
        rank = 10
    else:
        data = movielens("ml-1m")
        rng = np.random.default_rng(0)
        order = rng.permutation(len(data.ratings))
        cut = int(0.9 * len(order))
        train, test = data.ratings[order[:cut]], data.ratings[order[cut:]]
        label = f"ML-1M ({data.note.split(':')[0]}), 90/10 split seed 0, rank 32"
        rank = 32
    num_users = int(max(train[:, 0].max(), test[:, 0].max()))
    num_items = int(max(train[:, 1].max(), test[:, 1].max()))
    X_train = one_hot_design(train, num_users, num_items)
    X_test = one_hot_design(test, num_users, num_items)
    return label, rank, X_train, train[:, 2].astype(float), X_test, test[:, 2].astype(float)


def rmse(a, b) -> float:
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def peak_rss_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run_setting(name: str, args) -> None:
    import myfm

    label, rank, X, y, X_test, y_test = setting_data(name)
    print(f"\n== {label}: {X.shape[0]} train / {X_test.shape[0]} test rows, {X.shape[1]} columns")
    print(f"   n_iter={args.n_iter}, n_kept_samples={args.n_kept}, repeats={args.repeats}")
    ours, theirs = [], []
    compile_s, compiles_after_first = None, 0
    for seed in range(args.repeats):
        before = compile_count()
        start = time.perf_counter()
        model = FMRegressor(rank=rank, random_state=seed).fit(
            X, y, n_iter=args.n_iter, n_kept_samples=args.n_kept
        )
        wall = time.perf_counter() - start
        if seed == 0:
            compile_s = model.timings_.get("compile_s", 0.0)
        else:
            compiles_after_first += compile_count() - before
        fit_s = wall - model.timings_.get("compile_s", 0.0)
        ours.append((fit_s, rmse(model.predict(X_test), y_test)))
        compiled = model.timings_.get("compile_s", 0.0)
        print(
            f"   bnpjax seed {seed}: fit {fit_s:.2f} s (+ compile {compiled:.1f} s), "
            f"test RMSE {ours[-1][1]:.4f}"
        )

        start = time.perf_counter()
        peer = myfm.MyFMRegressor(rank=rank, random_seed=seed).fit(
            X, y, n_iter=args.n_iter, n_kept_samples=args.n_kept
        )
        theirs.append((time.perf_counter() - start, rmse(peer.predict(X_test), y_test)))
        print(f"   myFM   seed {seed}: fit {theirs[-1][0]:.2f} s, test RMSE {theirs[-1][1]:.4f}")
    t_ours = statistics.median(t for t, _ in ours)
    t_theirs = statistics.median(t for t, _ in theirs)
    r_ours = statistics.median(r for _, r in ours)
    r_theirs = statistics.median(r for _, r in theirs)
    print(
        f"   RESULT {name}: test RMSE bnpjax {r_ours:.4f} vs myFM {r_theirs:.4f} "
        f"(difference {r_ours - r_theirs:+.4f}; goal <= +0.005)"
    )
    print(
        f"   RESULT {name}: fit seconds (median) bnpjax {t_ours:.2f} vs myFM {t_theirs:.2f}: "
        f"ratio {t_ours / t_theirs:.2f} (goal <= 1, aim 0.5); per sweep "
        f"{1e3 * t_ours / args.n_iter:.1f} vs {1e3 * t_theirs / args.n_iter:.1f} ms"
    )
    print(
        f"   RESULT {name}: one-off compile {compile_s:.1f} s; "
        f"compilations in later fits: {compiles_after_first}"
    )
    print(f"   peak resident memory of this process so far: {peak_rss_gib():.2f} GiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settings", default="ml100k,ml1m")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-iter", type=int, default=200)
    parser.add_argument("--n-kept", type=int, default=150)
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"machine: {platform.platform()} ({platform.machine()}), jax devices {jax.devices()}")
    import myfm

    print(f"bnpjax {bnpjax.__version__}, jax {jax.__version__}, myfm {myfm.__version__}")
    for name in args.settings.split(","):
        run_setting(name.strip(), args)


if __name__ == "__main__":
    main()
