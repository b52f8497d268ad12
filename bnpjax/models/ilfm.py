r"""The infinite latent feature relational model (ILFM / LFRM) for link prediction.

Model (``../shared/seeds/000_82b12501ac6cffe5.txt``; Miller, Griffiths & Jordan 2009). ``N``
entities, ``R`` binary relations :math:`y^r_{ij} \in \{0, 1\}`::

    alpha ~ Gamma(a_alpha, rate b_alpha)        F | alpha ~ IBP(alpha)             (N x K+)
    w^r_kl ~ N(0, sigma_w^2)                    s_r ~ N(0, sigma_s^2)
    y^r_ij ~ Bernoulli(sigmoid(f_i W_r f_j' + s_r + beta_r' x_ij))    (or Phi(.): link="probit")
    beta_rc ~ N(0, sigma_beta^2)

with optional covariates :math:`x_{ij} \in \mathbb R^C` (Miller et al.'s :math:`\beta^\top
X_{ij}`, and their entity terms :math:`\beta_p^\top X_i + \beta_c^\top X_j`, which are the
pair covariates ``X_i`` and ``X_j`` of every pair; :func:`make_data` builds them from
``covariates`` and ``entity_covariates``). The covariate term is one more fixed offset of the
logits in steps 1 and 2 below, and its coefficients join the weights and biases in step 3.

("global": one ``F`` shared by all relations; "single", an independent model per relation, is
the same kernel ``vmap``-ed over relations, see :func:`gibbs`). Unobserved entries (held out,
missing, and the diagonal by default) are masked out of the likelihood, never read as zeros.

**Sampler** (seed 000's algorithm, INDEX's correction: new features at rate ``alpha / N``):

1. Entities in turn. For entity ``i``, each feature another entity holds is redrawn from
   its Gibbs conditional, prior :math:`m_{-i,k}/N` (seed eq. ``ibp_gibbs``) times the
   likelihood of the links that involve ``i`` (row ``i``, column ``i`` and the diagonal
   entry): the other links do not depend on :math:`f_{ik}`. With
   :math:`P_r = W_r F_{-i}^\top` and :math:`Q_r = F_{-i} W_r` (``F`` with row ``i`` zeroed), the
   logits of row ``i`` are :math:`f_i P_r + s_r` and of column ``i`` :math:`Q_r f_i^\top + s_r`,
   so a flip of :math:`f_{ik}` shifts them by :math:`\pm P_r[k]`, :math:`\pm Q_r[:, k]`:
   ``O(R N)`` per flip, not the ``O(R N^2)`` of the full likelihood.
2. Then the features unique to ``i`` and their weights get the seed's joint Metropolis-Hastings
   move (eq. ``r_{B->new}``): propose :math:`k^{new} \sim \mathrm{Poisson}(\alpha/N)` (truncated
   at ``kappa``) new features replacing the current unique ones, with every weight that
   involves them drawn from the prior :math:`\mathcal N(0, \sigma_w^2)`. Proposal = prior, so the
   acceptance ratio is the likelihood ratio of the links of ``i``. (With the truncation the
   reverse move from more than ``kappa`` unique features has probability 0; such moves are
   rejected, which keeps detailed balance.)
3. The weights of active features, the biases and the covariate coefficients: by default
   jointly by Hamiltonian Monte
   Carlo (JAX autodiff of the masked log joint; ``num_leapfrog`` steps of size
   ``exp(log_step_size)``), or (``weights="random_walk"``) by the seed's random-walk MH one
   weight at a time (eq. ``r_w``), vectorized over relations. During warmup the step size is
   adapted towards acceptance 0.8 (HMC) or 0.44 (random walk) by Robbins-Monro on its log;
   after warmup it is fixed, so the sampling kernel is a fixed MH kernel.
4. :math:`\alpha \mid F \sim \mathrm{Gamma}(a_\alpha + K_+, b_\alpha + H_N)` (seed 002).

Each step leaves the posterior invariant: 1 is Gibbs, 2 and 3 are Metropolis-Hastings with
their exact ratios, 4 is conjugate. Entities are visited in sequence because step 1 for
entity ``i`` conditions on the features of every other entity.
"""

from __future__ import annotations

import functools
import json
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import log_ndtr, ndtr

from bnpjax._checks import check_integer
from bnpjax._checks import is_positive_finite as _positive_finite
from bnpjax.infer.arviz_adapter import pooled_draws
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, pad_axis
from bnpjax.ops import sample_truncated_poisson
from bnpjax.priors import ibp

__all__ = [
    "ILFMData",
    "ILFMHyper",
    "ILFMInfo",
    "ILFMState",
    "cluster_features",
    "data_sample",
    "gibbs",
    "link_probabilities",
    "log_joint",
    "make_data",
    "make_hyper",
    "prior_sample",
    "single_link_probabilities",
]


class ILFMData(NamedTuple):
    """``Y`` (R, N, N) in {0, 1} (0 where unobserved), ``mask`` (R, N, N) 1.0 where observed,
    ``X`` (C, N, N) pair covariates (C = 0 without)."""

    Y: jax.Array
    mask: jax.Array
    X: jax.Array


class ILFMHyper(NamedTuple):
    """Hyperparameters (:func:`make_hyper`): Gamma(``alpha_shape``, rate ``alpha_rate``) prior
    of alpha, and the prior sds ``sigma_w`` of the weights, ``sigma_s`` of the biases and
    ``sigma_beta`` of the covariate coefficients (module docstring)."""

    alpha_shape: jax.Array
    alpha_rate: jax.Array
    sigma_w: jax.Array
    sigma_s: jax.Array
    sigma_beta: jax.Array


