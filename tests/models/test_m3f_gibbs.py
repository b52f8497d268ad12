"""Gibbs M3F (and, on the same generated ratings, iPM3F and the MAP baseline): the lambda
conditional against SciPy, the scale and threshold moves' targets against the
pseudo-posterior, recovery of known factors, strong generalization. The Geweke cases of
every kernel are in tests/geweke_cases/m3f.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import bnpjax
from bnpjax.models import m3f
from bnpjax.models.m3f import conditionals, scale
from bnpjax.testing import run_geweke_case


def test_flags_must_be_bools():
    """Gibbs M3F and iPM3F refuse a truthy string for a flag, naming it (factories and
    build_step); NumPy bools are bools."""
    data = m3f.make_data([0, 1], [1, 0], [1, 2], 2, 2, 3)
    for name in ("keep_factors", "item_bias", "pointwise_log_likelihood"):
        with pytest.raises(ValueError, match=name):
            m3f.gibbs(data, **{name: "no"})
    for name in ("keep_factors", "pointwise_log_likelihood"):
        with pytest.raises(ValueError, match=name):
            m3f.ipm3f_gibbs(data, **{name: "no"})
    for name in ("item_bias", "fixed_items"):
        with pytest.raises(ValueError, match=name):
            m3f.gibbs.build_step(**{name: "no"})
    assert m3f.gibbs(data, item_bias=np.True_).spec.settings["item_bias"] is True


def test_lambda_conditional_matches_scipy():
    """lambda | u ~ GIG(1/2, 1, u^2) = scipy geninvgauss(1/2, |u|, scale |u|)."""
    data = m3f.make_data([0], [0], [1], 1, 1, 2, margin=0.0)
    hyper = m3f.make_hyper(2, C=2.0)
    n, x_val, theta_val = 20_000, 0.7, 0.0
    # zeta = 0 - T (theta - x) with T = +1 (rating 1 <= r = 1): zeta = x = 0.7, u = C zeta / 2
    draws = jax.vmap(
        lambda k: conditionals._sample_omega(
            k, data, hyper, jnp.full((1, 1), theta_val), jnp.full(1, x_val)
        )
    )(jax.random.split(jax.random.key(0), n))
    lam = 1.0 / np.asarray(draws).ravel()
    u = abs(hyper.C * x_val / 2)
    p = scipy.stats.kstest(lam, scipy.stats.geninvgauss(0.5, u, scale=u).cdf).pvalue
    assert p > 1e-3, p
    # and a wrong mean (1/|u| doubled) is detected by the same test
    wrong = scipy.stats.kstest(lam, scipy.stats.geninvgauss(0.5, 2 * u, scale=u / 2).cdf).pvalue
    assert wrong < 1e-6, wrong


def _random_state(seed=0):
    rng = np.random.default_rng(seed)
    users, items = np.nonzero(rng.random((5, 4)) < 0.7)
    data = m3f.make_data(users, items, rng.integers(1, 4, users.size), 5, 4, 3, margin=1.0)
    hyper = m3f.make_hyper(3, C=1.5, margin=1.0)
    U, V = rng.normal(size=(5, 2)), rng.normal(size=(4, 2))
    theta, bias = np.sort(rng.normal(size=(5, 2)), axis=1), rng.normal(size=4)
    state = m3f.M3FState(U, V, theta, np.ones((users.size, 2)), bias)
    return data, hyper, jax.tree.map(jnp.asarray, state), rng


def test_move_targets_are_the_pseudo_posterior_with_the_jacobian():
    """Each move's log target at t, less its value at 0, is the change of the pseudo-posterior
    (the hinge, lambda integrated out) under the move plus the log Jacobian D t."""
    data, hyper, state, rng = _random_state()
    U, V, theta, bias = state.U, state.V, state.theta, state.bias
    lp = conditionals.pseudo_log_posterior
    args = (data, hyper, U, V, theta, bias)

    t = jnp.asarray(rng.normal(scale=0.3, size=5))
    a = jnp.exp(t)[:, None]
    target = scale._users_target(*args)
    moved = state._replace(U=a * U, theta=a * theta)
    expected = lp(data, hyper, moved) - lp(data, hyper, state) + 4 * jnp.sum(t)
    np.testing.assert_allclose(jnp.sum(target(t) - target(0 * t)), expected, rtol=1e-10)

    t = jnp.asarray(rng.normal(scale=0.3, size=4))
    target = scale._items_target(*args)
    moved = state._replace(V=jnp.exp(t)[:, None] * V)
    expected = lp(data, hyper, moved) - lp(data, hyper, state) + 2 * jnp.sum(t)
    np.testing.assert_allclose(jnp.sum(target(t) - target(0 * t)), expected, rtol=1e-10)

    t = jnp.asarray(0.2)
    target = scale._all_target(*args, item_bias=True)
    a = jnp.exp(t)
    moved = state._replace(V=a * V, theta=a * theta, bias=a * bias)
    expected = lp(data, hyper, moved) - lp(data, hyper, state) + (8 + 10 + 4) * t
    np.testing.assert_allclose(target(t) - target(0 * t), expected, rtol=1e-10)

    d = jnp.asarray(rng.normal(size=theta.shape))
    x = conditionals._scores(data, U, V) + bias[data.items]
    target = scale._thresholds_target(data, hyper, theta, x)
    expected = lp(data, hyper, state._replace(theta=theta + d)) - lp(data, hyper, state)
    np.testing.assert_allclose(jnp.sum(target(d) - target(0 * d)), expected, rtol=1e-10)


@pytest.mark.slow
def test_threshold_move_with_flipped_signs_fails_geweke():
    """The table's m3f.gibbs_moves row has the scale moves' twin; the threshold move's own
    slip (the signs of its pairs flipped) fails the same test by a wide margin."""
    from geweke_cases import m3f as cases

    row = next(case for case in cases.CASES if case.name == "m3f.gibbs")
    result = run_geweke_case(
        row._replace(broken_factory=cases._thresholds_with_flipped_signs()), broken=True
    )
    assert result.max_abs_z > 2 * result.threshold, str(result)


# ------------------------------------------------------------------------------------------
# recovery on generated ratings


def _generated(seed=0, N=80, M=60, K=3, density=0.5, num_new_users=30):
    """Ratings of N users, and of ``num_new_users`` more users of the same items (drawn after
    the first N, so those stay as they were): the strong-generalization users."""
    rng = np.random.default_rng(seed)
    U, V = rng.normal(size=(N, K)), rng.normal(size=(M, K))
    users, items = np.nonzero(rng.random((N, M)) < density)
    x = np.sum(U[users] * V[items], axis=1)
    cuts = np.quantile(x, [0.2, 0.4, 0.6, 0.8])
    levels = 1 + np.digitize(x + 0.3 * rng.normal(size=x.size), cuts)
    test = np.zeros(users.size, bool)
    test[rng.choice(users.size, users.size // 10, replace=False)] = True
    U_new = rng.normal(size=(num_new_users, K))
    new_users, new_items = np.nonzero(rng.random((num_new_users, M)) < density)
    x_new = np.sum(U_new[new_users] * V[new_items], axis=1)
    new_levels = 1 + np.digitize(x_new + 0.3 * rng.normal(size=x_new.size), cuts)
    # a fifth of each new user's ratings held out (the protocol holds out one; more test
    # ratings make the MAE less noisy)
    new_test = rng.random(new_users.size) < 0.2
    new = (new_users, new_items, new_levels, new_test, 1 + np.digitize(x_new, cuts))
    return users, items, levels, test, 1 + np.digitize(x, cuts), new


@pytest.fixture(scope="module")
def generated():
    users, items, levels, test, clean, _ = _generated()
    data = m3f.make_data(users[~test], items[~test], levels[~test], 80, 60, 5, margin=1.0)
    return data, (users[test], items[test]), levels[test], clean[test]


def _posterior_levels(idata, test_users, name="score_test"):
    score = idata.sample_stats[name].mean(("chain", "draw")).values
    theta = idata.posterior["theta"].mean(("chain", "draw")).values
    return np.asarray(m3f.levels_from_scores(score, theta[test_users]))


@pytest.mark.slow
def test_recovery_m3f_and_ipm3f_and_baseline(generated):
    """Held-out MAE on 5-level ratings generated from rank-3 factors with noise: guessing the
    middle level gives about 1.2; all three fits must be far below, M3F close to the noise
    floor (the truth's own MAE against the noisy levels, about 0.25)."""
    data, test, y_test, clean = generated
    hyper = m3f.make_hyper(5, C=1.0, margin=1.0)
    results = {}
    algorithms = {
        "m3f": m3f.gibbs(data, rank=6, hyper=hyper, test=test),
        # room for the K+ it reaches (35-45): each growth of the buffer is a recompile
        "ipm3f": m3f.ipm3f_gibbs(data, hyper=hyper, test=test, capacity=64),
    }
    for name, algorithm in algorithms.items():
        idata = bnpjax.sample(algorithm, jax.random.key(1), 60, num_warmup=60, progress_bar=False)
        results[name] = np.mean(np.abs(_posterior_levels(idata, test[0]) - y_test))
        # the Rao-Blackwellized score estimates the same posterior mean with less noise
        rb = _posterior_levels(idata, test[0], "score_test_rb")
        results[name + " rb"] = np.mean(np.abs(rb - y_test))
        np.testing.assert_array_equal(m3f.predict_levels(idata, test[0]), rb)
        median = m3f.predict_levels([idata, idata], test[0], rule="median")  # pooling: the same
        proba = m3f.predictive_distribution(idata.sample_stats["level_test"].values, 5)
        np.testing.assert_array_equal(median, 1 + np.argmax(np.cumsum(proba, 1) >= 0.5, 1))
        results[name + " median"] = np.mean(np.abs(median - y_test))
        plain = idata.sample_stats["score_test"].mean(("chain", "draw")).values
        smooth = idata.sample_stats["score_test_rb"].mean(("chain", "draw")).values
        assert np.corrcoef(plain, smooth)[0, 1] > 0.95
        if name == "ipm3f":
            assert idata.posterior["num_features"].values[0, -1] >= 3
        if name == "m3f":
            V_mean = idata.posterior["V"].mean(("chain", "draw")).values
    U, V, theta, _ = m3f.fit_map(data, rank=6, reg=3.0, max_iter=300)
    scores = jnp.sum(U[test[0]] * V[test[1]], axis=1)
    results["map"] = np.mean(
        np.abs(np.asarray(m3f.levels_from_scores(scores, theta[test[0]])) - y_test)
    )
    floor = np.mean(np.abs(clean - y_test))
    # strong generalization: 30 new users fitted with the items held at the fit's V
    new_users, new_items, new_levels, new_test, new_clean = _generated()[-1]
    keep = ~new_test
    new_data = m3f.make_data(
        new_users[keep], new_items[keep], new_levels[keep], 30, 60, 5, margin=1.0
    )
    held = (new_users[new_test], new_items[new_test])
    y_new = new_levels[new_test]
    strong = m3f.gibbs(new_data, hyper=hyper, test=held, item_factors=V_mean)
    idata = bnpjax.sample(strong, jax.random.key(2), 60, num_warmup=60, progress_bar=False)
    assert "V" not in idata.posterior
    lv = _posterior_levels(idata, held[0], "score_test_rb")
    results["strong m3f"] = np.mean(np.abs(lv - y_new))
    U_new, _, theta_new, _ = m3f.fit_map(new_data, reg=3.0, max_iter=300, item_factors=V)
    lv = m3f.levels_from_scores(jnp.sum(U_new[held[0]] * V[held[1]], 1), theta_new[held[0]])
    results["strong map"] = np.mean(np.abs(np.asarray(lv) - y_new))
    strong_floor = np.mean(np.abs(new_clean[new_test] - y_new))
    # seeds 2-4 gave 0.30-0.31 against a floor of 0.19 (175 test ratings: about +-0.04 of
    # test noise); with V drawn at random instead of fitted the MAE was 1.46-1.49
    assert results["strong m3f"] < strong_floor + 0.25, (results, strong_floor)
    assert results["strong map"] < strong_floor + 0.3, (results, strong_floor)
    assert results["m3f"] < floor + 0.35, (results, floor)
    assert results["m3f rb"] < floor + 0.35, (results, floor)
    # iPM3F's binary features fit rank-3 real factors less closely and its 60 kept draws vary
    # more: over seeds 1-3 and both feature steps its MAE ranged 0.54-0.72 (floor 0.22).
    # The bound, two thirds of guessing's 1.2, asks that it learn the structure.
    assert results["ipm3f"] < 0.8, (results, floor)
    assert results["ipm3f rb"] < 0.8, (results, floor)
    assert results["map"] < floor + 0.45, (results, floor)
