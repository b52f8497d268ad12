"""Same-draws reference of the linear regression kernel: the draws in
``draws/linear_regression.gibbs.npz`` were recorded with the code before issue 21 (d831a64)
on this data and these settings."""

import jax
import numpy as np

from bnpjax.models import linear_regression as lr


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(8, 2))
    y = X @ np.array([0.5, -1.0]) + 0.3 * rng.normal(size=8)
    mask = np.ones(8, bool)
    mask[[1, 5]] = False
    y[1] = np.nan
    return lr.make_data(X, y, mask)


def _gibbs():
    hyper = lr.make_hyper(2, mean=0.3, precision=[1.0, 2.0], a=3.0, b=2.0)
    algorithm = lr.gibbs(_data(), hyper)
    return algorithm, dict(
        key=jax.random.key(0), num_samples=4, num_warmup=2, num_chains=3, progress_bar=False
    )


CASES = {"linear_regression.gibbs": _gibbs}
RENAMED = {}
