"""The reference model: validation at the boundary and InferenceData output."""

import jax
import numpy as np
import pytest

import bnpjax
from bnpjax.models import linear_regression as lr


def test_bad_input_is_rejected_naming_the_argument():
    X = np.ones((5, 2))
    with pytest.raises(ValueError, match="X must be a 2-D"):
        lr.make_data(np.ones(5), np.ones(5))
    with pytest.raises(ValueError, match="y must have shape"):
        lr.make_data(X, np.ones(4))
    with pytest.raises(ValueError, match="X must contain finite"):
        lr.make_data(np.full((5, 2), np.nan), np.ones(5))
    with pytest.raises(ValueError, match="y must be finite"):
        lr.make_data(X, np.array([1, 2, np.nan, 4, 5.0]))
    with pytest.raises(ValueError, match="mask"):
        lr.make_data(X, np.ones(5), mask=np.zeros(5, bool))
    with pytest.raises(ValueError, match="precision"):
        lr.make_prior(2, precision=-1.0)
    # eigvalsh reads one triangle only: this would pass as SPD without the symmetry check
    with pytest.raises(ValueError, match="precision must be symmetric"):
        lr.make_prior(2, precision=[[1.0, 5.0], [0.0, 1.0]])
    with pytest.raises(ValueError, match="precision must be finite"):
        lr.make_prior(2, precision=[1.0, np.nan])
    with pytest.raises(ValueError, match="mean must be finite"):
        lr.make_prior(2, mean=[0.0, np.nan])
    with pytest.raises(ValueError, match="mean must be a scalar"):
        lr.make_prior(2, mean=[0.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="feature_names"):
        lr.gibbs(lr.make_data(X, np.ones(5)), feature_names=["a"])


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
