r"""Conjugate Normal-Gamma linear regression: the driver's reference model.

Model (``n`` observations, ``p`` coefficients, ``W = diag(mask)`` selecting observed entries):

.. math::

    \tau &\sim \mathrm{Gamma}(a_0, b_0) \quad\text{(shape, rate)} \\
    \beta \mid \tau &\sim \mathcal N\!\left(m_0, (\tau \Lambda_0)^{-1}\right) \\
    y_i \mid \beta, \tau &\sim \mathcal N\!\left(x_i^\top \beta, \tau^{-1}\right),
        \quad i \text{ observed}.

Gibbs sampler (two blocks, each an exact conditional):

.. math::

    \Lambda_n &= X^\top W X + \Lambda_0, \qquad m_n = \Lambda_n^{-1}(\Lambda_0 m_0 + X^\top W y) \\
    \beta \mid \tau, y &\sim \mathcal N\!\left(m_n, (\tau \Lambda_n)^{-1}\right) \\
    \tau \mid \beta, y &\sim \mathrm{Gamma}\!\left(a_0 + \tfrac{n_{obs} + p}{2},\;
        b_0 + \tfrac12 \lVert W^{1/2}(y - X\beta) \rVert^2
            + \tfrac12 (\beta - m_0)^\top \Lambda_0 (\beta - m_0)\right).

The joint posterior is known in closed form, which is what makes this the reference model of
the driver and of the Geweke harness:

.. math::

    \tau \mid y &\sim \mathrm{Gamma}(a_n, b_n), \quad a_n = a_0 + n_{obs}/2, \quad
        b_n = b_0 + \tfrac12\left(y^\top W y + m_0^\top \Lambda_0 m_0
            - m_n^\top \Lambda_n m_n\right) \\
    \beta \mid y &\sim t_{2 a_n}\!\left(m_n, \tfrac{b_n}{a_n} \Lambda_n^{-1}\right), \quad
        \mathrm{Cov}[\beta \mid y] = \tfrac{b_n}{a_n - 1} \Lambda_n^{-1}.

:math:`\Lambda_n` and its Cholesky factor do not depend on the state and are computed once in
the factory, so a sweep costs :math:`O(np + p^2)`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import gammaln

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, concrete_or_none

__all__ = [
    "GibbsInfo",
    "LinearRegressionData",
    "LinearRegressionState",
    "NormalGammaPrior",
    "data_sample",
    "gibbs",
    "log_joint",
    "log_likelihood",
    "make_data",
    "make_prior",
    "posterior_moments",
    "prior_sample",
]

_LOG_2PI = float(np.log(2 * np.pi))


class LinearRegressionData(NamedTuple):
    """Validated data: design ``X`` (n, p), response ``y`` (n,), ``mask`` (n,) of observed
    entries as 0/1 floats, and ``observed`` (n_obs,) their indices."""

    X: jax.Array
    y: jax.Array
    mask: jax.Array
    observed: jax.Array


class NormalGammaPrior(NamedTuple):
    """``beta | tau ~ N(mean, (tau * precision)^-1)``, ``tau ~ Gamma(a, b)`` (shape, rate)."""

    mean: jax.Array
    precision: jax.Array
    a: jax.Array
    b: jax.Array


class LinearRegressionState(NamedTuple):
    """Sampler state: coefficients ``beta`` (p,) and noise precision ``tau`` (scalar)."""

    beta: jax.Array
    tau: jax.Array


class GibbsInfo(NamedTuple):
    """Per-step diagnostics: ``lp``, the log joint :func:`log_joint` of the new state."""

    lp: jax.Array


def make_data(X, y, mask=None) -> LinearRegressionData:
    """Validate and convert user data; unobserved responses (``mask`` False) are never used.

    Raises ``ValueError`` naming the argument for wrong shapes, non-finite values or an empty
    set of observations. ``y`` may hold NaN where ``mask`` is False.
    """
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n, p), got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number) or not np.all(np.isfinite(X)):
        raise ValueError("X must contain finite numbers only")
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X, got {y.shape}")
    if not np.issubdtype(y.dtype, np.number):
        raise ValueError("y must be numeric")
    if mask is None:
        mask = np.ones(y.shape, bool)
    mask = np.asarray(mask)
    if mask.shape != y.shape or mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array of shape {y.shape}")
    if not mask.any():
        raise ValueError("mask must mark at least one observed entry of y")
    if not np.all(np.isfinite(y[mask])):
        raise ValueError("y must be finite where observed (NaN or inf found)")
    dtype = jnp.result_type(float)
    y_filled = np.where(mask, y, 0.0)
    return LinearRegressionData(
        X=jnp.asarray(X, dtype),
        y=jnp.asarray(y_filled, dtype),
        mask=jnp.asarray(mask, dtype),
        observed=jnp.asarray(np.flatnonzero(mask), jnp.int32),
    )


def make_prior(num_features: int, *, mean=0.0, precision=1.0, a=1.0, b=1.0) -> NormalGammaPrior:
    """Broadcast scalar, diagonal (vector) or full-matrix hyperparameters to arrays.

    ``mean``: finite, a scalar or a (p,) vector; ``precision``: a positive scalar, a (p,)
    vector of positive entries or a symmetric positive definite (p, p) matrix. Raises
    ``ValueError`` naming the argument otherwise."""
    dtype = jnp.result_type(float)
    p = int(num_features)
    mean = np.asarray(mean, float)
    if mean.ndim > 1 or mean.size not in (1, p):
        raise ValueError(f"mean must be a scalar or a ({p},) vector, got shape {mean.shape}")
    mean = np.broadcast_to(mean, (p,))
    if not np.all(np.isfinite(mean)):
        raise ValueError("mean must be finite (NaN or inf found)")
    precision = np.asarray(precision, float)
    if precision.ndim <= 1:
        if precision.size not in (1, p):
            raise ValueError(f"precision must be a scalar, a ({p},) vector or a ({p}, {p}) matrix")
        precision = np.diag(np.broadcast_to(precision, (p,)))
    if precision.shape != (p, p):
        raise ValueError(f"precision must be a scalar, a ({p},) vector or a ({p}, {p}) matrix")
    if not np.all(np.isfinite(precision)):
        raise ValueError("precision must be finite (NaN or inf found)")
    if not np.allclose(precision, precision.T):
        raise ValueError("precision must be symmetric positive definite (it is not symmetric)")
    if np.any(np.linalg.eigvalsh(precision) <= 0):
        raise ValueError("precision must be symmetric positive definite")
    if not (np.isfinite(a) and a > 0 and np.isfinite(b) and b > 0):
        raise ValueError(f"a and b must be positive, got a={a}, b={b}")
    return NormalGammaPrior(
        jnp.asarray(mean, dtype),
        jnp.asarray(precision, dtype),
        jnp.asarray(a, dtype),
        jnp.asarray(b, dtype),
    )


class _Posterior(NamedTuple):
    chol: jax.Array  # lower Cholesky factor of Lambda_n
    mean: jax.Array  # m_n
    num_observed: jax.Array


def _conditional_pieces(data: LinearRegressionData, prior: NormalGammaPrior) -> _Posterior:
    Xw = data.X * data.mask[:, None]
    precision_n = Xw.T @ data.X + prior.precision
    chol = jnp.linalg.cholesky(precision_n)
    rhs = prior.precision @ prior.mean + Xw.T @ data.y
    return _Posterior(chol, cho_solve((chol, True), rhs), jnp.sum(data.mask))


def sample_beta(key, pieces: _Posterior, tau) -> jax.Array:
    """``beta | tau, y ~ N(m_n, (tau Lambda_n)^-1)`` via the Cholesky factor of Lambda_n."""
    z = jax.random.normal(key, pieces.mean.shape, pieces.mean.dtype)
    return pieces.mean + solve_triangular(pieces.chol.T, z, lower=False) / jnp.sqrt(tau)


def tau_conditional(data, prior, pieces, beta):
    """Shape and rate of ``tau | beta, y`` (module docstring)."""
    resid = (data.y - data.X @ beta) * data.mask
    dev = beta - prior.mean
    shape = prior.a + 0.5 * (pieces.num_observed + beta.shape[0])
    rate = prior.b + 0.5 * (jnp.sum(resid**2) + dev @ prior.precision @ dev)
    return shape, rate


def _sample_gamma(key, shape, rate):
    return jax.random.gamma(key, shape, dtype=jnp.result_type(rate)) / rate


def log_likelihood(data: LinearRegressionData, state: LinearRegressionState) -> jax.Array:
    """Pointwise ``log N(y_i | x_i beta, 1/tau)`` over the observed entries (n_obs,)."""
    X = data.X[data.observed]
    y = data.y[data.observed]
    resid = y - X @ state.beta
    return 0.5 * (jnp.log(state.tau) - _LOG_2PI) - 0.5 * state.tau * resid**2


def log_joint(data, prior: NormalGammaPrior, state: LinearRegressionState) -> jax.Array:
    """``log p(y, beta, tau)`` up to nothing: every normalising constant included."""
    p = state.beta.shape[0]
    dev = state.beta - prior.mean
    _, logdet0 = jnp.linalg.slogdet(prior.precision)
    log_beta = 0.5 * (p * (jnp.log(state.tau) - _LOG_2PI) + logdet0) - 0.5 * state.tau * (
        dev @ prior.precision @ dev
    )
    log_tau = (
        prior.a * jnp.log(prior.b)
        - gammaln(prior.a)
        + (prior.a - 1) * jnp.log(state.tau)
        - prior.b * state.tau
    )
    return jnp.sum(log_likelihood(data, state)) + log_beta + log_tau


def _init(data, prior, key):
    key_tau, key_beta = jax.random.split(key)
    tau = _sample_gamma(key_tau, prior.a, prior.b)
    beta = sample_beta(key_beta, _conditional_pieces(data, prior), tau)
    return LinearRegressionState(beta, tau)


def _step(data, prior, pieces, key, state):
    key_beta, key_tau = jax.random.split(key)
    beta = sample_beta(key_beta, pieces, state.tau)
    tau = _sample_gamma(key_tau, *tau_conditional(data, prior, pieces, beta))
    new = LinearRegressionState(beta, tau)
    return new, GibbsInfo(lp=log_joint(data, prior, new))


def _trace(data, state, info):
    return {
        "posterior": {"beta": state.beta, "tau": state.tau, "sigma": jax.lax.rsqrt(state.tau)},
        "sample_stats": {"lp": info.lp},
        "log_likelihood": {"y": log_likelihood(data, state)},
    }


def gibbs(
    data: LinearRegressionData,
    *,
    prior: NormalGammaPrior | None = None,
    feature_names=None,
) -> SamplingAlgorithm:
    """Two-block Gibbs sampler for the Normal-Gamma regression (module docstring).

    ``data`` comes from :func:`make_data`; ``prior`` from :func:`make_prior` (default: zero
    mean, unit precision, ``a = b = 1``). Both blocks are exact conditionals, so the kernel
    leaves the joint posterior invariant.
    """
    if not isinstance(data, LinearRegressionData):
        raise ValueError("data must come from bnpjax.models.linear_regression.make_data")
    p = data.X.shape[1]
    prior = make_prior(p) if prior is None else prior
    pieces = _conditional_pieces(data, prior)
    names = list(feature_names) if feature_names is not None else list(range(p))
    if len(names) != p:
        raise ValueError(f"feature_names must have {p} entries, got {len(names)}")
    observed = concrete_or_none(data.observed)
    spec = ArvizSpec(
        name="linear_regression.gibbs",
        dims={"beta": ["coef"], "y": ["obs"]},
        coords={"coef": names, **({"obs": observed.tolist()} if observed is not None else {})},
        observed_data={"y": np.asarray(data.y)[observed]} if observed is not None else {},
        settings={"num_features": p},
    )
    return SamplingAlgorithm(
        init=bind(_init, data, prior),
        step=bind(_step, data, prior, pieces),
        trace=bind(_trace, data),
        spec=spec,
    )


def posterior_moments(data: LinearRegressionData, prior: NormalGammaPrior | None = None) -> dict:
    """Closed-form posterior means and variances (module docstring), in float64 NumPy."""
    X = np.asarray(data.X, float)
    y = np.asarray(data.y, float)
    w = np.asarray(data.mask, float)
    prior = make_prior(X.shape[1]) if prior is None else prior
    m0 = np.asarray(prior.mean, float)
    L0 = np.asarray(prior.precision, float)
    a0, b0 = float(prior.a), float(prior.b)
    Ln = (X * w[:, None]).T @ X + L0
    mn = np.linalg.solve(Ln, L0 @ m0 + (X * w[:, None]).T @ y)
    an = a0 + 0.5 * w.sum()
    bn = b0 + 0.5 * (np.sum(w * y**2) + m0 @ L0 @ m0 - mn @ Ln @ mn)
    cov = bn / (an - 1) * np.linalg.inv(Ln) if an > 1 else np.full(Ln.shape, np.inf)
    from scipy.special import gammaln as sp_gammaln

    mean_sigma = np.exp(sp_gammaln(an - 0.5) - sp_gammaln(an)) * np.sqrt(bn)
    return {
        "beta_mean": mn,
        "beta_var": np.diag(cov),
        "tau_mean": an / bn,
        "tau_var": an / bn**2,
        "sigma_mean": mean_sigma,
        "sigma_var": bn / (an - 1) - mean_sigma**2,
    }


def prior_sample(key, prior: NormalGammaPrior) -> LinearRegressionState:
    """A draw of ``(beta, tau)`` from the prior (for the Geweke harness)."""
    key_tau, key_beta = jax.random.split(key)
    tau = _sample_gamma(key_tau, prior.a, prior.b)
    chol = jnp.linalg.cholesky(prior.precision)
    z = jax.random.normal(key_beta, prior.mean.shape, prior.mean.dtype)
    beta = prior.mean + solve_triangular(chol.T, z, lower=False) / jnp.sqrt(tau)
    return LinearRegressionState(beta, tau)


def data_sample(key, state: LinearRegressionState, data: LinearRegressionData):
    """A fresh ``y ~ p(y | beta, tau)`` on the same design and mask (for the Geweke harness)."""
    noise = jax.random.normal(key, data.y.shape, data.y.dtype)
    y = (data.X @ state.beta + noise * jax.lax.rsqrt(state.tau)) * data.mask
    return data._replace(y=y)
