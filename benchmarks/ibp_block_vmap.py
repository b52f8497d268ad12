"""``IBPGibbs`` with its chains batched by ``vmap``: the cost of a sweep per chain against one
unbatched chain.

Under ``vmap`` a ``lax.cond`` with a per-chain predicate runs both branches for every chain, so
the block's column passes once evaluated the model for every column of the buffer whatever
K+; they now skip, through :func:`bnpjax.ops.apply_if`, the columns no chain uses. The model is
``numpyro_composition.py``'s linear-Gaussian IBP on the bars data (``--num-obs`` images,
``--capacity`` columns), ``Gibbs([(IBPGibbs(model), ["Z", "A"]), (HMC(model), None)])`` with
5 fixed leapfrog steps; after ``--warmup`` sweeps of NumPyro's ``MCMC`` (``chain_method=
jax.vmap``) the kernel's ``sample`` is timed in one compiled loop of 50 sweeps, batched over
``--chains`` chains and for one chain (median of 3 loops each, after a compiling run).

    python benchmarks/ibp_block_vmap.py [--chains 4 --capacity 24]
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.infer import HMC, MCMC, Gibbs
from numpyro_composition import ibp_model

from bnpjax.datasets import synthetic
from bnpjax.infer import IBPGibbs


def loop_ms(sample, state, sweeps: int = 50) -> float:
    loop = jax.jit(lambda s: jax.lax.fori_loop(0, sweeps, lambda i, s: sample(s), s))
    jax.block_until_ready(loop(state))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(loop(state))
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times)) / sweeps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-obs", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=24)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"machine: {platform.platform()}, jax {jax.__version__}, {jax.devices()}")
    X = jnp.asarray(synthetic.bars(0, num_obs=args.num_obs)["X"])
    model = ibp_model(args.capacity)
    hmc = HMC(model, step_size=0.05, num_steps=5, adapt_step_size=False)
    kernel = Gibbs([(IBPGibbs(model), ["Z", "A"]), (hmc, None)])
    mcmc = MCMC(
        kernel, num_warmup=args.warmup, num_samples=1, num_chains=args.chains,
        chain_method=jax.vmap, progress_bar=False,
    )  # fmt: skip
    mcmc.run(jax.random.key(0), X)
    state = mcmc.last_state
    active = (np.asarray(mcmc.get_samples()["Z"]).sum(axis=1) > 0).sum(axis=-1)
    batched = loop_ms(jax.vmap(lambda s: kernel.sample(s, (X,), {})), state)
    first = jax.tree_util.tree_map(lambda leaf: leaf[0], state)
    single = loop_ms(lambda s: kernel.sample(s, (X,), {}), first)
    print(f"bars, {args.num_obs} images, capacity {args.capacity}, K+ per chain {active.tolist()}")
    print(
        f"RESULT ms per sweep: {args.chains} chains under vmap {batched:.2f} "
        f"({batched / args.chains:.2f} per chain), one chain {single:.2f}; "
        f"ratio per chain {batched / args.chains / single:.2f}"
    )


if __name__ == "__main__":
    main()
