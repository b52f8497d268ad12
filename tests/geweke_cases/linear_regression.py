"""Geweke case of the linear regression's Gibbs kernel, and its broken twin: the reference
step with one slip, the Gamma shape of ``tau | beta, y`` forgetting the ``p / 2`` of beta's
prior."""

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer import bind
from bnpjax.models import linear_regression as lr
from bnpjax.models.linear_regression import geweke
from bnpjax.models.linear_regression.conditionals import (
    _conditional_pieces,
    sample_beta,
    tau_conditional,
)
from bnpjax.models.linear_regression.gibbs import GibbsInfo
from bnpjax.testing import GewekeCase

HYPER = lr.make_hyper(2, mean=0.3, precision=[1.0, 2.0], a=3.0, b=2.0)
BASE = lr.make_data(np.random.default_rng(0).normal(size=(6, 2)), np.zeros(6))


def statistics(state, data):
    # functions of parameters and data together are the sensitive ones
    return {
        "beta0": state.beta[0],
        "beta1": state.beta[1],
        "tau": state.tau,
        "beta0^2": state.beta[0] ** 2,
        "beta.X'y": state.beta @ (data.X.T @ data.y),
        "tau*y^2": state.tau * jnp.mean(data.y**2),
    }


def _broken_step(data, hyper, pieces, key, state):
    key_beta, key_tau = jax.random.split(key)
    beta = sample_beta(key_beta, pieces, state.tau)
    shape, rate = tau_conditional(data, hyper, pieces, beta)
    tau = jax.random.gamma(key_tau, shape - 0.5 * beta.shape[0]) / rate
    return lr.LinearRegressionState(beta, tau), GibbsInfo(lp=jnp.zeros(()))


def broken_gibbs(data, hyper=None):
    pieces = _conditional_pieces(data, hyper)
    return lr.gibbs(data, hyper)._replace(step=bind(_broken_step, data, hyper, pieces))


CASES = [
    GewekeCase(
        name="linear_regression.gibbs",
        module=geweke,
        factory=lr.gibbs,
        data=BASE,
        hyper=HYPER,
        statistics=statistics,
        broken_factory=broken_gibbs,
        num_marginal=20_000,
        num_successive=5_000,
        num_chains=4,
        seed=1,
    )
]
