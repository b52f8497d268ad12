# ruff: noqa: E402  (a one-off script: the environment is set before jax is imported)
"""Record the draws of the code before the restructuring (commit d831a64) for
tests/reference/m3f.py: ``cd <checkout of d831a64> && PYTHONPATH=. python
<this repo>/tests/reference/_record_m3f.py``."""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ["XLA_FLAGS"] = "--xla_backend_optimization_level=1"
import jax

jax.config.update("jax_enable_x64", True)
import numpy as np

from bnpjax.infer import run
from bnpjax.models import m3f

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "draws")


def pairs():
    rng = np.random.default_rng(0)
    users, items = np.nonzero(rng.random((6, 5)) < 0.6)
    ratings = rng.integers(1, 4, users.size)
    return users, items, ratings


users, items, ratings = pairs()
print(users.size)
DATA = m3f.make_data(users, items, ratings, 6, 5, 3, margin=1.0)
HYPER = m3f.make_hyper(3, C=1.0, margin=1.0)
TEST = ([0, 1, 5], [4, 0, 2])
REF = dict(
    item_factors=np.array(
        [[0.9, -0.6, 0.3], [-0.4, 1.0, 0.8], [1.1, 0.5, -0.7], [0.2, 0.3, 0.4], [-1.0, 0.1, 0.6]]
    ),
    feature_counts=[3, 1, 5],
    num_reference_users=6,
)
RUN = dict(num_samples=4, num_warmup=2, num_chains=3, progress_bar=False)

cases = {
    "m3f.gibbs": m3f.gibbs(DATA, rank=2, hyper=HYPER, test=TEST),
    "m3f.gibbs_item_bias": m3f.gibbs(DATA, rank=2, hyper=HYPER, test=TEST, item_bias=True),
    "m3f.ipm3f_sequential": m3f.ipm3f_gibbs(
        DATA, hyper=HYPER, alpha=3.0, kappa=2, capacity=2, num_init_features=1, test=TEST
    ),
    "m3f.ipm3f_parallel": m3f.ipm3f_gibbs(
        DATA,
        hyper=HYPER,
        alpha=3.0,
        kappa=2,
        capacity=2,
        num_init_features=1,
        test=TEST,
        feature_step="parallel",
        alpha_prior=(2.0, 1.0),
        weight_precision_prior=(4.0, 4.0),
    ),
    "m3f.ipm3f_fixed_items": m3f.ipm3f_gibbs(DATA, hyper=HYPER, test=TEST, **REF),
}
for name, alg in cases.items():
    res = run(alg, jax.random.key(0), **RUN)
    out = {f"{g}/{k}": np.asarray(v) for g, d in res.trace.items() for k, v in d.items()}
    out.update({f"final/{k}": np.asarray(v) for k, v in res.final_state._asdict().items()})
    print(name, res.settings.get("capacity"), res.settings.get("num_resizes"), sorted(out))
    np.savez_compressed(f"{OUT}/{name}.npz", **out)
U, V, theta, obj = m3f.fit_map(DATA, rank=2, reg=1.0, max_iter=20, seed=0)
np.savez_compressed(
    f"{OUT}/m3f.map.npz",
    **{"final/U": np.asarray(U), "final/V": np.asarray(V), "final/theta": np.asarray(theta)},
)
print("map", float(obj))
