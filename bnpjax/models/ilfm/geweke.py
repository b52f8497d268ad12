"""The Geweke protocol of the ILFM: draws from the prior and from the likelihood.

``prior_sample`` and ``data_sample`` are the marginal-conditional simulator of Geweke's test
(:mod:`bnpjax.testing.geweke`); ``settings`` are :func:`~bnpjax.models.ilfm.gibbs`'s keywords
(those that do not concern the prior or the likelihood are ignored).

References
----------
Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators. JASA
99, 799-804.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from bnpjax.models.ilfm.data import ILFMData, ILFMHyper, ILFMState
from bnpjax.models.ilfm.joint import probabilities, single_probabilities
from bnpjax.priors import ibp

__all__ = ["data_sample", "prior_sample", "refresh"]


def _model_prior(
    key, num_entities, num_relations, num_covariates, hyper, capacity, step_size, mass, mask
):
    key_a, key_f, key_w, key_s = jax.random.split(key, 4)
    dtype = jnp.result_type(float)
    alpha = jax.random.gamma(key_a, hyper.alpha_shape, dtype=dtype) / hyper.alpha_rate
    draw = ibp.sample_buffet(key_f, alpha, num_entities, capacity)
    pair = draw.active[:, None] & draw.active[None, :]
    sigma_w = None
    if hyper.sigma_w_shape is not None:  # sigma_w^2 ~ InvGamma(shape, scale)
        precision = jax.random.gamma(jax.random.fold_in(key_w, 1), hyper.sigma_w_shape, dtype=dtype)
        sigma_w = jnp.sqrt(hyper.sigma_w_scale / precision)
    scale = hyper.sigma_w if sigma_w is None else sigma_w
    W = scale * jax.random.normal(key_w, (num_relations, capacity, capacity), dtype)
    bias = hyper.sigma_s * jax.random.normal(key_s, (num_relations,), dtype)
    log_step = jnp.asarray(math.log(step_size), dtype)
    beta = hyper.sigma_beta * jax.random.normal(
        jax.random.fold_in(key_s, 1), (num_relations, num_covariates), dtype
    )
    off = jnp.zeros((), bool)  # the step size is not adapted (ILFMState.adapting)
    weights = None
    if mass == "fisher":
        # fixed pair weights for the dense mass, drawn independently of the parameters, so
        # that every draw of a chain started at an exact joint draw is exactly from the joint
        # (the kernel keeps the joint for any fixed weights)
        spread = jnp.exp(0.5 * jax.random.normal(jax.random.fold_in(key_s, 2), mask.shape, dtype))
        weights = 0.25 * mask * spread
    return ILFMState(
        draw.Z.astype(dtype), W * pair[None], bias, alpha, log_step, beta, off, sigma_w, weights
    )


def prior_sample(
    key,
    data: ILFMData,
    hyper: ILFMHyper,
    *,
    capacity: int = 16,
    step_size: float = 0.05,
    mode: str = "global",
    mass: str = "unit",
    **settings,
) -> ILFMState:
    """Parameters from the prior: alpha, ``F`` by the buffet process, the weights' scale
    (when it has a prior), ``W`` on the active block, the biases and the covariate
    coefficients, for the shapes of ``data``.

    Parameters
    ----------
    key
        a ``jax.random.key``.
    data, hyper
        the model's data (its shapes only) and hyperparameters.
    capacity, step_size, mode, mass
        as in :func:`~bnpjax.models.ilfm.gibbs` (with ``mass="fisher"``, fixed pair weights
        drawn independently of the parameters).

    Returns
    -------
    ILFMState
    """
    R, N, _ = data.Y.shape
    C = data.X.shape[0]
    shared = (hyper, capacity, step_size, mass)
    if mode == "single":
        keys = jax.random.split(key, R)
        return jax.vmap(lambda k, m: _model_prior(k, N, 1, C, *shared, m[None]))(keys, data.mask)
    return _model_prior(key, N, R, C, *shared, data.mask)


def data_sample(
    key,
    state: ILFMState,
    data: ILFMData,
    hyper: ILFMHyper | None = None,
    *,
    likelihood: str = "logit",
    mode: str = "global",
    **settings,
) -> ILFMData:
    """Fresh links on the observed entries of ``data`` (unobserved ones stay 0).

    Returns
    -------
    ILFMData
    """
    if mode == "single":
        p = single_probabilities(state, likelihood, data.X)
    else:
        p = probabilities(state, likelihood, data.X)
    Y = (jax.random.uniform(key, p.shape, p.dtype) < p).astype(p.dtype) * data.mask
    return data._replace(Y=Y)


def refresh(data: ILFMData, state: ILFMState, **settings) -> ILFMState:
    """The state unchanged: it caches nothing computed from the data."""
    return state
