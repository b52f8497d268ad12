"""Bayesian factorization machines: Geweke tests of the Gibbs sampler (regression, probit and
ordered probit; rank 0 and rank > 0; two feature groups), exact parallel blocks, recovery,
the myFM-style estimators and input validation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from jax.scipy.special import ndtr

from bnpjax.fm import FMClassifier, FMOrdinal, FMRegressor
from bnpjax.infer import compile_count, run
from bnpjax.models import fm
from bnpjax.testing import geweke_test

# proper, light-tailed hyperpriors so that every test function has a finite variance
HYPER = fm.make_hyper(alpha_0=20.0, beta_0=18.0, gamma_0=2.0, mu_0=0.0, reg_0=1.0,
                      cutpoint_scale=1.0)  # fmt: skip


def _small_design(seed=0):
    """12 rows: a one-hot block of 4 'users', a one-hot block of 3 'items', and 2 real-valued
    features present in some rows (so the colouring has more than two colours)."""
    rng = np.random.default_rng(seed)
    n = 12
    users = np.arange(n) % 4
    items = rng.integers(0, 3, n)
    X = np.zeros((n, 9))
    X[np.arange(n), users] = 1.0
    X[np.arange(n), 4 + items] = 1.0
    X[:, 7] = np.where(rng.random(n) < 0.6, rng.normal(size=n), 0.0)
    X[:, 8] = np.where(rng.random(n) < 0.5, rng.uniform(0.5, 1.5, n), 0.0)
    return sp.csr_matrix(X)


GROUPS = [4, 5]

# The quadratic term makes y heavy-tailed under the prior, and the successive chains wander
# through the scale of V slowly (ESS about 100-300 of 80,000 draws for sum V^2 and mean y^2).
# A few long chains then rest their standard error on a handful of excursions: four chains of
# 20,000 steps gave |z| = 4.6 for one seed under one compiler's rounding and 0.9 under
# another's. Many chains, each started from an exact joint draw, estimate the variance of
# the mean from independent replicates instead: 16 chains of 5,000 steps (the same number of
# draws) gave max |z| 1.3-2.1 over seeds 1-7 and 12 for the relation-block test.
SUCCESSIVE = dict(num_successive=5_000, num_chains=16)


def _statistics(likelihood):
    def stats(state, data):
        yhat, _ = fm._predict_parts(data, state.b, state.w, state.V)
        out = {
            "b": state.b,
            "sum w": jnp.sum(state.w),
            "sum w^2": jnp.sum(state.w**2),
            "sum V^2": jnp.sum(state.V**2),
            "mu_w[1]": state.mu_w[1],
            "var_w[0]": state.var_w[0],
            "sum var_v": jnp.sum(state.var_v),
            "<y, yhat>": jnp.mean(data.y * yhat),
            "mean y": jnp.mean(data.y),
        }
        if likelihood == "gaussian":
            out["noise_var"] = state.noise_var
            out["mean y^2"] = jnp.mean(data.y**2)
        if likelihood == "ordinal":
            out["cutpoint 0"] = state.cutpoints[0]
            out["cutpoint gap"] = state.cutpoints[1] - state.cutpoints[0]
        return out

    return stats


@pytest.mark.parametrize(
    ("likelihood", "rank"), [("gaussian", 0), ("gaussian", 2), ("probit", 2), ("ordinal", 1)]
)
def test_geweke(likelihood, rank):
    X = _small_design()
    num_levels = 3 if likelihood == "ordinal" else 0
    y0 = np.zeros(X.shape[0])
    base = fm.make_data(X, y0, likelihood=likelihood, group_shapes=GROUPS)
    assert len(base.blocks) >= 3  # the real-valued columns share rows with both blocks
    fit_w0 = likelihood != "ordinal"
    result = geweke_test(
        jax.random.key(11),
        prior_sample=lambda key: fm.prior_sample(
            key,
            9,
            rank,
            HYPER,
            num_groups=2,
            group=base.group,
            likelihood=likelihood,
            num_levels=num_levels,
            fit_w0=fit_w0,
        ),
        data_sample=lambda key, state: fm.data_sample(key, state, base, likelihood),
        kernel=lambda data: fm.gibbs(
            data, rank=rank, likelihood=likelihood, hyper=HYPER, num_levels=num_levels or None
        ),
        test_functions=_statistics(likelihood),
        num_marginal=20_000,
        **SUCCESSIVE,
    )
    assert result.passed, str(result)


def test_geweke_catches_a_too_narrow_block_conditional(monkeypatch):
    """The same test on a kernel whose joint (w_i, v_i) draws have half the right spread."""
    original = fm._joint_block

    def narrow(noise, *args):
        return original(0.5 * noise, *args)

    monkeypatch.setattr(fm, "_joint_block", narrow)
    X = _small_design()
    base = fm.make_data(X, np.zeros(X.shape[0]), group_shapes=GROUPS)
    result = geweke_test(
        jax.random.key(11),
        prior_sample=lambda key: fm.prior_sample(key, 9, 1, HYPER, num_groups=2, group=base.group),
        data_sample=lambda key, state: fm.data_sample(key, state, base),
        kernel=lambda data: fm.gibbs(data, rank=1, hyper=HYPER),
        test_functions=_statistics("gaussian"),
        num_marginal=20_000,
        num_successive=4_000,
    )
    assert not result.passed, str(result)


def test_colouring_separates_features_that_share_a_row():
    X = _small_design(3)
    rows, cols, _, (n, p) = fm.to_coo(X)
    colour = fm.colour_features(rows, cols, n, p)
    for r in range(n):
        present = cols[rows == r]
        assert len(set(colour[present])) == len(present)
    # a user x item one-hot design is bipartite: two colours (greedy by degree gave four
    # here), each holding exactly one feature of every row
    X, _, _ = _synthetic(0, n=200)
    rows, cols, _, (n, p) = fm.to_coo(X)
    colour = fm.colour_features(rows, cols, n, p)
    assert colour.max() == 1
    for c in (0, 1):
        assert np.array_equal(np.sort(rows[colour[cols] == c]), np.arange(n))


def _synthetic(seed, n=3000, users=60, items=40, rank=2, noise=0.3, pairs=None):
    """``n`` random (user, item) ratings of a rank-``rank`` FM: the one-hot design, the
    noiseless truth and the noisy targets. ``pairs=(u, i)``: the same for these pairs instead,
    under the same true parameters (the ``n`` random pairs are still drawn first, so the
    parameters are those of ``seed`` and ``n``)."""
    rng = np.random.default_rng(seed)
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)
    p = users + items
    b, w, V = 1.0, 0.5 * rng.normal(size=p), 0.8 * rng.normal(size=(p, rank))
    if pairs is not None:
        u, i = (np.asarray(a) for a in pairs)
    m = len(u)
    entries = (np.repeat(np.arange(m), 2), np.stack([u, users + i], 1).ravel())
    X = sp.csr_matrix((np.ones(2 * m), entries), shape=(m, p))
    truth = b + w[u] + w[users + i] + np.sum(V[u] * V[users + i], axis=1)
    return X, truth, truth + noise * rng.normal(size=m)


def test_recovery_of_the_noiseless_signal():
    """With 3000 ratings of 60 x 40 pairs, the posterior-mean prediction must be far closer to
    the noiseless truth than the noise (sd 0.3) and the noise sd must be recovered."""
    X, truth, y = _synthetic(0)
    model = FMRegressor(rank=2, random_state=1).fit(X, y, n_iter=300, n_kept_samples=200)
    error = np.sqrt(np.mean((model.predict(X) - truth) ** 2))
    assert error < 0.12, error
    noise_sd = np.sqrt(model.samples_["noise_var"])
    # posterior of sigma_n: centred within 4 posterior sd of the truth (0.3)
    assert abs(noise_sd.mean() - 0.3) < 4 * noise_sd.std() + 0.01, noise_sd.mean()
    # held-out pairs: generalisation, not memorisation. Every (user, item) pair that has no
    # rating in training (680 of the 2400), under the same generating parameters. The error
    # there is the posterior uncertainty of the entities' (w, v): about 0.3 sqrt(3/50 + 3/75)
    # = 0.095 for an average pair (3 parameters per entity, ~50 ratings per user and ~75 per
    # item), a little more since unrated pairs fall more often on sparsely rated entities;
    # measured 0.113-0.114 over random_state 1-3 (Monte Carlo spread < 0.001), against 0.099
    # on the training pairs. The bound is the training one: it generalises as well as it fits.
    seen = {tuple(pair) for pair in X.indices.reshape(-1, 2)}  # (user, 60 + item) per row
    unseen = np.array([(u, i) for u in range(60) for i in range(40) if (u, 60 + i) not in seen])
    X_new, truth_new, _ = _synthetic(0, pairs=unseen.T)
    assert np.sqrt(np.mean((model.predict(X_new) - truth_new) ** 2)) < 0.12


def test_estimators_classifier_and_ordinal_and_no_recompile():
    X, truth, y = _synthetic(2, n=1500)
    median = np.median(y)
    labels = (y > median).astype(int)
    clf = FMClassifier(rank=2, random_state=0).fit(X, labels, n_iter=60, n_kept_samples=40)
    proba = clf.predict_proba(X)
    assert proba.shape == (1500,)
    assert np.mean(clf.predict(X) == labels) > 0.8
    # the true P(label = 1) is Phi((truth - median) / 0.3), an FM on the probit scale (the
    # model is well specified). For a calibrated posterior the mean squared error of the
    # posterior mean is the mean posterior variance: the error must be of the size of the
    # posterior sd of Phi(hat y) (measured ratio 1.11-1.17 over random_state 0-5, RMSE
    # 0.162-0.166 with Monte Carlo spread 0.002), and far below the 0.42 of a constant 0.5.
    draws = np.asarray(ndtr(clf.predict_latent(X)))
    np.testing.assert_allclose(proba, draws.mean(0), rtol=1e-5)
    error = np.sqrt(np.mean((proba - ndtr((truth - median) / 0.3)) ** 2))
    assert error < 1.3 * np.sqrt(np.mean(draws.var(0))) and error < 0.18, error
    cuts = np.quantile(y, [0.25, 0.5, 0.75])
    levels = 1 + np.digitize(y, cuts)  # ratings 1..4
    ordinal = FMOrdinal(rank=2, random_state=0).fit(X, levels, n_iter=60, n_kept_samples=40)
    probs = ordinal.predict_proba(X)
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
    assert np.mean(np.abs(ordinal.predict(X) - levels) <= 1) > 0.9
    # against the true level probabilities Phi((c_k - truth) / 0.3) - Phi((c_{k-1} - truth) /
    # 0.3): mean total variation distance 0.19-0.22 over random_state 0-5 (sd 0.012), 0.56
    # for the constant 1/4
    cdf = ndtr((np.r_[cuts, np.inf][None, :] - truth[:, None]) / 0.3)
    true_probs = np.diff(cdf, axis=1, prepend=0.0)
    distance = 0.5 * np.abs(probs - true_probs).sum(1).mean()
    assert distance < 0.27, distance
    idata = ordinal.to_inference_data()
    assert "cutpoints" in idata.posterior and "lp" in idata.sample_stats
    # a second fit of the same shapes compiles nothing
    before = compile_count()
    FMOrdinal(rank=2, random_state=1).fit(X, levels, n_iter=60, n_kept_samples=40)
    assert compile_count() == before


def test_kernel_runs_through_the_driver_with_test_predictions():
    X, _, y = _synthetic(4, n=400)
    data = fm.make_data(X, y)
    rows, cols, values, shape = fm.to_coo(X[:50])
    algorithm = fm.gibbs(data, rank=2, test=(rows, cols, values), num_test=shape[0])
    result = run(algorithm, jax.random.key(0), 20, num_chains=2, progress_bar=False)
    assert result.trace["sample_stats"]["yhat_test"].shape == (2, 20, 50)
    assert result.trace["posterior"]["V"].shape == (2, 20, X.shape[1], 2)


def test_bad_input_is_rejected_naming_the_argument():
    X = sp.random(10, 5, density=0.5, format="csr", random_state=0)
    y = np.arange(10.0)
    with pytest.raises(ValueError, match="NaN"):
        fm.make_data(np.full((10, 5), np.nan), y)
    bad = X.copy()
    bad.data[0] = np.inf
    with pytest.raises(ValueError, match="X contains NaN or infinite"):
        fm.make_data(bad, y)
    with pytest.raises(ValueError, match="y must have shape"):
        fm.make_data(X, y[:-1])
    with pytest.raises(ValueError, match="y contains NaN"):
        fm.make_data(X, np.r_[y[:-1], np.nan])
    with pytest.raises(ValueError, match="labels 0 and 1"):
        FMClassifier().fit(X, np.r_[np.zeros(5), 2 * np.ones(5)], n_iter=2)
    with pytest.raises(ValueError, match="consecutive integer levels"):
        FMOrdinal().fit(X, np.r_[np.ones(5), 3 * np.ones(5)], n_iter=2)
    with pytest.raises(ValueError, match="integer levels"):
        FMOrdinal().fit(X, np.linspace(1, 2, 10), n_iter=2)
    with pytest.raises(ValueError, match="group_shapes"):
        fm.make_data(X, y, group_shapes=[2, 2])
    with pytest.raises(ValueError, match="n_kept_samples"):
        FMRegressor().fit(X, y, n_iter=5, n_kept_samples=6)
    with pytest.raises(ValueError, match="rank"):
        FMRegressor(rank=-1).fit(X, y, n_iter=2)
    with pytest.raises(ValueError, match="2-D"):
        fm.make_data(np.ones(10), y)
    model = FMRegressor(rank=1).fit(X, y, n_iter=3)
    with pytest.raises(ValueError, match="5"):
        model.predict(np.ones((2, 4)))
    # a chain that turned non-finite is reported, not turned into silent NaN predictions
    import bnpjax.fm as estimators

    def poisoned_run(*args, **kwargs):
        result = run(*args, **kwargs)
        result.trace["posterior"]["w"][0, 1, 0] = np.nan
        return result

    estimators.run, real_run = poisoned_run, estimators.run
    try:
        with pytest.raises(FloatingPointError, match="w is non-finite from kept draw 1"):
            FMRegressor(rank=1).fit(X, y, n_iter=3)
    finally:
        estimators.run = real_run
    with pytest.raises(ValueError, match="fit"):
        FMRegressor().predict(X)
    with pytest.raises(ValueError, match="group_shapes must be a sequence of integers"):
        fm.make_data(X, y, group_shapes=[2.5, 2.5])  # int() would truncate to [2, 2]
    # the kernel re-checks data.y against its likelihood (data built for "gaussian")
    data = fm.make_data(X, y + 0.5)
    with pytest.raises(ValueError, match=r"data\.y must hold class labels 0 and 1"):
        fm.gibbs(data, likelihood="probit")
    with pytest.raises(ValueError, match=r"data\.y must hold ordinal levels"):
        fm.gibbs(data, likelihood="ordinal")
    # labels are 0..num_levels-1: the top label 9 needs num_levels >= 10
    data = fm.make_data(X, y)
    with pytest.raises(ValueError, match="num_levels = 9"):
        fm.gibbs(data, likelihood="ordinal", num_levels=9)
    assert fm.gibbs(data, likelihood="ordinal", num_levels=10).spec.settings["num_levels"] == 10
    with pytest.raises(ValueError, match="num_levels must be an integer"):
        fm.gibbs(data, likelihood="ordinal", num_levels=10.5)
    with pytest.raises(ValueError, match="num_levels applies to likelihood 'ordinal' only"):
        fm.gibbs(data, num_levels=10)
    with pytest.raises(ValueError, match="hyper must come from"):
        fm.gibbs(data, hyper={"alpha_0": 1.0})
    rows, cols, values, (num_test, _) = fm.to_coo(X[:4])
    with pytest.raises(ValueError, match="num_test must be the number of rows"):
        fm.gibbs(data, test=(rows, cols, values))  # num_test left at 0
    with pytest.raises(ValueError, match="num_test = 4 is given without a test design"):
        fm.gibbs(data, num_test=num_test)
    with pytest.raises(ValueError, match=r"test rows must hold integers in 0\.\.2"):
        fm.gibbs(data, test=(rows, cols, values), num_test=3)
    with pytest.raises(ValueError, match="test rows must hold integers"):
        fm.gibbs(data, test=(rows.astype(float), cols, values), num_test=num_test)
    with pytest.raises(ValueError, match=r"test cols must hold integers in 0\.\.4"):
        fm.gibbs(data, test=(rows, cols + 1, values), num_test=num_test)
    with pytest.raises(ValueError, match="test rows, cols and values must be 1-D of one length"):
        fm.gibbs(data, test=(rows, cols, values[:-1]), num_test=num_test)
    with pytest.raises(ValueError, match="test values contain NaN"):
        fm.gibbs(data, test=(rows, cols, np.full_like(values, np.nan)), num_test=num_test)
    with pytest.raises(ValueError, match="test must be a tuple"):
        fm.gibbs(data, test=(rows, cols), num_test=num_test)
    with pytest.raises(ValueError, match="test has 1 relation blocks but data has 0"):
        block = fm.relation_design((np.zeros(num_test, int), np.ones((1, 1))), num_test, offset=4)
        fm.gibbs(data, test=(rows, cols, values, (block,)), num_test=num_test)


# --------------------------------------------------------------------------------------------
# relation blocks


def _relation_design(seed=0):
    """12 rows of 4 'users' x 3 'items': X holds the item one-hot; one relation block (a row
    per user) holds the user one-hot and 3 real-valued 'implicit' features that users share,
    so the block has several colours and chunks. Returns X, the block and the expanded X."""
    rng = np.random.default_rng(seed)
    n, users = 12, np.arange(12) % 4
    items = rng.integers(0, 3, n)
    X = sp.csr_matrix((np.ones(n), (np.arange(n), items)), shape=(n, 3))
    implicit = np.where(rng.random((4, 3)) < 0.6, rng.uniform(0.3, 1.0, (4, 3)), 0.0)
    implicit[0] = [0.5, 0.7, 0.9]  # one user holds all three: three colours at least
    block = sp.csr_matrix(np.hstack([np.eye(4), implicit]))
    expanded = sp.hstack([X, block[users]]).tocsr()
    return X, fm.RelationBlock(users, block), expanded


def test_relation_block_matches_the_expanded_design():
    X, block, expanded = _relation_design()
    y = np.linspace(-1, 1, 12)
    with_block = fm.make_data(X, y, X_rel=[block])
    plain = fm.make_data(expanded, y)
    assert sum(c.rows.shape[0] for c in with_block.relations[0].chunks) >= 3
    state = fm.prior_sample(jax.random.key(0), 10, 3, HYPER)
    for a, b in zip(fm._predict_parts(with_block, state.b, state.w, state.V),
                    fm._predict_parts(plain, state.b, state.w, state.V), strict=True):  # fmt: skip
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    # the sweep keeps its cached residual exact: the RMSE it reports is that of a fresh
    # prediction from the state it returns
    algorithm = fm.gibbs(with_block, rank=3, hyper=HYPER)
    # compiled: run op by op, this one sweep took 19 s against 8 s
    new, info = jax.jit(algorithm.step)(jax.random.key(1), algorithm.init(jax.random.key(2)))
    yhat, _ = fm._predict_parts(plain, new.b, new.w, new.V)
    np.testing.assert_allclose(info.rmse, np.sqrt(np.mean((y - yhat) ** 2)), rtol=1e-4)


def _relation_geweke(key, num_successive, num_chains=16):
    X, block, _ = _relation_design()
    base = fm.make_data(X, np.zeros(12), group_shapes=[3, 7], X_rel=[block])
    return geweke_test(
        key,
        prior_sample=lambda k: fm.prior_sample(k, 10, 2, HYPER, num_groups=2, group=base.group),
        data_sample=lambda k, state: fm.data_sample(k, state, base),
        kernel=lambda data: fm.gibbs(data, rank=2, hyper=HYPER),
        test_functions=_statistics("gaussian"),
        num_marginal=20_000,
        num_successive=num_successive,
        num_chains=num_chains,
    )


def test_geweke_with_a_relation_block():
    result = _relation_geweke(jax.random.key(12), **SUCCESSIVE)
    assert result.passed, str(result)


def test_geweke_catches_a_relation_sweep_without_the_rr_sums(monkeypatch):
    """Dropping the sum of r r' from the block-row sums (the precision's last term) must fail."""
    original = fm._block_row_sums

    def without_rr(relation, r, e):
        S, T, E, R = original(relation, r, e)
        return S, 0.0 * T, E, R

    monkeypatch.setattr(fm, "_block_row_sums", without_rr)
    result = _relation_geweke(jax.random.key(12), 1_000)
    assert not result.passed, str(result)


def test_relation_blocks_in_the_estimator_and_bad_blocks():
    X, truth, y = _synthetic(5, n=1200, users=40, items=30)
    users = X[:, :40].indices  # one-hot: the user of each row
    items = X[:, 40:].tocsr().indices
    item_X = sp.csr_matrix((np.ones(1200), (np.arange(1200), items)), shape=(1200, 30))
    block = fm.RelationBlock(users, sp.eye(40, format="csr"))
    model = FMRegressor(rank=2, random_state=0)
    model.fit(item_X, y, X_rel=[block], n_iter=200, n_kept_samples=100)
    assert np.sqrt(np.mean((model.predict(item_X, [block]) - truth) ** 2)) < 0.15
    # the same model with no columns in X at all: both entities as relation blocks
    item_block = fm.RelationBlock(items, sp.eye(30, format="csr"))
    empty = sp.csr_matrix((1200, 0))
    model.fit(empty, y, X_rel=[block, item_block], n_iter=200, n_kept_samples=100)
    assert np.sqrt(np.mean((model.predict(empty, [block, item_block]) - truth) ** 2)) < 0.15
    with pytest.raises(ValueError, match="widths"):
        model.predict(empty, [block])
    with pytest.raises(ValueError, match=r"X_rel\[0\].original_to_block must have one entry"):
        fm.make_data(item_X, y, X_rel=[fm.RelationBlock(users[:-1], sp.eye(40))])
    with pytest.raises(ValueError, match=r"X_rel\[0\].original_to_block must hold integer"):
        fm.make_data(item_X, y, X_rel=[fm.RelationBlock(users + 1, sp.eye(40))])
    with pytest.raises(ValueError, match=r"X_rel\[0\].data contains NaN"):
        fm.make_data(item_X, y, X_rel=[fm.RelationBlock(users, np.full((40, 2), np.nan))])
