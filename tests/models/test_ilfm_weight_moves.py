"""The ILFM's moves of the weights: the weights' scale and the ridge move each leave the prior
invariant (both touch the likelihood only through an exact ratio) and a broken twin of each
does not; the ridge move keeps every logit where its directions are exact; the Fisher mass of
the HMC move is the sum it stands for, adapts during warmup only and survives a grown buffer;
bad input. (With every other move: the Geweke rows ilfm.gibbs.merge_split and
ilfm.gibbs.fisher_mass, tests/geweke_cases/ilfm.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import norm
from tiers import long_only

from bnpjax.infer import run
from bnpjax.models import ilfm
from bnpjax.models.ilfm.joint import _logits, _offset
from bnpjax.models.ilfm.ridge import _null_directions, ridge_move
from bnpjax.models.ilfm.weights import sample_weight_scale

N, R, CAPACITY = 5, 2, 8


def _z_scores(before, after):
    """Paired z-scores of the shift of each statistic's mean (chains are independent, so the
    differences' standard error is their sd / sqrt(chains)) and the two-sided threshold at
    0.001, Bonferroni over the statistics."""
    difference = np.asarray(after) - np.asarray(before)
    z = difference.mean(0) / (difference.std(0, ddof=1) / np.sqrt(len(difference)))
    return np.abs(z), norm.isf(0.001 / (2 * z.size))


def _prior_states(hyper, num_chains, seed):
    data = ilfm.make_data(np.zeros((R, N, N)))
    keys = jax.random.split(jax.random.key(seed), num_chains)
    prior = jax.vmap(lambda k: ilfm.geweke.prior_sample(k, data, hyper, capacity=CAPACITY))
    return data, prior(keys)


def test_ridge_move_keeps_every_logit_where_its_directions_are_exact():
    """Features 0 and 1 cover every entity (F u = 1) and feature 2 is a copy of 0 (F'F has
    a null direction): the move changes the bias and the weights, but no logit, so every
    relation's move is accepted; the weights stay on the active block."""
    rng = np.random.default_rng(0)
    F = np.zeros((8, 6))
    F[:5, 0] = F[5:, 1] = F[:5, 2] = 1.0
    F[[1, 6], 3] = 1.0
    active = F.sum(0) > 0
    W = jnp.asarray(rng.normal(size=(R, 6, 6)) * (active[:, None] & active[None, :]))
    F, bias, beta = jnp.asarray(F), jnp.asarray([0.5, -1.0]), jnp.zeros((R, 0))
    data = ilfm.make_data(rng.integers(0, 2, (R, 8, 8)).astype(float))
    hyper = ilfm.make_hyper()
    _, _, null, u, ridge = _null_directions(F)
    assert int(null.sum()) == 1 and bool(ridge)
    np.testing.assert_allclose(F @ u, 1.0, atol=1e-10)
    before = _logits(F, W, _offset(bias, beta, data.X))
    move = jax.jit(lambda key: ridge_move(key, data, hyper, F, W, bias, beta, "logit"))
    for t in range(20):
        W2, bias2, accepted = move(jax.random.key(t))
        assert int(accepted) == 2 * R  # both moves of every relation
        np.testing.assert_allclose(_logits(F, W2, _offset(bias2, beta, data.X)), before,
                                   atol=1e-10)  # fmt: skip
        assert np.all(np.abs(np.asarray(bias2 - bias)) > 0)
        assert np.all(np.asarray(W2)[:, ~active] == 0) and np.all(
            np.asarray(W2)[:, :, ~active] == 0
        )
    # without a ridge or a null direction (one feature held by some entities) nothing moves
    lone = jnp.zeros((8, 6)).at[:3, 0].set(1.0)
    W_lone = jnp.zeros((R, 6, 6)).at[:, 0, 0].set(1.5)
    W2, bias2, _ = ridge_move(jax.random.key(0), data, hyper, lone, W_lone, bias, beta, "logit")
    np.testing.assert_array_equal(W2, W_lone)
    np.testing.assert_array_equal(bias2, bias)


def _ridge_statistics(F, W, bias):
    return jnp.stack([bias[0], bias[0] ** 2, jnp.sum(W**2), jnp.sum(W), bias[0] * jnp.sum(W[0])])