class ILFMState(NamedTuple):
    """Sampler state: features ``F`` (N, capacity), weights ``W`` (R, capacity, capacity; zero
    outside the active block), biases ``bias`` (R,), the IBP mass ``alpha``, the log HMC (or
    random-walk) step size and the covariate coefficients ``beta`` (R, C). With
    ``mode="single"`` every field has a leading relation axis."""

    F: jax.Array  # (N, capacity) in {0, 1}
    W: jax.Array  # (R, capacity, capacity); zero outside the active block
    bias: jax.Array  # (R,)
    alpha: jax.Array
    log_step_size: jax.Array  # HMC step size (adapted during warmup only)
    beta: jax.Array  # (R, C) covariate coefficients


class ILFMInfo(NamedTuple):
    """Per-step diagnostics: the log joint ``lp`` (:func:`log_joint`), the number of active
    features, the weight mover's acceptance probability, the fraction of accepted
    unique-feature moves, and whether (and to what size) the feature buffer must grow."""

    lp: jax.Array
    num_features: jax.Array
    acceptance_rate: jax.Array  # HMC
    birth_acceptance: jax.Array  # fraction of entities whose unique-feature move was accepted
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def make_hyper(
    alpha=(1.0, 1.0), sigma_w: float = 1.0, sigma_s: float = 3.0, sigma_beta: float = 1.0
) -> ILFMHyper:
    """Gamma(shape, rate) prior of alpha; prior sds of the weights, the biases and the
    covariate coefficients."""
    shape, rate = alpha
    values = (shape, rate, sigma_w, sigma_s, sigma_beta)
    names = ("alpha shape", "alpha rate", "sigma_w", "sigma_s", "sigma_beta")
    for name, value in zip(names, values, strict=True):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    dtype = jnp.result_type(float)
    return ILFMHyper(*(jnp.asarray(v, dtype) for v in values))


def _covariates(covariates, entity_covariates, N: int) -> np.ndarray:
    """Stack pair covariates ``(C, N, N)`` and, for entity covariates ``A`` (N, E), the sender
    term ``A[i, e]`` and the receiver term ``A[j, e]`` of every pair: (C + 2E, N, N)."""
    parts = [np.zeros((0, N, N))]
    if covariates is not None:
        X = np.asarray(covariates, float)
        X = X[None] if X.ndim == 2 else X
        if X.ndim != 3 or X.shape[1:] != (N, N):
            raise ValueError(f"covariates must be (N, N) or (C, N, N) with N = {N}, got {X.shape}")
        if not np.all(np.isfinite(X)):
            raise ValueError("covariates contain NaN or infinite values")
        parts.append(X)
    if entity_covariates is not None:
        A = np.asarray(entity_covariates, float)
        A = A[:, None] if A.ndim == 1 else A
        if A.ndim != 2 or A.shape[0] != N:
            raise ValueError(f"entity_covariates must be (N, E) with N = {N}, got {A.shape}")
        if not np.all(np.isfinite(A)):
            raise ValueError("entity_covariates contain NaN or infinite values")
        sender = np.broadcast_to(A.T[:, :, None], (A.shape[1], N, N))
        receiver = np.broadcast_to(A.T[:, None, :], (A.shape[1], N, N))
        parts += [sender, receiver]
    return np.concatenate(parts)


def make_data(
    Y, mask=None, *, observe_diagonal: bool = False, covariates=None, entity_covariates=None
) -> ILFMData:
    """Validate links ``Y`` ((N, N) or (R, N, N), entries 0/1; NaN = unobserved) and the
    optional ``mask`` (True = observed). The diagonal is unobserved unless
    ``observe_diagonal``. ``covariates`` ((N, N) or (C, N, N)) and ``entity_covariates``
    ((N, E): each column enters as a sender and a receiver covariate) add the term
    ``beta_r' x_ij`` to the logits (module docstring)."""
    Y = np.asarray(Y, float)
    if Y.ndim == 2:
        Y = Y[None]
    if Y.ndim != 3 or Y.shape[1] != Y.shape[2] or Y.shape[1] < 2:
        raise ValueError(f"Y must be (N, N) or (R, N, N) with N >= 2, got shape {Y.shape}")
    if np.any(np.isinf(Y)):
        raise ValueError("Y must not contain +-inf (only NaN marks an unobserved entry)")
    observed = ~np.isnan(Y)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != Y.shape and mask.shape != Y.shape[1:]:
            raise ValueError(f"mask must have the shape of Y {Y.shape}, got {mask.shape}")
        if mask.dtype != bool and not np.all((mask == 0) | (mask == 1)):
            raise ValueError("mask must be boolean (True = observed)")
        observed &= np.broadcast_to(mask.astype(bool), Y.shape)
    values = Y[observed]
    if not np.all((values == 0) | (values == 1)):
        raise ValueError("Y must hold binary links (0 or 1) where observed")
    if not observe_diagonal:
        N = Y.shape[1]
        observed[:, np.arange(N), np.arange(N)] = False
    if not observed.any():
        raise ValueError("mask leaves no observed entry")
    dtype = jnp.result_type(float)
    X = _covariates(covariates, entity_covariates, Y.shape[1])
    return ILFMData(
        jnp.asarray(np.where(observed, np.nan_to_num(Y), 0.0), dtype),
        jnp.asarray(observed, dtype),
        jnp.asarray(X, dtype),
    )


# --------------------------------------------------------------------------------------------
# likelihood


def _offset(bias, beta, X):
    """The logits' terms other than the features: ``s_r + beta_r' x_ij`` ((R, 1, 1) without
    covariates, else (R, N, N))."""
    offset = bias[:, None, None]
    if X.shape[0]:
        offset = offset + jnp.einsum("rc,cij->rij", beta, X)
    return offset


