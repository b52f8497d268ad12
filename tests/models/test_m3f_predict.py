"""M3F data, predictions and the command line: input validation, the rating-level rule,
predictive distributions, pointwise log-likelihoods and the MAP baseline's API."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnpjax
from bnpjax.models import m3f

L = 3


def _pairs():
    """4 users x 3 items, 9 of 12 pairs observed, every rating level present."""
    users = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3])
    items = np.array([0, 1, 1, 2, 0, 2, 0, 1, 2])
    ratings = np.array([1, 2, 3, 1, 2, 3, 3, 2, 1])
    return users, items, ratings


def test_predictive_distribution_and_level_rule():
    levels = np.array([[1, 2, 5], [1, 3, 5], [2, 3, 5], [1, 3, 4]])
    dist = m3f.predictive_distribution(levels, 5)
    np.testing.assert_allclose(dist.sum(1), 1.0)
    np.testing.assert_allclose(dist[0], [0.75, 0.25, 0, 0, 0])
    got = m3f.levels_from_scores(jnp.array([-3.0, 0.0, 3.0]), jnp.array([-1.0, 0.5, 1.0, 2.0]))
    np.testing.assert_array_equal(got, [1, 2, 5])
    # predict_levels on a hand-made trace: 1 chain, 2 draws, 3 test pairs of users 0, 1, 1
    theta = np.broadcast_to(np.array([-1.0, 0.5, 1.0, 2.0]), (1, 2, 2, 4)).copy()
    theta[0, 1, 1] += 10.0  # user 1's thresholds average to (4, 5.5, 6, 7)
    trace = {
        "posterior": {"theta": theta},
        "sample_stats": {
            "score_test_rb": np.array([[[-3.0, 0.0, 4.5], [-3.0, 0.0, 5.5]]]),
            "level_test": np.array([[[1, 2, 5], [1, 3, 5]]]),
        },
    }
    np.testing.assert_array_equal(m3f.predict_levels(trace, [0, 1, 1]), [1, 1, 2])
    np.testing.assert_array_equal(m3f.predict_levels(trace, [0, 1, 1], rule="median"), [1, 2, 5])
    with pytest.raises(ValueError, match="rule"):
        m3f.predict_levels(trace, [0, 1, 1], rule="mean")
    with pytest.raises(ValueError, match="test_users has 2 pairs"):
        m3f.predict_levels(trace, [0, 1])
    with pytest.raises(ValueError, match="lacks 'score_test'"):
        m3f.predict_levels(trace, [0, 1, 1], score="score_test")
    with pytest.raises(ValueError, match="test_users must lie in"):
        m3f.predict_levels(trace, [0, 1, 2])


def test_bad_input_is_rejected_naming_the_argument():
    u, v, y = _pairs()
    with pytest.raises(ValueError, match=r"ratings must lie in 1\.\.num_levels"):
        m3f.make_data(u, v, np.r_[y[:-1], 0], 4, 3, 3)
    with pytest.raises(ValueError, match="num_levels = 2 does not match"):
        m3f.make_data(u, v, y, 4, 3, 2)
    with pytest.raises(ValueError, match="ratings must hold integers"):
        m3f.make_data(u, v, y + 0.5, 4, 3, 4)
    with pytest.raises(ValueError, match="ratings must hold integers"):
        m3f.make_data(u, v, np.r_[y[:-1], np.nan], 4, 3, 3)
    with pytest.raises(ValueError, match="users must lie in"):
        m3f.make_data(np.r_[u[:-1], 4], v, y, 4, 3, 3)
    with pytest.raises(ValueError, match="items must lie in"):
        m3f.make_data(u, np.r_[v[:-1], -1], y, 4, 3, 3)
    with pytest.raises(ValueError, match="same length"):
        m3f.make_data(u[:-1], v, y, 4, 3, 3)
    with pytest.raises(ValueError, match="more than once"):
        m3f.make_data(np.r_[u, 0], np.r_[v, 0], np.r_[y, 1], 4, 3, 3)
    with pytest.raises(ValueError, match="num_levels"):
        m3f.make_data(u, v, y, 4, 3, 1)
    with pytest.raises(ValueError, match="margin must be a scalar"):
        m3f.make_data(u, v, y, 4, 3, 3, margin=np.ones(3))
    with pytest.raises(ValueError, match="margin must be >= 0"):
        m3f.make_data(u, v, y, 4, 3, 3, margin=-9.0)
    with pytest.raises(ValueError, match="C must be a positive"):
        m3f.make_hyper(3, C=-1.0)
    # 1-based ids with num_users = max id + 1 leave user 0 without ratings: kept, but said
    with pytest.warns(UserWarning, match=r"1 users have no ratings \(ids \[0\]\)"):
        m3f.make_data(u + 1, v, y, 5, 3, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an item without ratings is a routine held-out case
        m3f.make_data(u, v, y, 4, 4, 3)
    data = m3f.make_data(u, v, y, 4, 3, 3)
    with pytest.raises(ValueError, match="levels"):
        m3f.gibbs(data, hyper=m3f.make_hyper(5))
    with pytest.raises(ValueError, match="rank"):
        m3f.gibbs(data, rank=0)
    with pytest.raises(ValueError, match="capacity"):
        m3f.ipm3f_gibbs(data, capacity=4, kappa=10)
    with pytest.raises(ValueError, match="feature_step"):
        m3f.ipm3f_gibbs(data, feature_step="rows")
    for bad in (-1, 2.5, True):
        with pytest.raises(ValueError, match="num_init_features must be an integer"):
            m3f.ipm3f_gibbs(data, num_init_features=bad)
    with pytest.raises(ValueError, match=r"num_init_features \(40\) must be at most capacity"):
        m3f.ipm3f_gibbs(data, num_init_features=40, capacity=32)
    with pytest.raises(ValueError, match="alpha_prior"):
        m3f.ipm3f_gibbs(data, alpha_prior=(1.0, -1.0))
    with pytest.raises(ValueError, match="alpha_prior"):
        m3f.ipm3f_gibbs(data, alpha_prior=3.0)
    with pytest.raises(ValueError, match="test ids"):
        m3f.gibbs(data, test=([0], [7]))
    with pytest.raises(ValueError, match="item_factors must be"):
        m3f.gibbs(data, item_factors=np.ones((4, 2)))
    with pytest.raises(ValueError, match="item_factors contains NaN"):
        m3f.gibbs(data, item_factors=np.full((3, 2), np.nan))
    with pytest.raises(ValueError, match="does not match item_factors"):
        m3f.gibbs(data, rank=3, item_factors=np.ones((3, 2)))
    with pytest.raises(ValueError, match="needs item_biases"):
        m3f.gibbs(data, item_bias=True, item_factors=np.ones((3, 2)))
    with pytest.raises(ValueError, match="item_biases must have shape"):
        m3f.gibbs(data, item_factors=np.ones((3, 2)), item_biases=np.ones(4))
    with pytest.raises(ValueError, match="item_biases is given without"):
        m3f.gibbs(data, item_biases=np.ones(3))
    with pytest.raises(ValueError, match="item_factors must be"):
        m3f.fit_map(data, item_factors=np.ones(3))


def test_log_likelihood_group_matches_predict_and_sums_over_levels():
    """The kernels trace the training ratings' pointwise log-likelihood (the hinge
    pseudo-likelihood normalized over the L levels); predict.log_likelihood recomputes it from
    the factor draws, and held-out ratings get one entry per pair."""
    u, v, y = _pairs()
    data = m3f.make_data(u, v, y, 4, 3, L, margin=1.0)
    hyper = m3f.make_hyper(L, C=1.0, margin=1.0)
    for algorithm in (
        m3f.gibbs(data, hyper, rank=2, item_bias=True),
        m3f.ipm3f_gibbs(data, hyper, capacity=16, kappa=4),
    ):
        idata = bnpjax.sample(algorithm, jax.random.key(0), 4, num_chains=2, progress_bar=False)
        traced = idata.log_likelihood["ratings"].values
        assert traced.shape == (2, 4, y.size)
        np.testing.assert_array_equal(idata.observed_data["ratings"].values, y)
        recomputed = m3f.log_likelihood(idata, data, hyper=hyper)
        np.testing.assert_allclose(recomputed, traced, rtol=1e-10)
        held = m3f.log_likelihood(idata, data, ([0, 1], [2, 0], [2, 3]), hyper=hyper)
        assert held.shape == (2, 4, 2) and np.all(held < 0)
        total = sum(
            np.exp(m3f.log_likelihood(idata, data, ([0], [2], [level]), hyper=hyper))
            for level in range(1, L + 1)
        )
        np.testing.assert_allclose(total, 1.0, rtol=1e-10)
    with pytest.raises(ValueError, match="keep_factors"):
        idata = bnpjax.sample(
            m3f.gibbs(data, hyper, rank=2, keep_factors=False),
            jax.random.key(0),
            2,
            progress_bar=False,
        )
        m3f.log_likelihood(idata, data)


def test_predict_is_predict_levels():
    u, v, y = _pairs()
    data = m3f.make_data(u, v, y, 4, 3, L, margin=1.0)
    test = ([0, 1], [2, 0])
    idata = bnpjax.sample(
        m3f.gibbs(data, rank=2, test=test), jax.random.key(1), 5, progress_bar=False
    )
    for rule in ("score", "median"):
        np.testing.assert_array_equal(
            m3f.predict(idata, data, test, rule=rule), m3f.predict_levels(idata, [0, 1], rule=rule)
        )


def test_map_baseline_is_a_variational_algorithm_and_seed_is_deprecated():
    u, v, y = _pairs()
    data = m3f.make_data(u, v, y, 4, 3, L, margin=1.0)
    default = m3f.fit_map(data, rank=2, max_iter=15)
    with pytest.warns(FutureWarning, match="key="):
        seeded = m3f.fit_map(data, rank=2, max_iter=15, seed=0)
    for a, b in zip(default, seeded, strict=True):
        np.testing.assert_array_equal(a, b)
    U, V, theta, objective = m3f.fit_map(data, rank=2, max_iter=15, key=jax.random.key(3))
    assert U.shape == (4, 2) and V.shape == (3, 2) and theta.shape == (4, L - 1)
    algorithm = m3f.map_estimate(data, rank=2)
    assert isinstance(algorithm, bnpjax.infer.VariationalAlgorithm)
    idata = bnpjax.fit(algorithm, jax.random.key(3), 15, progress_bar=False)
    np.testing.assert_allclose(idata.posterior["U"].values[0, 0], U, rtol=1e-12)
    result = bnpjax.infer.fit_run(algorithm, jax.random.key(3), 15, progress_bar=False)
    # L-BFGS descends: the objective of the last step is below that of the first
    assert result.history["objective"][-1] < result.history["objective"][0]
    assert float(objective) <= result.history["objective"][-1] + 1e-9
    with pytest.raises(TypeError, match="both"):
        m3f.fit_map(data, seed=0, key=jax.random.key(0))
    for bad in (np.nan, -1.0, "0.1", True):  # Gibbs M3F refuses them too
        with pytest.raises(ValueError, match="init_scale"):
            m3f.map_estimate(data, rank=2, init_scale=bad)


def test_geweke_protocol_and_deprecated_prior_sample():
    u, v, y = _pairs()
    data = m3f.make_data(u, v, y, 4, 3, L, margin=1.0)
    hyper = m3f.make_hyper(L)
    key = jax.random.key(0)
    state = m3f.geweke.prior_sample(key, data, hyper, rank=2)
    assert isinstance(state, m3f.M3FState) and state.U.shape == (4, 2)
    assert m3f.geweke.refresh(data, state, rank=2) is state
    assert m3f.geweke.data_sample(key, state, data, hyper, rank=2).margin.shape == (y.size, 2)
    new = m3f.geweke.prior_sample(key, data, hyper, alpha=1.0, capacity=8, kappa=4)
    assert isinstance(new, m3f.IPM3FState) and new.Z.shape == (4, 8)
    with pytest.warns(FutureWarning, match="ipm3f_prior_sample is deprecated"):
        old = m3f.ipm3f_prior_sample(key, data, hyper, 1.0, 8)
    for a, b in zip(old, new, strict=True):
        np.testing.assert_array_equal(a, b)


def test_predict_from_the_factor_draws_matches_the_traced_test_scores():
    # pairs the kernel was not built with are scored from U, V, theta of every draw: the same
    # levels as the kernel's own traced scores for pairs it was built with
    u, v, y = _pairs()
    data = m3f.make_data(u, v, y, 4, 3, L, margin=1.0)
    test = ([0, 1, 3], [2, 0, 1])
    with_scores = bnpjax.sample(
        m3f.gibbs(data, rank=2, test=test), jax.random.key(1), 6, progress_bar=False
    )
    factors_only = bnpjax.sample(m3f.gibbs(data, rank=2), jax.random.key(1), 6, progress_bar=False)
    for rule in ("score", "median"):
        np.testing.assert_array_equal(
            m3f.predict(factors_only, data, test, rule=rule),
            m3f.predict(with_scores, data, test, rule=rule, score="score_test"),
        )
    with pytest.raises(ValueError, match="test items"):
        m3f.predict(factors_only, data, ([0], [7]))
