"""Gibbs M3F and Gibbs iPM3F on MovieLens, the authors' weak-generalization protocol, with the
optax M3F baseline, bnpjax's ordered-probit BFM and myFM's ordered probit on the same splits.

Protocol (Xu, Zhu & Zhang 2013; the authors' code chokkyvista/iPM3F):

* users with at least 20 ratings; ``--partitions`` random partitions (seed = partition index);
  in each, one rated item per user is held out as its test rating (weak generalization: the
  rest of the user's ratings are training data);
* a validation split made the same way from each training set selects ``C`` (Gibbs M3F and
  iPM3F) and the regularization (optax baseline) from ``--c-grid`` / ``--reg-grid``; the
  authors' grid is ``C = 10^(-e/4)``, ``e = 3, 3.5, ..., 8`` (``--c-grid full``); then the
  model is refitted on the whole training set with the chosen value;
* Gibbs M3F: ``K = --rank`` (100), ``ell = 9``, ``--iterations`` (50) sweeps of which
  ``--burn-in`` (10) are discarded; prediction by the rating-level rule from the
  posterior-mean scores and thresholds; the scores are Rao-Blackwellized (the conditional
  mean of one factor block given the rest, :mod:`bnpjax.models.m3f`; ``--plain-mean`` for
  the average of the drawn scores) (``--val-iterations`` / ``--val-burn-in`` for the
  validation fits, shorter to save time if needed); ``--chains`` runs several chains side by
  side (vmap) and pools their draws in the posterior mean. Gibbs iPM3F: alpha = 3, sigma = 1,
  kappa = 10, the same sweeps and rule (``--feature-step parallel`` for the row-parallel
  feature step, the same posterior);
* NMAE = MAE / E[MAE of uniform random guessing] = MAE / 1.6 for 5 levels;
* strong generalization (``--strong-fraction F``): a share F of the users is set aside whole
  before the weak split; the weak protocol runs on the others; then the set-aside users, one
  held-out rating each, are fitted with the item side held at the weak run's fit (Gibbs M3F:
  the posterior mean of V, and of the item biases with ``--item-bias``, as the authors'
  code does; Gibbs iPM3F: ``--strong-references`` (5) draws of its V and feature counts,
  spread over the kept draws, the new users joining each draw's buffet and their scores
  pooled; the optax baseline: its optimum V), with the same C / regularization. An FM
  cannot hold its item side fixed: under the strong protocol it is fitted once more on the
  weak training set together with the new users' observed ratings (so their ratings also
  inform the items, which the fixed-item fits do not allow) and scored on their held-out
  ratings.

Baselines on the same split: M3F by optimization (Rennie & Srebro 2005, smooth hinge,
per-user thresholds, ``optax.lbfgs``; :func:`bnpjax.models.m3f.fit_map`), bnpjax's
``FMOrdinal`` and myFM's ``MyFMOrderedProbit`` (one-hot user and item, rank 10, 200 sweeps, 150
kept, prediction = median of the posterior predictive level distribution, the MAE-optimal
level). Reported: NMAE per partition, mean and sd over partitions, seconds per Gibbs sweep
(compile time separate; one sweep of all chains together) and, with ``--time-only``, the
per-sweep time of Gibbs M3F at K = 100 (and of iPM3F unless ``--skip-ipm3f``) on each of
``--datasets``. ``--skip-m3f``, ``--skip-ipm3f``, ``--skip-map`` and ``--skip-fm`` leave models
out, e.g. to run iPM3F with a C chosen in an earlier run (``--c-grid E``, one exponent).

Float64 by default (``--float32`` to opt out). At ``C >= 0.1`` a chain can hit a pair with
``|zeta| ~ 1e-4``, whose ``omega = 1/lambda`` (mean ``2/(C |zeta|)``, heavy right tail) reaches
``~1e8``; the rank-one term ``b_ij U_i U_i^T`` then swamps ``B_j`` beyond float32 precision, and
the float32 Cholesky of ``B_j`` turned NaN (sweep 4 with ``C = 0.178``, K = 100). Float32 runs
therefore draw the factor rows in square-root form (QR of the stacked rows, ``B`` never formed;
:mod:`bnpjax.models.m3f`), which ran that chain to the end.
A non-finite test score stops the run instead of being scored as a rating.

Run from the repository root::

    python benchmarks/m3f_movielens.py --datasets ml-100k
    python benchmarks/m3f_movielens.py --datasets ml-100k --partitions 1 --c-grid 5 --skip-fm
    python benchmarks/m3f_movielens.py --time-only --rank 100      # per-sweep time, any device
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

import bnpjax
from bnpjax.datasets import movielens
from bnpjax.infer import run
from bnpjax.metrics import nmae_uniform
from bnpjax.models import m3f


def weak_split(users: np.ndarray, seed: int) -> np.ndarray:
    """Boolean mask of one held-out rating per user (uniform among the user's ratings)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(users.size)
    _, first = np.unique(users[order], return_index=True)
    held = np.zeros(users.size, bool)
    held[order[first]] = True
    return held


def load(name: str, min_ratings: int = 20):
    ratings = movielens(name).ratings
    users, items, y = ratings[:, 0], ratings[:, 1], ratings[:, 2]
    ids, counts = np.unique(users, return_counts=True)
    keep = np.isin(users, ids[counts >= min_ratings])
    users, items, y = users[keep], items[keep], y[keep]
    _, users = np.unique(users, return_inverse=True)
    _, items = np.unique(items, return_inverse=True)
    return users, items, y.astype(np.int64)


def strong_split(users, items, y, fraction: float, seed: int):
    """The strong-generalization split: ``round(fraction * users)`` users drawn at random
    (seed ``2000 + seed``) are set aside whole. Returns ``((users, items, ratings, n) of the
    rest, (the same) of the set-aside users or None)``, users renumbered 0..n-1 in each, items
    as they were."""
    n_users = int(users.max()) + 1
    if fraction <= 0:
        return (users, items, y, n_users), None
    if fraction >= 1:
        raise ValueError(f"--strong-fraction must be below 1, got {fraction}")
    rng = np.random.default_rng(2000 + seed)
    chosen = rng.choice(n_users, round(fraction * n_users), replace=False)
    is_strong = np.isin(users, chosen)
    parts = []
    for mask in (~is_strong, is_strong):
        ids, renumbered = np.unique(users[mask], return_inverse=True)
        parts.append((renumbered, items[mask], y[mask], ids.size))
    return parts[0], parts[1]


def _run_gibbs(algorithm, key, sweeps, chains=1):
    iterations, burn_in = sweeps
    return run(
        algorithm,
        key,
        iterations - burn_in,
        num_warmup=burn_in,
        num_chains=chains,
        progress_bar=False,
    )


def _gibbs_levels(results, iterations, test_users, score_name="score_test_rb"):
    """Posterior-mean levels from the kept draws of every chain of every run in ``results``
    (several runs: the strong iPM3F fits, one per reference draw, pooled)."""

    traces = [r.trace for r in results]
    levels = m3f.predict(traces, None, (test_users, None), score=score_name)
    # the pseudo-posterior predictive median level (MAE-optimal; what the FMs report)
    median = m3f.predict(traces, None, (test_users, None), rule="median")
    timings = [r.timings for r in results]
    per_sweep = statistics.mean(
        (t.get("warmup_s", 0.0) + t.get("sampling_s", 0.0)) / iterations for t in timings
    )
    compile_s = sum(t.get("compile_s", 0.0) for t in timings)
    post = results[-1].trace["posterior"]
    extra = ""
    if "num_features" in post:
        extra = f", K+ {np.asarray(post['num_features'])[:, -1].tolist()}"
    if "sigma_v" in post:
        extra += f", sigma {np.round(np.asarray(post['sigma_v'])[:, -1], 3).tolist()}"
    return levels, per_sweep, compile_s, extra, median


def item_side_of(result, num_references=1):
    """What the strong protocol holds fixed from a weak run: for Gibbs M3F the posterior mean
    of V (and of the item biases), as the authors' code does; for iPM3F, whose features are
    not identified across draws (they are born, die and swap places), a list of
    ``num_references`` draws of chain 0 spread evenly over its kept draws (the last is the
    final state): per draw, V on its active features, how many users hold each, and the
    number of users. The new users are fitted once per draw and their scores pooled, the
    Monte Carlo average over the weak posterior of the item side."""
    post = result.trace["posterior"]
    if "U" in post:
        bias = np.asarray(post["bias"]).mean(axis=(0, 1)) if "bias" in post else None
        return np.asarray(post["V"]).mean(axis=(0, 1)), bias
    Zs, Vs = np.asarray(post["Z"])[0], np.asarray(post["V"])[0]
    picks = np.unique(np.round(np.linspace(Zs.shape[0] - 1, 0, num_references)).astype(int))
    sides = []
    for d in picks:
        counts = Zs[d].sum(0)
        active = counts > 0
        sides.append((Vs[d][:, active], counts[active], Zs[d].shape[0]))
    return sides


def fit_gibbs(
    kind, train, n_users, n_items, C, test, args, seed, validation=False, item_side=None, keep=False
):
    """``item_side``: the strong protocol's fit of new users with the item side fixed
    (:func:`item_side_of`); ``keep=True`` also returns the item side of this fit."""
    users, items, y = train
    data = m3f.make_data(users, items, y, n_users, n_items, 5, margin=args.margin)
    sigma_v = args.ipm3f_sigma if kind == "ipm3f" else 1.0
    hyper = m3f.make_hyper(5, C=C, margin=args.margin, sigma_v=sigma_v)
    # one algorithm per run; the strong iPM3F fit has one per reference draw, pooled
    if kind == "m3f":
        algorithms = [
            m3f.gibbs(
                data,
                rank=None if item_side is not None else args.rank,
                hyper=hyper,
                test=test,
                keep_factors=keep,
                pointwise_log_likelihood=False,  # predictions only: no per-rating trace
                item_bias=args.item_bias,
                item_factors=None if item_side is None else item_side[0],
                item_biases=None if item_side is None else item_side[1],
            )
        ]
    elif item_side is not None:
        algorithms = [
            m3f.ipm3f_gibbs(
                data,
                hyper=hyper,
                test=test,
                keep_factors=False,
                pointwise_log_likelihood=False,  # predictions only: no per-rating trace
                item_factors=V,
                feature_counts=counts,
                num_reference_users=num_reference_users,
            )
            for V, counts, num_reference_users in item_side
        ]
    else:
        algorithms = [
            m3f.ipm3f_gibbs(
                data,
                hyper=hyper,
                alpha=3.0,
                kappa=10,
                capacity=args.capacity,
                test=test,
                keep_factors=keep,
                pointwise_log_likelihood=False,  # predictions only: no per-rating trace
                feature_step=args.feature_step,
                weight_precision_prior=args.ipm3f_weight_prior,
                num_init_features=args.ipm3f_init_features,
            )
        ]
    sweeps = (
        (args.val_iterations, args.val_burn_in) if validation else (args.iterations, args.burn_in)
    )
    score_name = "score_test" if args.plain_mean else "score_test_rb"
    key = jax.random.key(seed)
    results = [_run_gibbs(a, key, sweeps, chains=args.chains) for a in algorithms]
    out = _gibbs_levels(results, sweeps[0], test[0], score_name)
    return (*out, item_side_of(results[0], args.strong_references) if keep else None)


def fit_baseline(train, n_users, n_items, reg, test, args, seed, item_factors=None):
    users, items, y = train
    data = m3f.make_data(users, items, y, n_users, n_items, 5, margin=1.0)
    start = time.perf_counter()
    U, V, theta, _ = m3f.fit_map(
        data,
        rank=None if item_factors is not None else args.map_rank,
        reg=reg,
        max_iter=args.map_iter,
        key=jax.random.key(seed),
        item_factors=item_factors,
    )
    scores = jnp.sum(U[test[0]] * V[test[1]], axis=1)
    levels = np.asarray(m3f.levels_from_scores(scores, theta[test[0]]))
    return levels, time.perf_counter() - start, np.asarray(V)


def _one_hot(users, items, n_users, n_items):
    import scipy.sparse as sp

    n = users.size
    rows = np.repeat(np.arange(n), 2)
    cols = np.stack([users, n_users + items], axis=1).ravel()
    return sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, n_users + n_items))


