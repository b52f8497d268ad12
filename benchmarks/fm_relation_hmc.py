"""A design tried for the relation-block FM and not kept: one HMC move per relation block.

bnpjax's relation-block sweep (Rendle 2013) draws each feature's ``(w_i, v_i)`` from its exact
Gaussian conditional, chunk after chunk of features that share no block row. On myFM's
"extended" ML-100K setting the implicit-feedback features co-occur densely, so a sweep is
about 1,280 sequential chunk steps. This script replaces the chunks of each block by a single
Hamiltonian Monte Carlo move on all of the block's features at once, and runs it beside the
chunked Gibbs sweep and myFM in one process.

The move leaves the block's conditional invariant: HMC with a Metropolis correction
(Neal 2011), a step size jittered uniformly in ``[step/2, step]`` and a diagonal mass built
only from what the move holds fixed (the other features' per-block-row sums, the noise
variance and the priors). Its log target is the block's exact conditional, written through
the block-row sums ``S = sum r``, ``T = sum r r'``, ``E = sum z`` and ``R = sum r z`` of the
rows of each block row (``r``: the other features' factor sums, ``z``: the target less the
other features' part), so that a gradient is a forward and a backward pass of segment sums
over the block's entries (``jax.grad``).

Figures of 2026-11-30 are in docs/benchmarks.md ("The relation-block FM: a joint HMC move").

    python benchmarks/fm_relation_hmc.py                     # 60 sweeps, about 1.5 min
    python benchmarks/fm_relation_hmc.py --sweeps 200 --leapfrog 20 --step-size 0.05

References
----------
Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain Monte Carlo,
chapter 5.

Rendle, S. (2013). Scaling factorization machines to relational data. PVLDB 6(5), 337-348.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

# each variant compiles its own program; the on-disk stores key programs by bnpjax's source,
# which the patch below does not change
os.environ["BNPJAX_CACHE_DIR"] = "off"

import jax
import jax.numpy as jnp
import numpy as np
from fm_movielens import setting_data

from bnpjax.fm import FMRegressor, RelationBlock
from bnpjax.infer.programs import clear_compile_cache
from bnpjax.models.fm.conditionals import _block_row_sums, _relation_parts

ACCEPTANCE: list[float] = []


def hmc_relation_move(num_leapfrog: int, step_size: float):
    """A drop-in for ``bnpjax.models.fm.conditionals._relation_sweep``: one HMC move for all
    of a relation block's features."""

    def move(key, e, q, theta, relation, prior_mean, prior_precision, noise_var, K, row_sums):
        p, D = theta.shape
        linear = D > K
        index, counts = relation.index, relation.counts
        rows, cols, x = relation.rows, relation.cols, relation.values
        in_block = jax.ops.segment_sum(jnp.ones_like(x), cols, num_segments=p) > 0
        mask = in_block.astype(theta.dtype)[:, None]

        def parts(th):
            w = th[:, 0] if linear else jnp.zeros((p,), th.dtype)
            return _relation_parts(relation, w, th[:, D - K :])

        def block_part(block_parts, r):
            lin, s, sq = block_parts
            per_row = lin + 0.5 * jnp.sum(s**2, 1) - 0.5 * sq
            return per_row[index] + jnp.sum(r * s[index], 1)

        parts_now = parts(theta)
        r = q - parts_now[1][index]
        z = e + block_part(parts_now, r)
        S, T, E, R = _block_row_sums(relation, r, z)
        inverse_noise = 1.0 / noise_var

        def log_target(th):
            lin, s, sq = parts(th)
            a = lin + 0.5 * jnp.sum(s**2, 1) - 0.5 * sq
            squares = (
                counts * a**2
                - 2 * a * E
                + 2 * a * jnp.sum(s * S, 1)
                - 2 * jnp.sum(s * R, 1)
                + jnp.einsum("bk,bkl,bl->b", s, T, s)
            )
            prior = jnp.sum(mask * prior_precision * (th - prior_mean) ** 2)
            return -0.5 * inverse_noise * jnp.sum(squares) - 0.5 * prior

        x2 = x**2
        T_diagonal = jnp.diagonal(T, axis1=1, axis2=2)
        factor_curvature = jax.ops.segment_sum(
            x2[:, None] * (T_diagonal[rows] + 0.1 * counts[rows, None]), cols, num_segments=p
        )
        curvature = factor_curvature
        if linear:
            weight_curvature = jax.ops.segment_sum(x2 * counts[rows], cols, num_segments=p)
            curvature = jnp.concatenate([weight_curvature[:, None], factor_curvature], 1)
        mass = prior_precision + inverse_noise * curvature
        gradient = jax.grad(log_target)
        key_momentum, key_accept, key_step = jax.random.split(key, 3)
        eps = step_size * jax.random.uniform(key_step, (), theta.dtype, 0.5, 1.0)
        momentum = jax.random.normal(key_momentum, theta.shape, theta.dtype)
        momentum = momentum * jnp.sqrt(mass) * mask
        energy_now = log_target(theta) - 0.5 * jnp.sum(momentum**2 / mass)

        def leapfrog(carry, _):
            th, m, g = carry
            m = m + 0.5 * eps * g
            th = th + eps * m / mass
            g = gradient(th) * mask
            return (th, m + 0.5 * eps * g, g), None

        start = (theta, momentum, gradient(theta) * mask)
        (proposal, momentum, _), _ = jax.lax.scan(leapfrog, start, None, length=num_leapfrog)
        energy_new = log_target(proposal) - 0.5 * jnp.sum(momentum**2 / mass)
        log_ratio = energy_new - energy_now
        accept = jnp.log(jax.random.uniform(key_accept, (), theta.dtype)) < log_ratio
        jax.debug.callback(
            lambda value: ACCEPTANCE.append(float(value)), jnp.minimum(1.0, jnp.exp(log_ratio))
        )
        new = jnp.where(accept, proposal, theta)
        parts_new = parts(new)
        return new, z - block_part(parts_new, r), r + parts_new[1][index]

    return move


