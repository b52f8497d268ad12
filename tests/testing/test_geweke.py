"""The Geweke harness refuses bad settings (the kernels' cases are in tests/geweke_cases)."""

import jax
import jax.numpy as jnp
import pytest

from bnpjax.testing import exact_start_test, geweke_test


def test_geweke_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_successive"):
        geweke_test(
            jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, num_successive=1
        )
    with pytest.raises(ValueError, match="level"):
        geweke_test(jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, level=1.5)


# --------------------------------------------------------------------------------------------
# the exact-start test on a conjugate normal model: theta ~ N(0, 1), y | theta ~ N(theta, 1)


def _normal_kernel(prior_precision):
    """Random-walk Metropolis on theta given y; ``prior_precision`` 1 is the model's, anything
    else a twin that sees the wrong prior."""
    from bnpjax.infer import SamplingAlgorithm

    def kernel(y):
        def log_target(theta):
            return -0.5 * prior_precision * theta**2 - 0.5 * (y - theta) ** 2

        def step(key, theta):
            k_prop, k_acc = jax.random.split(key)
            proposal = theta + 0.8 * jax.random.normal(k_prop)
            accept = jnp.log(jax.random.uniform(k_acc)) < log_target(proposal) - log_target(theta)
            return jnp.where(accept, proposal, theta), None

        return SamplingAlgorithm(init=None, step=step)

    return kernel


def _exact_start(prior_precision, seed):
    return exact_start_test(
        jax.random.key(seed),
        prior_sample=lambda key: jax.random.normal(key),
        data_sample=lambda key, theta: theta + jax.random.normal(key),
        kernel=_normal_kernel(prior_precision),
        test_functions=lambda theta, y: {"theta^2": theta**2, "theta y": theta * y},
        num_chains=4000,
        num_steps=10,
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_exact_start_passes_an_exact_kernel(seed):
    result = _exact_start(1.0, seed)
    assert result.passed, str(result)


def test_exact_start_fails_a_kernel_with_the_wrong_prior():
    # the twin's stationary variance of theta given y is 1 instead of 1/2: a slip of this size
    # must move E[theta^2] by many standard errors within 10 steps
    result = _exact_start(0.0, 0)
    assert not result.passed and result.max_abs_z > 2 * result.threshold, str(result)


def test_exact_start_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_chains"):
        exact_start_test(
            jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, num_chains=1
        )
    with pytest.raises(ValueError, match="num_steps"):
        exact_start_test(
            jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, num_steps=0
        )


# --------------------------------------------------------------------------------------------
# the ESS floor: a kernel that hardly moves cannot pass for want of evidence


def _successive(step_scale, num_successive=400):
    from bnpjax.infer import SamplingAlgorithm

    def kernel(y):
        def log_target(theta):
            return -0.5 * theta**2 - 0.5 * (y - theta) ** 2

        def step(key, theta):
            k_prop, k_acc = jax.random.split(key)
            proposal = theta + step_scale * jax.random.normal(k_prop)
            accept = jnp.log(jax.random.uniform(k_acc)) < log_target(proposal) - log_target(theta)
            return jnp.where(accept, proposal, theta), None

        return SamplingAlgorithm(init=None, step=step)

    return geweke_test(
        jax.random.key(3),
        prior_sample=lambda key: jax.random.normal(key),
        data_sample=lambda key, theta: theta + jax.random.normal(key),
        kernel=kernel,
        test_functions=lambda theta, y: {"theta": theta, "theta y": theta * y},
        num_marginal=4000,
        num_successive=num_successive,
        num_chains=4,
        burn_in=0,
    )


def test_a_kernel_that_hardly_moves_is_not_passed():
    # an exact kernel with steps of 0.002 (the posterior's sd is 0.7): its z-scores stay
    # small because its ESS is tiny; the floor turns that into "not passed", and says why
    sticky = _successive(0.002)
    assert sticky.max_abs_z < sticky.threshold, str(sticky)  # what passed before the floor
    assert sticky.too_few_draws and not sticky.passed, str(sticky)
    assert "ESS below 100" in str(sticky)
    moving = _successive(1.0)
    assert moving.passed and not moving.too_few_draws, str(moving)


def test_min_ess_is_checked():
    with pytest.raises(ValueError, match="min_ess"):
        geweke_test(jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, min_ess=-1)