@pytest.mark.parametrize("correct", [True, False])
def test_ridge_move_leaves_the_prior_invariant_and_its_broken_twin_does_not(correct):
    """With nothing observed the likelihood ratio is one and the move is a Gibbs step of the
    prior along its directions: started from prior draws (N = 5 entities, whose features often
    cover them all or repeat), 20 moves shift no statistic's mean. The twin that leaves the
    weights' pull out of the bias direction's conditional must fail by a wide margin."""
    hyper = ilfm.make_hyper(alpha_prior=(3.0, 3.0), sigma_s=1.0)
    data, start = _prior_states(hyper, 20_000, seed=21)
    data = data._replace(mask=jnp.zeros_like(data.mask))

    def chain(key, F, W, bias, beta):
        def one(t, carry):
            W, bias = carry
            step = ridge_move(jax.random.fold_in(key, t), data, hyper, F, W, bias, beta, "logit",
                              correct)  # fmt: skip
            return step[:2]

        W, bias = jax.lax.fori_loop(0, 20, one, (W, bias))
        return _ridge_statistics(F, W, bias)

    keys = jax.random.split(jax.random.key(22), len(start.F))
    after = jax.jit(jax.vmap(chain))(keys, start.F, start.W, start.bias, start.beta)
    before = jax.vmap(_ridge_statistics)(start.F, start.W, start.bias)
    ridges = jax.vmap(lambda F: _null_directions(F)[4])(start.F)
    assert 0.2 < float(jnp.mean(ridges)) < 0.95  # the move has something to do
    z, threshold = _z_scores(before, after)
    if correct:
        assert np.all(z < threshold), (z, threshold)
    else:
        assert z.max() > 2 * threshold, (z, threshold)


def _scale_statistics(sigma_w, W):
    # the weights on sigma_w's scale: the marginal of sigma_w alone is kept by a draw given
    # any subset of the weights, the joint only by the right one
    return jnp.stack([jnp.log(sigma_w), sigma_w**2, jnp.sum(W**2) / sigma_w**2])


@pytest.mark.parametrize("correct", [True, False])
def test_weight_scale_draw_leaves_the_prior_invariant_and_its_broken_twin_does_not(correct):
    """The conjugate draw of sigma_w given the weights, from joint prior draws of sigma_w, F
    and W, leaves sigma_w's distribution as it was. The twin counts the weights of one
    relation only (as if the model had one), and must fail by a wide margin."""
    hyper = ilfm.make_hyper(alpha_prior=(3.0, 3.0), sigma_w_prior=(3.0, 2.0))
    _, start = _prior_states(hyper, 20_000, seed=31)
    W = start.W if correct else start.W[:, :1]
    keys = jax.random.split(jax.random.key(32), len(start.F))
    draw = jax.vmap(lambda k, F, W: sample_weight_scale(k, F, W, 3.0, 2.0))
    after = jax.vmap(_scale_statistics)(jax.jit(draw)(keys, start.F, W), start.W)
    before = jax.vmap(_scale_statistics)(start.sigma_w, start.W)
    z, threshold = _z_scores(before, after)
    if correct:
        assert np.all(z < threshold), (z, threshold)
    else:
        assert z.max() > 2 * threshold, (z, threshold)


def test_a_sampled_weight_scale_is_in_the_state_the_trace_and_the_log_joint():
    rng = np.random.default_rng(2)
    data = ilfm.make_data((rng.random((2, 10, 10)) < 0.3).astype(float))
    hyper = ilfm.make_hyper(sigma_w=1.5, sigma_w_prior=(2.0, 2.0))
    state = ilfm.gibbs.init(jax.random.key(0), data, hyper, capacity=6)
    assert float(state.sigma_w) == 1.5
    algorithm = ilfm.gibbs(data, hyper, capacity=6, num_leapfrog=3, ridge=True)
    result = run(algorithm, jax.random.key(1), 30, num_warmup=10, progress_bar=False)
    sigma_w = np.asarray(result.trace["posterior"]["sigma_w"])
    assert sigma_w.shape == (1, 30) and np.all(sigma_w > 0) and np.unique(sigma_w).size > 20
    final = jax.tree.map(lambda leaf: leaf[0], result.final_state)
    lp = result.trace["sample_stats"]["lp"][0, -1]
    np.testing.assert_allclose(lp, ilfm.log_joint(data, hyper, final), rtol=1e-6)
    # every draw's lp is its own state's log joint (with its own sigma_w), not the last one's
    post = result.trace["posterior"]
    kept = final._replace(
        F=post["F"][0], W=post["W"][0], bias=post["bias"][0], alpha=post["alpha"][0],
        sigma_w=post["sigma_w"][0], log_step_size=jnp.zeros(30), beta=jnp.zeros((30, 2, 0)),
        adapting=None, pair_weights=None,
    )  # fmt: skip
    each = jax.vmap(lambda state: ilfm.log_joint(data, hyper, state))(kept)
    np.testing.assert_allclose(result.trace["sample_stats"]["lp"][0], each, rtol=1e-5)
    # the same sigma_w fixed: the log joint drops the inverse-Gamma term
    fixed = ilfm.log_joint(data, ilfm.make_hyper(sigma_w=float(final.sigma_w)),
                           final._replace(sigma_w=None))  # fmt: skip
    a, b, s2 = 2.0, 2.0, float(final.sigma_w) ** 2
    from scipy.stats import invgamma

    np.testing.assert_allclose(lp - fixed, invgamma(a, scale=b).logpdf(s2), rtol=1e-6)
    # one model per relation: a scale per relation
    single = ilfm.gibbs(data, hyper, capacity=6, num_leapfrog=3, mode="single", ridge=True)
    result = run(single, jax.random.key(1), 5, num_warmup=2, progress_bar=False)
    assert np.asarray(result.trace["posterior"]["sigma_w"]).shape == (1, 5, 2)


