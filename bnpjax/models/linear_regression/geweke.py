"""The Geweke protocol of the linear regression (one signature in every model): prior draws
of the state, fresh data given the state, and nothing to refresh.

References
----------
Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
*JASA* 99, 799-804.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from bnpjax.models.linear_regression.data import (
    LinearRegressionData,
    LinearRegressionHyper,
    LinearRegressionState,
    make_hyper,
)

__all__ = ["data_sample", "prior_sample", "refresh"]


def _hyper(data, hyper):
    return make_hyper(data.X.shape[1]) if hyper is None else hyper


def prior_sample(
    key, data: LinearRegressionData, hyper: LinearRegressionHyper | None = None, **settings
) -> LinearRegressionState:
    """``(beta, tau)`` from the Normal-Gamma prior (``data`` gives only the sizes)."""
    del settings
    hyper = _hyper(data, hyper)
    key_tau, key_beta = jax.random.split(key)
    # JAX's own sampler: the kernel's draws are checked against an independent one
    tau = jax.random.gamma(key_tau, hyper.a, dtype=jnp.result_type(hyper.b)) / hyper.b
    chol = jnp.linalg.cholesky(hyper.precision)
    z = jax.random.normal(key_beta, hyper.mean.shape, hyper.mean.dtype)
    beta = hyper.mean + solve_triangular(chol.T, z, lower=False) / jnp.sqrt(tau)
    return LinearRegressionState(beta, tau)


def data_sample(
    key,
    state: LinearRegressionState,
    data: LinearRegressionData,
    hyper: LinearRegressionHyper | None = None,
    **settings,
) -> LinearRegressionData:
    """A fresh ``y ~ p(y | beta, tau)`` on the design and mask of ``data``."""
    del hyper, settings
    noise = jax.random.normal(key, data.y.shape, data.y.dtype)
    y = (data.X @ state.beta + noise * jax.lax.rsqrt(state.tau)) * data.mask
    return data._replace(y=y)


def refresh(data: LinearRegressionData, state: LinearRegressionState, **settings):
    """The state unchanged: no state field is derived from the data."""
    del data, settings
    return state
