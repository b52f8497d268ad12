"""The FM Gibbs kernel: through the driver with test predictions, its InferenceData
(observed data, pointwise log-likelihood for az.loo), predict and log_likelihood from the
draws, the protocol's levels (init, build_step), the deprecated names, and bad settings
rejected naming the argument."""

import arviz as az
import jax
import numpy as np
import pytest
import scipy.sparse as sp

import bnpjax
from bnpjax.infer import run
from bnpjax.models import fm


def _synthetic(seed, n=400, users=60, items=40, rank=2, noise=0.3):
    rng = np.random.default_rng(seed)
    u, i = rng.integers(0, users, n), rng.integers(0, items, n)
    p = users + items
    b, w, V = 1.0, 0.5 * rng.normal(size=p), 0.8 * rng.normal(size=(p, rank))
    entries = (np.repeat(np.arange(n), 2), np.stack([u, users + i], 1).ravel())
    X = sp.csr_matrix((np.ones(2 * n), entries), shape=(n, p))
    truth = b + w[u] + w[users + i] + np.sum(V[u] * V[users + i], axis=1)
    return X, truth, truth + noise * rng.normal(size=n)


def test_kernel_runs_through_the_driver_with_test_predictions():
    X, _, y = _synthetic(4, n=400)
    data = fm.make_data(X, y)
    rows, cols, values, shape = fm.to_coo(X[:50])
    algorithm = fm.gibbs(data, rank=2, test=(rows, cols, values), num_test=shape[0])
    result = run(algorithm, jax.random.key(0), 20, num_chains=2, progress_bar=False)
    assert result.trace["sample_stats"]["yhat_test"].shape == (2, 20, 50)
    assert result.trace["posterior"]["V"].shape == (2, 20, X.shape[1], 2)
    # the traced pointwise log-likelihood sums to lp, and predict / log_likelihood from the
    # draws agree with the kernel's own
    pointwise = result.trace["log_likelihood"]["y"]
    assert pointwise.shape == (2, 20, 400)
    np.testing.assert_allclose(pointwise.sum(-1), result.trace["sample_stats"]["lp"], rtol=1e-9)
    np.testing.assert_allclose(fm.log_likelihood(result.trace, data), pointwise, rtol=1e-6)
    test = fm.make_data(X[:50], y[:50])
    yhat = fm.predict(result.trace, data, test)
    np.testing.assert_allclose(yhat, result.trace["sample_stats"]["yhat_test"], rtol=1e-9)
    np.testing.assert_allclose(fm.log_likelihood(result.trace, data, test), pointwise[..., :50],
                               rtol=1e-6)  # fmt: skip
    pooled = fm.predict([result.trace, result.trace], data, test)
    assert pooled.shape == (4, 20, 50)  # runs pooled along the chain axis


def test_inference_data_has_observed_data_and_a_pointwise_log_likelihood():
    X, _, y = _synthetic(1, n=100)
    labels = (y > np.median(y)).astype(float)
    data = fm.make_data(X, labels, likelihood="probit")
    idata = bnpjax.sample(fm.gibbs(data, rank=1, likelihood="probit"), jax.random.key(0), 30,
                          num_chains=2, progress_bar=False)  # fmt: skip
    np.testing.assert_array_equal(idata.observed_data["y"], labels)
    assert idata.log_likelihood["y"].shape == (2, 30, 100)
    loo = az.loo(idata)
    assert np.isfinite(loo.elpd_loo)
    proba = fm.predict(idata, data, data, output="probability")
    assert proba.shape == (2, 30, 100) and np.all((proba >= 0) & (proba <= 1))