def _median_level(proba):
    return 1 + np.argmax(np.cumsum(proba, axis=1) >= 0.5, axis=1)


def fit_fms(train, n_users, n_items, test, seed):
    import myfm

    from bnpjax.fm import FMOrdinal

    X = _one_hot(train[0], train[1], n_users, n_items)
    Xt = _one_hot(test[0], test[1], n_users, n_items)
    out = {}
    start = time.perf_counter()
    ours = FMOrdinal(rank=10, random_state=seed).fit(X, train[2], n_iter=200, n_kept_samples=150)
    out["bnpjax FMOrdinal"] = (_median_level(ours.predict_proba(Xt)), time.perf_counter() - start)
    start = time.perf_counter()
    theirs = myfm.MyFMOrderedProbit(rank=10, random_seed=seed).fit(
        X, train[2] - 1, n_iter=200, n_kept_samples=150
    )
    out["myFM OrderedProbit"] = (
        _median_level(theirs.predict_proba(Xt)),
        time.perf_counter() - start,
    )
    return out


def c_grid(spec: str) -> list[float]:
    if spec == "full":
        exponents = np.arange(3.0, 8.01, 0.5)
    else:
        exponents = [float(e) for e in spec.split(",")]
    return [float(10 ** (-e / 4)) for e in exponents]


