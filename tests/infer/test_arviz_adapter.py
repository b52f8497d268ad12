"""The ArviZ adapter on both ArviZ lines.

The 0.x path (``arviz.InferenceData``) is checked with ArviZ 0.x's own tools: ``az.summary``,
``az.plot_trace``, ``az.loo``, ``az.compare``, ``az.plot_ppc``, and NumPyro's
``print_summary`` on the posterior. The 1.x path (``xarray.DataTree`` from
``arviz_base.from_dict``) runs when arviz-base is installed, with ``arviz_stats`` and
``arviz_plots`` (the 1.x tools) where those are installed too. Each test picks its backend
with :func:`bnpjax.infer.arviz_adapter.set_backend`, so one pytest run covers both paths.
:func:`bnpjax.infer.concat` combines runs whose feature buffers grew to different capacities
without turning integer arrays into floats.
"""

import os
import subprocess
import sys
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

import bnpjax
from bnpjax.infer import ArvizSpec, SamplingAlgorithm, arviz_adapter, bind, concat, run
from bnpjax.testing.kernels import poisson_birth_death

matplotlib.use("Agg")

Y = np.array([0.3, -1.2, 2.1, 0.8, 1.5, -0.4, 0.9, 1.1, 0.0, 2.4, -0.7, 1.3])


# --------------------------------------------------------------------------------------------
# a tiny conjugate model with everything ArviZ's tools read: the mean of normal data with known
# sd; each step draws mu exactly from its posterior and a replicate of the data.


class NormalState(NamedTuple):
    mu: jax.Array
    y_rep: jax.Array


class NormalInfo(NamedTuple):
    lp: jax.Array


def _normal_init(y, sd, prior_sd, key):
    del sd, prior_sd, key
    return NormalState(jnp.zeros(()), jnp.zeros_like(y))


def _normal_step(y, sd, prior_sd, key, state):
    del state
    key_mu, key_rep = jax.random.split(key)
    precision = 1.0 / prior_sd**2 + y.size / sd**2
    mean = jnp.sum(y) / sd**2 / precision
    mu = mean + jax.random.normal(key_mu) / jnp.sqrt(precision)
    y_rep = mu + sd * jax.random.normal(key_rep, y.shape)
    lp = jnp.sum(jax.scipy.stats.norm.logpdf(y, mu, sd)) + jax.scipy.stats.norm.logpdf(
        mu, 0.0, prior_sd
    )
    return NormalState(mu, y_rep), NormalInfo(lp)


def _normal_trace(y, sd, state, info):
    return {
        "posterior": {"mu": state.mu, "above": y > state.mu},  # a boolean variable
        "sample_stats": {"lp": info.lp},
        "log_likelihood": {"y": jax.scipy.stats.norm.logpdf(y, state.mu, sd)},
        "posterior_predictive": {"y": state.y_rep},
    }


def normal_mean(y, sd=1.0, prior_sd=10.0) -> SamplingAlgorithm:
    y = jnp.asarray(y)
    sd, prior_sd = jnp.asarray(sd), jnp.asarray(prior_sd)
    return SamplingAlgorithm(
        init=bind(_normal_init, y, sd, prior_sd),
        step=bind(_normal_step, y, sd, prior_sd),
        trace=bind(_normal_trace, y, sd),
        spec=ArvizSpec(
            name="test.normal_mean",
            dims={"y": ["obs"], "above": ["obs"]},
            coords={"obs": np.arange(y.size)},
            observed_data={"y": np.asarray(y)},
            settings={"sd": float(sd)},
        ),
    )


@pytest.fixture(scope="module")
def normal_runs():
    """Two fits of the same data (sd 1 and sd 3): SamplingResults, converted per backend."""
    return {
        sd: run(normal_mean(Y, sd=sd), jax.random.key(0), 200, num_chains=2, progress_bar=False)
        for sd in (1.0, 3.0)
    }


@pytest.fixture(scope="module")
def birth_death_runs():
    """Two runs of the birth-death kernel from capacity 2 whose buffers grew to different
    capacities (8 and 16)."""
    return [
        run(poisson_birth_death(rate, capacity=2), key, 60, num_chains=2, progress_bar=False)
        for rate, key in ((3.0, jax.random.key(1)), (8.0, jax.random.key(2)))
    ]


@pytest.fixture
def backend_0():
    previous = arviz_adapter.set_backend("0")
    yield
    arviz_adapter.set_backend(previous)


@pytest.fixture
def backend_1():
    pytest.importorskip("arviz_base")
    previous = arviz_adapter.set_backend("1")
    yield
    arviz_adapter.set_backend(previous)


