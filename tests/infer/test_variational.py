"""The variational driver: chunking changes nothing, keys follow the MCMC driver, draws from
the posterior approximation or the point estimate land in InferenceData."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnpjax
from bnpjax.infer import ArvizSpec, VariationalAlgorithm, bind, fit_run, map_draws


class GaussState(NamedTuple):
    mean: jax.Array
    log_sd: jax.Array


class GaussInfo(NamedTuple):
    loss: jax.Array


def _init(target, key):
    return GaussState(jax.random.normal(key, target.shape), jnp.zeros(target.shape))


def _step(target, key, state):
    # a noisy gradient step on 0.5 * |mean - target|^2 and on log_sd towards log 0.5
    noise = 0.01 * jax.random.normal(key, target.shape)
    mean = state.mean - 0.2 * (state.mean - target) + noise
    log_sd = state.log_sd - 0.2 * (state.log_sd - jnp.log(0.5))
    return GaussState(mean, log_sd), GaussInfo(0.5 * jnp.sum((mean - target) ** 2))


def _sample(key, state, num_draws):
    eps = jax.random.normal(key, (num_draws, *state.mean.shape))
    return {"posterior": {"theta": state.mean + jnp.exp(state.log_sd) * eps}}


def gaussian_fit(target, with_sample=True):
    target = jnp.asarray(target, float)
    return VariationalAlgorithm(
        init=bind(_init, target),
        step=bind(_step, target),
        sample=_sample if with_sample else None,
        spec=ArvizSpec(name="test.gauss", dims={"theta": ["dim"], "mean": ["dim"]}),
    )


def test_fit_converges_and_chunking_changes_nothing():
    algorithm = gaussian_fit([1.0, -2.0])
    key = jax.random.key(3)
    a = fit_run(algorithm, key, 60, num_draws=4000, progress_bar=False, chunk_size=7)
    b = fit_run(algorithm, key, 60, num_draws=4000, progress_bar=False)
    np.testing.assert_array_equal(a.state.mean, b.state.mean)
    np.testing.assert_array_equal(a.draws["posterior"]["theta"], b.draws["posterior"]["theta"])
    assert a.history["loss"].shape == (60,)
    assert a.history["loss"][-1] < 1e-2 < a.history["loss"][0]
    theta = a.draws["posterior"]["theta"]
    assert theta.shape == (4000, 2)
    # sd 0.5: the mean of 4000 draws lies within 4 standard errors of the fitted mean
    assert np.all(np.abs(theta.mean(0) - np.asarray(a.state.mean)) < 4 * 0.5 / np.sqrt(4000))


def test_fit_returns_inference_data():
    idata = bnpjax.fit(gaussian_fit([0.5]), jax.random.key(0), 20, num_draws=50, progress_bar=False)
    assert idata.posterior["theta"].shape == (1, 50, 1)
    assert idata.attrs["inference_method"] == "variational"
    assert "final_loss" in idata.attrs
    point = bnpjax.fit(
        gaussian_fit([0.5], with_sample=False), jax.random.key(0), 20, progress_bar=False
    )
    assert point.posterior["mean"].shape == (1, 1, 1)


def test_fit_refuses_bad_input():
    with pytest.raises(ValueError, match="VariationalAlgorithm"):
        fit_run(object(), jax.random.key(0), 3)
    with pytest.raises(ValueError, match="num_steps"):
        fit_run(gaussian_fit([0.0]), jax.random.key(0), 0)
    for not_a_key in (0, None, np.array([1, 2, 3])):  # as bnpjax.sample refuses them
        with pytest.raises(ValueError, match="key must be"):
            fit_run(gaussian_fit([0.0]), not_a_key, 3)
    with pytest.raises(ValueError, match="progress_bar"):  # a truthy string is not True
        fit_run(gaussian_fit([0.0]), jax.random.key(0), 3, progress_bar="no")


def test_map_draws_applies_a_function_to_every_draw():
    draws = {"a": np.arange(2 * 5 * 3.0).reshape(2, 5, 3), "b": np.ones((2, 5))}
    out = map_draws(lambda d: jnp.sum(d["a"]) + d["b"], draws, batch_size=3)
    np.testing.assert_allclose(out, draws["a"].sum(-1) + 1)
    with pytest.raises(ValueError, match="chain, draw"):
        map_draws(lambda d: d["a"], {"a": np.ones((2, 5)), "b": np.ones((3, 5))})
