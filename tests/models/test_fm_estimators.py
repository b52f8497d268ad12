"""The myFM-style estimators (``bnpjax.fm``): recovery of a noiseless signal, calibrated
classifier and ordinal probabilities, relation blocks, no recompilation for a second fit,
and input validation."""

import numpy as np
import pytest
import scipy.sparse as sp
from jax.scipy.special import ndtr

import bnpjax.models.fm.estimators as estimators
from bnpjax.fm import FMClassifier, FMOrdinal, FMRegressor
from bnpjax.infer import compile_count, run
from bnpjax.models import fm


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


def test_estimators_reject_bad_input_naming_the_argument():
    X = sp.random(10, 5, density=0.5, format="csr", random_state=0)
    y = np.arange(10.0)
    with pytest.raises(ValueError, match="labels 0 and 1"):
        FMClassifier().fit(X, np.r_[np.zeros(5), 2 * np.ones(5)], n_iter=2)
    with pytest.raises(ValueError, match="consecutive integer levels"):
        FMOrdinal().fit(X, np.r_[np.ones(5), 3 * np.ones(5)], n_iter=2)
    with pytest.raises(ValueError, match="integer levels"):
        FMOrdinal().fit(X, np.linspace(1, 2, 10), n_iter=2)
    with pytest.raises(ValueError, match="n_kept_samples"):
        FMRegressor().fit(X, y, n_iter=5, n_kept_samples=6)
    with pytest.raises(ValueError, match="rank"):
        FMRegressor(rank=-1).fit(X, y, n_iter=2)
    for flag in ("fit_w0", "fit_linear", "progress_bar", "bucket_shapes"):
        with pytest.raises(ValueError, match=f"{flag} must be True or False"):
            FMRegressor(**{flag: "no"}).fit(X, y, n_iter=2)
    # test targets: never dropped without their design, never NaN
    with pytest.raises(ValueError, match="y_test needs X_test"):
        FMRegressor().fit(X, y, y_test=y, n_iter=2)
    with pytest.raises(ValueError, match="y_test"):
        FMRegressor().fit(X, y, X_test=X, y_test=np.r_[np.nan, y[1:]], n_iter=2)
    with pytest.raises(ValueError, match="y_test must hold class labels 0 and 1"):
        FMClassifier().fit(X, y % 2, X_test=X, y_test=y, n_iter=2)
    model = FMRegressor(rank=1).fit(X, y, n_iter=3)
    with pytest.raises(ValueError, match="5"):
        model.predict(np.ones((2, 4)))

    # a chain that turned non-finite is reported, not turned into silent NaN predictions
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


def test_relation_blocks_in_the_estimator():
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