def _logits(F, W, offset):
    return jnp.einsum("ik,rkl,jl->rij", F, W, F) + offset


LINKS = ("logit", "probit")
#: "random": ``num_init_features`` features, each held with probability 1/2, small weights;
#: "cluster": one feature per k-means cluster of the link profiles (:func:`cluster_features`)
INIT_STRATEGIES = ("random", "cluster")


def _bernoulli(y, eta, mask, link="logit"):
    """Masked ``log p(y | eta)``: ``sigmoid`` link, or ``Phi`` (probit) in log space."""
    if link == "probit":
        return mask * (y * log_ndtr(eta) + (1 - y) * log_ndtr(-eta))
    return mask * (y * eta - jax.nn.softplus(eta))


def _prediction_covariates(state: ILFMState, data: ILFMData | None):
    """The pair covariates of ``data``, or none when the model has no covariates."""
    if data is None:
        if state.beta.shape[-1]:
            raise ValueError("a model with covariates needs the data (with X) to predict")
        return jnp.zeros((0, state.F.shape[-2], state.F.shape[-2]), state.F.dtype)
    return data.X


def link_probabilities(
    state: ILFMState, link: str = "logit", data: ILFMData | None = None
) -> jax.Array:
    """``P(y^r_ij = 1 | state)`` (R, N, N): the link function of
    ``f_i W_r f_j' + s_r + beta_r' x_ij`` (module docstring, the model; the ``P(Y | F, W)`` of
    ``../shared/seeds/000_82b12501ac6cffe5.txt`` eq. ``ibp_gibbs``); ``data`` supplies the
    covariates, if any."""
    X = _prediction_covariates(state, data)
    eta = _logits(state.F, state.W, _offset(state.bias, state.beta, X))
    return ndtr(eta) if link == "probit" else jax.nn.sigmoid(eta)


def log_joint(data: ILFMData, hyper: ILFMHyper, state: ILFMState, link: str = "logit") -> jax.Array:
    """``log p(Y_obs, F, W_active, bias, beta, alpha)``: the masked Bernoulli likelihood, the
    Normal priors of the active weights, biases and coefficients, the IBP probability of
    ``[F]`` (``../shared/seeds/002_c2a7c7ffebfd8867.txt``, the equation after Figure 2.1; see
    :func:`bnpjax.priors.ibp.log_prob`) and the Gamma prior of alpha; the target of the
    sampler of ``../shared/seeds/000_82b12501ac6cffe5.txt``, ``P(W, F | Y) ∝ P(Y | F, W) P(F)
    P(W)``."""
    active = state.F.sum(0) > 0
    pair = (active[:, None] & active[None, :]).astype(state.W.dtype)
    offset = _offset(state.bias, state.beta, data.X)
    log_lik = jnp.sum(_bernoulli(data.Y, _logits(state.F, state.W, offset), data.mask, link))
    sw2, ss2, sb2 = hyper.sigma_w**2, hyper.sigma_s**2, hyper.sigma_beta**2
    R = state.W.shape[0]
    log_w = -0.5 * jnp.sum(pair * state.W**2) / sw2 - 0.5 * R * jnp.sum(pair) * jnp.log(
        2 * math.pi * sw2
    )
    log_s = -0.5 * jnp.sum(state.bias**2) / ss2 - 0.5 * R * jnp.log(2 * math.pi * ss2)
    log_s = (
        log_s
        - 0.5 * jnp.sum(state.beta**2) / sb2
        - 0.5 * state.beta.size * jnp.log(2 * math.pi * sb2)
    )
    a, b = hyper.alpha_shape, hyper.alpha_rate
    log_alpha = a * jnp.log(b) - jax.scipy.special.gammaln(a) + (a - 1) * jnp.log(state.alpha)
    return (
        log_lik + log_w + log_s + ibp.log_prob(state.F, state.alpha) + log_alpha - b * state.alpha
    )


# --------------------------------------------------------------------------------------------
# step 1 and 2: entities in turn


def _entity_terms(f, row, col, i, data, W, diag_offset, link):
    """Log-likelihood of the links of entity ``i`` given its features ``f`` and the row/column
    logits without the diagonal. ``row``/``col``: (R, N)."""
    off = jnp.arange(row.shape[1]) != i
    y_row, m_row = data.Y[:, i, :], data.mask[:, i, :] * off
    y_col, m_col = data.Y[:, :, i], data.mask[:, :, i] * off
    diag = jnp.einsum("k,rkl,l->r", f, W, f) + diag_offset
    total = jnp.sum(_bernoulli(y_row, row, m_row, link))
    total = total + jnp.sum(_bernoulli(y_col, col, m_col, link))
    return total + jnp.sum(_bernoulli(data.Y[:, i, i], diag, data.mask[:, i, i], link))


