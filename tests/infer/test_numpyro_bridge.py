"""NumPyro integration: bnpjax kernels under numpyro.infer.MCMC, and the IBP as a NumPyro
distribution inside NumPyro models."""

import math
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from scipy import stats

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer import NumPyroKernel, mcmc_to_inference_data
from bnpjax.models import ibp_lg, ilfm
from bnpjax.priors import IndianBuffetProcess, capacity_for


def _ibp_algorithm(capacity=16, num_obs=20, **kwargs):
    bars = synthetic.bars(0, num_obs=num_obs)
    # unstandardised: the state's sigma_x is then the traced one (the tests compare them)
    data = ibp_lg.make_data(bars["X"], standardize=False)
    # the collapsed sampler: the bridge is the same for every kernel, and its programs compile
    # in about half the row-parallel sampler's time
    return ibp_lg.collapsed_gibbs(data, capacity=capacity, **kwargs)


def _mcmc(kernel, num_warmup, num_samples, num_chains=2, chain_method="vectorized"):
    return numpyro.infer.MCMC(
        kernel,
        num_warmup=num_warmup,
        num_samples=num_samples,
        num_chains=num_chains,
        chain_method=chain_method,
        progress_bar=False,
    )


# ------------------------------------------------------------------------------------------
# NumPyroKernel


@pytest.fixture(scope="module")
def ibp_run():
    """One compiled NumPyro run (2 chains, 3 warmup + 5 kept steps) shared by the tests that
    only read it: compiling the kernel into NumPyro's loop is most of their time."""
    algorithm = _ibp_algorithm()  # the pointwise log-likelihood is kept by default
    kernel = NumPyroKernel(algorithm, log_likelihood=True)
    mcmc = _mcmc(kernel, 3, 5)
    mcmc.run(jax.random.key(7), extra_fields=("log_likelihood",))
    return algorithm, kernel, mcmc


def test_numpyro_mcmc_draws_the_chains_of_bnpjax_sample(ibp_run):
    # (one chain, or chain_method="sequential", runs the unbatched path that other tests
    # cover)
    algorithm, _, mcmc = ibp_run
    idata = bnpjax.sample(
        algorithm, jax.random.key(7), 5, num_warmup=3, num_chains=2, progress_bar=False
    )
    samples = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    for name in ("Z", "A", "alpha", "sigma_x", "sigma_a"):
        np.testing.assert_allclose(samples[name], idata.posterior[name].values, rtol=1e-6)
    for name in ("lp", "num_features"):
        np.testing.assert_allclose(extra[name], idata.sample_stats[name].values, rtol=1e-6)
    np.testing.assert_allclose(
        extra["log_likelihood"]["X"], idata.log_likelihood["X"].values, rtol=1e-6
    )
    assert not np.any(extra["capacity_exceeded"])
    # the draws move: a bridge that returned its initial state would fail the comparison above
    assert np.ptp(samples["sigma_x"]) > 0


def test_adaptation_is_on_during_warmup_only():
    # ILFM adapts its HMC step size during warmup only (its state's adaptation switch): the
    # bridge must switch it as the driver does
    rng = np.random.default_rng(0)
    Y = (rng.random((1, 8, 8)) < 0.3).astype(float)
    algorithm = ilfm.gibbs(ilfm.make_data(Y), capacity=8, num_leapfrog=3)
    mcmc = _mcmc(NumPyroKernel(algorithm), 4, 3)
    mcmc.run(jax.random.key(1))
    idata = bnpjax.sample(
        algorithm, jax.random.key(1), 3, num_warmup=4, num_chains=2, progress_bar=False
    )
    samples = mcmc.get_samples(group_by_chain=True)
    for name in ("F", "W", "alpha"):
        np.testing.assert_allclose(samples[name], idata.posterior[name].values, rtol=1e-6)
    # the state after warmup has the switch off: a step from it, in any loop, is exact
    split = _mcmc(NumPyroKernel(algorithm), 4, 3)
    split.warmup(jax.random.key(1))
    assert not np.any(np.asarray(split.post_warmup_state.sampler_state.adapting))


def test_warmup_then_run_continues_the_same_chains(ibp_run):
    _, kernel, whole = ibp_run
    split = _mcmc(kernel, 3, 5)
    split.warmup(jax.random.key(7), extra_fields=("log_likelihood",))
    split.run(split.post_warmup_state.rng_key, extra_fields=("log_likelihood",))
    np.testing.assert_array_equal(split.get_samples()["Z"], whole.get_samples()["Z"])
    np.testing.assert_array_equal(split.get_samples()["alpha"], whole.get_samples()["alpha"])


