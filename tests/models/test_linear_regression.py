"""The reference model: validation at the boundary, InferenceData output, prediction and the
deprecated names."""

import jax
import numpy as np
import pytest

import bnpjax
from bnpjax.infer import run
from bnpjax.models import linear_regression as lr


def test_bad_input_is_rejected_naming_the_argument():
    X = np.ones((5, 2))
    with pytest.raises(ValueError, match="X must be a 2-D"):
        lr.make_data(np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="y must have shape"):
        lr.make_data(X, np.ones(4))
    with pytest.raises(ValueError, match="X contains NaN or infinite"):
        lr.make_data(np.full((5, 2), np.nan), np.ones(5))
    with pytest.raises(ValueError, match="y must be finite"):
        lr.make_data(X, np.array([1, 2, np.nan, 4, 5.0]))
    with pytest.raises(ValueError, match="mask"):
        lr.make_data(X, np.ones(5), mask=np.zeros(5, bool))
    with pytest.raises(ValueError, match="precision"):
        lr.make_hyper(2, precision=-1.0)
    # eigvalsh reads one triangle only: this would pass as SPD without the symmetry check
    with pytest.raises(ValueError, match="precision must be symmetric"):
        lr.make_hyper(2, precision=[[1.0, 5.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="precision must be finite"):
        lr.make_hyper(2, precision=[1.0, np.nan])
    with pytest.raises(ValueError, match="mean must be finite"):
        lr.make_hyper(2, mean=[0.0, np.nan])
    with pytest.raises(ValueError, match="mean must be a scalar"):
        lr.make_hyper(2, mean=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="feature_names"):
        lr.gibbs(lr.make_data(X, np.ones(5)), feature_names=["a"])
    with pytest.raises(ValueError, match=r"feature_names must be distinct, got \['a'\]"):
        lr.gibbs(lr.make_data(X, np.ones(5)), feature_names=["a", "a"])


def test_inference_data_groups_dims_and_tools(tmp_path):
    import arviz as az
    import matplotlib

    matplotlib.use("Agg")
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2))
    y = X @ np.array([0.5, 1.0]) + rng.normal(size=30)
    mask = np.ones(30, bool)
    mask[:4] = False
    data = lr.make_data(X, y, mask)
    idata = bnpjax.sample(
        lr.gibbs(data, feature_names=["x1", "x2"]),
        jax.random.key(0),
        200,
        num_chains=2,
        progress_bar=False,
    )
    assert {"posterior", "sample_stats", "log_likelihood", "observed_data"} <= set(idata.groups())
    assert idata.posterior["beta"].dims == ("chain", "draw", "coef")
    assert list(idata.posterior["beta"].coords["coef"].values) == ["x1", "x2"]
    assert idata.log_likelihood["y"].shape == (2, 200, 26)
    np.testing.assert_allclose(idata.observed_data["y"].values, y[mask], rtol=1e-6)
    assert "lp" in idata.sample_stats
    assert idata.attrs["kernel"] == "linear_regression.gibbs"
    assert idata.attrs["num_chains"] == 2
    assert "jax_version" in idata.attrs
    summary = az.summary(idata)
    assert {"mean", "sd", "r_hat", "ess_bulk"} <= set(summary.columns)
    az.plot_trace(idata)
    loo = az.loo(idata)
    assert np.isfinite(loo.elpd_loo)
    path = tmp_path / "fit.nc"
    idata.to_netcdf(str(path))
    back = az.from_netcdf(str(path))
    np.testing.assert_array_equal(back.posterior["tau"].values, idata.posterior["tau"].values)


def _fit():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 2))
    y = X @ np.array([1.0, -0.5]) + 0.5 * rng.normal(size=40)
    mask = np.ones(40, bool)
    mask[30:] = False  # held out
    data = lr.make_data(X, y, mask)
    result = run(lr.gibbs(data), jax.random.key(3), 100, progress_bar=False)
    return X, y, mask, data, result


def test_predict_and_log_likelihood_of_held_out_responses():
    X, y, mask, data, result = _fit()
    # training entries: the same values as the kernel's own log_likelihood group
    ll = lr.log_likelihood(result.trace, data)
    assert ll.shape == (1, 100, 30)
    # the same formula computed twice (in the chunk and here): equal to the dtype's rounding
    # (tests/test_float32.py runs this test in float32 too). The density is a sum of terms of
    # order 1 (-log(2 pi sigma^2) / 2, -r^2 / (2 sigma^2)), so two evaluations differ by a few
    # machine epsilons in absolute terms, which is more than rtol where the sum nearly cancels
    # (float32: -0.0091768 against -0.0091767, 1.1e-7 apart, 2026-11-26)
    rtol = 1e-12 if ll.dtype == np.float64 else 1e-5
    atol = 16 * np.finfo(ll.dtype).eps
    np.testing.assert_allclose(ll, result.trace["log_likelihood"]["y"], rtol=rtol, atol=atol)
    test = lr.make_data(X[~mask], y[~mask])
    held = lr.log_likelihood(result.trace, data, test)
    assert held.shape == (1, 100, 10) and np.all(np.isfinite(held))
    mean = lr.predict(result.trace, data, test)
    beta = result.trace["posterior"]["beta"]
    expected = np.einsum("nk,cdk->cdn", X[~mask], beta)
    np.testing.assert_allclose(mean, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    draws = lr.predict([result.trace, result.trace], data, test, key=jax.random.key(0))
    assert draws.shape == (2, 100, 10)
    # each draw is x beta + noise of precision tau, from that draw's beta and tau: the
    # standardised residuals are 2000 independent N(0, 1) (a draw ignoring x beta, or with
    # the noise's sd taken as tau or 1 / tau, is far outside these 4-sigma bounds)
    tau = np.concatenate([result.trace["posterior"]["tau"]] * 2)
    residuals = ((draws - np.concatenate([expected] * 2)) * np.sqrt(tau)[..., None]).ravel()
    assert abs(residuals.mean()) < 4 / np.sqrt(residuals.size)
    assert abs(residuals.std() - 1) < 4 / np.sqrt(2 * residuals.size)


def test_deprecated_names_still_work():
    X = np.ones((5, 2)) + np.eye(5, 2)
    data = lr.make_data(X, np.ones(5))
    with pytest.warns(FutureWarning, match="make_hyper"):
        prior = lr.make_prior(2, a=2.0)
    assert isinstance(prior, lr.NormalGammaPrior) and isinstance(prior, lr.LinearRegressionHyper)
    with pytest.warns(FutureWarning, match="hyper"):
        alg = lr.gibbs(data, prior=prior)
    assert alg.spec.name == "linear_regression.gibbs"
    with pytest.warns(FutureWarning):
        state = lr.prior_sample(jax.random.key(0), prior)
    with pytest.warns(FutureWarning):
        assert lr.data_sample(jax.random.key(1), state, data).y.shape == (5,)
    with pytest.warns(FutureWarning):
        assert lr.log_likelihood(data, state).shape == (5,)
