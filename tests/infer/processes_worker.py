"""One process of a two-process FM fit (tests/infer/test_sharding.py): with ``jax.distributed``
over localhost and CPU collectives, the two processes run the chains of one FM fit together,
one chain each; process 0 writes the kept draws to ``out``."""

import sys

import jax

process_id, num_processes, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
if num_processes > 1:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"localhost:{port}", num_processes, process_id)

import numpy as np  # noqa: E402

from bnpjax.infer import make_mesh  # noqa: E402
from bnpjax.infer.driver import run  # noqa: E402
from bnpjax.models import fm  # noqa: E402


def design(seed=0, n=60):
    rng = np.random.default_rng(seed)
    X = np.zeros((n, 9))
    X[np.arange(n), rng.integers(0, 4, n)] = 1.0
    X[np.arange(n), 4 + rng.integers(0, 5, n)] = 1.0
    return X, rng.normal(size=n)


X, y = design()
kernel = fm.gibbs(fm.make_data(X, y), rank=2)
devices = make_mesh(num_processes) if num_processes > 1 else None
result = run(
    kernel, jax.random.key(0), 6, num_chains=2, num_warmup=4, chunk_size=5,
    progress_bar=False, devices=devices,
)  # fmt: skip
if process_id == 0:
    np.savez(out, **{f"{g}/{v}": a for g, d in result.trace.items() for v, a in d.items()})