def _entity(carry, xs, *, data, offset, alpha, sigma_w, kappa, link):
    F, W, m, exceeded, needed, accepted = carry
    i, uniforms, key = xs
    N = F.shape[0]
    offset = jnp.broadcast_to(offset, (W.shape[0], N, N))
    row_offset, col_offset, bias = offset[:, i, :], offset[:, :, i], offset[:, i, i]
    f = F[i]
    F_minus = F.at[i].set(0.0)
    m_minus = m - f
    P = jnp.einsum("rkl,jl->rkj", W, F_minus)  # (R, C, N): row logits are f P + s
    Q = jnp.einsum("jk,rkl->rjl", F_minus, W)  # (R, N, C): column logits are Q f + s
    row = jnp.einsum("k,rkj->rj", f, P) + row_offset
    col = jnp.einsum("rjl,l->rj", Q, f) + col_offset
    held = m_minus > 0.5
    order = jnp.argsort(~held)  # held slots first, in slot order

    def flip(j, c):
        f, row, col, current = c
        k = order[j]
        delta = 1.0 - 2.0 * f[k]
        f_new = f.at[k].set(1.0 - f[k])
        row_new = row + delta * P[:, k, :]
        col_new = col + delta * Q[:, :, k]
        proposed = _entity_terms(f_new, row_new, col_new, i, data, W, bias, link)
        p_on = m_minus[k] / N
        log_prior = jnp.where(
            f[k] > 0, jnp.log1p(-p_on) - jnp.log(p_on), jnp.log(p_on) - jnp.log1p(-p_on)
        )
        log_odds = proposed - current + log_prior
        take = jnp.log(uniforms[k]) < -jax.nn.softplus(-log_odds)
        return (
            jnp.where(take, f_new, f),
            jnp.where(take, row_new, row),
            jnp.where(take, col_new, col),
            jnp.where(take, proposed, current),
        )

    current = _entity_terms(f, row, col, i, data, W, bias, link)
    f, row, col, current = jax.lax.fori_loop(0, jnp.sum(held), flip, (f, row, col, current))

    # unique features of i and their weights: joint MH with the prior as proposal
    key_k, key_w, key_u = jax.random.split(key, 3)
    unique = (~held) & (f > 0)
    k_unique = jnp.sum(unique)
    k_new = sample_truncated_poisson(key_k, alpha / N, kappa)
    free = ~held
    owned, short = ibp.place_new_features(free, k_new[None])
    owned = owned[0]
    f_prop = jnp.where(held, f, owned.astype(f.dtype))
    fresh = owned[:, None] | owned[None, :]
    active_prop = held | owned
    pair_prop = active_prop[:, None] & active_prop[None, :]
    W_prop = jnp.where(fresh[None], sigma_w * jax.random.normal(key_w, W.shape, W.dtype), W)
    W_prop = jnp.where(pair_prop[None], W_prop, 0.0)
    P_prop = jnp.einsum("rkl,jl->rkj", W_prop, F_minus)
    Q_prop = jnp.einsum("jk,rkl->rjl", F_minus, W_prop)
    row_prop = jnp.einsum("k,rkj->rj", f_prop, P_prop) + row_offset
    col_prop = jnp.einsum("rjl,l->rj", Q_prop, f_prop) + col_offset
    proposed = _entity_terms(f_prop, row_prop, col_prop, i, data, W_prop, bias, link)
    log_ratio = proposed - current
    possible = (k_unique <= kappa) & (short == 0)
    take = possible & (jnp.log(jax.random.uniform(key_u, (), W.dtype)) < log_ratio)
    f = jnp.where(take, f_prop, f)
    W = jnp.where(take, W_prop, W)
    # slots nobody holds any more carry no weights
    active = held | (f > 0)
    W = jnp.where((active[:, None] & active[None, :])[None], W, 0.0)
    F = F.at[i].set(f)
    carry = (
        F,
        W,
        m_minus + f,
        exceeded | (short > 0),
        jnp.maximum(needed, (jnp.sum(held) + k_new).astype(jnp.int32)),
        accepted + take.astype(W.dtype),
    )
    return carry, None


# --------------------------------------------------------------------------------------------
# step 3: HMC on the active weights and the biases


def _hmc(key, data, hyper, F, W, bias, beta, log_step_size, num_leapfrog, link):
    active = F.sum(0) > 0
    pair = (active[:, None] & active[None, :]).astype(W.dtype)

    def potential(position):
        W_, s_, b_ = position
        logits = _logits(F, W_ * pair, _offset(s_, b_, data.X))
        log_lik = jnp.sum(_bernoulli(data.Y, logits, data.mask, link))
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

    def leapfrog(_, c):
        q, p = c
        g = grad(q)
        p = jax.tree.map(lambda a, b: a - 0.5 * eps * b, p, g)
        q = jax.tree.map(lambda a, b: a + eps * b, q, p)
        g = grad(q)
        p = jax.tree.map(lambda a, b: a - 0.5 * eps * b, p, g)
        return q, (p[0] * pair, p[1], p[2])

    q0 = (W, bias, beta)
    q1, p1 = jax.lax.fori_loop(0, num_leapfrog, leapfrog, (q0, momentum))
    log_ratio = potential(q0) + kinetic(momentum) - potential(q1) - kinetic(p1)
    log_ratio = jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
    accept_prob = jnp.exp(jnp.minimum(log_ratio, 0.0))
    take = jax.random.uniform(key_u, (), W.dtype) < accept_prob
    W_new = jnp.where(take, q1[0] * pair, W)
    bias_new = jnp.where(take, q1[1], bias)
    beta_new = jnp.where(take, q1[2], beta)
    return W_new, bias_new, beta_new, accept_prob