def _az():
    return arviz_adapter.import_arviz()


def _posterior_dict(data):
    posterior = arviz_adapter.group(data, "posterior")
    return {name: posterior[name].values for name in posterior.data_vars}


# --------------------------------------------------------------------------------------------
# choosing the backend


def test_backend_switch(monkeypatch):
    previous = arviz_adapter.set_backend(None)
    try:
        monkeypatch.setenv("BNPJAX_ARVIZ", "1")
        assert arviz_adapter.backend() == "1"
        monkeypatch.setenv("BNPJAX_ARVIZ", "0")
        assert arviz_adapter.backend() == "0"
        assert arviz_adapter.set_backend(1) is None  # set_backend wins over the variable
        assert arviz_adapter.backend() == "1"
        assert arviz_adapter.set_backend(None) == "1"
        monkeypatch.setenv("BNPJAX_ARVIZ", "2")
        with pytest.raises(ValueError, match="0 or 1"):
            arviz_adapter.backend()
        with pytest.raises(ValueError, match="0 or 1"):
            arviz_adapter.set_backend("1.x")
        monkeypatch.delenv("BNPJAX_ARVIZ")
        # with no choice made, the installed arviz decides (0.x here: the project pins <1)
        major = int(arviz_adapter._version("arviz").split(".")[0])
        assert arviz_adapter.backend() == ("1" if major >= 1 else "0")
    finally:
        arviz_adapter.set_backend(previous)


def test_prepare_backend_imports_in_a_thread_that_readers_wait_for(tmp_path):
    """prepare_backend starts the backend's import in a daemon thread and returns; whatever
    needs the backend waits for it (backend_ready); once imported, nothing more starts. In a
    fresh interpreter, where neither ArviZ line is imported yet, and with an empty cache
    directory, so that ArviZ 0.2x prints its daily notice, which stays hidden."""
    code = """
import sys, threading
from bnpjax.infer import arviz_adapter as a
module = "arviz_base" if a.backend() == "1" else "arviz"
assert module not in sys.modules
a.prepare_backend()
thread = a._backend_import
assert thread is not None and thread.daemon and thread is not threading.current_thread()
a.backend_ready()
assert not thread.is_alive() and module in sys.modules and a._backend_import is None
a.prepare_backend()
assert a._backend_import is None
print("ok")
"""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert "refactor" not in done.stderr, done.stderr


def test_a_compilation_waits_for_the_backend_import(monkeypatch):
    """A program is compiled only once the backend's import is done: lowering may import
    modules the import also imports, and two threads must not import at once."""
    from bnpjax.infer import clear_compile_cache, programs

    events = []
    monkeypatch.setattr(programs, "backend_ready", lambda: events.append("ready"))
    lower = programs.traced_programs.lower

    def recording_lower(*args, **kwargs):
        events.append("lower")
        return lower(*args, **kwargs)

    monkeypatch.setattr(programs.traced_programs, "lower", recording_lower)
    clear_compile_cache()
    run(poisson_birth_death(0.7), jax.random.key(0), 3, progress_bar=False)
    lowered = [i for i, event in enumerate(events) if event == "lower"]
    assert lowered, events
    assert all(i > 0 and events[i - 1] == "ready" for i in lowered), events


# --------------------------------------------------------------------------------------------
# ArviZ 0.x: InferenceData


def test_inference_data_reads(normal_runs, backend_0):
    idata = arviz_adapter.to_inference_data(normal_runs[1.0])
    az = _az()
    assert isinstance(idata, az.InferenceData)
    assert set(arviz_adapter.group_names(idata)) == {
        "posterior",
        "sample_stats",
        "log_likelihood",
        "posterior_predictive",
        "observed_data",
    }
    assert idata.posterior["above"].dtype == np.int8
    assert idata.posterior["above"].dims == ("chain", "draw", "obs")
    assert idata.attrs["kernel"] == "test.normal_mean"
    assert idata.posterior.attrs["kernel"] == "test.normal_mean"
    np.testing.assert_array_equal(
        arviz_adapter.pooled_draws(idata, "posterior", "mu"),
        normal_runs[1.0].trace["posterior"]["mu"].reshape(-1),
    )


