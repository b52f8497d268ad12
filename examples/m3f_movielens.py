"""Gibbs M3F on MovieLens 100K under the authors' weak-generalization protocol (one partition).

One rated item per user is held out; Gibbs M3F (K = 100, ell = 9, C = 0.1, the value the
authors' validation grid picks most often here) and the optax baseline (Rennie & Srebro's
smooth-hinge MMMF, rank 100) are fitted on the rest. NMAE = MAE / 1.6 for 5 levels.
``benchmarks/m3f_movielens.py`` runs the whole protocol (C chosen on validation, 3
partitions, iPM3F and the FMs beside)."""

import time

import jax
import jax.numpy as jnp
import numpy as np

import bnpjax
from bnpjax.datasets import movielens
from bnpjax.metrics import nmae_uniform
from bnpjax.models import m3f


def main():
    ratings = movielens("ml-100k").ratings
    _, users = np.unique(ratings[:, 0], return_inverse=True)  # 0-based ids
    _, items = np.unique(ratings[:, 1], return_inverse=True)
    y = ratings[:, 2]
    N, M = users.max() + 1, items.max() + 1
    rng = np.random.default_rng(0)
    order = rng.permutation(y.size)
    held = np.zeros(y.size, bool)
    held[order[np.unique(users[order], return_index=True)[1]]] = True  # one rating per user
    test = (users[held], items[held])

    data = m3f.make_data(users[~held], items[~held], y[~held], N, M, 5)
    hyper = m3f.make_hyper(5, C=0.1)
    idata = bnpjax.sample(
        m3f.gibbs(data, hyper, rank=100, test=test, keep_factors=False),
        jax.random.key(0),
        70,
        num_warmup=30,
    )
    levels = m3f.predict(idata, data, test)
    median = m3f.predict(idata, data, test, rule="median")
    per_sweep = (idata.attrs["warmup_s"] + idata.attrs["sampling_s"]) / 100
    print(
        f"Gibbs M3F: test NMAE {nmae_uniform(y[held], levels, num_levels=5):.4f} "
        f"(predictive median {nmae_uniform(y[held], median, num_levels=5):.4f}), "
        f"{per_sweep:.2f} s per sweep, compile {idata.attrs['compile_s']:.1f} s"
    )

    start = time.perf_counter()
    U, V, theta, _ = m3f.fit_map(data, rank=100, reg=10.0, max_iter=200)
    scores = jnp.sum(U[test[0]] * V[test[1]], axis=1)
    baseline = np.asarray(m3f.levels_from_scores(scores, theta[test[0]]))
    print(
        f"optax M3F: test NMAE {nmae_uniform(y[held], baseline, num_levels=5):.4f}, "
        f"{time.perf_counter() - start:.1f} s"
    )


if __name__ == "__main__":
    main()
