"""Step 3 of the ILFM sampler: the weights of the active features, the biases and the
covariate coefficients, jointly by Hamiltonian Monte Carlo (the default) or one weight at a
time by random-walk Metropolis-Hastings (``weights="random_walk"``). Both are exact MH moves
for a fixed step size; the step size is adapted during warmup only. With a prior on the
weights' scale, :func:`sample_weight_scale` then draws it from its conditional.

References
----------
Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain Monte Carlo,
ch. 5.
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (the random-walk weight move).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.models.ilfm.joint import _active_pairs, _bernoulli, _logits, _offset
from bnpjax.ops import sample_gamma

__all__ = ["hmc", "random_walk", "sample_weight_scale"]


def hmc(key, data, hyper, F, W, bias, beta, log_step_size, num_leapfrog, likelihood):
    """One HMC move of the active weights, the biases and the covariate coefficients
    (``num_leapfrog`` leapfrog steps of size ``exp(log_step_size)``, unit mass).
    Returns the new ``W``, ``bias``, ``beta`` and the acceptance probability."""
    active = F.sum(0) > 0
    pair = (active[:, None] & active[None, :]).astype(W.dtype)

    def potential(position):
        W_, s_, b_ = position
        logits = _logits(F, W_ * pair, _offset(s_, b_, data.X))
        log_lik = jnp.sum(_bernoulli(data.Y, logits, data.mask, likelihood))
        prior = jnp.sum(pair * W_**2) / hyper.sigma_w**2 + jnp.sum(s_**2) / hyper.sigma_s**2
        prior = prior + jnp.sum(b_**2) / hyper.sigma_beta**2
        return -log_lik + 0.5 * prior

    grad = jax.grad(potential)
    key_p, key_u = jax.random.split(key)
    kp1, kp2 = jax.random.split(key_p)
    momentum = (
        jax.random.normal(kp1, W.shape, W.dtype) * pair,
        jax.random.normal(kp2, bias.shape, W.dtype),
        jax.random.normal(jax.random.fold_in(kp2, 1), beta.shape, W.dtype),
    )
    eps = jnp.exp(log_step_size)

    def kinetic(p):
        return 0.5 * sum(jnp.sum(leaf**2) for leaf in p)

    # each step's last gradient is the next step's first: carried, one gradient a step
    # (the potential itself only at the ends, for the ratio)
    def leapfrog(_, c):
        q, p, g = c
        p = jax.tree.map(lambda a, b: a - 0.5 * eps * b, p, g)
        q = jax.tree.map(lambda a, b: a + eps * b, q, p)
        g = grad(q)
        p = jax.tree.map(lambda a, b: a - 0.5 * eps * b, p, g)
        return q, (p[0] * pair, p[1], p[2]), g

    q0 = (W, bias, beta)
    q1, p1, _ = jax.lax.fori_loop(0, num_leapfrog, leapfrog, (q0, momentum, grad(q0)))
    log_ratio = potential(q0) + kinetic(momentum) - potential(q1) - kinetic(p1)
    log_ratio = jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
    accept_prob = jnp.exp(jnp.minimum(log_ratio, 0.0))
    take = jax.random.uniform(key_u, (), W.dtype) < accept_prob
    W_new = jnp.where(take, q1[0] * pair, W)
    bias_new = jnp.where(take, q1[1], bias)
    beta_new = jnp.where(take, q1[2], beta)
    return W_new, bias_new, beta_new, accept_prob


def random_walk(key, data, hyper, F, W, bias, log_step_size, likelihood):
    r"""Random-walk Metropolis-Hastings, one weight at a time:
    :math:`w^* \sim \mathcal N(w, \eta^2)`, accepted with the likelihood x prior ratio
    (the proposal is symmetric). Relations share nothing given ``F``, so the same
    :math:`(k, l)` of every relation is updated at once; a proposal for :math:`w^r_{kl}` moves
    the logits of the pairs with :math:`f_{ik} f_{jl} = 1` only. The biases get the same move.
    Returns the new weights and biases and the mean acceptance probability."""
    active = F.sum(0) > 0
    C = F.shape[1]
    eta = jnp.exp(log_step_size)
    logits = _logits(F, W, bias[:, None, None])  # no covariates with this move (see gibbs)
    # active pairs first, so that the loop runs over K+^2 slots only
    pair_active = (active[:, None] & active[None, :]).ravel()
    order = jnp.argsort(~pair_active)
    key_w, key_b = jax.random.split(key)
    steps = eta * jax.random.normal(key_w, (C * C, *bias.shape), W.dtype)
    log_u = jnp.log(jax.random.uniform(jax.random.fold_in(key_w, 1), steps.shape, W.dtype))

    def one(t, carry):
        W, logits, total = carry
        pair = order[t]
        k, l = pair // C, pair % C
        w = W[:, k, l]
        w_new = w + steps[pair]
        delta = (w_new - w)[:, None, None] * (F[:, k][:, None] * F[:, l][None, :])[None]
        new_logits = logits + delta
        gain = (
            jnp.sum(
                _bernoulli(data.Y, new_logits, data.mask, likelihood)
                - _bernoulli(data.Y, logits, data.mask, likelihood),
                axis=(1, 2),
            )
            - 0.5 * (w_new**2 - w**2) / hyper.sigma_w**2
        )
        take = log_u[pair] < gain
        W = W.at[:, k, l].set(jnp.where(take, w_new, w))
        logits = jnp.where(take[:, None, None], new_logits, logits)
        return W, logits, total + jnp.mean(jnp.exp(jnp.minimum(gain, 0.0)))

    num_pairs = jnp.sum(pair_active)
    W, logits, total = jax.lax.fori_loop(0, num_pairs, one, (W, logits, jnp.zeros((), W.dtype)))
    b_new = bias + eta * jax.random.normal(key_b, bias.shape, W.dtype)
    shift = (b_new - bias)[:, None, None]
    gain = (
        jnp.sum(
            _bernoulli(data.Y, logits + shift, data.mask, likelihood)
            - _bernoulli(data.Y, logits, data.mask, likelihood),
            axis=(1, 2),
        )
        - 0.5 * (b_new**2 - bias**2) / hyper.sigma_s**2
    )
    take = jnp.log(jax.random.uniform(jax.random.fold_in(key_b, 1), bias.shape, W.dtype)) < gain
    bias = jnp.where(take, b_new, bias)
    accept = (total + jnp.mean(jnp.exp(jnp.minimum(gain, 0.0)))) / (num_pairs + 1)
    return W, bias, accept


def sample_weight_scale(key, F, W, shape, scale):
    r"""The weights' prior standard deviation from its conditional, given the active weights.

    With :math:`\sigma_w^2 \sim \mathrm{InvGamma}(a, b)` and the :math:`n = R K_+^2` weights of
    the active features i.i.d. :math:`\mathcal N(0, \sigma_w^2)`, the conditional is
    conjugate: :math:`\sigma_w^2 \mid W \sim \mathrm{InvGamma}(a + n / 2,\; b + \tfrac12
    \sum w^2)`. The weights outside the active block are zero and not part of the model, so
    they count for nothing. An exact Gibbs step: every other move of the sweep is exact given
    :math:`\sigma_w`, and this one draws it given the rest.

    Parameters
    ----------
    key
        a ``jax.random.key``.
    F, W
        the features (N, capacity) and the weights (R, capacity, capacity) of one model.
    shape, scale
        the inverse-Gamma prior of :math:`\sigma_w^2`.

    Returns
    -------
    jax.Array
        the new :math:`\sigma_w` (a scalar).

    References
    ----------
    Gelman, A., Carlin, J. B., Stern, H. S., Dunson, D. B., Vehtari, A. and Rubin, D. B.
    (2013). Bayesian Data Analysis, 3rd ed., section 3.3 (the normal variance's conjugate
    prior).
    """
    pair = _active_pairs(F, W.dtype)
    count = W.shape[0] * jnp.sum(pair)
    precision = sample_gamma(key, shape + 0.5 * count, W.dtype) / (
        scale + 0.5 * jnp.sum(pair * W**2)
    )
    return jax.lax.rsqrt(precision)
