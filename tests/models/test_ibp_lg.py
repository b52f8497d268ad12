"""The linear-Gaussian latent feature model: recovery on bars, held-out evaluation, missing
data, capacity growth, the pointwise log-likelihood, input validation and the deprecated names
(the Geweke cases of both samplers are in tests/geweke_cases/ibp_lg.py)."""

import warnings

import jax
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import bnpjax
from bnpjax.datasets import bars
from bnpjax.infer import run
from bnpjax.metrics import log_mean_exp
from bnpjax.models import ibp_lg


def _match(A_true, A_est):
    """Mean absolute error of the best one-to-one match of features, each up to its sign:
    with the per-column offset sampled (the default) a feature and its complement
    are the same model (``z -> 1 - z``, ``a -> -a``, the offset takes ``a``), and a bar held
    by half of the images, as each is here, may come out either way."""
    diff = A_true[:, None, :] - A_est[None, :, :]
    total = A_true[:, None, :] + A_est[None, :, :]
    cost = np.minimum(np.abs(diff).mean(-1), np.abs(total).mean(-1))
    rows, cols = linear_sum_assignment(cost)
    return cost[rows, cols].mean()


@pytest.fixture(scope="module")
def bars_data():
    sim = bars(0, missing_fraction=0.1)
    return sim, ibp_lg.make_data(sim["X"], sim["mask"])


@pytest.mark.parametrize("sampler", ["collapsed_gibbs", "parallel_gibbs"])
def test_recovers_bars(sampler, bars_data):
    sim, data = bars_data
    # K+ = 4 holds about 0.35 of the posterior and 5 about 0.28: the row-parallel sampler,
    # whose K+ mixes more slowly, needs 4 x 1000 draws for the mode to be 4 beyond its Monte
    # Carlo error (2 x 400 gave 271 against 282 draws); its sweeps are cheap
    draws, warmup, chains = (400, 600, 2) if sampler == "collapsed_gibbs" else (1000, 1000, 4)
    result = run(
        getattr(ibp_lg, sampler)(data, capacity=4),
        jax.random.key(1),
        draws,
        num_warmup=warmup,
        num_chains=chains,
        progress_bar=False,
    )
    assert result.settings["num_resizes"] >= 1  # started too small on purpose
    post = result.trace["posterior"]
    k = post["num_features"].ravel()
    assert np.bincount(k).argmax() == 4
    # the highest-density draw with four features: its weights match the true images
    lp = np.where(post["num_features"] == 4, result.trace["sample_stats"]["lp"], -np.inf)
    chain, draw = np.unravel_index(np.argmax(lp), lp.shape)
    means = ibp_lg.feature_means(result.trace, data)[chain, draw]
    A = means[post["Z"][chain, draw].sum(0) > 0]
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
    pointwise = ibp_lg.log_likelihood(idata, data, test=(full, heldout))
    assert pointwise.shape == (1, 200, heldout.sum())
    pooled = log_mean_exp(pointwise.reshape(-1, heldout.sum()), axis=0)
    out = {"pointwise": pooled, "mean": float(pooled.mean())}
    # the predictive means of the held-out entries are those the kernel imputes around
    mean = ibp_lg.predict(idata, data).mean((0, 1))
    assert mean.shape == (heldout.sum(),)
    assert np.mean((mean - full[heldout]) ** 2) < np.mean((full[heldout] - full.mean()) ** 2)
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

    sim, data = bars_data
    idata = bnpjax.sample(
        ibp_lg.collapsed_gibbs(data, trace_features=False),
        jax.random.key(0),
        20,
        num_chains=2,
        progress_bar=False,
    )
    assert "Z" not in idata.posterior and "num_features" in idata.sample_stats
    # on by default, and only the observed entries are observations (none written as 0.0)
    num_observed = int(sim["mask"].sum())
    assert num_observed < 100 * 36
    assert idata.log_likelihood["X"].shape == (2, 20, num_observed)
    np.testing.assert_allclose(idata.observed_data["X"].values, sim["X"][sim["mask"]])
    assert {"mean", "r_hat"} <= set(az.summary(idata, var_names=["sigma_x", "alpha"]).columns)
    with warnings.catch_warnings():  # 20 draws are few for PSIS: warnings, not errors
        warnings.simplefilter("ignore")
        loo = az.loo(idata)
    assert loo.n_data_points == num_observed
    off = ibp_lg.collapsed_gibbs(data, pointwise_log_likelihood=False)
    assert "log_likelihood" not in off.trace(*_first_step(off))


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
    with pytest.raises(ValueError, match="alpha_prior must be a pair"):
        ibp_lg.make_hyper(alpha_prior=(1.0, -1.0))
    with pytest.raises(ValueError, match="alpha_prior"):
        ibp_lg.collapsed_gibbs(data, alpha_prior=(1.0, 0.0))
    with pytest.raises(ValueError, match="alpha_prior=None"):
        ibp_lg.collapsed_gibbs(data, alpha_prior=(1.0, 1.0), sample_alpha=False)
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