def run_dataset(name, args):
    users, items, y = load(name)
    n_users, n_items = int(users.max()) + 1, int(items.max()) + 1
    print(f"\n== {name}: {n_users} users with >= 20 ratings, {n_items} items, {y.size} ratings")
    grid = c_grid(args.c_grid)
    regs = [float(r) for r in args.reg_grid.split(",")]
    models = ["Gibbs M3F", "Gibbs iPM3F", "optax M3F (R&S 2005)"]
    if not args.skip_fm:
        models += ["bnpjax FMOrdinal", "myFM OrderedProbit"]
    if args.strong_fraction > 0:
        models += ["Gibbs M3F, strong", "Gibbs iPM3F, strong", "optax M3F (R&S 2005), strong"]
        if not args.skip_fm:
            models += ["bnpjax FMOrdinal, strong", "myFM OrderedProbit, strong"]
    scores = {m: [] for m in models}
    seconds = {m: [] for m in models}
    parts = range(args.partitions)
    if args.only_partitions:
        parts = [int(p) for p in args.only_partitions.split(",")]
    for part in parts:
        (users_p, items_p, y_p, n_fit), strong = strong_split(
            users, items, y, args.strong_fraction, part
        )
        test_mask = weak_split(users_p, part)
        tr = ~test_mask
        train = (users_p[tr], items_p[tr], y_p[tr])
        test = (users_p[test_mask], items_p[test_mask])
        y_test = y_p[test_mask]
        if strong is not None:
            s_users, s_items, s_y, n_strong = strong
            s_mask = weak_split(s_users, 3000 + part)
            s_train = (s_users[~s_mask], s_items[~s_mask], s_y[~s_mask])
            s_test = (s_users[s_mask], s_items[s_mask])
            s_y_test = s_y[s_mask]
            print(
                f"   strong generalization: {n_strong} held-out users, "
                f"{s_train[0].size} observed / {s_mask.sum()} test ratings"
            )
        val_mask = weak_split(train[0], 1000 + part)
        inner = tuple(a[~val_mask] for a in train)
        val = (train[0][val_mask], train[1][val_mask])
        y_val = train[2][val_mask]
        print(f"-- partition {part}: {tr.sum()} train / {test_mask.sum()} test ratings")
        chosen = {}
        for kind, label in (("m3f", "Gibbs M3F"), ("ipm3f", "Gibbs iPM3F")):
            if args.fm_only or (kind == "ipm3f" and args.skip_ipm3f):
                continue
            if kind == "m3f" and args.skip_m3f:
                continue
            if len(grid) == 1:
                chosen[kind] = grid[0]
            elif kind == "ipm3f" and args.ipm3f_c_from_m3f:
                chosen[kind] = chosen["m3f"]
            else:
                best = None
                for C in grid:
                    lv, sweep, _, extra, _, _ = fit_gibbs(
                        kind, inner, n_fit, n_items, C, val, args, part, validation=True
                    )
                    v = nmae_uniform(y_val, lv, num_levels=5)
                    print(
                        f"   {label} validation C={C:.4f}: NMAE {v:.4f} ({sweep:.3f} s/it{extra})"
                    )
                    if best is None or v < best[0]:
                        best = (v, C)
                chosen[kind] = best[1]
            keep = strong is not None
            lv, sweep, compile_s, extra, median_lv, item_means = fit_gibbs(
                kind, train, n_fit, n_items, chosen[kind], test, args, part, keep=keep
            )
            median = nmae_uniform(y_test, median_lv, num_levels=5)
            extra += f"; predictive-median levels: NMAE {median:.4f}"
            scores[label].append(nmae_uniform(y_test, lv, num_levels=5))
            seconds[label].append(sweep)
            print(
                f"   {label}: C={chosen[kind]:.4f} test NMAE {scores[label][-1]:.4f}, "
                f"{sweep:.3f} s/sweep (compile {compile_s:.1f} s{extra})"
            )
            if keep:
                # the new users, with the item side held at the weak run's (item_side_of)
                lv, sweep, _, _, median_lv, _ = fit_gibbs(
                    kind,
                    s_train,
                    n_strong,
                    n_items,
                    chosen[kind],
                    s_test,
                    args,
                    part,
                    item_side=item_means,
                )
                strong_label = label + ", strong"
                scores[strong_label].append(nmae_uniform(s_y_test, lv, num_levels=5))
                seconds[strong_label].append(sweep)
                median = nmae_uniform(s_y_test, median_lv, num_levels=5)
                print(
                    f"   {strong_label}: test NMAE {scores[strong_label][-1]:.4f} "
                    f"({sweep:.3f} s/sweep; predictive-median levels: NMAE {median:.4f})"
                )
        if not (args.fm_only or args.skip_map):
            label = "optax M3F (R&S 2005)"
            best = None
            for reg in regs if len(regs) > 1 else []:
                lv, _, _ = fit_baseline(inner, n_fit, n_items, reg, val, args, part)
                v = nmae_uniform(y_val, lv, num_levels=5)
                print(f"   {label} validation reg={reg}: NMAE {v:.4f}")
                if best is None or v < best[0]:
                    best = (v, reg)
            reg = best[1] if best else regs[0]
            lv, fit_s, V = fit_baseline(train, n_fit, n_items, reg, test, args, part)
            scores[label].append(nmae_uniform(y_test, lv, num_levels=5))
            seconds[label].append(fit_s)
            print(f"   {label}: reg={reg} test NMAE {scores[label][-1]:.4f} ({fit_s:.1f} s fit)")
            if strong is not None:
                lv, fit_s, _ = fit_baseline(
                    s_train, n_strong, n_items, reg, s_test, args, part, item_factors=V
                )
                strong_label = label + ", strong"
                scores[strong_label].append(nmae_uniform(s_y_test, lv, num_levels=5))
                seconds[strong_label].append(fit_s)
                print(f"   {strong_label}: test NMAE {scores[strong_label][-1]:.4f}")
        if not args.skip_fm:
            for label, (lv, fit_s) in fit_fms(train, n_fit, n_items, test, part).items():
                scores[label].append(nmae_uniform(y_test, lv, num_levels=5))
                seconds[label].append(fit_s)
                print(f"   {label}: test NMAE {scores[label][-1]:.4f} ({fit_s:.1f} s fit)")
            if strong is not None:
                # an FM cannot hold its item side fixed, so the new users' observed ratings
                # join the training set (their one-hot columns follow the weak users')
                joint = tuple(
                    np.concatenate([a, b + offset])
                    for a, b, offset in zip(train, s_train, (n_fit, 0, 0), strict=True)
                )
                s_test_joint = (s_test[0] + n_fit, s_test[1])
                fits = fit_fms(joint, n_fit + n_strong, n_items, s_test_joint, part)
                for label, (lv, fit_s) in fits.items():
                    strong_label = label + ", strong"
                    scores[strong_label].append(nmae_uniform(s_y_test, lv, num_levels=5))
                    seconds[strong_label].append(fit_s)
                    print(f"   {strong_label}: test NMAE {scores[strong_label][-1]:.4f}")
    print(
        f"RESULT {name} (NMAE over partitions {list(parts)}; time: median s/sweep for Gibbs,"
        " s per fit otherwise)"
    )
    for label in models:
        if not scores[label]:
            continue
        vals = np.array(scores[label])
        sd = vals.std(ddof=1) if vals.size > 1 else float("nan")
        per = " ".join(f"{v:.4f}" for v in vals)
        print(
            f"RESULT {name} {label:<22} {vals.mean():.4f} +- {sd:.4f}  [{per}]  "
            f"time {statistics.median(seconds[label]):.3f}"
        )