def _random_walk(key, data, hyper, F, W, bias, log_step_size, link):
    r"""The seed's random-walk Metropolis-Hastings, one weight at a time (eq. ``r_w``):
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
                _bernoulli(data.Y, new_logits, data.mask, link)
                - _bernoulli(data.Y, logits, data.mask, link),
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
            _bernoulli(data.Y, logits + shift, data.mask, link)
            - _bernoulli(data.Y, logits, data.mask, link),
            axis=(1, 2),
        )
        - 0.5 * (b_new**2 - bias**2) / hyper.sigma_s**2
    )
    take = jnp.log(jax.random.uniform(jax.random.fold_in(key_b, 1), bias.shape, W.dtype)) < gain
    bias = jnp.where(take, b_new, bias)
    accept = (total + jnp.mean(jnp.exp(jnp.minimum(gain, 0.0)))) / (num_pairs + 1)
    return W, bias, accept


# --------------------------------------------------------------------------------------------
# the kernel


def _step(data, hyper, key, state, *, kappa, num_leapfrog, adapt, weights="hmc", link="logit"):
    key_flip, key_birth, key_hmc, key_alpha = jax.random.split(key, 4)
    F, W = state.F, state.W
    N, C = F.shape
    uniforms = jax.random.uniform(key_flip, (N, C), F.dtype)
    keys = jax.random.split(key_birth, N)
    zero = jnp.zeros((), F.dtype)
    init = (F, W, F.sum(0), jnp.zeros((), bool), jnp.zeros((), jnp.int32), zero)

    def entity(carry, xs):
        return _entity(
            carry,
            xs,
            data=data,
            offset=_offset(state.bias, state.beta, data.X),
            alpha=state.alpha,
            sigma_w=hyper.sigma_w,
            kappa=kappa,
            link=link,
        )

    (F, W, _, exceeded, needed, births), _ = jax.lax.scan(
        entity, init, (jnp.arange(N), uniforms, keys)
    )
    if weights == "hmc":
        W, bias, beta, accept_prob = _hmc(
            key_hmc, data, hyper, F, W, state.bias, state.beta, state.log_step_size,
            num_leapfrog, link,
        )  # fmt: skip
        target_accept = 0.8
    else:
        W, bias, accept_prob = _random_walk(
            key_hmc, data, hyper, F, W, state.bias, state.log_step_size, link
        )
        beta = state.beta
        target_accept = 0.44
    log_step = state.log_step_size
    if adapt:  # warmup only: Robbins-Monro on log(step size) towards the target acceptance
        log_step = log_step + 0.1 * (accept_prob - target_accept)
    k_plus = jnp.sum(F.sum(0) > 0)
    alpha = ibp.sample_alpha(key_alpha, k_plus, N, hyper.alpha_shape, hyper.alpha_rate)
    new = ILFMState(F, W, bias, alpha.astype(F.dtype), log_step, beta)
    info = ILFMInfo(
        lp=log_joint(data, hyper, new, link),
        num_features=k_plus.astype(jnp.int32),
        acceptance_rate=accept_prob,
        birth_acceptance=births / N,
        capacity_exceeded=exceeded,
        capacity_needed=needed,
    )
    return new, info


def prior_sample(
    key,
    num_entities: int,
    num_relations: int,
    hyper: ILFMHyper,
    *,
    capacity: int,
    step_size: float = 0.05,
    num_covariates: int = 0,
) -> ILFMState:
    """Parameters from the prior (alpha, F by the buffet process, W on the active block, bias,
    ``num_covariates`` coefficients per relation)."""
    key_a, key_f, key_w, key_s = jax.random.split(key, 4)
    dtype = jnp.result_type(float)
    alpha = jax.random.gamma(key_a, hyper.alpha_shape, dtype=dtype) / hyper.alpha_rate
    draw = ibp.sample_buffet(key_f, alpha, num_entities, capacity)
    pair = draw.active[:, None] & draw.active[None, :]
    W = hyper.sigma_w * jax.random.normal(key_w, (num_relations, capacity, capacity), dtype)
    bias = hyper.sigma_s * jax.random.normal(key_s, (num_relations,), dtype)
    log_step = jnp.asarray(math.log(step_size), dtype)
    beta = hyper.sigma_beta * jax.random.normal(
        jax.random.fold_in(key_s, 1), (num_relations, num_covariates), dtype
    )
    return ILFMState(draw.Z.astype(dtype), W * pair[None], bias, alpha, log_step, beta)


def data_sample(key, state: ILFMState, data: ILFMData, link: str = "logit") -> ILFMData:
    """Fresh links on the observed entries of ``data`` (unobserved ones stay 0)."""
    p = link_probabilities(state, link, data)
    Y = (jax.random.uniform(key, p.shape, p.dtype) < p).astype(p.dtype) * data.mask
    return data._replace(Y=Y)


def _entity_profiles(data: ILFMData) -> jax.Array:
    """Each entity's observed row and column of every relation, unobserved entries replaced by
    the relation's observed link rate: (N, 2 R N)."""
    N = data.Y.shape[1]
    rate = jnp.sum(data.Y, axis=(1, 2)) / jnp.maximum(jnp.sum(data.mask, axis=(1, 2)), 1.0)
    filled = jnp.where(data.mask > 0, data.Y, rate[:, None, None])
    return jnp.concatenate(
        [jnp.moveaxis(filled, 1, 0).reshape(N, -1), jnp.moveaxis(filled, 2, 0).reshape(N, -1)],
        axis=1,
    )


