"""The ILFM sweep of ``bnpjax demo ilfm``: milliseconds a sweep, batched by ``vmap`` over
replicas (the demo runs 2 chains x 4 temperatures on each of two devices) and for one chain,
with parts of the kernel switched off to show where the time goes.

The data and kernel settings are the demo's (40 entities, 3 relations, 3 planted features;
``kappa=5``, the demo's leapfrog steps and merge-split moves, Laplace births, capacity 8, the
start from 2 k-means clusters). Each case compiles a loop of ``--sweeps`` sweeps, runs it once, then
times it ``--repeats`` times and prints the median.

    python benchmarks/ilfm_sweep.py [--replicas 8 --sweeps 50 --repeats 3]
"""

from __future__ import annotations

import argparse
import platform
import time

import jax
import numpy as np

from bnpjax.cli import ilfm as demo
from bnpjax.datasets import planted_relations
from bnpjax.infer import programs
from bnpjax.models import ilfm

DEMO = dict(
    kappa=5, num_leapfrog=demo.DEMO_LEAPFROG, merge_split=demo.DEMO_MERGE_SPLIT, birth="laplace"
)
CASES = {
    "demo kernel": {},
    "no merge-split": dict(merge_split=0),
    "1 leapfrog step": dict(num_leapfrog=1),
    "births from the prior": dict(birth="prior"),
}


def time_case(data, hyper, settings, replicas, sweeps, repeats):
    step = ilfm.build_step(**settings)
    keys = jax.random.split(jax.random.key(0), replicas)
    states = jax.vmap(
        lambda k: ilfm.init(
            k, data, hyper, capacity=8, init_strategy="cluster", num_init_features=2
        )
    )(keys)

    @programs.jit  # the driver's XLA options
    def many(states, key):
        def body(t, s):
            ks = jax.random.split(jax.random.fold_in(key, t), replicas)
            return jax.vmap(lambda k, st: step(k, st, data, hyper)[0])(ks, s)

        return jax.lax.fori_loop(0, sweeps, body, states)

    states = jax.block_until_ready(many(states, jax.random.key(1)))
    times = []
    for r in range(repeats):
        start = time.perf_counter()
        states = jax.block_until_ready(many(states, jax.random.key(r + 2)))
        times.append(time.perf_counter() - start)
    return float(np.median(times)) / sweeps * 1e3


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--sweeps", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    sim = planted_relations(0, num_entities=40, num_relations=3)
    data = ilfm.make_data(sim["Y"], mask=~sim["heldout"])
    hyper = ilfm.make_hyper()
    print(f"{platform.machine()} {jax.devices()[0].device_kind}, jax {jax.__version__}")
    print(f"{'case':24s} {args.replicas:>3d} replicas   1 chain   (ms a sweep)")
    for name, change in CASES.items():
        settings = {**DEMO, **change}
        many = time_case(data, hyper, settings, args.replicas, args.sweeps, args.repeats)
        one = time_case(data, hyper, settings, 1, args.sweeps, args.repeats)
        print(f"{name:24s} {many:12.2f} {one:9.2f}", flush=True)


if __name__ == "__main__":
    main()
