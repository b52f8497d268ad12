r"""A dense mass for the ILFM's HMC move: the Fisher information of each relation's bias,
weights and coefficients, at pair weights frozen after warmup (``gibbs(mass="fisher")``).

Given the features, a relation's logits are linear in :math:`\theta_r = (s_r, \mathrm{vec}\,
W_r, \beta_r)`: :math:`\eta_{ij} = a_{ij}^\top \theta_r` with :math:`a_{ij} = (1, f_i \otimes
f_j, x_{ij})`. The posterior precision near a state is about

.. math::

    I_r = \sum_{ij} d_{ij}\, a_{ij} a_{ij}^\top + \Lambda, \qquad
    d_{ij} = m_{ij}\, \frac{\phi(\eta_{ij})^2}{\Phi(\eta_{ij}) (1 - \Phi(\eta_{ij}))}
    \ \text{(probit)}, \quad m_{ij}\, p_{ij} (1 - p_{ij}) \ \text{(logit)},

with :math:`\Lambda` the prior precisions. HMC with mass :math:`I_r` moves in coordinates where
the posterior is about isotropic: the directions the links pin down and those only the prior
bounds (the weights of blocks whose links are all 0 or all 1, the bias against them) get
steps of their own scale, where with unit mass one step size fits the narrowest and the
others move by a random walk.

The pair weights :math:`d_{ij}` are what is adapted: a moving average over the warmup's states,
then frozen. The mass is rebuilt every sweep from them, the current features and the current
prior scales, all of which the HMC move leaves alone, so every kept HMC move has a mass fixed
during it, which keeps it exact; and the pairs, unlike the feature slots, never change their
meaning, so births, deaths, relabelling moves and a grown buffer need no special care. Inactive
slots have no links, so their rows hold the prior alone and they stay at zero.

Cost: building :math:`I_r` takes ``O(C^2 N^2 + C^4 N)`` and its Cholesky factor ``O(C^6)`` per
relation and sweep, and each leapfrog step two triangular solves; for ``C = 8`` about a third
more than a unit-mass sweep, for large buffers (``C >= 16`` with many relations) much more.

References
----------
Girolami, M. and Calderhead, B. (2011). Riemann manifold Langevin and Hamiltonian Monte Carlo
methods. JRSS B 73, 123-214 (the Fisher information as a metric; here frozen, so that the
plain leapfrog applies).
Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain Monte Carlo,
ch. 5 (HMC with a mass matrix).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import ndtr

from bnpjax.models.ilfm.joint import (
    _active_pairs,
    _logits,
    _offset,
    _relation_log_likelihood,
)

__all__ = ["MASSES", "dense_hmc", "fisher_precision", "pair_weights"]

#: how the HMC move's mass is set
MASSES = ("unit", "fisher")
#: weight of the newest state in the warmup's moving average of the pair weights
PAIR_WEIGHT_SMOOTHING = 0.1


def pair_weights(data, F, W, bias, beta, likelihood):
    """The observed entries' Fisher weights ``d_ij`` (R, N, N) at a state (module docstring),
    the mask (a temperature's scaling included) times the link's information at its logit."""
    eta = _logits(F, W, _offset(bias, beta, data.X))
    if likelihood == "probit":
        cdf = jnp.clip(ndtr(eta), 1e-6, 1.0 - 1e-6)
        density = jnp.exp(-0.5 * eta**2) / jnp.sqrt(2.0 * jnp.pi)
        information = density**2 / (cdf * (1.0 - cdf))
    else:
        p = jax.nn.sigmoid(eta)
        information = p * (1.0 - p)
    return data.mask * information


def fisher_precision(F, weights, X, hyper):
    """``I_r`` (R, P, P), ``P = 1 + C^2 + C_x``: coordinates the bias, the weights ``(k, l)``
    row-major, the coefficients. ``sum_ij d_ij f_ik f_jl f_ik' f_jl'`` is
    ``(H' D H)[(k, k'), (l, l')]`` with ``H_i = f_i (x) f_i``: products of small matrices
    instead of a sum over pairs."""
    N, C = F.shape
    H = (F[:, :, None] * F[:, None, :]).reshape(N, C * C)

    def one(D):
        total = jnp.sum(D)[None]
        cross = (F.T @ D @ F).reshape(C * C)
        quad = (H.T @ D @ H).reshape(C, C, C, C).transpose(0, 2, 1, 3).reshape(C * C, C * C)
        DX = D[None] * X  # (C_x, N, N)
        bias_x = jnp.sum(DX, axis=(1, 2))
        weights_x = jnp.einsum("ik,cij,jl->klc", F, DX, F).reshape(C * C, -1)
        xx = jnp.einsum("cij,dij->cd", DX, X)
        top = jnp.concatenate([total, cross, bias_x])[None]
        middle = jnp.concatenate([cross[:, None], quad, weights_x], axis=1)
        bottom = jnp.concatenate([bias_x[:, None], weights_x.T, xx], axis=1)
        return jnp.concatenate([top, middle, bottom], axis=0)

    prior = _prior_precision(hyper, C, X.shape[0], F.dtype)
    return jax.vmap(one)(weights) + jnp.diag(prior)[None]


def _prior_precision(hyper, C, num_covariates, dtype):
    """The prior precisions of the flat coordinates (P,): bias, weights, coefficients."""
    return jnp.concatenate(
        [
            jnp.full((1,), 1.0 / hyper.sigma_s**2, dtype),
            jnp.full((C * C,), 1.0 / hyper.sigma_w**2, dtype),
            jnp.full((num_covariates,), 1.0 / hyper.sigma_beta**2, dtype),
        ]
    )


def _flatten(W, bias, beta):
    R = W.shape[0]
    return jnp.concatenate([bias[:, None], W.reshape(R, -1), beta], axis=1)


def _unflatten(theta, C):
    R = theta.shape[0]
    return theta[:, 1 : 1 + C * C].reshape(R, C, C), theta[:, 0], theta[:, 1 + C * C :]


def dense_hmc(
    key, data, hyper, F, W, bias, beta, log_step_size, num_leapfrog, likelihood, weights,
    correct=True,
):  # fmt: skip
    """One HMC move of the active weights, the biases and the coefficients with mass
    ``I_r`` per relation (:func:`fisher_precision` at the frozen pair ``weights``). Returns
    the new ``W``, ``bias``, ``beta`` and the acceptance probability. ``correct=False``
    computes the kinetic energy as if the mass were the identity while the dynamics use
    ``I_r`` (a broken twin for tests)."""
    R, C, _ = W.shape
    pair = _active_pairs(F, W.dtype)
    free = jnp.concatenate(
        [jnp.ones((1,), W.dtype), pair.reshape(-1), jnp.ones((beta.shape[1],), W.dtype)]
    )
    chol = jnp.linalg.cholesky(fisher_precision(F, weights, data.X, hyper))
    prior = _prior_precision(hyper, C, beta.shape[1], W.dtype)

    def potential(theta):
        log_lik = _relation_log_likelihood(data, F, *_unflatten(theta * free, C), likelihood)
        return -jnp.sum(log_lik) + 0.5 * jnp.sum(free * prior * theta**2)

    def velocity(p):  # M^-1 p = L^-T L^-1 p, relation by relation
        half = solve_triangular(chol, p[..., None], lower=True)
        return free * solve_triangular(jnp.swapaxes(chol, -1, -2), half, lower=False)[..., 0]

    def kinetic(p):
        if not correct:
            return 0.5 * jnp.sum(p**2)
        half = solve_triangular(chol, p[..., None], lower=True)
        return 0.5 * jnp.sum(half**2)

    grad = jax.grad(potential)
    key_p, key_u = jax.random.split(key)
    noise = jax.random.normal(key_p, (R, chol.shape[-1]), W.dtype)
    # p = L z ~ N(0, I_r); inactive slots' rows of L are the prior's alone, so masking
    # their momentum leaves the active block's distribution as it is
    momentum = free * jnp.einsum("rab,rb->ra", chol, noise)
    eps = jnp.exp(log_step_size)

    # each step's last gradient is the next step's first: carried, one gradient a step
    # (the potential itself only at the ends, for the ratio)
    def leapfrog(_, carry):
        q, p, g = carry
        p = p - 0.5 * eps * free * g
        q = q + eps * velocity(p)
        g = grad(q)
        p = p - 0.5 * eps * free * g
        return q, p, g

    q0 = _flatten(W, bias, beta)
    q1, p1, _ = jax.lax.fori_loop(0, num_leapfrog, leapfrog, (q0, momentum, grad(q0)))
    log_ratio = potential(q0) + kinetic(momentum) - potential(q1) - kinetic(p1)
    log_ratio = jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
    accept_prob = jnp.exp(jnp.minimum(log_ratio, 0.0))
    take = jax.random.uniform(key_u, (), W.dtype) < accept_prob
    W_new, bias_new, beta_new = _unflatten(jnp.where(take, q1 * free, q0), C)
    return W_new, bias_new, beta_new, accept_prob