def test_flags_must_be_bools():
    """A truthy string is refused naming the flag, not read as True (the factories, their
    lower levels, make_data); NumPy bools are bools."""
    with pytest.raises(ValueError, match="standardize"):
        ibp_lg.make_data(np.ones((3, 2)), standardize="no")
    data = ibp_lg.make_data(np.ones((3, 2)), standardize=np.False_)
    sweep = ("sample_alpha", "sample_sigma_x", "sample_sigma_a", "sample_offset")
    for factory in (ibp_lg.collapsed_gibbs, ibp_lg.parallel_gibbs, ibp_lg.split_merge):
        for name in (*sweep, "trace_features", "pointwise_log_likelihood"):
            with pytest.raises(ValueError, match=name):
                factory(data, **{name: "no"})
        for name in sweep:
            with pytest.raises(ValueError, match=name):
                factory.build_step(**{name: "no"})
    with pytest.raises(ValueError, match="sample_offset"):
        ibp_lg.collapsed_gibbs.init(jax.random.key(0), data, sample_offset="no")
    alg = ibp_lg.collapsed_gibbs(data, sample_offset=np.False_, trace_features=np.True_)
    assert alg.spec.settings["sample_offset"] is False
    with pytest.raises(ValueError, match="integrate_offset must be True or False"):
        ibp_lg.feature_means({}, data, integrate_offset="no")


def _first_step(algorithm):
    # compiled whole: op by op, each of the sweep's scans and small operations compiles alone
    state = jax.jit(algorithm.init)(jax.random.key(0))
    return jax.jit(algorithm.step)(jax.random.key(1), state)


def test_alpha_prior_spelling():
    """``alpha_prior=(a, b)`` is the one spelling: in make_hyper and in the factories (the
    call the NumPyro bridge documents), None fixes alpha."""
    data = ibp_lg.make_data(np.ones((4, 3)) + np.eye(4, 3))
    hyper = ibp_lg.make_hyper(alpha_prior=(2.0, 3.0))
    assert float(hyper.alpha_shape) == 2.0 and float(hyper.alpha_rate) == 3.0
    same = ibp_lg.collapsed_gibbs(data, hyper)
    via_factory = ibp_lg.collapsed_gibbs(data, alpha_prior=(2.0, 3.0))
    state = jax.jit(via_factory.init)(jax.random.key(0))
    # one compiled step serves both: same program when the hyperparameters are equal
    a, _ = jax.jit(same.step)(jax.random.key(1), state)
    b, _ = jax.jit(via_factory.step)(jax.random.key(1), state)
    assert float(a.alpha) == float(b.alpha)
    fixed = ibp_lg.parallel_gibbs(data, alpha_prior=None, alpha=2.5, init_sweeps=0)
    new, _ = jax.jit(fixed.step)(jax.random.key(1), jax.jit(fixed.init)(jax.random.key(0)))
    assert float(new.alpha) == 2.5 and fixed.spec.settings["sample_alpha"] is False


def test_deprecated_names_still_work(bars_data):
    sim, data = bars_data
    with pytest.warns(FutureWarning, match="alpha_prior"):
        hyper = ibp_lg.make_hyper(alpha=(4.0, 4.0), sigma_x=(3.0, 2.0), sigma_a=(3.0, 2.0))
    assert hyper == ibp_lg.make_hyper(
        alpha_prior=(4.0, 4.0), sigma_x_prior=(3.0, 2.0), sigma_a_prior=(3.0, 2.0)
    )
    # the old function knows no offset: the model without one
    kernel = ibp_lg.parallel_gibbs(data, capacity=8, sample_offset=False)
    result = run(kernel, jax.random.key(0), 5, progress_bar=False)
    post = result.trace["posterior"]
    with pytest.warns(FutureWarning, match="feature_means"):
        old = ibp_lg.posterior_mean_features(
            post["Z"][0, -1], sim["X"], post["sigma_x"][0, -1], post["sigma_a"][0, -1], sim["mask"]
        )
    new = ibp_lg.feature_means(result.trace, data)[0, -1]
    np.testing.assert_allclose(old, new[post["Z"][0, -1].sum(0) > 0], rtol=1e-8)
    with pytest.warns(FutureWarning, match="log_likelihood"):
        held = ibp_lg.heldout_log_likelihood(result.trace, sim["X"], sim["mask"])
    assert held["pointwise"].shape == (sim["mask"].sum(),) and np.isfinite(held["mean"])
    with pytest.warns(FutureWarning):
        state = ibp_lg.prior_sample(
            jax.random.key(0), 3, 2, hyper, capacity=4, flags={"sample_alpha": True}
        )
    with pytest.warns(FutureWarning):
        fresh = ibp_lg.data_sample(jax.random.key(1), state, ibp_lg.make_data(np.ones((3, 2))))
    with pytest.warns(FutureWarning):
        assert ibp_lg.refresh(fresh, state).X.shape == (3, 2)


def test_the_default_start_leaves_room_on_bars():
    # the default start (a few random features in the default buffer of 16) leaves the row
    # sweeps room for their births: with 10 the first sweeps overflowed the buffer, and the run
    # went on at twice the width, where a collapsed sweep costs about three times as much
    data = ibp_lg.make_data(bars(0)["X"])
    result = run(ibp_lg.collapsed_gibbs(data), jax.random.key(0), 20, num_chains=2,
                 progress_bar=False)  # fmt: skip
    assert result.settings["num_resizes"] == 0
    assert result.settings["capacity"] == 16