def cluster_features(key, data: ILFMData, num_clusters: int, iterations: int = 30) -> jax.Array:
    """A data-driven starting ``F`` (N, num_clusters): one feature per cluster of k-means
    (k-means++ seeding from ``key``, then ``iterations`` Lloyd steps) on the entities' link
    profiles (:func:`_entity_profiles`). With one feature per entity this is a latent-class
    (IRM-like) partition, which the sampler then refines into overlapping features; clusters
    left empty give inactive slots."""
    if isinstance(num_clusters, bool) or not isinstance(num_clusters, int) or num_clusters < 1:
        raise ValueError(f"num_clusters must be a positive integer, got {num_clusters!r}")
    X = _entity_profiles(data)
    num_clusters = min(num_clusters, X.shape[0])

    def squared_distances(centres):
        cross = X @ centres.T
        return jnp.sum(X**2, 1)[:, None] - 2 * cross + jnp.sum(centres**2, 1)[None]

    def seed(c, key_c):
        centres, count = c
        unset = jnp.where(jnp.arange(num_clusters) < count, 0.0, jnp.inf)
        d2 = jnp.maximum(jnp.min(squared_distances(centres) + unset[None], axis=1), 0.0)
        d2 = jnp.where(count == 0, jnp.ones_like(d2), d2)
        pick = jax.random.categorical(key_c, jnp.log(jnp.maximum(d2, 1e-30)))
        return (centres.at[count].set(X[pick]), count + 1), None

    keys = jax.random.split(key, num_clusters)
    (centres, _), _ = jax.lax.scan(seed, (jnp.zeros((num_clusters, X.shape[1]), X.dtype), 0), keys)

    def lloyd(_, centres):
        labels = jnp.argmin(squared_distances(centres), axis=1)
        onehot = jax.nn.one_hot(labels, num_clusters, dtype=X.dtype)
        counts = onehot.sum(0)
        means = (onehot.T @ X) / jnp.maximum(counts, 1.0)[:, None]
        return jnp.where(counts[:, None] > 0, means, centres)

    centres = jax.lax.fori_loop(0, iterations, lloyd, centres)
    labels = jnp.argmin(squared_distances(centres), axis=1)
    return jax.nn.one_hot(labels, num_clusters, dtype=X.dtype)


def _block_weights(data: ILFMData, F: jax.Array, bias: jax.Array) -> jax.Array:
    """Weights matching the smoothed link rate of every feature block, ``logit((n1 + 1/2) /
    (n + 1)) - s_r`` (their least-squares start for a one-feature-per-entity ``F``)."""
    ones = jnp.einsum("ik,rij,jl->rkl", F, data.Y * data.mask, F)
    seen = jnp.einsum("ik,rij,jl->rkl", F, data.mask, F)
    p = (ones + 0.5) / (seen + 1.0)
    return jnp.log(p) - jnp.log1p(-p) - bias[:, None, None]


def _init(data, hyper, key, *, capacity, num_init_features, step_size, alpha, init_strategy):
    key_f, key_w = jax.random.split(key)
    R, N, _ = data.Y.shape
    dtype = data.Y.dtype
    rate = jnp.sum(data.Y) / jnp.maximum(jnp.sum(data.mask), 1.0)
    bias = jnp.full((R,), jnp.log(rate) - jnp.log1p(-rate), dtype)
    if init_strategy == "cluster":
        clusters = cluster_features(key_f, data, num_init_features)
        F = jnp.zeros((N, capacity), dtype).at[:, : clusters.shape[1]].set(clusters) > 0
        W = _block_weights(data, F.astype(dtype), bias)
    else:
        slots = jnp.arange(capacity) < num_init_features
        F = (jax.random.uniform(key_f, (N, capacity)) < 0.5) & slots
        W = 0.1 * hyper.sigma_w * jax.random.normal(key_w, (R, capacity, capacity), dtype)
    active = F.sum(0) > 0
    W = W * (active[:, None] & active[None, :])
    beta = jnp.zeros((R, data.X.shape[0]), dtype)
    log_step = jnp.asarray(math.log(step_size), dtype)
    return ILFMState(F.astype(dtype), W, bias, jnp.asarray(alpha, dtype), log_step, beta)


def _grow_state(state: ILFMState, capacity: int) -> ILFMState:
    return state._replace(
        F=pad_axis(state.F, 1, capacity), W=pad_axis(pad_axis(state.W, 1, capacity), 2, capacity)
    )


def _trace(data, hyper, state, info):
    covariates = {"beta": state.beta} if data.X.shape[0] else {}
    return {
        "posterior": {
            "num_features": info.num_features,
            "alpha": state.alpha,
            "bias": state.bias,
            "F": state.F,
            "W": state.W,
            **covariates,
        },
        "sample_stats": {
            "lp": info.lp,
            "acceptance_rate": info.acceptance_rate,
            "birth_acceptance": info.birth_acceptance,
            "step_size": jnp.exp(state.log_step_size),
        },
    }


def _per_relation(data: ILFMData) -> ILFMData:
    """(R, N, N) -> R one-relation data sets (R, 1, N, N), for the "single" model."""
    R = data.Y.shape[0]
    return ILFMData(
        data.Y[:, None], data.mask[:, None], jnp.broadcast_to(data.X, (R, *data.X.shape))
    )


def _single_init(data, hyper, key, **settings):
    keys = jax.random.split(key, data.Y.shape[0])
    return jax.vmap(lambda d, k: _init(d, hyper, k, **settings))(_per_relation(data), keys)


def _single_step(data, hyper, key, state, **settings):
    keys = jax.random.split(key, data.Y.shape[0])
    new, info = jax.vmap(lambda d, k, s: _step(d, hyper, k, s, **settings))(
        _per_relation(data), keys, state
    )
    info = info._replace(
        lp=jnp.sum(info.lp),
        capacity_exceeded=jnp.any(info.capacity_exceeded),
        capacity_needed=jnp.max(info.capacity_needed),
    )
    return new, info


def _single_trace(data, hyper, state, info):
    covariates = {"beta": state.beta[:, 0]} if data.X.shape[0] else {}
    return {
        "posterior": {
            "num_features": info.num_features,
            "alpha": state.alpha,
            "bias": state.bias[:, 0],
            "F": state.F,
            "W": state.W[:, 0],
            **covariates,
        },
        "sample_stats": {
            "lp": info.lp,
            "acceptance_rate": jnp.mean(info.acceptance_rate),
            "birth_acceptance": jnp.mean(info.birth_acceptance),
        },
    }


