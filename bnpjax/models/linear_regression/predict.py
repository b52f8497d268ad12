"""Predictions and pointwise log-likelihoods of the linear regression from posterior draws."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.predictive import map_draws, posterior_draws
from bnpjax.models.linear_regression.conditionals import pointwise_log_likelihood
from bnpjax.models.linear_regression.data import LinearRegressionData, LinearRegressionState

__all__ = ["log_likelihood", "predict"]


def _check(data, name):
    if not isinstance(data, LinearRegressionData):
        raise ValueError(f"{name} must come from bnpjax.models.linear_regression.make_data")


def predict(draws, data: LinearRegressionData, test: LinearRegressionData, *, key=None):
    """Posterior predictions of the held-out responses of ``test``.

    Parameters
    ----------
    draws : arviz.InferenceData, dict or list
        The InferenceData of :func:`bnpjax.sample`, the ``trace`` of :func:`bnpjax.infer.run`,
        or a list of them (pooled along the chain axis); needs ``beta`` and ``tau``.
    data : LinearRegressionData
        The training data (unused: the coefficients carry everything; kept for the one
        signature of every model).
    test : LinearRegressionData
        From :func:`make_data`; its observed entries are the held-out responses to predict.
    key : jax.Array, optional
        Without it the predictive means ``x_i beta`` are returned; with it one draw
        ``y_i ~ N(x_i beta, 1 / tau)`` per posterior draw.

    Returns
    -------
    numpy.ndarray, shape (chain, draw, n_test_observed)
    """
    _check(data, "data")
    _check(test, "test")
    arrays = posterior_draws(draws, ["beta", "tau"])
    X = test.X[test.observed]
    if key is None:
        return map_draws(lambda d: X @ d["beta"], arrays)
    chain, draw = arrays["tau"].shape[:2]
    arrays = {**arrays, "index": np.arange(chain * draw).reshape(chain, draw)}

    def sample(d):
        noise = jax.random.normal(jax.random.fold_in(key, d["index"]), (X.shape[0],), X.dtype)
        return X @ d["beta"] + noise * jax.lax.rsqrt(d["tau"])

    return map_draws(sample, arrays)


def log_likelihood(draws, data: LinearRegressionData, test: LinearRegressionData | None = None):
    """Pointwise ``log N(y_i | x_i beta, 1 / tau)`` for every posterior draw.

    Parameters
    ----------
    draws : arviz.InferenceData, dict or list
        As in :func:`predict`.
    data : LinearRegressionData
        The training data.
    test : LinearRegressionData, optional
        Held-out responses (its observed entries); None scores the observed entries of
        ``data``. Unobserved entries are never scored.

    Returns
    -------
    numpy.ndarray, shape (chain, draw, entry)
    """
    if isinstance(draws, LinearRegressionData) and isinstance(data, LinearRegressionState):
        warnings.warn(
            "log_likelihood(data, state) is deprecated: use "
            "linear_regression.conditionals.pointwise_log_likelihood(data, state)",
            FutureWarning,
            stacklevel=2,
        )
        return pointwise_log_likelihood(draws, data)
    _check(data, "data")
    target = data if test is None else test
    _check(target, "test")
    arrays = posterior_draws(draws, ["beta", "tau"])
    return map_draws(
        lambda d: pointwise_log_likelihood(
            target, LinearRegressionState(d["beta"], jnp.asarray(d["tau"]))
        ),
        arrays,
    )
