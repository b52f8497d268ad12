"""Overhead of the bnpjax driver over a bare ``lax.scan`` running the same trivial kernel.

Both sides run a random-walk Metropolis step on a standard normal for ``--steps`` steps, one
chain, per-step keys by ``fold_in`` and the draws brought back to host memory. bnpjax runs
``bnpjax.sample`` with its progress bar and builds the InferenceData. Compilation is excluded
from both (each is run once before timing; the driver's compiled programs are cached), and the
median over ``--repeats`` runs is reported.

    python benchmarks/driver_overhead.py            # prints per-side medians and `ratio: X`
"""

from __future__ import annotations

import argparse
import io
import platform
import statistics
import time
from contextlib import redirect_stderr
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import bnpjax
from bnpjax.infer import SamplingAlgorithm


class RWState(NamedTuple):
    x: jax.Array


class RWInfo(NamedTuple):
    acceptance_rate: jax.Array


def init(key):
    return RWState(jnp.zeros(()))


def step(key, state):
    key_prop, key_acc = jax.random.split(key)
    proposal = state.x + 0.8 * jax.random.normal(key_prop)
    log_ratio = 0.5 * (state.x**2 - proposal**2)
    accept = jnp.log(jax.random.uniform(key_acc)) < log_ratio
    return RWState(jnp.where(accept, proposal, state.x)), RWInfo(
        jnp.minimum(1.0, jnp.exp(log_ratio))
    )


def bare_scan(num_steps: int):
    @jax.jit
    def run(key):
        def body(state, t):
            state, info = step(jax.random.fold_in(key, t), state)
            return state, (state.x, info.acceptance_rate)

        return jax.lax.scan(body, init(key), jnp.arange(num_steps))[1]

    return run


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    key = jax.random.key(0)
    scan = bare_scan(args.steps)
    jax.device_get(scan(key))  # compile

    algorithm = SamplingAlgorithm(init=init, step=step)

    def with_driver():
        with redirect_stderr(io.StringIO()):  # the bar is drawn, just not shown here
            return bnpjax.sample(algorithm, key, args.steps, progress_bar=True)

    idata = with_driver()  # compile
    bare_draws = np.asarray(jax.device_get(scan(key))[0])
    driver_draws = idata.posterior["x"].values[0]
    # same kernel, different key derivation (the driver splits per chain): compare moments
    assert abs(driver_draws.mean() - bare_draws.mean()) < 0.1

    t_bare = median_time(lambda: jax.device_get(scan(key)), args.repeats)
    t_driver = median_time(with_driver, args.repeats)
    print(
        f"date: {time.strftime('%Y-%m-%d')}, machine: {platform.machine()} "
        f"{jax.devices()[0].platform} ({jax.device_count()} device), jax {jax.__version__}"
    )
    print(f"steps: {args.steps}, repeats: {args.repeats} (medians, compile excluded)")
    print(f"bare lax.scan: {t_bare * 1e3:.1f} ms")
    print(f"bnpjax.sample (progress bar, InferenceData): {t_driver * 1e3:.1f} ms")
    print(f"ratio: {t_driver / t_bare:.3f}")


if __name__ == "__main__":
    main()