def _single_grow(state: ILFMState, capacity: int) -> ILFMState:
    return state._replace(
        F=pad_axis(state.F, 2, capacity),
        W=pad_axis(pad_axis(state.W, 2, capacity), 3, capacity),
    )


def single_link_probabilities(
    state: ILFMState, link: str = "logit", data: ILFMData | None = None
) -> jax.Array:
    """``P(y^r_ij = 1)`` (R, N, N) of the "single" model's state (one model per relation);
    ``data`` supplies the covariates, if any."""
    if data is None:
        return jax.vmap(lambda s: link_probabilities(s, link))(state)[:, 0]
    return jax.vmap(lambda s, d: link_probabilities(s, link, d))(state, _per_relation(data))[:, 0]


def posterior_link_probabilities(
    draws, data: ILFMData, *, link: str | None = None, chunk: int = 50
) -> np.ndarray:
    """Posterior-mean link probabilities :math:`E[P(y^r_{ij} = 1 \\mid F, W, s, \\beta) \\mid
    Y_{obs}]`, shape (R, N, N): :func:`link_probabilities` (``mode="global"``) or
    :func:`single_link_probabilities` (``mode="single"``, told apart by the shape of ``F``)
    averaged over every kept draw of every chain, ``chunk`` draws at a time. This is the
    posterior predictive probability of a link at a held-out pair, what held-out AUC is
    computed from (``../shared/seeds/000_82b12501ac6cffe5.txt``, the likelihood of eq.
    ``ibp_gibbs``).

    ``draws``: the InferenceData of :func:`bnpjax.sample`, or the ``trace`` of
    :func:`bnpjax.infer.run`; its posterior must hold ``F``, ``W`` and ``bias`` (and ``beta``
    for a model with covariates). ``data``: the :func:`make_data` the chain ran on (its
    covariates). ``link``: the chain's link function; by default read from the
    InferenceData's ``kernel_settings``, else ``"logit"``."""
    if link is None and hasattr(draws, "posterior"):
        settings = draws.posterior.attrs.get("kernel_settings", "{}")
        if isinstance(settings, str):
            settings = json.loads(settings)
        link = settings.get("link")
    link = "logit" if link is None else link
    if link not in LINKS:
        raise ValueError(f"link must be one of {LINKS}, got {link!r}")
    if not isinstance(data, ILFMData):
        raise ValueError("data must come from bnpjax.models.ilfm.make_data")
    chunk = check_integer(chunk, "chunk")
    F, W, bias = (pooled_draws(draws, "posterior", name) for name in ("F", "W", "bias"))
    single = F.ndim == 4  # (draws, R, N, capacity): one model per relation
    try:
        beta = pooled_draws(draws, "posterior", "beta")
    except ValueError:  # a model without covariates
        beta = np.zeros((*bias.shape, 0), F.dtype)
    if beta.shape[-1] != data.X.shape[0]:
        raise ValueError(
            f"data has {data.X.shape[0]} covariates but the draws have {beta.shape[-1]}"
        )
    N = F.shape[-2]
    if data.Y.shape[-1] != N:
        raise ValueError(f"data has {data.Y.shape[-1]} entities but the draws have {N}")

    chunk = min(chunk, F.shape[0])
    total = np.zeros(data.Y.shape, np.float64)
    for start in range(0, F.shape[0], chunk):
        part = slice(start, start + chunk)
        size = F[part].shape[0]
        # the last chunk is padded to the others' size so that every call has one shape (one
        # compiled program, reused by later calls); the padding enters with weight 0
        padded = [_pad_draws(x[part], chunk) for x in (F, W, bias, beta)]
        weight = (np.arange(chunk) < size).astype(F.dtype)
        total += np.asarray(
            _probability_sum(*padded, weight, data, single=single, link=link), np.float64
        )
    return total / F.shape[0]


def _pad_draws(x, size):
    return np.concatenate([x, np.zeros((size - x.shape[0], *x.shape[1:]), x.dtype)])


@functools.partial(jax.jit, static_argnames=("single", "link"))
def _probability_sum(F, W, bias, beta, weight, data, *, single, link):
    """The ``weight``-ed sum over draws of their link probabilities (R, N, N)."""

    def one(f, w, b, c):
        if single:
            # the trace keeps one relation per model without its own relation axis: put it back
            R = b.shape[0]
            state = ILFMState(
                f, w[:, None], b[:, None], jnp.ones(R, f.dtype), jnp.zeros(R, f.dtype), c[:, None]
            )
            return single_link_probabilities(state, link, data)
        state = ILFMState(f, w, b, jnp.ones((), f.dtype), jnp.zeros((), f.dtype), c)
        return link_probabilities(state, link, data)

    return jnp.einsum("s,srij->rij", weight, jax.vmap(one)(F, W, bias, beta))


