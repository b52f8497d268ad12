"""Per-sweep time and mixing of the IBP linear-Gaussian samplers, against a NumPy reference.

What is measured (``bnpjax.models.ibp_lg``):

* **Conditional check.** In float64, for fixed ``(Z, X)`` and a row ``i``, the NumPy reference
  below computes the flip log-odds of every existing feature and the log weights of
  ``k_new = 0..kappa`` new features. Both are compared with brute force from the explicit
  collapsed marginal likelihood ``log p(X | Z)`` (Griffiths & Ghahramani 2011) and with
  bnpjax's own ``_collapsed_row`` (instrumented: its uniforms are pinned so that nothing flips,
  and the log-odds and ``new_feature_log_weights`` it computes are recorded). The maximum
  absolute difference is printed and must be below 1e-8.
* **Per-sweep time** for each size ``N x D`` of ``--sizes`` (default ``N`` in {100, 1000,
  10000}, ``D`` in {36, 500}, plus the bars data of ``bnpjax.datasets.bars``). Synthetic data
  are ``X = Z A + noise`` with 15 features (``Z`` Bernoulli(0.3), ``A`` N(0, 1), noise sd 0.5),
  so that ``K+`` stays around 15. Both bnpjax samplers start from the generating features and
  run with alpha = 1, sigma_X = 0.5, sigma_A = 1 held fixed (``alpha_prior=None`` and
  ``sample_sigma_*`` off), a feature buffer of ``--capacity`` slots, float32 on the default JAX
  device. bnpjax times its whole step (the ``Z`` sweep, the ``A | Z`` draw and the
  fixed-hyperparameter bookkeeping): ``SamplingResult.timings['sampling_s']`` per sweep,
  compilation excluded, the median over ``--repeats`` runs that continue the chain. The NumPy
  reference :func:`numpy_collapsed_sweep` is the same collapsed Gibbs sweep (same rank-one
  updates, same row order, same treatment of the row's singletons, ``A`` integrated out) in
  float64 on the CPU, written as a NumPy user would: a compacted ``Z`` whose new columns are
  appended and dead ones dropped, flips scored on Python scalars, and the add-back skipped for
  rows that end unchanged (it would restore the arrays before the downdate). It starts from
  the collapsed sampler's state and is timed over the ``Z`` sweep alone (median over sweeps,
  for at most ``--numpy-budget-s`` seconds).
  One line per size ends with ``speedup: S`` = NumPy time / bnpjax collapsed time; the
  row-parallel sampler's time ratios between successive ``N`` follow (linear growth in ``N``
  means a ratio no larger than the ratio of the ``N``), then the issue's targets.
* **Mixing.** Both samplers with every hyperparameter sampled, ``--mix-chains`` chains from
  bnpjax's default initialisation, on bars (``--mix-warmup`` + ``--mix-samples`` steps) and on
  the ``N = --mix-n``, ``D = 36`` synthetic data (``--mix-n-warmup`` + ``--mix-n-samples``,
  fewer by default: a collapsed sweep there costs ten bars sweeps): bulk ESS (``arviz.ess``)
  of ``K+`` and ``sigma_X`` over all chains, divided by the sampling seconds (compile and
  warmup excluded).

Run from the repository root::

    python benchmarks/ibp_scaling.py            # full grid and mixing (10-15 min on 2 CPU cores)
    python benchmarks/ibp_scaling.py --quick    # smoke test: N = 100 only, a few sweeps
    python benchmarks/ibp_scaling.py --sizes 1000x36,1000x500 --skip-mixing
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import math
import os
import platform
import statistics
import time
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve

import bnpjax
from bnpjax.datasets import bars
from bnpjax.infer import run
from bnpjax.models import ibp_lg

# the collapsed sampler's module (ibp_lg.collapsed_gibbs is its factory)
_collapsed = importlib.import_module("bnpjax.models.ibp_lg.collapsed_gibbs")

with warnings.catch_warnings():
    warnings.simplefilter("ignore", FutureWarning)
    import arviz as az

DEFAULT_SIZES = "bars,100x36,100x500,1000x36,1000x500,10000x36,10000x500"
TRUE_FEATURES = 15
FEATURE_PROB = 0.3
NOISE_SD = 0.5
# fixed hyperparameters of the timing runs (both sides)
ALPHA, SIGMA_X, SIGMA_A, KAPPA = 1.0, 0.5, 1.0, 10


# --------------------------------------------------------------------------------------------
# data


def synthetic(num_rows: int, num_dims: int, seed: int = 0) -> dict[str, np.ndarray]:
    """``X = Z A + noise``: 15 features on w.p. 0.3, ``A ~ N(0, 1)``, noise sd 0.5."""
    rng = np.random.default_rng([seed, num_rows, num_dims])
    Z = (rng.random((num_rows, TRUE_FEATURES)) < FEATURE_PROB).astype(float)
    A = rng.normal(size=(TRUE_FEATURES, num_dims))
    X = Z @ A + NOISE_SD * rng.normal(size=(num_rows, num_dims))
    return {"X": X, "Z": Z, "A": A}


def load(size: str, seed: int) -> tuple[str, dict[str, np.ndarray]]:
    if size == "bars":
        d = bars(seed)
        return "bars", {"X": d["X"], "Z": d["Z"], "A": d["A"]}
    try:
        n, d = (int(v) for v in size.lower().split("x"))
    except ValueError:
        raise SystemExit(f"--sizes: expected NxD or 'bars', got {size!r}") from None
    return size, synthetic(n, d, seed)


# --------------------------------------------------------------------------------------------
# the NumPy reference


def truncated_poisson_log_pmf(rate: float, kappa: int) -> np.ndarray:
    """log Poisson(k; rate) normalised over k = 0..kappa."""
    terms = np.array([k * math.log(rate) - math.lgamma(k + 1) for k in range(kappa + 1)])
    top = terms.max()
    return terms - (top + math.log(np.exp(terms - top).sum()))


def posterior_A(Z: np.ndarray, X: np.ndarray, ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """``M^-1 = (Z'Z + ratio I)^-1`` and the posterior mean ``mu = M^-1 Z'X``."""
    Minv = np.linalg.inv(Z.T @ Z + ratio * np.eye(Z.shape[1]))
    return Minv, Minv @ (Z.T @ X)


def numpy_collapsed_sweep(
    Z, X, sigma_x, sigma_a, alpha, kappa, rng, *, rows=None, record=None
) -> np.ndarray:
    """One collapsed Gibbs sweep over the rows of ``Z`` (N x K+, active columns only).

    Per row ``i`` (the bnpjax algorithm, ``bnpjax.models.ibp_lg.collapsed_gibbs``):

    1. remove row ``i``: Sherman-Morrison downdate of ``M^-1`` and ``mu``, ``O(K^2 + KD)``;
       the columns only row ``i`` uses (its singletons) get the prior block ``I / ratio``;
    2. flip every other feature in turn with prior ``m_{-i,k} / N`` and the predictive
       ``N(x_i; z_i mu_{-i}, sigma_x^2 (1 + z_i M_{-i}^-1 z_i') I)``, whose two scalars
       ``q = z_i M^-1 z_i'`` and ``rss = |x_i - z_i mu|^2`` move by ``O(1)`` per proposal
       (``w = M^-1 z_i'`` and ``mu (x_i - z_i mu)'`` are updated, ``O(K + KD)``, only when a
       flip is taken); the singletons stay in the predictive meanwhile;
    3. replace the singletons by ``k_new ~ Poisson(alpha / N)`` truncated at ``kappa`` times
       the predictive with variance ``sigma_x^2 (1 + q) + k sigma_a^2``;
    4. add row ``i`` back (rank-one update), append new columns, drop dead ones.

    ``rows`` restricts the sweep to some rows. With ``record`` (a dict) nothing is flipped:
    the flip log-odds of the current ``z_i`` go to ``record['flip'][k]`` and the new-feature
    log weights to ``record['new']`` (for the conditional check). Returns the new ``Z``.
    """
    N, D = X.shape
    sx2, sa2 = sigma_x**2, sigma_a**2
    ratio = sx2 / sa2
    log_prior_new = truncated_poisson_log_pmf(alpha / N, kappa)
    extra_var = np.arange(kappa + 1) * sa2
    Z = np.array(Z, dtype=float)
    m = Z.sum(axis=0)
    Minv, mu = posterior_A(Z, X, ratio)
    for i in range(N) if rows is None else rows:
        x = X[i]
        z = Z[i].copy()
        K = z.size

        # 1. remove row i, into new arrays: when the row ends unchanged (most rows, once the
        # chain has settled) M^-1 and mu stay as they are and the add-back is skipped
        v = Minv @ z
        c = 1.0 / (1.0 - z @ v)
        Minv_i = Minv + c * (v[:, None] * v)
        mu_i = mu + (c * v)[:, None] * (z @ mu - x)
        m_i = m - z
        single = (m_i < 0.5).nonzero()[0]
        if single.size:  # exact prior block: no rounding residue from the downdate
            Minv_i[single, :] = 0.0
            Minv_i[:, single] = 0.0
            Minv_i[single, single] = 1.0 / ratio
            mu_i[single] = 0.0

        # 2. flips, on Python scalars; numpy work only when a flip is taken
        w = Minv_i @ z
        q = float(z @ w)
        resid = x - z @ mu_i
        rss = float(resid @ resid)
        r_mu = mu_i @ resid
        z_l, w_l, r_l = z.tolist(), w.tolist(), r_mu.tolist()
        m_l, diag = m_i.tolist(), Minv_i.diagonal().tolist()
        mumu = np.square(mu_i).sum(axis=1).tolist()
        u = rng.random(K + 1).tolist()
        var = sx2 * (1.0 + q)
        log_pred = -0.5 * D * math.log(var) - 0.5 * rss / var
        flipped = False
        for k in range(K):
            m_k = m_l[k]
            if m_k < 0.5:
                continue  # a singleton of row i: redrawn in step 3
            on = z_l[k] > 0.5
            sign = -1.0 if on else 1.0
            q_new = q + 2.0 * sign * w_l[k] + diag[k]
            rss_new = rss - 2.0 * sign * r_l[k] + mumu[k]
            var_new = sx2 * (1.0 + q_new)
            log_pred_new = -0.5 * D * math.log(var_new) - 0.5 * rss_new / var_new
            prior_on = math.log(m_k) - math.log(N - m_k)
            log_odds = log_pred_new - log_pred + (-prior_on if on else prior_on)
            if record is not None:
                record["flip"][k] = log_odds
                continue
            if log_odds >= 0.0:
                p_flip = 1.0 / (1.0 + math.exp(-log_odds))
            else:
                e = math.exp(log_odds)
                p_flip = e / (1.0 + e)
            if u[k] < p_flip:
                flipped = True
                z_l[k] = 1.0 - z_l[k]
                z[k] = z_l[k]
                w += sign * Minv_i[:, k]
                r_mu -= sign * (mu_i @ mu_i[k])
                w_l, r_l = w.tolist(), r_mu.tolist()
                q, rss, log_pred = q_new, rss_new, log_pred_new

        # 3. new features; the singletons (block I / ratio, mean 0) leave the predictive
        q -= single.size / ratio
        var_k = sx2 * (1.0 + q) + extra_var
        log_w = log_prior_new - 0.5 * D * np.log(var_k) - 0.5 * rss / var_k
        if record is not None:
            record["new"] = log_w
        weights = log_w.tolist()
        top = max(weights)
        weights = [math.exp(lw - top) for lw in weights]
        target = u[K] * sum(weights)
        k_new, total = 0, weights[0]
        while total <= target and k_new < kappa:
            k_new += 1
            total += weights[k_new]
        if not flipped and k_new == single.size:
            continue  # row i unchanged (its singletons' columns serve the new features)

        Minv, mu, m = Minv_i, mu_i, m_i
        reuse = min(single.size, k_new)  # a singleton's column serves as a new feature's
        dead = single[reuse:]
        z[dead] = 0.0
        n_add = k_new - reuse
        if n_add:
            Z = np.concatenate([Z, np.zeros((N, n_add))], axis=1)
            grown = np.zeros((K + n_add, K + n_add))
            grown[:K, :K] = Minv
            grown[K:, K:] = np.eye(n_add) / ratio
            Minv = grown
            mu = np.concatenate([mu, np.zeros((n_add, D))])
            m = np.concatenate([m, np.zeros(n_add)])
            z = np.concatenate([z, np.ones(n_add)])

        # 4. add row i back
        v = Minv @ z
        c = 1.0 / (1.0 + z @ v)
        Minv -= c * (v[:, None] * v)
        mu += (c * v)[:, None] * (x - z @ mu)
        m += z
        Z[i] = z
        if dead.size:  # decoupled from the rest (prior block, zero mean): just delete
            keep = np.ones(m.size, bool)
            keep[dead] = False
            Z, Minv, mu, m = Z[:, keep], Minv[np.ix_(keep, keep)], mu[keep], m[keep]
    return Z


# --------------------------------------------------------------------------------------------
# conditional check


def log_marginal(Z, X, sigma_x, sigma_a) -> float:
    """``log p(X | Z)`` with ``A`` integrated out (Griffiths & Ghahramani 2011)."""
    N, D = X.shape
    K = Z.shape[1]
    M = Z.T @ Z + (sigma_x / sigma_a) ** 2 * np.eye(K)
    logdet = np.linalg.slogdet(M)[1]
    ZtX = Z.T @ X
    trace = np.sum(X * X) - np.sum(ZtX * np.linalg.solve(M, ZtX))
    return float(
        -0.5 * N * D * math.log(2 * math.pi)
        - (N - K) * D * math.log(sigma_x)
        - K * D * math.log(sigma_a)
        - 0.5 * D * logdet
        - 0.5 * trace / sigma_x**2
    )


def brute_force_conditionals(Z, X, i, sigma_x, sigma_a, alpha, kappa):
    """Flip log-odds and normalised new-feature log weights of row ``i`` from log p(X | Z)."""
    N = X.shape[0]
    base = log_marginal(Z, X, sigma_x, sigma_a)
    m_minus = Z.sum(0) - Z[i]
    flips = {}
    for k in np.flatnonzero(m_minus > 0.5):
        flipped = Z.copy()
        flipped[i, k] = 1 - flipped[i, k]
        prior_on = math.log(m_minus[k]) - math.log(N - m_minus[k])
        prior = -prior_on if Z[i, k] > 0.5 else prior_on
        flips[int(k)] = log_marginal(flipped, X, sigma_x, sigma_a) - base + prior
    shared = Z[:, m_minus > 0.5]  # row i's singletons removed
    log_w = truncated_poisson_log_pmf(alpha / N, kappa).copy()
    for k in range(kappa + 1):
        new = np.zeros((N, k))
        new[i] = 1.0
        log_w[k] += log_marginal(np.concatenate([shared, new], axis=1), X, sigma_x, sigma_a)
    return flips, log_w


def bnpjax_conditionals(Z, X, i, sigma_x, sigma_a, alpha, kappa):
    """The same quantities from bnpjax's ``_collapsed_row`` in float64, run eagerly with its
    uniforms pinned at 1 (no flip is taken) while recording the log-odds it passes to
    ``jax.nn.softplus`` and the output of ``new_feature_log_weights``."""
    N, D = X.shape
    capacity = Z.shape[1] + kappa + 1
    recorded = {"flip": [], "new": None}
    originals = (_collapsed.new_feature_log_weights, jax.nn.softplus)

    def softplus(x):  # each flip scores -softplus(-log_odds) once, in slot order
        recorded["flip"].append(-float(x))
        return originals[1](x)

    def new_weights(*args, **kwargs):
        out = originals[0](*args, **kwargs)
        recorded["new"] = np.asarray(out, float)
        return out

    with jax.enable_x64(True):
        Zj = jnp.zeros((N, capacity)).at[:, : Z.shape[1]].set(jnp.asarray(Z))
        Xj = jnp.asarray(X)
        ratio = jnp.asarray((sigma_x / sigma_a) ** 2)
        chol, mu = _collapsed.posterior_A(Zj, Xj, ratio)
        Minv = cho_solve((chol, True), jnp.eye(capacity))
        carry = (Zj, Zj.sum(0), Minv, mu, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
        # uniforms pinned at 1: no flip is taken, so every flip is scored from the same state
        xs = (i, jnp.ones(capacity), jnp.zeros(kappa + 1))
        _collapsed.new_feature_log_weights = new_weights
        jax.nn.softplus = softplus
        try:
            with jax.disable_jit():
                _collapsed._collapsed_row(
                    carry,
                    xs,
                    X=Xj,
                    N=N,
                    D=D,
                    ratio=ratio,
                    sigma_x2=jnp.asarray(sigma_x**2),
                    sigma_a2=jnp.asarray(sigma_a**2),
                    alpha=jnp.asarray(alpha),
                    kappa=kappa,
                )
        finally:
            _collapsed.new_feature_log_weights = originals[0]
            jax.nn.softplus = originals[1]
    held = [k for k in range(Z.shape[1]) if Z[:, k].sum() - Z[i, k] > 0]
    recorded["flip"] = dict(zip(held, recorded["flip"], strict=True))
    return recorded["flip"], recorded["new"]


def _normalise(log_w):
    log_w = np.asarray(log_w, float)
    top = log_w.max()
    return log_w - (top + math.log(np.exp(log_w - top).sum()))


def check_conditionals() -> None:
    rng = np.random.default_rng(1)
    N, D, K = 40, 12, 6
    sigma_x, sigma_a, alpha, kappa = 0.6, 1.3, 1.7, 6
    shared = (rng.random((N, K)) < 0.4).astype(float)
    shared[:2] = 1.0  # every shared column used by >= 2 rows
    shared[7] = [1, 0, 1, 0, 1, 0]
    singles = np.zeros((N, 2))
    singles[7] = 1.0  # row 7 owns two singletons
    Z = np.concatenate([shared, singles], axis=1)
    X = Z @ (sigma_a * rng.normal(size=(K + 2, D))) + sigma_x * rng.normal(size=(N, D))
    worst_brute = worst_bnpjax = 0.0
    num_flips = 0
    for i in (7, 12):
        record = {"flip": {}, "new": None}
        numpy_collapsed_sweep(
            Z, X, sigma_x, sigma_a, alpha, kappa, np.random.default_rng(0), rows=[i], record=record
        )
        flips_bf, new_bf = brute_force_conditionals(Z, X, i, sigma_x, sigma_a, alpha, kappa)
        flips_bj, new_bj = bnpjax_conditionals(Z, X, i, sigma_x, sigma_a, alpha, kappa)
        assert sorted(record["flip"]) == sorted(flips_bf), (record["flip"], flips_bf)
        new_np = _normalise(record["new"])
        for k, value in record["flip"].items():
            worst_brute = max(worst_brute, abs(value - flips_bf[k]))
            worst_bnpjax = max(worst_bnpjax, abs(value - flips_bj[k]))
        worst_brute = max(worst_brute, float(np.max(np.abs(new_np - _normalise(new_bf)))))
        worst_bnpjax = max(worst_bnpjax, float(np.max(np.abs(new_np - _normalise(new_bj)))))
        num_flips += len(record["flip"])
    print(
        f"conditional check (float64; rows 7 (2 singletons) and 12; {num_flips} flip log-odds, "
        f"2 x {kappa + 1} new-feature log weights): max |numpy - brute force| = "
        f"{worst_brute:.2e}, max |numpy - bnpjax _collapsed_row| = {worst_bnpjax:.2e}"
    )
    if not (worst_brute < 1e-8 and worst_bnpjax < 1e-8):
        raise SystemExit("conditional check failed: the conditional probabilities differ")


# --------------------------------------------------------------------------------------------
# timing


def start_state(d: dict, capacity: int) -> ibp_lg.IBPLGState:
    """The generating features as a one-chain bnpjax state (float32, padded to capacity)."""
    Z, A, X = d["Z"], d["A"], d["X"]
    used = Z.sum(0) > 0
    Z, A = Z[:, used], A[used]
    N, K = Z.shape
    if K >= capacity:
        raise SystemExit(f"--capacity {capacity} must exceed the {K} generating features")
    Z_pad = np.zeros((N, capacity))
    Z_pad[:, :K] = Z
    A_pad = np.zeros((capacity, X.shape[1]))
    A_pad[:K] = A
    state = ibp_lg.IBPLGState(Z_pad, A_pad, ALPHA, SIGMA_X, SIGMA_A, X, np.zeros(X.shape[1]))
    dtype = jnp.result_type(float)
    return jax.tree.map(lambda a: jnp.asarray(a, dtype)[None], state)


def time_bnpjax(algorithm, state, key, chunk: int, repeats: int, target_s: float) -> dict:
    """Burn in one chunk (compiles), then ``repeats`` timed runs continuing the chain."""
    res = run(algorithm, key, chunk, chunk_size=chunk, initial_state=state, progress_bar=False)
    compile_s = res.timings.get("compile_s", 0.0)
    per_sweep = res.timings["sampling_s"] / chunk
    sweeps = chunk * max(1, math.ceil(target_s / (per_sweep * chunk)))
    times, k_plus, resizes = [], [], res.settings["num_resizes"]
    for _ in range(repeats):
        res = run(
            res.algorithm,
            key,
            sweeps,
            chunk_size=chunk,
            initial_state=res.final_state,
            start_step=res.num_steps,
            progress_bar=False,
        )
        times.append(res.timings["sampling_s"] / sweeps)
        k_plus.append(float(res.trace["posterior"]["num_features"].mean()))
        resizes += res.settings["num_resizes"]
        compile_s += res.timings.get("compile_s", 0.0)
    return {
        "s": statistics.median(times),
        "k_plus": statistics.mean(k_plus),
        "sweeps": f"{repeats}x{sweeps}",
        "compile_s": compile_s,
        "resizes": resizes,
        "result": res,
    }


def time_numpy(Z, X, rng, budget_s: float, max_sweeps: int) -> dict:
    times, k_plus = [], []
    start = time.perf_counter()
    while True:
        t0 = time.perf_counter()
        Z = numpy_collapsed_sweep(Z, X, SIGMA_X, SIGMA_A, ALPHA, KAPPA, rng)
        times.append(time.perf_counter() - t0)
        k_plus.append(Z.shape[1])
        if len(times) >= max_sweeps or time.perf_counter() - start >= budget_s:
            break
    return {"s": statistics.median(times), "k_plus": statistics.mean(k_plus), "sweeps": len(times)}


def chunk_for(work: float) -> int:
    """Sweeps per compiled chunk (``work`` / estimated cost of a sweep, clipped to 1..50):
    enough that the driver's per-chunk cost is small, few enough to keep the burn-in short."""
    return int(min(50, max(1, work)))


def timing(args, key) -> list[dict]:
    rows = []
    for size in args.sizes.split(","):
        label, d = load(size.strip(), args.seed)
        X = d["X"]
        N, D = X.shape
        data = ibp_lg.make_data(X)
        fixed = dict(
            alpha=ALPHA,
            sigma_x=SIGMA_X,
            sigma_a=SIGMA_A,
            alpha_prior=None,
            sample_sigma_x=False,
            sample_sigma_a=False,
            kappa=KAPPA,
            capacity=args.capacity,
            trace_features=False,
            pointwise_log_likelihood=False,
        )
        collapsed = time_bnpjax(
            ibp_lg.collapsed_gibbs(data, **fixed),
            start_state(d, args.capacity),
            key,
            chunk_for(5e3 / N),  # sequential in N; per-row cost barely depends on D
            args.repeats,
            args.target_s,
        )
        final = collapsed["result"]
        fixed["capacity"] = final.algorithm.capacity
        parallel = time_bnpjax(
            ibp_lg.parallel_gibbs(data, **fixed),
            final.final_state,
            key,
            chunk_for(2e7 / (N * D)),
            args.repeats,
            args.target_s,
        )
        Z0 = np.asarray(final.final_state.Z[0], float)
        numpy_ = time_numpy(
            Z0[:, Z0.sum(0) > 0],
            np.asarray(X, float),
            np.random.default_rng(args.seed),
            args.numpy_budget_s,
            args.numpy_max_sweeps,
        )
        speedup = numpy_["s"] / collapsed["s"]
        name = "bars " if label == "bars" else ""
        print(
            f"{name}N={N} D={D} collapsed: {collapsed['s'] * 1e3:.2f} ms/sweep, "
            f"parallel: {parallel['s'] * 1e3:.2f} ms/sweep, numpy: {numpy_['s'] * 1e3:.2f} "
            f"ms/sweep, speedup: {speedup:.1f}"
        )
        resizes = collapsed["resizes"] + parallel["resizes"]
        print(
            f"    K+ collapsed/parallel/numpy: {collapsed['k_plus']:.1f}/"
            f"{parallel['k_plus']:.1f}/{numpy_['k_plus']:.1f}; sweeps timed: "
            f"{collapsed['sweeps']}/{parallel['sweeps']}/{numpy_['sweeps']}; compile s: "
            f"{collapsed['compile_s']:.1f}/{parallel['compile_s']:.1f}; parallel: "
            f"{1 / parallel['s']:.1f} sweeps/s"
            + (f"; WARNING: {resizes} buffer growth(s) inside timed runs" if resizes else ""),
            flush=True,
        )
        rows.append(
            {
                "label": label,
                "N": N,
                "D": D,
                "collapsed": collapsed["s"],
                "parallel": parallel["s"],
                "numpy": numpy_["s"],
                "speedup": speedup,
            }
        )
    return rows


def report_targets(rows: list[dict]) -> None:
    grid = [r for r in rows if r["label"] != "bars"]
    for D in sorted({r["D"] for r in grid}):
        by_n = sorted((r for r in grid if r["D"] == D), key=lambda r: r["N"])
        for a, b in itertools.pairwise(by_n):
            growth = b["parallel"] / a["parallel"]
            linear = b["N"] / a["N"]
            verdict = "ok" if growth <= linear else "WORSE THAN LINEAR"
            print(
                f"parallel scaling D={D}: N {a['N']} -> {b['N']}: time x{growth:.2f} "
                f"(linear: x{linear:.1f}) {verdict}"
            )
    print("targets of the issue:")
    for r in grid:
        need = 20.0 if r["N"] <= 1000 else 5.0
        verdict = "ok" if r["speedup"] >= need else "MISSED"
        print(f"    N={r['N']} D={r['D']}: speedup {r['speedup']:.1f} >= {need:.0f}: {verdict}")
    gpu = jax.default_backend() == "gpu"
    for r in grid:
        if r["N"] == 10000 and r["D"] == 500:
            rate = 1 / r["parallel"]
            verdict = ("ok" if rate >= 20 else "MISSED") if gpu else "n/a (no GPU)"
            print(f"    parallel at N=10000 D=500: {rate:.1f} sweeps/s >= 20 on a GPU: {verdict}")


# --------------------------------------------------------------------------------------------
# mixing


def mixing(args, key) -> None:
    sets = [
        ("bars", bars(args.seed)["X"], args.mix_warmup, args.mix_samples),
        (
            f"synthetic N={args.mix_n} D=36",
            synthetic(args.mix_n, 36, args.seed)["X"],
            args.mix_n_warmup,
            args.mix_n_samples,
        ),
    ]
    print(
        f"mixing: {args.mix_chains} chains, alpha, sigma_x, sigma_a sampled, default init, "
        f"buffer {args.capacity}; bulk ESS over all chains / sampling seconds"
    )
    for label, X, num_warmup, num_samples in sets:
        data = ibp_lg.make_data(X)
        for name, factory in (
            ("collapsed", ibp_lg.collapsed_gibbs),
            ("parallel", ibp_lg.parallel_gibbs),
        ):
            alg = factory(
                data, capacity=args.capacity, trace_features=False, pointwise_log_likelihood=False
            )
            res = run(
                alg,
                key,
                num_samples,
                num_warmup=num_warmup,
                num_chains=args.mix_chains,
                progress_bar=False,
            )
            post = res.trace["posterior"]
            secs = res.timings["sampling_s"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ess_k = float(az.ess(np.asarray(post["num_features"], float)))
                ess_s = float(az.ess(np.asarray(post["sigma_x"], float)))
            print(
                f"{label} {name}: ESS/s K+: {ess_k / secs:.1f}, ESS/s sigma_x: "
                f"{ess_s / secs:.1f} (ESS {ess_k:.0f} and {ess_s:.0f} from {num_warmup} warmup + "
                f"{num_samples} draws per chain in {secs:.2f} s; "
                f"K+ mean {np.mean(post['num_features']):.1f}, sigma_x mean "
                f"{np.mean(post['sigma_x']):.3f}, buffer growths {res.settings['num_resizes']})",
                flush=True,
            )


# --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", default=DEFAULT_SIZES, help=f"comma-separated NxD or 'bars' ({DEFAULT_SIZES})"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed bnpjax runs per size")
    parser.add_argument(
        "--target-s", type=float, default=1.0, help="seconds of sampling per timed bnpjax run"
    )
    parser.add_argument("--numpy-budget-s", type=float, default=2.0)
    parser.add_argument("--numpy-max-sweeps", type=int, default=10)
    parser.add_argument("--capacity", type=int, default=32, help="bnpjax feature buffer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--mix-n", type=int, default=1000, help="N of the synthetic mixing data")
    parser.add_argument("--mix-chains", type=int, default=2)
    parser.add_argument("--mix-warmup", type=int, default=300, help="warmup steps on bars")
    parser.add_argument("--mix-samples", type=int, default=1000, help="draws per chain on bars")
    parser.add_argument("--mix-n-warmup", type=int, default=200, help="warmup, synthetic data")
    parser.add_argument("--mix-n-samples", type=int, default=400, help="draws, synthetic data")
    parser.add_argument("--skip-mixing", action="store_true")
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: N = 100 only, a few sweeps"
    )
    args = parser.parse_args()
    if args.quick:
        args.sizes = "bars,100x36"
        args.repeats, args.target_s = 2, 0.1
        args.numpy_budget_s, args.numpy_max_sweeps = 0.3, 3
        args.mix_n, args.mix_warmup, args.mix_samples = 100, 20, 50
        args.mix_n_warmup, args.mix_n_samples = 20, 50

    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
    print(
        f"machine: {platform.platform()} ({platform.machine()}, {os.cpu_count()} CPUs), "
        f"jax devices: {jax.devices()}"
    )
    print(f"jax {jax.__version__}, numpy {np.__version__}, bnpjax {bnpjax.__version__}")
    check_conditionals()

    key = jax.random.key(args.seed)
    print(
        f"timing: alpha={ALPHA}, sigma_x={SIGMA_X}, sigma_a={SIGMA_A} fixed, kappa={KAPPA}; "
        f"bnpjax {jnp.result_type(float)} on {jax.default_backend()}, whole step (Z sweep + "
        f"A draw + bookkeeping), compile excluded, median of {args.repeats} runs, buffer "
        f"{args.capacity}; numpy float64, Z sweep only, median over sweeps"
    )
    rows = timing(args, key)
    report_targets(rows)
    if not args.skip_mixing:
        mixing(args, key)


if __name__ == "__main__":
    main()