def test_init_params_is_the_samplers_initial_state():
    algorithm = _ibp_algorithm()
    start = algorithm.init(jax.random.key(11))
    mcmc = _mcmc(NumPyroKernel(algorithm), 0, 1, num_chains=1)
    mcmc.run(jax.random.key(3), init_params=start)
    _, run_key = jax.random.split(jax.random.key(3))
    expected, _ = jax.jit(algorithm.step)(jax.random.fold_in(run_key, 0), start)
    np.testing.assert_allclose(mcmc.get_samples()["Z"][0], expected.Z, rtol=1e-6)
    np.testing.assert_allclose(mcmc.get_samples()["sigma_x"][0], expected.sigma_x, rtol=1e-6)


def test_inference_data_from_numpyro_run(ibp_run):
    algorithm, kernel, mcmc = ibp_run
    idata = mcmc_to_inference_data(mcmc)
    assert idata.posterior.sizes["chain"] == 2 and idata.posterior.sizes["draw"] == 5
    assert set(idata.sample_stats.data_vars) >= {"lp", "num_features"}
    assert "X" in idata.log_likelihood
    assert idata.posterior["Z"].dims == ("chain", "draw", *algorithm.spec.dims["Z"])
    assert idata.attrs["kernel"] == algorithm.spec.name
    plain = az.from_numpyro(mcmc, dims=kernel.dims, coords=kernel.coords)
    np.testing.assert_array_equal(plain.posterior["Z"].values, idata.posterior["Z"].values)
    np.testing.assert_array_equal(
        plain.sample_stats["num_features"].values, idata.sample_stats["num_features"].values
    )


def test_a_run_that_outgrows_the_buffer_is_flagged_and_refused():
    # a buffer of 1 and alpha = 10: new features overflow it within a few steps
    algorithm = _ibp_algorithm(capacity=1, num_init_features=1, alpha=10.0, alpha_prior=None)
    mcmc = _mcmc(NumPyroKernel(algorithm), 0, 5, num_chains=1)
    with pytest.warns(RuntimeWarning, match="capacity"):
        mcmc.run(jax.random.key(0))
        jax.block_until_ready(mcmc.get_samples())
    assert np.any(mcmc.get_extra_fields()["capacity_exceeded"])
    with pytest.raises(RuntimeError, match="capacity"):
        mcmc_to_inference_data(mcmc)


def test_bridge_bad_input():
    with pytest.raises(ValueError, match="algorithm"):
        NumPyroKernel(lambda key: key)
    with pytest.raises(ValueError, match="log_likelihood"):  # a truthy string is not True
        NumPyroKernel(_ibp_algorithm(), log_likelihood="no")
    mcmc = _mcmc(NumPyroKernel(_ibp_algorithm()), 1, 1, num_chains=1)
    with pytest.raises(ValueError, match="model arguments"):
        mcmc.run(jax.random.key(0), np.zeros(3))
    with pytest.raises(ValueError, match="not been run"):
        mcmc_to_inference_data(mcmc)
    with pytest.raises(ValueError, match="NumPyroKernel"):
        mcmc_to_inference_data(object())


# ------------------------------------------------------------------------------------------
# IndianBuffetProcess


def _history_counts(Z):
    """(K_10, K_01, K_11): columns of a 2-row matrix by history."""
    Z = np.asarray(Z) > 0
    return (
        int(np.sum(Z[0] & ~Z[1])),
        int(np.sum(~Z[0] & Z[1])),
        int(np.sum(Z[0] & Z[1])),
    )


def _matrix_of(counts, capacity):
    columns = [(1, 0)] * counts[0] + [(0, 1)] * counts[1] + [(1, 1)] * counts[2]
    Z = np.zeros((2, capacity))
    if columns:
        Z[:, : len(columns)] = np.array(columns).T
    return Z


def test_ibp_class_probabilities_on_two_rows():
    # On N = 2 rows the lof-class probability factorises (seed 002's formula with H_2 = 3/2 and
    # (N - m)! (m - 1)! / N! = 1/2 for m = 1 and m = 2) into three independent Poisson(alpha / 2)
    # counts, one per column history: a closed form derived apart from the code.
    alpha, capacity = 1.3, 40
    d = IndianBuffetProcess(alpha, 2, capacity)
    classes = [(a, b, c) for a in range(8) for b in range(8) for c in range(8)]
    exact = np.array([np.prod([stats.poisson.pmf(k, alpha / 2) for k in c]) for c in classes])
    matrices = np.stack([_matrix_of(c, capacity) for c in classes])
    log_p = np.asarray(d.log_prob(matrices))
    np.testing.assert_allclose(np.exp(log_p), exact, rtol=1e-5)
    # column order and padding do not change the class probability
    shuffled = matrices[:, :, ::-1]
    np.testing.assert_allclose(np.asarray(d.log_prob(shuffled)), log_p, rtol=1e-5)
    # and sampling draws the classes with those probabilities (binomial error, Bonferroni)
    num = 20000
    draws = np.asarray(d.sample(jax.random.key(0), (num,)))
    seen = {}
    for Z in draws:
        c = _history_counts(Z)
        seen[c] = seen.get(c, 0) + 1
    frequent = [(c, p) for c, p in zip(classes, exact, strict=True) if p > 0.005]
    z_crit = stats.norm.isf(0.001 / (2 * len(frequent)))
    for c, p in frequent:
        z = (seen.get(c, 0) / num - p) / math.sqrt(p * (1 - p) / num)
        assert abs(z) < z_crit, (c, z)