def fit(setting, sweeps: int, seed: int):
    def blocks(name):
        return [RelationBlock(index, matrix) for index, matrix in setting[name]]

    kept = max(1, int(sweeps * 462 / 512))
    start = time.perf_counter()
    model = FMRegressor(rank=setting["rank"], random_state=seed).fit(
        setting["X"], setting["y"], X_rel=blocks("X_rel"), n_iter=sweeps, n_kept_samples=kept,
        group_shapes=setting["group_shapes"],
    )  # fmt: skip
    wall = time.perf_counter() - start
    compiled = model.timings_.get("compile_s", 0.0)
    predicted = model.predict(setting["X_test"], blocks("X_rel_test"))
    rmse = float(np.sqrt(np.mean((predicted - setting["y_test"]) ** 2)))
    return wall - compiled, compiled, rmse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sweeps", type=int, default=60)
    parser.add_argument("--leapfrog", type=int, default=10)
    parser.add_argument("--step-size", type=float, default=0.1)
    parser.add_argument("--skip-peer", action="store_true")
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}, jax {jax.__version__}, {jax.devices()}")
    setting = setting_data("ml100k-extended")
    sweep_module = importlib.import_module("bnpjax.models.fm.gibbs")
    chunked = sweep_module._relation_sweep
    results = {"bnpjax, chunked Gibbs": fit(setting, args.sweeps, 0)}
    sweep_module._relation_sweep = hmc_relation_move(args.leapfrog, args.step_size)
    clear_compile_cache()  # the driver's programs are keyed by the kernel, not by this patch
    try:
        results["bnpjax, HMC block move"] = fit(setting, args.sweeps, 0)
    finally:
        sweep_module._relation_sweep = chunked
    if not args.skip_peer:
        import myfm

        peer_blocks = [myfm.RelationBlock(index, matrix) for index, matrix in setting["X_rel"]]
        start = time.perf_counter()
        peer = myfm.MyFMRegressor(rank=setting["rank"], random_seed=0).fit(
            setting["X"], setting["y"], X_rel=peer_blocks, n_iter=args.sweeps,
            n_kept_samples=max(1, int(args.sweeps * 462 / 512)),
            group_shapes=setting["group_shapes"],
        )  # fmt: skip
        wall = time.perf_counter() - start
        test_blocks = [myfm.RelationBlock(i, m) for i, m in setting["X_rel_test"]]
        predicted = peer.predict(setting["X_test"], test_blocks)
        rmse = float(np.sqrt(np.mean((predicted - setting["y_test"]) ** 2)))
        results["myFM"] = (wall, 0.0, rmse)
    print(f"ML-100K extended, rank {setting['rank']}, {args.sweeps} sweeps, one chain")
    for name, (seconds, compiled, rmse) in results.items():
        print(
            f"  {name:24s} {1e3 * seconds / args.sweeps:7.1f} ms per sweep "
            f"(+ {compiled:.1f} s compiling), test RMSE {rmse:.4f}"
        )
    if ACCEPTANCE:
        half = len(ACCEPTANCE) // 2
        print(
            f"  HMC acceptance: mean {np.mean(ACCEPTANCE):.2f}, second half "
            f"{np.mean(ACCEPTANCE[half:]):.2f}, last 10 {np.mean(ACCEPTANCE[-10:]):.2f}"
        )


if __name__ == "__main__":
    main()
