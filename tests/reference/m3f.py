"""Same-draws cases of Gibbs M3F, Gibbs iPM3F and the MAP baseline (tests/test_same_draws.py).

The recorded draws in ``draws/m3f.*.npz`` come from the code before the package split
(commit d831a64, ``bnpjax/models/m3f.py``) with the same data, settings and keys: 3 chains
of 2 warmup + 4 kept sweeps (``m3f.map``: 20 L-BFGS updates from ``jax.random.key(0)``).
Both iPM3F cases start with a buffer of 2 columns and grow it during the run. The two Gibbs
M3F cases were recorded again from this code by ``_record_m3f_gibbs.py`` when the sweep gained
the moves of ``bnpjax.models.m3f.scale`` (their draws changed on purpose).
"""

import jax
import numpy as np

from bnpjax.models import m3f

RENAMED: dict[str, str] = {}


def _data():
    rng = np.random.default_rng(0)
    users, items = np.nonzero(rng.random((6, 5)) < 0.6)
    ratings = rng.integers(1, 4, users.size)
    return m3f.make_data(users, items, ratings, 6, 5, 3, margin=1.0)


TEST = ([0, 1, 5], [4, 0, 2])
REFERENCE = dict(
    item_factors=np.array(
        [[0.9, -0.6, 0.3], [-0.4, 1.0, 0.8], [1.1, 0.5, -0.7], [0.2, 0.3, 0.4], [-1.0, 0.1, 0.6]]
    ),
    feature_counts=[3, 1, 5],
    num_reference_users=6,
)


def _run():
    return dict(
        key=jax.random.key(0), num_samples=4, num_warmup=2, num_chains=3, progress_bar=False
    )


def _hyper():
    return m3f.make_hyper(3, C=1.0, margin=1.0)


def gibbs():
    return m3f.gibbs(_data(), _hyper(), rank=2, test=TEST), _run()


def gibbs_item_bias():
    return m3f.gibbs(_data(), _hyper(), rank=2, test=TEST, item_bias=True), _run()


def _ipm3f(**settings):
    return m3f.ipm3f_gibbs(
        _data(),
        _hyper(),
        alpha=3.0,
        kappa=2,
        capacity=2,
        num_init_features=1,
        test=TEST,
        **settings,
    )


def ipm3f_sequential():
    return _ipm3f(), _run()


def ipm3f_parallel():
    algorithm = _ipm3f(
        feature_step="parallel", alpha_prior=(2.0, 1.0), weight_precision_prior=(4.0, 4.0)
    )
    return algorithm, _run()


def ipm3f_fixed_items():
    return m3f.ipm3f_gibbs(_data(), _hyper(), test=TEST, **REFERENCE), _run()


def map_baseline():
    """A VariationalAlgorithm, run with ``bnpjax.infer.fit_run(algorithm, **run_kwargs)``;
    the recorded keys are ``final/U``, ``final/V``, ``final/theta``. The old code drew the
    start from the key itself, hence ``initial_state``."""
    algorithm = m3f.map_estimate(_data(), rank=2, reg=1.0)
    key = jax.random.key(0)
    run = dict(key=key, num_steps=20, progress_bar=False, initial_state=algorithm.init(key))
    return algorithm, run


CASES = {
    "m3f.gibbs": gibbs,
    "m3f.gibbs_item_bias": gibbs_item_bias,
    "m3f.ipm3f_sequential": ipm3f_sequential,
    "m3f.ipm3f_parallel": ipm3f_parallel,
    "m3f.ipm3f_fixed_items": ipm3f_fixed_items,
    "m3f.map": map_baseline,
}
