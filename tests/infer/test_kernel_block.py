"""KernelBlock: bnpjax samplers as blocks of numpyro.infer.Gibbs.

A Geweke test of ``Gibbs([(ibp_lg.gibbs_block(model), sites), (HMC(model), None)])``: the
collapsed Gibbs sampler of the linear-Gaussian IBP samples ``Z``, ``A``, ``alpha`` and
``sigma_a`` while HMC samples ``sigma_x`` under a log-normal prior, which the bnpjax kernel
does not have. Its broken twin reads the ``sigma_x`` site as a variance.
"""

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from _gibbs_geweke import refresh_blocks, two_block_kernel
from numpyro.infer import HMC, MCMC, NUTS, Gibbs

from bnpjax.models import ibp_lg
from bnpjax.priors.ibp_distribution import IndianBuffetProcess
from bnpjax.testing import geweke_test

ROWS, DIMS, CAPACITY = 6, 3, 16
HYPER = ibp_lg.make_hyper(alpha_prior=(4.0, 4.0), sigma_a_prior=(3.0, 2.0))
SIGMA_X_PRIOR = (-0.5, 0.3)  # log-normal: not the kernel's inverse-gamma


def lg_model(X=None):
    alpha = numpyro.sample("alpha", dist.Gamma(4.0, 4.0))
    Z = numpyro.sample("Z", IndianBuffetProcess(alpha, ROWS, capacity=CAPACITY))
    sigma_a2 = numpyro.sample("sigma_a2", dist.InverseGamma(3.0, 2.0))
    A = numpyro.sample(
        "A", dist.Normal(0.0, jnp.sqrt(sigma_a2)).expand([CAPACITY, DIMS]).to_event(2)
    )
    sigma_x = numpyro.sample("sigma_x", dist.LogNormal(*SIGMA_X_PRIOR))
    numpyro.sample("X", dist.Normal(Z @ A, sigma_x).to_event(2), obs=X)


SITES = {"Z": "Z", "A": "A", "alpha": "alpha", "sigma_a2": lambda s: s.sigma_a**2}


def block(**options):
    return ibp_lg.gibbs_block(lg_model, HYPER, sites=SITES, capacity=CAPACITY, kappa=6, **options)


#: broken twin: reads the sigma_x site as a variance (the kernel holds the noise sd)
AS_VARIANCE = {"sigma_x": lambda values: jnp.sqrt(values["sigma_x"])}


def statistics(v, X):
    m = v["Z"].sum(0)
    return {
        "K+": jnp.sum(m > 0).astype(float),
        "sum Z": jnp.sum(v["Z"]),
        "alpha": v["alpha"],
        "sigma_x^2": v["sigma_x"] ** 2,
        "sigma_a^2": v["sigma_a2"],
        "mean X^2": jnp.mean(X**2),
        "<X, ZA>": jnp.sum(X * (v["Z"] @ v["A"])),
    }


def _geweke(given=None, seed_=0, **sizes):
    """Gibbs.init once on concrete data; prior draws written into copies of its state."""
    kernel_block = block(given=given)
    hmc = HMC(lg_model, step_size=0.1, trajectory_length=0.5, adapt_step_size=False,
              adapt_mass_matrix=False)  # fmt: skip
    gibbs = Gibbs([(kernel_block, kernel_block.sites), (hmc, None)])
    X0 = jnp.ones((ROWS, DIMS))
    template = gibbs.init(jax.random.key(0), 0, None, (X0,), {})
    assert gibbs._sites[1] == ("sigma_x",)
    base = ibp_lg.make_data(np.zeros((ROWS, DIMS)))
    constrain = gibbs.get_constrain_fn((X0,), {})

    def constrained(state):
        return constrain(state.z)

    def prior_sample(key):
        key_state, key_sx, key_run, key_hmc = jax.random.split(key, 4)
        inner = ibp_lg.geweke.prior_sample(  # the block's model: no offset (gibbs_block)
            key_state, base, HYPER, capacity=CAPACITY, sample_sigma_x=False, sample_offset=False
        )
        log_sx = SIGMA_X_PRIOR[0] + SIGMA_X_PRIOR[1] * jax.random.normal(key_sx)
        inner = inner._replace(sigma_x=jnp.exp(log_sx))
        own, hmc_state = template.block_states
        own = own._replace(z=gibbs._kernels[0]._read(inner), sampler_state=inner, rng_key=key_run)
        hmc_state = hmc_state._replace(z={"sigma_x": log_sx}, rng_key=key_hmc)
        return template._replace(
            z={**own.z, "sigma_x": log_sx}, block_states=(own, hmc_state), rng_key=key
        )

    def data_sample(key, state):
        v = constrained(state)
        return v["Z"] @ v["A"] + v["sigma_x"] * jax.random.normal(key, (ROWS, DIMS))

    def refresh(X, state):
        own = state.block_states[0]
        own = own._replace(sampler_state=own.sampler_state._replace(X=X))
        state = state._replace(block_states=(own, state.block_states[1]))
        return refresh_blocks(gibbs, constrained(state), state, X)

    kernel = two_block_kernel(gibbs, lambda block: block.capacity_exceeded)

    return geweke_test(
        jax.random.key(seed_),
        prior_sample=prior_sample,
        data_sample=data_sample,
        kernel=kernel,
        refresh=refresh,
        test_functions=lambda state, X: statistics(constrained(state), X),
        **{"num_marginal": 5000, "num_successive": 1000, "num_chains": 4, "burn_in": 50, **sizes},
    )


