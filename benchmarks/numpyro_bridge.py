"""The cost of running a bnpjax kernel under ``numpyro.infer.MCMC`` instead of ``bnpjax.sample``.

Both sides run the same kernel, the IBP linear-Gaussian model's collapsed Gibbs sampler
(``ibp_lg.collapsed_gibbs``, every hyperparameter sampled, a buffer of ``--capacity`` features)
on the bars data (``--num-obs`` images of 36 pixels), ``--chains`` chains vmapped
(``chain_method="vectorized"`` for NumPyro), ``--warmup`` + ``--samples`` steps, no progress
bar, the draws brought to host memory. The first run of each side includes compilation; the
median over ``--repeats`` further runs with fresh keys (same shapes: nothing recompiles) is the
run time. The two sides draw the same chains for the same key (checked and printed).

    python benchmarks/numpyro_bridge.py      # prints both sides and `ratio (numpyro / bnpjax)`
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import numpy as np
import numpyro

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer import NumPyroKernel
from bnpjax.models import ibp_lg


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-obs", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=32)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"machine: {platform.platform()}, jax devices {jax.devices()}")
    print(f"bnpjax {bnpjax.__version__}, jax {jax.__version__}, numpyro {numpyro.__version__}")
    data = ibp_lg.make_data(synthetic.bars(0, num_obs=args.num_obs)["X"])
    # the pointwise log-likelihood (on by default since issue 21) stays off, as in the runs
    # recorded in the README: NumPyro's side does not keep it either
    algorithm = ibp_lg.collapsed_gibbs(data, capacity=args.capacity, pointwise_log_likelihood=False)
    kernel = NumPyroKernel(algorithm)
    mcmc = numpyro.infer.MCMC(
        kernel,
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_chains=args.chains,
        chain_method="vectorized",
        progress_bar=False,
    )

    def run_bnpjax(seed):
        idata = bnpjax.sample(
            algorithm,
            jax.random.key(seed),
            args.samples,
            num_warmup=args.warmup,
            num_chains=args.chains,
            progress_bar=False,
        )
        return idata.posterior["Z"].values

    def run_numpyro(seed):
        mcmc.run(jax.random.key(seed))
        return np.asarray(mcmc.get_samples(group_by_chain=True)["Z"])

    results = {}
    for name, fn in (("bnpjax.sample", run_bnpjax), ("numpyro MCMC", run_numpyro)):
        start = time.perf_counter()
        first = fn(0)
        first_s = time.perf_counter() - start
        times = []
        for seed in range(1, args.repeats + 1):
            start = time.perf_counter()
            fn(seed)
            times.append(time.perf_counter() - start)
        results[name] = (first, first_s, statistics.median(times))
        steps = args.chains * (args.warmup + args.samples)
        print(
            f"{name}: first run (with compile) {first_s:.2f} s, then median {results[name][2]:.2f}"
            f" s over {args.repeats} runs ({1e3 * results[name][2] / steps:.2f} ms per chain-step)"
        )
    same = np.array_equal(results["bnpjax.sample"][0], results["numpyro MCMC"][0])
    print(f"same chains for the same key: {same}")
    bnp, npy = results["bnpjax.sample"], results["numpyro MCMC"]
    print(f"ratio (numpyro / bnpjax), run time: {npy[2] / bnp[2]:.2f}")
    print(f"ratio (numpyro / bnpjax), first run: {npy[1] / bnp[1]:.2f}")


if __name__ == "__main__":
    main()