def time_only(args):
    """Per-sweep time of Gibbs M3F (and iPM3F unless ``--skip-ipm3f``) on the training set of
    partition 0 of each of ``--datasets``, C = 0.1."""
    for name in args.datasets.split(","):
        users, items, y = load(name.strip())
        n_users, n_items = int(users.max()) + 1, int(items.max()) + 1
        tr = ~weak_split(users, 0)
        data = m3f.make_data(users[tr], items[tr], y[tr], n_users, n_items, 5, margin=args.margin)
        hyper = m3f.make_hyper(5, C=0.1, margin=args.margin)
        kernels = [
            (
                f"Gibbs M3F K={args.rank}",
                m3f.gibbs(
                    data, hyper, rank=args.rank, keep_factors=False, pointwise_log_likelihood=False
                ),
            )
        ]
        if not args.skip_ipm3f:
            kernels.append(
                (
                    f"Gibbs iPM3F ({args.feature_step} feature step)",
                    m3f.ipm3f_gibbs(
                        data,
                        hyper=hyper,
                        capacity=args.capacity,
                        keep_factors=False,
                        pointwise_log_likelihood=False,  # predictions only: no per-rating trace
                        feature_step=args.feature_step,
                    ),
                )
            )
        for label, algorithm in kernels:
            times = []
            compile_s = 0.0
            for rep in range(args.repeats):
                result = run(
                    algorithm,
                    jax.random.key(rep),
                    args.iterations,
                    num_chains=args.chains,
                    progress_bar=False,
                )
                compile_s += result.timings.get("compile_s", 0.0)
                times.append(result.timings["sampling_s"] / args.iterations)
            extra = ""
            if "num_features" in result.trace["posterior"]:
                extra = f", final K+ {result.trace['posterior']['num_features'][0, -1]}"
            print(
                f"RESULT time {name} {label} chains={args.chains} x64={args.x64}: "
                f"{statistics.median(times):.4f} s/sweep (median of {args.repeats} runs of "
                f"{args.iterations} sweeps; compile {compile_s:.1f} s{extra})"
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="ml-100k", help="ml-100k and/or ml-1m")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rank", type=int, default=100)
    parser.add_argument("--margin", type=float, default=9.0)
    parser.add_argument("--iterations", type=int, default=50)
    parser.add_argument("--burn-in", type=int, default=10)
    parser.add_argument("--val-iterations", type=int, default=50, help="sweeps per C on validation")
    parser.add_argument("--val-burn-in", type=int, default=10)
    parser.add_argument("--capacity", type=int, default=64, help="initial iPM3F feature buffer")
    parser.add_argument("--c-grid", default="full", help="'full' or exponents e (C = 10^(-e/4))")
    parser.add_argument("--reg-grid", default="0.3,1,3,10,30")
    parser.add_argument("--map-rank", type=int, default=100)
    parser.add_argument("--map-iter", type=int, default=300)
    parser.add_argument("--skip-fm", action="store_true")
    parser.add_argument("--skip-ipm3f", action="store_true")
    parser.add_argument("--skip-m3f", action="store_true")
    parser.add_argument(
        "--feature-step",
        default="sequential",
        choices=m3f.features.FEATURE_STEPS,
        help="iPM3F's Z step: the authors' user-by-user sweep or the row-parallel one",
    )
    parser.add_argument(
        "--ipm3f-sigma",
        type=float,
        default=1.0,
        help="iPM3F's weight sd sigma (the authors' 1); sets how many binary features a score"
        " of the margin's size needs",
    )
    parser.add_argument(
        "--ipm3f-init-features",
        type=int,
        default=8,
        help="features (each user holding each with probability 1/2) iPM3F's chains start with",
    )
    parser.add_argument(
        "--ipm3f-weight-prior",
        default="",
        help="'a,b': a Gamma(a, rate b) hyperprior on iPM3F's weight precision 1/sigma^2"
        " (sampled; --ipm3f-sigma is then its starting value)",
    )
    parser.add_argument(
        "--item-bias",
        action="store_true",
        help="Gibbs M3F with item biases (x = U_i . V_j + c_j, c_j ~ N(0, ell^2))",
    )
    parser.add_argument(
        "--strong-references",
        type=int,
        default=5,
        help="strong iPM3F: the new users are fitted against this many draws of the weak run"
        " (spread over its kept draws), their scores pooled",
    )
    parser.add_argument(
        "--strong-fraction",
        type=float,
        default=0.0,
        help="strong generalization: this share of the users is set aside whole; Gibbs M3F and"
        " the optax baseline fit them with the items held at the weak run's fit (posterior"
        " mean / optimum), one held-out rating per user (the authors: 5000 weak users of ML-1M's"
        " 6040, so about 0.17)",
    )
    parser.add_argument("--skip-map", action="store_true", help="no optax baseline")
    parser.add_argument("--fm-only", action="store_true", help="only the two ordinal FMs")
    parser.add_argument(
        "--ipm3f-c-from-m3f", action="store_true", help="reuse M3F's validated C for iPM3F"
    )
    parser.add_argument("--time-only", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--only-partitions", default="", help="comma-separated partition ids (default: all)"
    )
    parser.add_argument(
        "--plain-mean",
        action="store_true",
        help="average the drawn scores instead of the Rao-Blackwellized ones",
    )
    parser.add_argument(
        "--chains",
        type=int,
        default=1,
        help="Gibbs chains run side by side (vmap); the posterior mean pools their draws",
    )
    parser.add_argument("--float32", action="store_true", help="float32 (default float64)")
    args = parser.parse_args()
    args.x64 = not args.float32
    args.ipm3f_weight_prior = (
        tuple(float(v) for v in args.ipm3f_weight_prior.split(","))
        if args.ipm3f_weight_prior
        else None
    )
    if args.x64:
        jax.config.update("jax_enable_x64", True)
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"machine: {platform.platform()} ({platform.machine()}), jax devices {jax.devices()}")
    print(f"bnpjax {bnpjax.__version__}, jax {jax.__version__}, x64 {args.x64}")
    if args.time_only:
        time_only(args)
        return
    for name in args.datasets.split(","):
        run_dataset(name.strip(), args)


if __name__ == "__main__":
    main()
