"""The exact conditionals, log densities and closed-form posterior of the Normal-Gamma
linear regression, shared by the Gibbs kernel, prediction and the Geweke protocol."""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import gammaln

from bnpjax.models.linear_regression.data import (
    LinearRegressionData,
    LinearRegressionHyper,
    LinearRegressionState,
    make_hyper,
)
from bnpjax.ops import sample_gamma

__all__ = [
    "log_joint",
    "pointwise_log_likelihood",
    "posterior_moments",
    "sample_beta",
    "tau_conditional",
]

_LOG_2PI = math.log(2 * math.pi)


class _Posterior(NamedTuple):
    chol: jax.Array  # lower Cholesky factor of Lambda_n
    mean: jax.Array  # m_n
    num_observed: jax.Array


def _conditional_pieces(data: LinearRegressionData, hyper: LinearRegressionHyper) -> _Posterior:
    """``Lambda_n = X'WX + Lambda_0`` (its Cholesky factor) and ``m_n``: they do not depend on
    the state, so a kernel computes them once."""
    Xw = data.X * data.mask[:, None]
    precision_n = Xw.T @ data.X + hyper.precision
    chol = jnp.linalg.cholesky(precision_n)
    rhs = hyper.precision @ hyper.mean + Xw.T @ data.y
    return _Posterior(chol, cho_solve((chol, True), rhs), jnp.sum(data.mask))


def sample_beta(key, pieces: _Posterior, tau) -> jax.Array:
    """``beta | tau, y ~ N(m_n, (tau Lambda_n)^-1)`` via the Cholesky factor of Lambda_n."""
    z = jax.random.normal(key, pieces.mean.shape, pieces.mean.dtype)
    return pieces.mean + solve_triangular(pieces.chol.T, z, lower=False) / jnp.sqrt(tau)


def tau_conditional(data, hyper, pieces, beta):
    """Shape and rate of the Gamma conditional ``tau | beta, y``."""
    resid = (data.y - data.X @ beta) * data.mask
    dev = beta - hyper.mean
    shape = hyper.a + 0.5 * (pieces.num_observed + beta.shape[0])
    rate = hyper.b + 0.5 * (jnp.sum(resid**2) + dev @ hyper.precision @ dev)
    return shape, rate


def _sample_gamma(key, shape, rate):
    return sample_gamma(key, shape, jnp.result_type(rate)) / rate


def pointwise_log_likelihood(data: LinearRegressionData, state: LinearRegressionState) -> jax.Array:
    """``log N(y_i | x_i beta, 1/tau)`` for the observed entries, shape (n_obs,)."""
    X = data.X[data.observed]
    y = data.y[data.observed]
    resid = y - X @ state.beta
    return 0.5 * (jnp.log(state.tau) - _LOG_2PI) - 0.5 * state.tau * resid**2


def log_joint(data, hyper: LinearRegressionHyper, state: LinearRegressionState) -> jax.Array:
    """``log p(y_obs, beta, tau)`` with every normalising constant."""
    p = state.beta.shape[0]
    dev = state.beta - hyper.mean
    _, logdet0 = jnp.linalg.slogdet(hyper.precision)
    log_beta = 0.5 * (p * (jnp.log(state.tau) - _LOG_2PI) + logdet0) - 0.5 * state.tau * (
        dev @ hyper.precision @ dev
    )
    log_tau = (
        hyper.a * jnp.log(hyper.b)
        - gammaln(hyper.a)
        + (hyper.a - 1) * jnp.log(state.tau)
        - hyper.b * state.tau
    )
    return jnp.sum(pointwise_log_likelihood(data, state)) + log_beta + log_tau


def posterior_moments(
    data: LinearRegressionData, hyper: LinearRegressionHyper | None = None
) -> dict:
    """Closed-form posterior means and variances of ``beta``, ``tau`` and ``sigma``.

    Parameters
    ----------
    data : LinearRegressionData
    hyper : LinearRegressionHyper, optional
        Default :func:`make_hyper` with its defaults.

    Returns
    -------
    dict
        ``beta_mean``, ``beta_var``, ``tau_mean``, ``tau_var``, ``sigma_mean``, ``sigma_var``
        (float64 NumPy).

    References
    ----------
    Bernardo, J. M. & Smith, A. F. M. (1994). *Bayesian Theory*, sec. 5.2 (the Normal-Gamma
    conjugate family).
    """
    from scipy.special import gammaln as sp_gammaln

    X = np.asarray(data.X, float)
    y = np.asarray(data.y, float)
    w = np.asarray(data.mask, float)
    hyper = make_hyper(X.shape[1]) if hyper is None else hyper
    m0 = np.asarray(hyper.mean, float)
    L0 = np.asarray(hyper.precision, float)
    a0, b0 = float(hyper.a), float(hyper.b)
    Ln = (X * w[:, None]).T @ X + L0
    mn = np.linalg.solve(Ln, L0 @ m0 + (X * w[:, None]).T @ y)
    an = a0 + 0.5 * w.sum()
    bn = b0 + 0.5 * (np.sum(w * y**2) + m0 @ L0 @ m0 - mn @ Ln @ mn)
    cov = bn / (an - 1) * np.linalg.inv(Ln) if an > 1 else np.full(Ln.shape, np.inf)
    mean_sigma = np.exp(sp_gammaln(an - 0.5) - sp_gammaln(an)) * np.sqrt(bn)
    return {
        "beta_mean": mn,
        "beta_var": np.diag(cov),
        "tau_mean": an / bn,
        "tau_var": an / bn**2,
        "sigma_mean": mean_sigma,
        "sigma_var": bn / (an - 1) - mean_sigma**2,
    }
