"""Replica exchange: the cold rung samples the posterior where its own kernel cannot cross
between modes; a twin with a wrong swap ratio fails the same comparison; bad ladders."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

import bnpjax
from bnpjax.infer import clear_compile_cache, tempering
from bnpjax.infer.base import bind

# prior N(0, 3^2); a likelihood with two narrow modes of weights 0.3 and 0.7: the random walk
# below never crosses between them at temperature one (the valley is ~50 nats deep)
PRIOR_SD, MODE, MODE_SD, WEIGHT = 3.0, 3.0, 0.3, 0.7
LADDER = tempering.geometric_temperatures(8, 0.02)


def _log_likelihood(theta):
    lo = jnp.log1p(-WEIGHT) + jax.scipy.stats.norm.logpdf(theta, -MODE, MODE_SD)
    hi = jnp.log(WEIGHT) + jax.scipy.stats.norm.logpdf(theta, MODE, MODE_SD)
    return jnp.logaddexp(lo, hi)


def _init(key):
    return PRIOR_SD * jax.random.normal(key, ())


def _step(key, theta, beta):
    def log_target(x):
        return jax.scipy.stats.norm.logpdf(x, 0.0, PRIOR_SD) + beta * _log_likelihood(x)

    def one(carry, k):
        x, taken = carry
        k_move, k_u = jax.random.split(k)
        proposal = x + 0.4 * jax.random.normal(k_move, ())
        take = jnp.log(jax.random.uniform(k_u, ())) < log_target(proposal) - log_target(x)
        return (jnp.where(take, proposal, x), taken + take), None

    (theta, taken), _ = jax.lax.scan(one, (theta, 0), jax.random.split(key, 5))
    return theta, {"acceptance_rate": taken / 5}


def _algorithm(ladder=LADDER):
    kernel = tempering.TemperedKernel(
        init=bind(_init), step=bind(_step), log_likelihood=bind(_log_likelihood)
    )
    return tempering.replica_exchange(kernel, ladder)


def _exact():
    """P(theta > 0) and E[theta] of the cold posterior by quadrature."""
    grid = np.linspace(-12, 12, 240_001)
    log_density = stats.norm.logpdf(grid, 0, PRIOR_SD) + np.asarray(_log_likelihood(grid))
    density = np.exp(log_density - log_density.max())
    density /= density.sum()
    return float(density[grid > 0].sum()), float((density * grid).sum())


def _z_scores(num_chains=32, num_samples=600):
    idata = bnpjax.sample(
        _algorithm(),
        jax.random.key(3),
        num_samples,
        num_warmup=100,
        num_chains=num_chains,
        progress_bar=False,
        check_convergence=False,
    )
    theta = idata.posterior["value"].values  # (chain, draw)
    positive, mean = _exact()
    scores = []
    for values, truth in ((theta > 0, positive), (theta, mean)):
        per_chain = values.mean(1)  # chains are independent: their means give the MCSE
        mcse = per_chain.std(ddof=1) / np.sqrt(num_chains)
        scores.append((per_chain.mean() - truth) / mcse)
    return np.array(scores), idata


def test_cold_rung_matches_quadrature():
    z, idata = _z_scores()
    assert np.all(np.abs(z) < 4), z
    swaps = idata.sample_stats["swap_acceptance"].values
    assert swaps.shape[-1] == len(LADDER) - 1
    assert np.all(swaps.mean((0, 1)) > 0.05)  # every rung exchanges with its neighbours


def test_without_swaps_the_cold_kernel_does_not_cross():
    # the premise: alone, the cold kernel keeps each chain in its starting mode
    algorithm = _algorithm()
    states = jax.vmap(algorithm.init)(jax.random.split(jax.random.key(0), 16))
    cold = states.replicas[:, 0]
    keys = jax.random.split(jax.random.key(1), 400)

    def run(theta):
        def body(x, k):
            x, _ = _step(k, x, 1.0)
            return x, x > 0

        return jax.lax.scan(body, theta, keys)[1]

    signs = jax.vmap(run)(cold)
    assert bool(jnp.all(signs == signs[:, :1]))


def test_broken_swap_ratio_fails(monkeypatch):
    # a twin that swaps with the ratio of the log-likelihoods alone (temperature gap dropped)
    def wrong(betas, ll):
        return ll[1:] - ll[:-1]

    monkeypatch.setattr(tempering, "_log_swap_ratio", wrong)
    clear_compile_cache()  # the twin must be traced afresh, and not kept for other tests
    try:
        z, _ = _z_scores()
    finally:
        clear_compile_cache()
    assert np.max(np.abs(z)) > 8, z  # twice the passing bound


@pytest.mark.parametrize(
    "ladder, message",
    [
        ((1.0,), "at least two"),
        ((0.9, 0.5), "start at 1"),
        ((1.0, 0.5, 0.7), "decrease strictly"),
        ((1.0, 0.0), "positive"),
        ("hot", "sequence of numbers"),
    ],
)
def test_bad_ladders(ladder, message):
    with pytest.raises(ValueError, match=message):
        _algorithm(ladder)


def test_geometric_temperatures():
    ladder = tempering.geometric_temperatures(4, 0.125)
    np.testing.assert_allclose(ladder, (1.0, 0.5, 0.25, 0.125))
    with pytest.raises(ValueError, match="num"):
        tempering.geometric_temperatures(1, 0.5)
    with pytest.raises(ValueError, match="hottest"):
        tempering.geometric_temperatures(3, 1.5)


def test_checkpoint_and_resume_continue_every_rung(tmp_path):
    """A replica-exchange run resumed from its checkpoint is the uninterrupted run: the state
    of every rung, not only the kept one, is saved."""
    from bnpjax.infer import load_checkpoint, resume

    algorithm, key = _algorithm(), jax.random.key(5)
    whole = bnpjax.sample(algorithm, key, 12, num_warmup=4, num_chains=2, progress_bar=False,
                          check_convergence=False)  # fmt: skip
    path = tmp_path / "tempered.npz"
    bnpjax.sample(algorithm, key, 4, num_warmup=4, num_chains=2, progress_bar=False,
                  chunk_size=4, checkpoint_path=path, check_convergence=False)  # fmt: skip
    rest = resume(load_checkpoint(path, algorithm), 8, progress_bar=False, check_convergence=False)
    for group in ("posterior", "sample_stats"):
        name = "value" if group == "posterior" else "swap_acceptance"
        np.testing.assert_array_equal(rest[group][name].values, whole[group][name].values)


def _step_reporting_its_state(key, theta, beta):
    theta, info = _step(key, theta, beta)
    return theta, {**info, "where": theta}  # a statistic of the state the move left


def test_a_draws_statistics_describe_that_draw():
    """The statistics recorded with a draw (a model's log joint, its number of features)
    are those of the recorded state, also when a swap brought it to the cold rung."""
    kernel = tempering.TemperedKernel(
        init=bind(_init), step=bind(_step_reporting_its_state), log_likelihood=bind(_log_likelihood)
    )
    idata = bnpjax.sample(tempering.replica_exchange(kernel, LADDER), jax.random.key(4), 200,
                          num_warmup=20, num_chains=4, progress_bar=False,
                          check_convergence=False)  # fmt: skip
    swaps = idata.sample_stats["swap_acceptance"].values[..., 0]
    assert swaps.mean() > 0.2  # the cold rung takes its neighbour's state often
    np.testing.assert_array_equal(
        idata.sample_stats["where"].values, idata.posterior["value"].values
    )
