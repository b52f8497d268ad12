"""The probit and ordered-probit likelihoods of the FM: latent-variable draws (Albert and
Chib 1993), the ordinal cutpoints' Metropolis step with the latent variables integrated out
(Cowles 1996), and pointwise log-likelihoods.

References
----------
Albert, J. H. and Chib, S. (1993). Bayesian analysis of binary and polychotomous response
data. JASA 88(422), 669-679.

Cowles, M. K. (1996). Accelerating Monte Carlo Markov chain convergence for cumulative-link
generalized linear models. Statistics and Computing 6, 101-111.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

from bnpjax.ops import sample_truncated_normal

_LOG_2PI = math.log(2 * math.pi)


def _interval_log_prob(lower, upper):
    """log(Phi(upper) - Phi(lower)) for lower < upper, stable in both tails."""
    flip = lower > 0
    a = jnp.where(flip, -upper, lower)
    b = jnp.where(flip, -lower, upper)
    log_b, log_a = log_ndtr(b), log_ndtr(a)
    return log_b + jnp.log1p(-jnp.exp(jnp.minimum(log_a - log_b, 0.0)))


def _bounds(y, cutpoints, likelihood):
    """Interval of the latent z for each target."""
    inf = jnp.asarray(jnp.inf, y.dtype)
    if likelihood == "probit":
        return jnp.where(y > 0, 0.0, -inf), jnp.where(y > 0, inf, 0.0)
    padded = jnp.concatenate([-inf[None], cutpoints, inf[None]])
    level = y.astype(jnp.int32)
    return padded[level], padded[level + 1]


def _cutpoints_from(params):
    return jnp.cumsum(jnp.concatenate([params[:1], jnp.exp(params[1:])]))


def _params_from(cutpoints):
    return jnp.concatenate([cutpoints[:1], jnp.log(jnp.diff(cutpoints))])


def _sample_latent(key, y, yhat, cutpoints, likelihood):
    lower, upper = _bounds(y, cutpoints, likelihood)
    # jax.random.truncated_normal returns the largest float beyond ~6 sd in float32
    z = yhat + sample_truncated_normal(key, lower - yhat, upper - yhat, yhat.shape, yhat.dtype)
    return jnp.clip(z, lower, upper)


def _cutpoint_step(key, y, yhat, cutpoints, hyper, step_sizes):
    """Random-walk Metropolis on (c_0, log gaps) with z integrated out (Cowles 1996)."""
    key_prop, key_acc = jax.random.split(key)
    params = _params_from(cutpoints)
    proposal = params + step_sizes * jax.random.normal(key_prop, params.shape, params.dtype)
    new_cut = _cutpoints_from(proposal)

    def log_target(p, c):
        lower, upper = _bounds(y, c, "ordinal")
        prior = -0.5 * jnp.sum(p**2) / hyper.cutpoint_scale**2
        return jnp.sum(_interval_log_prob(lower - yhat, upper - yhat)) + prior

    log_ratio = log_target(proposal, new_cut) - log_target(params, cutpoints)
    accept = jnp.log(jax.random.uniform(key_acc, (), yhat.dtype)) < log_ratio
    return jnp.where(accept, new_cut, cutpoints), accept.astype(yhat.dtype)


def _log_likelihood_terms(y, yhat, noise_var, cutpoints, likelihood):
    if likelihood == "gaussian":
        return -0.5 * (_LOG_2PI + jnp.log(noise_var) + (y - yhat) ** 2 / noise_var)
    lower, upper = _bounds(y, cutpoints, likelihood)
    return _interval_log_prob(lower - yhat, upper - yhat)
