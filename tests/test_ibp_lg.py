"""The linear-Gaussian latent feature model: Geweke tests of both samplers, recovery on bars,
held-out evaluation, missing data, capacity growth and input validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import bnpjax
from bnpjax.datasets import bars
from bnpjax.infer import run
from bnpjax.models import ibp_lg
from bnpjax.testing import geweke_test

ROWS, DIMS, CAPACITY = 6, 3, 40
FLAGS = {"sample_alpha": True, "sample_sigma_x": True, "sample_sigma_a": True}
HYPER = ibp_lg.make_hyper(alpha=(4.0, 4.0), sigma_x=(3.0, 2.0), sigma_a=(3.0, 2.0))
BASE = ibp_lg.make_data(np.zeros((ROWS, DIMS)))


def statistics(state, data):
    m = state.Z.sum(0)
    return {
        "K+": jnp.sum(m > 0).astype(float),
        "sum Z": jnp.sum(state.Z),
        "sum m^2": jnp.sum(m**2),
        "alpha": state.alpha,
        "sigma_x^2": state.sigma_x**2,
        "sigma_a^2": state.sigma_a**2,
        "mean X^2": jnp.mean(data.X**2),
        "<X, ZA>": jnp.sum(data.X * (state.Z @ state.A)),
        "sum A^2": jnp.sum(state.A**2),
    }


@pytest.mark.parametrize("sampler", ["collapsed_gibbs", "parallel_gibbs"])
def test_geweke(sampler):
    factory = getattr(ibp_lg, sampler)
    result = geweke_test(
        jax.random.key(5),
        prior_sample=lambda key: ibp_lg.prior_sample(
            key, ROWS, DIMS, HYPER, capacity=CAPACITY, flags=FLAGS
        ),
        data_sample=lambda key, state: ibp_lg.data_sample(key, state, BASE),
        kernel=lambda data: factory(data, hyper=HYPER, capacity=CAPACITY, kappa=8),
        refresh=ibp_lg.refresh,
        test_functions=statistics,
        num_successive=6000,
    )
    assert result.passed, str(result)


def _match(A_true, A_est):
    """Mean absolute error of the best one-to-one match of features."""
    cost = np.abs(A_true[:, None, :] - A_est[None, :, :]).mean(-1)
    rows, cols = linear_sum_assignment(cost)
    return cost[rows, cols].mean()


@pytest.fixture(scope="module")
def bars_data():
    sim = bars(0, missing_fraction=0.1)
    return sim, ibp_lg.make_data(sim["X"], sim["mask"])


@pytest.mark.parametrize("sampler", ["collapsed_gibbs", "parallel_gibbs"])
def test_recovers_bars(sampler, bars_data):
    sim, data = bars_data
    result = run(
        getattr(ibp_lg, sampler)(data, capacity=4),
        jax.random.key(1),
        400,
        num_warmup=600,
        num_chains=2,
        progress_bar=False,
    )
    assert result.settings["num_resizes"] >= 1  # started too small on purpose
    post = result.trace["posterior"]
    k = post["num_features"].ravel()
    assert np.bincount(k).argmax() == 4
    # the highest-density draw with four features: its weights match the true images
    lp = np.where(post["num_features"] == 4, result.trace["sample_stats"]["lp"], -np.inf)
    chain, draw = np.unravel_index(np.argmax(lp), lp.shape)
    A = ibp_lg.posterior_mean_features(
        post["Z"][chain, draw], sim["X"], post["sigma_x"][chain, draw], post["sigma_a"][chain, draw]
    )
    assert _match(sim["A"], A) < 0.1
    active = post["active"][chain, draw]
    assert _match(sim["A"], post["A"][chain, draw][active]) < 0.15  # one posterior draw of A
    assert abs(post["sigma_x"].mean() - 0.5) < 0.05


def test_heldout_log_likelihood_beats_a_constant_predictor(bars_data):
    sim, data = bars_data
    idata = bnpjax.sample(
        ibp_lg.parallel_gibbs(data), jax.random.key(2), 200, num_warmup=300, progress_bar=False
    )
    full = bars(0, missing_fraction=0.0)["X"]  # the same draw without the holes
    heldout = ~sim["mask"]
    out = ibp_lg.heldout_log_likelihood(idata, full, heldout)
    assert out["pointwise"].shape == (heldout.sum(),)
    # a Gaussian fitted to the observed entries is the baseline to beat
    observed = sim["X"][sim["mask"]]
    baseline = -0.5 * np.log(2 * np.pi * observed.var()) - 0.5 * (
        (full[heldout] - observed.mean()) ** 2 / observed.var()
    )
    # the oracle knows Z, A and sigma_x; held-out entries were imputed, never read as zeros
    oracle = -0.5 * np.log(2 * np.pi * 0.25) - 0.5 * (
        (full[heldout] - (sim["Z"] @ sim["A"])[heldout]) ** 2 / 0.25
    )
    assert out["mean"] > baseline.mean() + 0.2
    assert out["mean"] > oracle.mean() - 0.15


def test_trace_options_and_inference_data(bars_data):
    import arviz as az

    _, data = bars_data
    idata = bnpjax.sample(
        ibp_lg.collapsed_gibbs(data, trace_features=False, pointwise_log_likelihood=True),
        jax.random.key(0),
        20,
        num_chains=2,
        progress_bar=False,
    )
    assert "Z" not in idata.posterior and "num_features" in idata.sample_stats
    assert idata.log_likelihood["X"].shape == (2, 20, 100, 36)
    assert {"mean", "r_hat"} <= set(az.summary(idata, var_names=["sigma_x", "alpha"]).columns)


def test_bad_input():
    with pytest.raises(ValueError, match="2-D"):
        ibp_lg.make_data(np.ones(5))
    with pytest.raises(ValueError, match="NaN"):
        ibp_lg.make_data(np.array([[1.0, np.nan]]))
    with pytest.raises(ValueError, match="mask must be a boolean"):
        ibp_lg.make_data(np.ones((2, 2)), mask=np.ones((2, 3), bool))
    with pytest.raises(ValueError, match="rows without any observed"):
        ibp_lg.make_data(np.ones((2, 2)), mask=np.array([[True, True], [False, False]]))
    with pytest.raises(ValueError, match="finite where mask"):
        ibp_lg.make_data(np.array([[1.0, np.inf]]), mask=np.ones((1, 2), bool))
    data = ibp_lg.make_data(np.ones((3, 2)))
    with pytest.raises(ValueError, match="sigma_x"):
        ibp_lg.collapsed_gibbs(data, sigma_x=-1.0)
    with pytest.raises(ValueError, match="kappa"):
        ibp_lg.parallel_gibbs(data, kappa=0)
    with pytest.raises(ValueError, match="make_data"):
        ibp_lg.parallel_gibbs(np.ones((3, 2)))
    with pytest.raises(ValueError, match="hyperparameters"):
        ibp_lg.make_hyper(alpha=(1.0, -1.0))
    with pytest.raises(ValueError, match="alpha"):
        ibp_lg.collapsed_gibbs(data, alpha=np.nan)
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="num_init_features"):
            ibp_lg.collapsed_gibbs(data, num_init_features=bad)
    for name in ("kappa", "capacity"):
        for bad in (True, 0, 2.0):
            with pytest.raises(ValueError, match=name):
                ibp_lg.parallel_gibbs(data, **{name: bad})
    with pytest.raises(ValueError, match="hyper must come from"):
        ibp_lg.parallel_gibbs(data, hyper=(1.0,) * 6)
    # integers of any kind are fine; 0 starting features is a legitimate (empty) start
    alg = ibp_lg.collapsed_gibbs(data, num_init_features=np.int64(0), kappa=np.int32(3))
    assert alg.capacity == 16