def test_bad_weight_scale_and_ridge_settings_are_refused_by_name():
    data = ilfm.make_data(np.zeros((1, 4, 4)))
    for bad in ((0.0, 1.0), (1.0, -2.0), (1.0,), 3.0, (1.0, np.nan)):
        with pytest.raises(ValueError, match="sigma_w_prior"):
            ilfm.make_hyper(sigma_w_prior=bad)
    with pytest.raises(ValueError, match="ridge"):
        ilfm.gibbs(data, ridge="yes")
    with pytest.raises(ValueError, match="ridge"):
        ilfm.gibbs.build_step(ridge=1)
    # a state without the scale for hyperparameters that sample it
    hyper = ilfm.make_hyper(sigma_w_prior=(2.0, 2.0))
    state = ilfm.gibbs.init(jax.random.key(0), data, ilfm.make_hyper())
    step = ilfm.gibbs.build_step()
    with pytest.raises(ValueError, match=r"state\.sigma_w"):
        step(jax.random.key(1), state, data, hyper)


def test_fisher_precision_is_the_sum_over_observed_pairs_plus_the_prior():
    """Built from products of small matrices; checked against the sum of d_ij a_ij a_ij' over
    the pairs, a_ij = (1, f_i (x) f_j, x_ij), with covariates."""
    from bnpjax.models.ilfm.mass import fisher_precision

    rng = np.random.default_rng(3)
    N, C, X = 6, 3, rng.normal(size=(2, 6, 6))
    F = (rng.random((N, C)) < 0.5).astype(float)
    F[:, 2] = 0.0  # an inactive slot: its rows hold the prior alone
    D = rng.random((R, N, N))
    hyper = ilfm.make_hyper(sigma_w=1.5, sigma_s=2.0, sigma_beta=0.5)
    got = np.asarray(fisher_precision(jnp.asarray(F), jnp.asarray(D), jnp.asarray(X), hyper))
    prior = np.diag([1 / 4.0] + [1 / 2.25] * C * C + [1 / 0.25] * 2)
    for r in range(R):
        want = prior.copy()
        for i in range(N):
            for j in range(N):
                a = np.concatenate([[1.0], np.outer(F[i], F[j]).ravel(), X[:, i, j]])
                want += D[r, i, j] * np.outer(a, a)
        np.testing.assert_allclose(got[r], want, rtol=1e-10, atol=1e-12)


def test_fisher_mass_adapts_in_warmup_only_and_survives_a_grown_buffer():
    rng = np.random.default_rng(4)
    data = ilfm.make_data((rng.random((2, 10, 10)) < 0.3).astype(float))
    hyper = ilfm.make_hyper()
    state = ilfm.gibbs.init(jax.random.key(0), data, hyper, capacity=6, mass="fisher")
    assert state.pair_weights.shape == (2, 10, 10)
    np.testing.assert_array_equal(
        np.asarray(state.pair_weights)[:, np.arange(10), np.arange(10)], 0
    )
    step = jax.jit(ilfm.gibbs.build_step(num_leapfrog=3))
    on, _ = step(jax.random.key(1), state._replace(adapting=jnp.ones((), bool)), data, hyper)
    off, _ = step(jax.random.key(1), state, data, hyper)
    assert not np.allclose(on.pair_weights, state.pair_weights)
    np.testing.assert_array_equal(off.pair_weights, state.pair_weights)
    # capacity 2 makes the driver grow the buffer; the pair weights do not depend on it
    algorithm = ilfm.gibbs(data, hyper, capacity=2, num_init_features=2, num_leapfrog=3,
                           mass="fisher")  # fmt: skip
    result = run(algorithm, jax.random.key(2), 20, num_warmup=10, progress_bar=False)
    assert result.algorithm.capacity > 2
    accept = np.asarray(result.trace["sample_stats"]["acceptance_rate"])
    assert np.all(np.isfinite(accept)) and accept.mean() > 0.2