def test_arviz_0_tools(normal_runs, backend_0):
    az = _az()
    idatas = {sd: arviz_adapter.to_inference_data(r) for sd, r in normal_runs.items()}
    idata = idatas[1.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = az.summary(idata, var_names=["mu", "above"])
        loo = az.loo(idata)
        comparison = az.compare({"sd1": idata, "sd3": idatas[3.0]})
        az.plot_trace(idata, var_names=["mu", "above"])
        az.plot_ppc(idata, num_pp_samples=20)
    matplotlib.pyplot.close("all")
    assert len(summary) == 1 + Y.size
    assert loo.n_data_points == Y.size and np.isfinite(loo.elpd_loo)
    # the model with the right noise scale (the data's sd is about 1) ranks first
    assert comparison.index[0] == "sd1"


def test_print_summary_and_plot_trace_on_a_buffer(birth_death_runs, backend_0, capsys):
    from numpyro.diagnostics import print_summary

    idata = arviz_adapter.to_inference_data(birth_death_runs[0])
    assert idata.posterior["active"].dtype == np.int8
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        print_summary(_posterior_dict(idata))
        _az().plot_trace(idata, var_names=["active", "values"], compact=True)
    matplotlib.pyplot.close("all")
    assert "active[0]" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# combining runs whose buffers grew to different capacities


def _check_concat(runs, combined):
    capacities = [r.trace["posterior"]["active"].shape[-1] for r in runs]
    assert capacities[0] != capacities[1]
    width = max(capacities)
    posterior = arviz_adapter.group(combined, "posterior")
    assert posterior["active"].dtype == np.int8  # not float, no NaN
    assert posterior["active"].shape == (4, 60, width)
    assert posterior["values"].shape == (4, 60, width)
    assert np.array_equal(posterior["chain"].values, np.arange(4))
    assert combined.attrs["capacity"] == width
    stats = arviz_adapter.group(combined, "sample_stats")
    assert np.issubdtype(stats["num_features"].dtype, np.integer)
    for i, r in enumerate(runs):
        chains = slice(2 * i, 2 * i + 2)
        active = posterior["active"].values[chains]
        values = posterior["values"].values[chains]
        c = capacities[i]
        np.testing.assert_array_equal(active[..., :c], r.trace["posterior"]["active"])
        np.testing.assert_array_equal(values[..., :c], r.trace["posterior"]["values"])
        assert not active[..., c:].any() and not values[..., c:].any()
        np.testing.assert_array_equal(
            stats["num_features"].values[chains], r.trace["sample_stats"]["num_features"]
        )
    np.testing.assert_array_equal(
        arviz_adapter.pooled_draws(combined, "posterior", "active").sum(-1),
        arviz_adapter.pooled_draws(combined, "sample_stats", "num_features"),
    )


def test_concat_pads_with_inactive_entries(birth_death_runs, backend_0):
    idatas = [arviz_adapter.to_inference_data(r) for r in birth_death_runs]
    combined = concat(*idatas, dim="chain")
    assert isinstance(combined, _az().InferenceData)
    _check_concat(birth_death_runs, combined)
    assert bnpjax.infer.concat is concat


def test_concat_through_sample(backend_0):
    """The same through bnpjax.sample, along draws."""
    options = {"num_chains": 2, "progress_bar": False}
    first = bnpjax.sample(poisson_birth_death(1.0, capacity=2), jax.random.key(3), 10, **options)
    second = bnpjax.sample(poisson_birth_death(12.0, capacity=2), jax.random.key(4), 30, **options)
    assert first.attrs["capacity"] < second.attrs["capacity"]
    combined = concat([first, second], dim="draw")
    assert combined.posterior["active"].dtype == np.int8
    assert combined.posterior["values"].shape == (2, 40, second.attrs["capacity"])
    assert np.array_equal(combined.posterior["draw"].values, np.arange(40))


def test_concat_refuses_what_it_cannot_pad(birth_death_runs, normal_runs, backend_0):
    a, b = (arviz_adapter.to_inference_data(r) for r in birth_death_runs)
    with pytest.raises(ValueError, match="equal 'chain' sizes"):
        concat(a, b.sel(chain=[0]), dim="draw")
    with pytest.raises(ValueError, match="same groups"):
        concat(arviz_adapter.to_inference_data(normal_runs[1.0]), a)
    with pytest.raises(ValueError, match="dim must be"):
        concat(a, b, dim="feature")
    with pytest.raises(ValueError, match="at least one"):
        concat()
    with pytest.raises(ValueError, match="different data"):
        concat(
            *(
                arviz_adapter.groups_to_inference_data(
                    {"posterior": {"mu": np.zeros((1, 3))}, "observed_data": {"y": y}}
                )
                for y in (np.zeros(2), np.ones(2))
            )
        )


# --------------------------------------------------------------------------------------------
# ArviZ 1.x: DataTree from arviz_base


def test_datatree_reads(normal_runs, birth_death_runs, backend_1):
    import xarray

    dt = arviz_adapter.to_inference_data(normal_runs[1.0])
    assert isinstance(dt, xarray.DataTree)
    assert {"posterior", "log_likelihood", "observed_data"} <= set(dt.children)
    assert dt["posterior"]["above"].dtype == np.int8
    assert dt.posterior["mu"].dims == ("chain", "draw")
    assert dt.attrs["kernel"] == "test.normal_mean"
    assert dt.posterior.attrs["kernel"] == "test.normal_mean"
    assert dt.attrs["arviz_base_version"] != "unknown"
    assert dt["observed_data"]["y"].dims == ("obs",)
    np.testing.assert_array_equal(
        arviz_adapter.pooled_draws(dt, "posterior", "mu"),
        normal_runs[1.0].trace["posterior"]["mu"].reshape(-1),
    )
    # the same numbers as the 0.x path
    arviz_adapter.set_backend("0")
    idata = arviz_adapter.to_inference_data(normal_runs[1.0])
    arviz_adapter.set_backend("1")
    for name in ("posterior", "log_likelihood", "posterior_predictive", "observed_data"):
        xarray.testing.assert_equal(
            arviz_adapter.group(dt, name).drop_attrs(), idata[name].drop_attrs()
        )
    # bnpjax.sample returns a DataTree on this backend
    out = bnpjax.sample(
        poisson_birth_death(3.0, capacity=2), jax.random.key(1), 5, progress_bar=False
    )
    assert isinstance(out, xarray.DataTree) and out["posterior"]["active"].dtype == np.int8


def test_arviz_1_stats(normal_runs, backend_1):
    azs = pytest.importorskip("arviz_stats")
    dts = {sd: arviz_adapter.to_inference_data(r) for sd, r in normal_runs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = azs.summary(dts[1.0], var_names=["mu", "above"])
        loo = azs.loo(dts[1.0])
        comparison = azs.compare({"sd1": dts[1.0], "sd3": dts[3.0]})
    assert len(summary) == 1 + Y.size
    assert loo.n_data_points == Y.size and np.isfinite(loo.elpd)
    assert comparison.index[0] == "sd1"


def _upstream_plot_works(plot, **options) -> bool:
    """Whether ``plot`` draws arviz-base's own data (arviz-plots 0.8's trace plots fail on
    xarray 2026.9 whatever the data)."""
    import arviz_base

    rng = np.random.default_rng(0)
    reference = arviz_base.from_dict({"posterior": {"mu": rng.normal(size=(2, 20))}})
    try:
        plot(reference, backend="matplotlib", **options)
    except Exception:
        return False
    return True


def test_arviz_1_plots(normal_runs, birth_death_runs, backend_1):
    arviz_adapter._import_matplotlib_style()  # arviz-plots 0.8 with matplotlib 3.11
    azp = pytest.importorskip("arviz_plots")
    dt = arviz_adapter.to_inference_data(normal_runs[1.0])
    buffer = arviz_adapter.to_inference_data(birth_death_runs[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        azp.plot_dist(dt, var_names=["mu", "above"], backend="matplotlib")
        azp.plot_dist(buffer, var_names=["active"], backend="matplotlib")
        azp.plot_ppc_dist(dt, num_samples=20, backend="matplotlib")
        trace_plot_works = _upstream_plot_works(azp.plot_trace_dist)
        if trace_plot_works:
            azp.plot_trace_dist(dt, var_names=["mu", "above"], backend="matplotlib")
            azp.plot_trace_dist(buffer, var_names=["active"], backend="matplotlib")
    matplotlib.pyplot.close("all")
    if not trace_plot_works:
        pytest.skip("arviz_plots.plot_trace_dist fails on arviz-base's own data here")


def test_print_summary_on_a_datatree(birth_death_runs, backend_1, capsys):
    from numpyro.diagnostics import print_summary

    dt = arviz_adapter.to_inference_data(birth_death_runs[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        print_summary(_posterior_dict(dt))
    assert "active[0]" in capsys.readouterr().out


def test_concat_datatrees(birth_death_runs, backend_1):
    import xarray

    dts = [arviz_adapter.to_inference_data(r) for r in birth_death_runs]
    combined = concat(*dts, dim="chain")
    assert isinstance(combined, xarray.DataTree)
    _check_concat(birth_death_runs, combined)
    with pytest.raises(TypeError, match="all InferenceData or all DataTree"):
        arviz_adapter.set_backend("0")
        concat(dts[0], arviz_adapter.to_inference_data(birth_death_runs[1]))
