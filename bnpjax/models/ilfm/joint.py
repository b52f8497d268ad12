r"""The model's densities, shared by the sampler, the Geweke protocol and prediction.

The logits of a link are :math:`\eta^r_{ij} = f_i W_r f_j^\top + s_r + \beta_r^\top x_{ij}`;
the likelihood is Bernoulli with the logistic (``"logit"``) or normal (``"probit"``) link.
Unobserved entries are masked out, never read as zeros.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (the model).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr, ndtr

from bnpjax.models.ilfm.data import ILFMData, ILFMHyper, ILFMState
from bnpjax.ops import softplus
from bnpjax.priors import ibp

__all__ = ["LIKELIHOODS", "log_joint", "pointwise_log_likelihood", "probabilities"]

#: the observation models: the logistic or the normal CDF of the logits
LIKELIHOODS = ("logit", "probit")


def _offset(bias, beta, X):
    """The logits' terms other than the features: ``s_r + beta_r' x_ij`` ((R, 1, 1) without
    covariates, else (R, N, N))."""
    offset = bias[:, None, None]
    if X.shape[0]:
        offset = offset + jnp.einsum("rc,cij->rij", beta, X)
    return offset


def _logits(F, W, offset):
    return jnp.einsum("ik,rkl,jl->rij", F, W, F) + offset


def _bernoulli(y, eta, mask, likelihood="logit"):
    """Masked ``log p(y | eta)``: logistic, or ``Phi`` (probit) in log space."""
    if likelihood == "probit":
        return mask * (y * log_ndtr(eta) + (1 - y) * log_ndtr(-eta))
    return mask * (y * eta - softplus(eta))


def _active_pairs(F, dtype):
    """(C, C): 1 where both features are active, the block the weights' prior covers."""
    active = F.sum(0) > 0
    return (active[:, None] & active[None, :]).astype(dtype)


def _relation_log_likelihood(data, F, W, bias, beta, likelihood):
    """Each relation's masked log-likelihood (R,) at the given parameters."""
    logits = _logits(F, W, _offset(bias, beta, data.X))
    return jnp.sum(_bernoulli(data.Y, logits, data.mask, likelihood), axis=(1, 2))


def _covariates_for(state: ILFMState, X):
    """The pair covariates ``X``, or an empty (0, N, N) array for a model without any."""
    if X is None:
        if state.beta.shape[-1]:
            raise ValueError("a model with covariates needs the data (with X) to predict")
        return jnp.zeros((0, state.F.shape[-2], state.F.shape[-2]), state.F.dtype)
    return X


def probabilities(state: ILFMState, likelihood: str = "logit", X=None) -> jax.Array:
    """``P(y^r_ij = 1 | state)`` (R, N, N) of one global-model state.

    Parameters
    ----------
    state
        an :class:`ILFMState` without a relation axis of models.
    likelihood
        ``"logit"`` or ``"probit"``.
    X
        the pair covariates of the data (needed when the model has covariates).

    Returns
    -------
    jax.Array
        (R, N, N) link probabilities.
    """
    eta = _logits(state.F, state.W, _offset(state.bias, state.beta, _covariates_for(state, X)))
    return ndtr(eta) if likelihood == "probit" else jax.nn.sigmoid(eta)


def pointwise_log_likelihood(state: ILFMState, data: ILFMData, likelihood: str = "logit"):
    """``log p(y^r_ij | state)`` of every entry (R, N, N), observed or not (the caller picks
    the entries)."""
    eta = _logits(state.F, state.W, _offset(state.bias, state.beta, data.X))
    return _bernoulli(data.Y, eta, jnp.ones_like(data.Y), likelihood)


def log_joint(
    data: ILFMData, hyper: ILFMHyper, state: ILFMState, likelihood: str = "logit"
) -> jax.Array:
    """``log p(Y_obs, F, W_active, bias, beta, alpha)`` (and ``sigma_w^2`` when sampled).

    The masked Bernoulli likelihood, the Normal priors of the active weights, the biases and
    the coefficients, the IBP probability of the equivalence class of ``F``
    (:func:`bnpjax.priors.ibp.log_prob`), the Gamma prior of alpha and, with a prior on the
    weights' scale, its inverse-Gamma density at ``sigma_w^2``.

    Parameters
    ----------
    data, hyper, state
        the model's data, hyperparameters and one global-model state.
    likelihood
        ``"logit"`` or ``"probit"``.

    Returns
    -------
    jax.Array
        a scalar.

    References
    ----------
    Miller, Griffiths and Jordan (2009), the posterior; Griffiths, T. L. and
    Ghahramani, Z. (2011). The Indian buffet process: an introduction and review. JMLR 12,
    the probability of the equivalence class ``[F]``.
    """
    pair = _active_pairs(state.F, state.W.dtype)
    offset = _offset(state.bias, state.beta, data.X)
    eta = _logits(state.F, state.W, offset)
    log_lik = jnp.sum(_bernoulli(data.Y, eta, data.mask, likelihood))
    sigma_w = hyper.sigma_w if state.sigma_w is None else state.sigma_w
    sw2, ss2, sb2 = sigma_w**2, hyper.sigma_s**2, hyper.sigma_beta**2
    R = state.W.shape[0]
    log_w = -0.5 * jnp.sum(pair * state.W**2) / sw2 - 0.5 * R * jnp.sum(pair) * jnp.log(
        2 * math.pi * sw2
    )
    if state.sigma_w is not None:  # the inverse-Gamma(shape, scale) prior of sigma_w^2
        a, b = hyper.sigma_w_shape, hyper.sigma_w_scale
        log_w = log_w + (
            a * jnp.log(b) - jax.scipy.special.gammaln(a) - (a + 1) * jnp.log(sw2) - b / sw2
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


def per_relation(data: ILFMData) -> ILFMData:
    """(R, N, N) -> R one-relation data sets with a leading axis (R, 1, N, N): the data of the
    ``mode="single"`` model (one independent model per relation)."""
    R = data.Y.shape[0]
    return ILFMData(
        data.Y[:, None], data.mask[:, None], jnp.broadcast_to(data.X, (R, *data.X.shape))
    )


def single_probabilities(state: ILFMState, likelihood: str = "logit", X=None) -> jax.Array:
    """``P(y^r_ij = 1)`` (R, N, N) of a ``mode="single"`` state (one model per relation)."""
    if X is None:
        return jax.vmap(lambda s: probabilities(s, likelihood))(state)[:, 0]
    R = state.F.shape[0]
    Xs = jnp.broadcast_to(X, (R, *X.shape))
    return jax.vmap(lambda s, x: probabilities(s, likelihood, x))(state, Xs)[:, 0]