def test_bad_mass_settings_are_refused_by_name():
    data = ilfm.make_data(np.zeros((1, 4, 4)))
    with pytest.raises(ValueError, match="mass"):
        ilfm.gibbs(data, mass="dense")
    with pytest.raises(ValueError, match="mass"):
        ilfm.gibbs(data, mass="fisher", weights="random_walk")
    with pytest.raises(ValueError, match="mass"):
        ilfm.gibbs.init(jax.random.key(0), data, mass="identity")
    fisher = ilfm.gibbs.init(jax.random.key(0), data, mass="fisher")
    with pytest.raises(ValueError, match="Fisher mass"):
        ilfm.gibbs.build_step(weights="random_walk")(
            jax.random.key(1), fisher, data, ilfm.make_hyper()
        )


def _random_walk_statistics(data, W, bias, likelihood):
    """The weights' and biases' moments and their coupling with the links (the observed
    entries' sum of y times the logit), which only the likelihood part of the ratio keeps."""
    logits = _logits(jnp.ones((N, 1)), jnp.sum(W, (1, 2))[:, None, None], bias[:, None, None])
    return jnp.stack([
        jnp.sum(W), jnp.sum(W**2), jnp.sum(bias), jnp.sum(bias**2),
        jnp.sum(data.mask * data.Y * logits),
    ])  # fmt: skip


@pytest.mark.parametrize(
    ("likelihood", "correct"),
    [pytest.param("logit", True, marks=long_only("about 17 s")), ("probit", True),
     ("probit", False)],
)  # fmt: skip
def test_random_walk_keeps_the_posterior_and_its_broken_twin_does_not(likelihood, correct):
    """Exact starts for the random-walk Metropolis move of the weights and biases (F held):
    4,000 joint draws of (F, W, bias) and links, then 5 moves given the links; a move that
    leaves p(W, bias | F, Y) invariant keeps the joint, so the statistics' paired shifts
    have mean zero (measured max |z| 2.4 and 2.2 against 3.7). The twin's ratio uses a prior
    sd of the weights twice the model's (36).
    (Its Geweke row with every other move, ilfm.gibbs.random_walk_probit, is long-only.)"""
    from bnpjax.models.ilfm.weights import random_walk

    hyper = ilfm.make_hyper(alpha_prior=(3.0, 3.0), sigma_s=1.0)
    data, start = _prior_states(hyper, 4000, seed=41)
    keys = jax.random.split(jax.random.key(42), len(start.F))
    links = jax.vmap(lambda k, s: ilfm.geweke.data_sample(k, s, data, likelihood=likelihood))
    datas = jax.jit(links)(keys, start)
    ratio_hyper = hyper if correct else hyper._replace(sigma_w=2 * hyper.sigma_w)

    def moves(key, d, state):
        W, bias = state.W, state.bias
        for t in range(5):
            W, bias, _ = random_walk(jax.random.fold_in(key, t), d, ratio_hyper, state.F, W,
                                     bias, jnp.log(0.5), likelihood)  # fmt: skip
        return W, bias

    W, bias = jax.jit(jax.vmap(moves))(jax.random.split(jax.random.key(43), len(keys)), datas,
                                       start)  # fmt: skip
    stats = jax.vmap(_random_walk_statistics, (0, 0, 0, None))
    before = stats(datas, start.W, start.bias, likelihood)
    after = stats(datas, W, bias, likelihood)
    z, threshold = _z_scores(before, after)
    moved = np.mean(np.any(np.asarray(W != start.W), axis=(1, 2, 3)))
    assert moved > 0.5, moved  # the move moves (a rejecting one keeps the joint too)
    if correct:
        assert np.all(z < threshold), (z, threshold)
    else:
        assert z.max() > 2 * threshold, (z, threshold)