@pytest.mark.parametrize("broken", [False, True], ids=["correct", "broken"])
def test_geweke_ibp_lg_block_with_hmc(broken):
    result = _geweke(AS_VARIANCE if broken else None)
    if not broken:
        assert result.passed, str(result)
    else:
        assert not result.passed, str(result)
        assert result.max_abs_z > 2 * result.threshold, str(result)


def test_block_runs_under_mcmc_with_nuts_and_names_bad_sites():
    X = jax.random.normal(jax.random.key(3), (ROWS, DIMS))
    kernel_block = block()
    kernel = Gibbs([(kernel_block, kernel_block.sites), (NUTS(lg_model), None)])
    mcmc = MCMC(kernel, num_warmup=10, num_samples=10, progress_bar=False)
    mcmc.run(jax.random.key(0), X)
    samples = mcmc.get_samples()
    assert samples["Z"].shape == (10, ROWS, CAPACITY) and samples["sigma_x"].shape == (10,)
    # the block holds sigma_x at NUTS's value (NUTS keeps log sigma_x)
    last = mcmc.last_state
    held = last.block_states[0].sampler_state.sigma_x
    assert np.allclose(held, np.exp(last.block_states[1].z["sigma_x"]), rtol=1e-5)
    with pytest.raises(ValueError, match="site 'B' is not a latent site"):
        bad = ibp_lg.gibbs_block(lg_model, HYPER, sites={**SITES, "B": "A"}, capacity=CAPACITY)
        bad.init(jax.random.key(0), 0, None, (X,), {})
    with pytest.raises(ValueError, match="shape"):
        bad = ibp_lg.gibbs_block(lg_model, HYPER, sites=SITES, capacity=CAPACITY + 1)
        bad.init(jax.random.key(0), 0, None, (X,), {})
    with pytest.raises(ValueError, match="given may hold"):
        ibp_lg.gibbs_block(lg_model, given={"noise": "sigma_x"})


def test_fm_block_with_nuts_on_a_half_cauchy_noise_scale():
    from bnpjax.models import fm

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    y = X @ np.array([1.0, -0.5, 0.0, 0.3]) + 0.2 * rng.normal(size=40)

    def fm_model(X, y=None):
        b = numpyro.sample("b", dist.Normal(0.0, 1.0))
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([4]).to_event(1))
        V = numpyro.sample("V", dist.Normal(0.0, 1.0).expand([4, 2]).to_event(2))
        sigma = numpyro.sample("sigma", dist.HalfCauchy(1.0))
        XV = X @ V
        yhat = b + X @ w + 0.5 * jnp.sum(XV**2 - (X**2) @ (V**2), -1)
        numpyro.sample("y", dist.Normal(yhat, sigma).to_event(1), obs=y)

    kernel_block = fm.gibbs_block(fm_model, fm.make_data(X, y, standardize=False), rank=2)
    kernel = Gibbs([(kernel_block, kernel_block.sites), (NUTS(fm_model), None)])
    mcmc = MCMC(kernel, num_warmup=100, num_samples=100, progress_bar=False)
    mcmc.run(jax.random.key(0), jnp.asarray(X), jnp.asarray(y))
    samples = mcmc.get_samples()
    assert samples["V"].shape == (100, 4, 2)
    assert abs(float(samples["w"][:, 0].mean()) - 1.0) < 0.2
    assert 0.1 < float(samples["sigma"].mean()) < 0.4
    # the block holds the noise variance at NUTS's sigma squared (not sigma, not stale: the
    # coarse checks above would pass either way)
    last = mcmc.last_state
    held = last.block_states[0].sampler_state.noise_var
    assert np.allclose(held, np.exp(last.block_states[1].z["sigma"]) ** 2, rtol=1e-5)
    with pytest.raises(ValueError, match="exactly 'noise_var'"):
        fm.gibbs_block(fm_model, fm.make_data(X, y, standardize=False), given={"b": "b"})
