"""The Geweke harness passes on the reference Gibbs kernel and fails on a broken twin."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnpjax.infer import bind
from bnpjax.models import linear_regression as lr
from bnpjax.testing import geweke_test

PRIOR = lr.make_prior(2, mean=0.3, precision=[1.0, 2.0], a=3.0, b=2.0)
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


def _broken_step(data, prior, pieces, key, state):
    """The reference step with one slip: the Gamma shape forgets the p/2 of beta's prior."""
    key_beta, key_tau = jax.random.split(key)
    beta = lr.sample_beta(key_beta, pieces, state.tau)
    shape, rate = lr.tau_conditional(data, prior, pieces, beta)
    tau = jax.random.gamma(key_tau, shape - 0.5 * beta.shape[0]) / rate
    return lr.LinearRegressionState(beta, tau), lr.GibbsInfo(lp=jnp.zeros(()))


def _broken_kernel(data):
    pieces = lr._conditional_pieces(data, PRIOR)
    return lr.gibbs(data, prior=PRIOR)._replace(step=bind(_broken_step, data, PRIOR, pieces))


def _run(kernel, seed):
    return geweke_test(
        jax.random.key(seed),
        prior_sample=lambda key: lr.prior_sample(key, PRIOR),
        data_sample=lambda key, state: lr.data_sample(key, state, BASE),
        kernel=kernel,
        test_functions=statistics,
        num_marginal=20_000,
        num_successive=5_000,
        num_chains=4,
    )


def test_geweke_passes_on_reference_gibbs():
    result = _run(lambda data: lr.gibbs(data, prior=PRIOR), seed=1)
    assert result.passed, str(result)
    assert set(result.z) == {"beta0", "beta1", "tau", "beta0^2", "beta.X'y", "tau*y^2"}


def test_geweke_fails_on_broken_gibbs():
    result = _run(_broken_kernel, seed=1)
    assert not result.passed, str(result)
    # not a marginal call: the slip is caught by a wide margin
    assert result.max_abs_z > 3 * result.threshold, str(result)


def test_geweke_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_successive"):
        geweke_test(
            jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, num_successive=1
        )
    with pytest.raises(ValueError, match="level"):
        geweke_test(jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, level=1.5)