def test_protocol_levels_and_deprecated_names():
    X, _, y = _synthetic(2, n=60)
    data = fm.make_data(X, y)
    hyper = fm.make_hyper()
    algorithm = fm.gibbs(data, hyper, rank=2, init_scale=0.2)
    state = fm.init(jax.random.key(0), data, hyper, rank=2, init_scale=0.2)
    np.testing.assert_array_equal(state.V, algorithm.init(jax.random.key(0)).V)
    # compiled, not op by op: the sweep's scans and its few hundred small operations would
    # each compile on their own (most of this test's time with an empty compilation cache)
    step = jax.jit(fm.build_step())
    new, info = step(jax.random.key(1), state, data, hyper)
    expected, _ = jax.jit(algorithm.step)(jax.random.key(1), state)
    np.testing.assert_allclose(new.V, expected.V, rtol=1e-12)
    assert info.log_likelihood.shape == (60,)
    with pytest.warns(FutureWarning, match="init_scale"):
        old = fm.gibbs(data, rank=2, init_stdev=0.2)
    np.testing.assert_array_equal(old.init(jax.random.key(0)).V, state.V)
    with pytest.warns(FutureWarning):
        fm.data_sample(jax.random.key(0), state, data, "gaussian")
    assert fm.refresh(data, state) is state


def test_bad_settings_are_rejected_naming_the_argument():
    X = sp.random(10, 5, density=0.5, format="csr", random_state=0)
    y = np.arange(10.0)
    with pytest.raises(ValueError, match="group_shapes must be a sequence of integers"):
        fm.make_data(X, y, group_shapes=[2.5, 2.5])  # int() would truncate to [2, 2]
    # the kernel re-checks data.y against its likelihood (data built for "gaussian")
    with pytest.raises(ValueError, match="make_data\\(X, y, likelihood='probit'\\)"):
        fm.gibbs(fm.make_data(X, y), likelihood="probit")  # standardised targets
    data = fm.make_data(X, y + 0.5, standardize=False)
    with pytest.raises(ValueError, match=r"data\.y must hold class labels 0 and 1"):
        fm.gibbs(data, likelihood="probit")
    with pytest.raises(ValueError, match=r"data\.y must hold ordinal levels"):
        fm.gibbs(data, likelihood="ordinal")
    # labels are 0..num_levels-1: the top label 9 needs num_levels >= 10
    data = fm.make_data(X, y, likelihood="ordinal")
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


def test_flags_must_be_bools():
    """A truthy string for a flag is refused naming it (make_data, gibbs, init, build_step);
    NumPy bools are bools."""
    X = sp.random(10, 5, density=0.5, format="csr", random_state=0)
    y = np.arange(10.0)
    for name in ("standardize", "bucket_shapes"):
        with pytest.raises(ValueError, match=name):
            fm.make_data(X, y, **{name: "no"})
    data = fm.make_data(X, y, standardize=np.False_)
    for name in ("fit_w0", "fit_linear", "pointwise_log_likelihood", "sample_noise"):
        with pytest.raises(ValueError, match=name):
            fm.gibbs(data, **{name: "no"})
    for name in ("fit_w0", "fit_linear"):
        with pytest.raises(ValueError, match=name):
            fm.init(jax.random.key(0), data, **{name: "no"})
        with pytest.raises(ValueError, match=name):
            fm.build_step(**{name: "no"})
    assert fm.gibbs(data, fit_linear=np.False_).spec.settings["fit_linear"] is False


# --------------------------------------------------------------------------------------------
# relation blocks


def test_colour_draws_are_the_same_on_both_routes_of_the_gaussian_draw(monkeypatch):
    """The colours' joint (w_i, v_i) draws go through bnpjax.ops.gaussian_from_precision,
    whose batch-last loops serve colours of at least LOOP_MIN_BATCH features: a fit whose
    colours (100 users, 80 items) take the loops gives the draws of one that takes LAPACK."""
    from bnpjax.ops import gaussian

    X, _, y = _synthetic(5, n=600, users=100, items=80)
    data = fm.make_data(X, y)
    fits = []
    for min_batch in (1, 10**9):
        monkeypatch.setattr(gaussian, "LOOP_MIN_BATCH", min_batch)
        # a fresh kernel each time, and the driver's program cache emptied: a program
        # compiled for the first route would otherwise serve the second
        bnpjax.infer.programs.clear_compile_cache()
        result = run(fm.gibbs(data, rank=3), jax.random.key(1), 10, progress_bar=False)
        fits.append(result.trace["posterior"])
    for name in ("w", "V", "b", "noise_var"):
        np.testing.assert_allclose(fits[0][name], fits[1][name], rtol=1e-6, atol=1e-8)