def gibbs(
    data: ILFMData,
    *,
    hyper: ILFMHyper | None = None,
    capacity: int = 16,
    kappa: int = 5,
    num_leapfrog: int = 10,
    step_size: float = 0.05,
    alpha: float = 1.0,
    num_init_features: int | None = None,
    init_strategy: str = "random",
    mode: str = "global",
    weights: str = "hmc",
    link: str = "logit",
) -> SamplingAlgorithm:
    """The ILFM sampler (module docstring) as a kernel for :func:`bnpjax.sample`: Gibbs for
    shared features, joint MH for each entity's unique features and their weights, HMC for
    the weights and biases (step size adapted during warmup only), conjugate alpha.
    Implements ``../shared/seeds/000_82b12501ac6cffe5.txt`` (algorithm ``mcmc_ilfm``): eq.
    ``ibp_gibbs`` with prior ``m_{-i,k}/N`` for shared features, eqs. ``j_knew``/``r_knew``
    for the unique-feature move (new-feature rate ``alpha / N``, INDEX's correction), eqs.
    ``j_w``/``r_w`` for ``weights="random_walk"``; alpha by the conjugate update of
    ``../shared/seeds/002_c2a7c7ffebfd8867.txt`` (its last equation).

    ``hyper`` comes from :func:`make_hyper` (default: its defaults); ``alpha`` is the starting
    value of the IBP mass (positive, finite).

    ``mode="global"``: one feature matrix shared by all relations. ``mode="single"``: an
    independent model (own F, W, bias, alpha) per relation, all relations advanced together
    by ``vmap``; its state has a leading relation axis (use
    :func:`single_link_probabilities`).

    ``init_strategy`` picks the starting state: ``"random"`` (``num_init_features`` features,
    each entity holding each with probability 1/2, small weights) or ``"cluster"`` (one
    feature per k-means cluster of the entities' link profiles, ``num_init_features``
    clusters, weights at the blocks' smoothed log-odds; :func:`cluster_features`; Miller et
    al. started from an IRM run). The start does not change the chain's stationary
    distribution, only how fast it gets there. Start with more features than the data need:
    features held by several entities die quickly once their entities drop them, but new ones
    are born only through step 2, whose proposal draws all ``R (2 K + 1)`` weights of a new
    feature from the prior and so is rarely accepted when there are many relations (on the
    nations data, 56 relations, a chain started with 4 features stayed at 4, one started with
    12 settled at 10 and predicted better). With one relation per model the birth proposal
    draws only ``2 K + 1`` weights and works, and surplus starting features linger (kinship,
    "single": 12 starting features ended at 13 per relation and predicted worse than 4). So
    the default (``None``) is 10 features with several relations per model and 4 with one."""
    if mode not in ("global", "single"):
        raise ValueError(f"mode must be 'global' or 'single', got {mode!r}")
    if link not in LINKS:
        raise ValueError(f"link must be one of {LINKS}, got {link!r}")
    if init_strategy not in INIT_STRATEGIES:
        raise ValueError(f"init_strategy must be one of {INIT_STRATEGIES}, got {init_strategy!r}")
    if weights not in ("hmc", "random_walk"):
        raise ValueError(f"weights must be 'hmc' or 'random_walk', got {weights!r}")
    if not isinstance(data, ILFMData):
        raise ValueError("data must come from bnpjax.models.ilfm.make_data")
    if weights == "random_walk" and data.X.shape[0]:
        raise ValueError("covariates need weights='hmc' (the random walk moves no coefficients)")
    for name, value in (("capacity", capacity), ("kappa", kappa), ("num_leapfrog", num_leapfrog)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    for name, value in (("step_size", step_size), ("alpha", alpha)):
        if not _positive_finite(value):
            raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    hyper = make_hyper() if hyper is None else hyper
    if not isinstance(hyper, ILFMHyper):
        raise ValueError("hyper must come from bnpjax.models.ilfm.make_hyper")
    if num_init_features is None:
        relations_per_model = 1 if mode == "single" else data.Y.shape[0]
        num_init_features = 4 if relations_per_model == 1 else 10
    elif isinstance(num_init_features, bool) or not isinstance(num_init_features, int):
        raise ValueError(f"num_init_features must be an integer, got {num_init_features!r}")
    elif num_init_features < (1 if init_strategy == "cluster" else 0):
        raise ValueError(f"num_init_features is out of range, got {num_init_features}")
    num_init_features = min(int(num_init_features), capacity)
    settings = dict(
        link=link,
        weights=weights,
        mode=mode,
        hyper=hyper,
        kappa=kappa,
        num_leapfrog=num_leapfrog,
        step_size=step_size,
        alpha=alpha,
        num_init_features=num_init_features,
        init_strategy=init_strategy,
    )
    init_settings = dict(
        capacity=capacity,
        num_init_features=num_init_features,
        init_strategy=init_strategy,
        step_size=float(step_size),
        alpha=float(alpha),
    )
    single = mode == "single"
    init_fn, step_fn = (_single_init, _single_step) if single else (_init, _step)
    dims = {"bias": ["relation"], "F": ["entity", "feature"], "beta": ["relation", "covariate"],
            "W": ["relation", "feature", "feature2"]}  # fmt: skip
    if single:
        dims = {"num_features": ["relation"], "alpha": ["relation"], "bias": ["relation"],
                "beta": ["relation", "covariate"],
                "F": ["relation", "entity", "feature"],
                "W": ["relation", "feature", "feature2"]}  # fmt: skip
    return SamplingAlgorithm(
        init=bind(init_fn, data, hyper, **init_settings),
        step=bind(
            step_fn,
            data,
            hyper,
            kappa=kappa,
            num_leapfrog=num_leapfrog,
            adapt=False,
            weights=weights,
            link=link,
        ),
        warmup_step=bind(
            step_fn,
            data,
            hyper,
            kappa=kappa,
            num_leapfrog=num_leapfrog,
            adapt=True,
            weights=weights,
            link=link,
        ),
        trace=bind(_single_trace if single else _trace, data, hyper),
        spec=ArvizSpec(
            name=f"ilfm.gibbs.{mode}",
            dims=dims,
            settings={
                "kappa": kappa,
                "num_leapfrog": num_leapfrog,
                "mode": mode,
                "weights": weights,
                "link": link,
            },
        ),
        capacity=capacity,
        resize=lambda c: gibbs(data, capacity=c, **settings),
        grow_state=_single_grow if single else _grow_state,
    )