def test_ibp_sample_moments():
    # K+ ~ Poisson(alpha H_N) and each row holds Poisson(alpha) features (seed 002)
    alpha, N, num = 2.5, 30, 4000
    d = IndianBuffetProcess(alpha, N)
    Z = np.asarray(d.sample(jax.random.key(1), (num,)))
    assert Z.shape == (num, N, d.capacity)
    H = np.sum(1.0 / np.arange(1, N + 1))
    k_plus = (Z.sum(1) > 0).sum(1)
    assert abs(k_plus.mean() - alpha * H) / math.sqrt(alpha * H / num) < 4.0
    row_sums = Z.sum(2)[:, 0]  # the first customer: Poisson(alpha) dishes
    assert abs(row_sums.mean() - alpha) / math.sqrt(alpha / num) < 4.0
    # a batch of alphas gives independent matrices of the matching sizes
    batch = IndianBuffetProcess(jnp.array([0.5, 4.0]), N, 60)
    k_batch = (np.asarray(batch.sample(jax.random.key(2), (num,))).sum(2) > 0).sum(2)
    for j, a in enumerate((0.5, 4.0)):
        assert abs(k_batch[:, j].mean() - a * H) / math.sqrt(a * H / num) < 4.0
    assert batch.log_prob(np.zeros((3, 2, N, 5))).shape == (3, 2)


def test_nuts_recovers_the_conjugate_alpha_posterior():
    # alpha ~ Gamma(2, rate 1), Z | alpha ~ IBP(alpha): alpha | Z ~ Gamma(2 + K+, 1 + H_N)
    # (seed 002, last equation). NUTS through IndianBuffetProcess.log_prob must agree within
    # Monte Carlo error.
    N = 50
    Z = IndianBuffetProcess(3.0, N).sample(jax.random.key(5))
    k_plus = int((np.asarray(Z).sum(0) > 0).sum())
    shape, rate = 2.0 + k_plus, 1.0 + np.sum(1.0 / np.arange(1, N + 1))

    def model(Z):
        alpha = numpyro.sample("alpha", dist.Gamma(2.0, 1.0))
        numpyro.sample("Z", IndianBuffetProcess(alpha, *Z.shape), obs=Z)

    mcmc = numpyro.infer.MCMC(
        numpyro.infer.NUTS(model), num_warmup=500, num_samples=2000, progress_bar=False
    )
    mcmc.run(jax.random.key(2), Z)
    alpha = np.asarray(mcmc.get_samples()["alpha"])
    ess = float(numpyro.diagnostics.effective_sample_size(alpha[None]))
    assert ess > 200
    sd = math.sqrt(shape) / rate
    assert abs(alpha.mean() - shape / rate) < 4.0 * sd / math.sqrt(ess)
    # the sd of a sample sd is about sd / sqrt(2 ESS)
    assert abs(alpha.std() - sd) < 4.0 * sd / math.sqrt(2 * ess)


def test_capacity_for_is_the_poisson_quantile():
    for alpha, N in ((0.5, 10), (3.0, 100), (20.0, 1000)):
        rate = alpha * np.sum(1.0 / np.arange(1, N + 1))
        c = capacity_for(alpha, N, tail=1e-6)
        assert stats.poisson.sf(c, rate) <= 1e-6 < stats.poisson.sf(c - 1, rate)


def test_overflowing_draw_warns():
    with pytest.warns(RuntimeWarning, match="buffer holds 2"):
        jax.block_until_ready(IndianBuffetProcess(5.0, 20, 2).sample(jax.random.key(0)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.block_until_ready(IndianBuffetProcess(5.0, 20).sample(jax.random.key(0)))


def test_ibp_distribution_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        IndianBuffetProcess(-1.0, 5)
    with pytest.raises(ValueError, match="alpha"):
        IndianBuffetProcess(jnp.array([1.0, np.nan]), 5, 10)
    with pytest.raises(ValueError, match="num_rows"):
        IndianBuffetProcess(1.0, 2.5)
    with pytest.raises(ValueError, match="capacity"):
        IndianBuffetProcess(1.0, 5, 0)
    with pytest.raises(ValueError, match="form"):
        IndianBuffetProcess(1.0, 5, form="ordered")
    for not_a_number in ("a", True):
        with pytest.raises(ValueError, match="alpha must be a positive number"):
            IndianBuffetProcess(not_a_number, 5)
    d = IndianBuffetProcess(1.0, 5)
    with pytest.raises(ValueError, match="key must be"):
        d.sample(0)  # an integer seed is no key
    with pytest.raises(ValueError, match="binary"):
        d.log_prob(np.full((5, 3), 0.5))
    with pytest.raises(ValueError, match="shape"):
        d.log_prob(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="alpha"):
        capacity_for(0.0, 5)
