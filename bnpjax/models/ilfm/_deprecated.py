"""The ILFM's names before the one vocabulary (kept for one release, each warning)."""

from __future__ import annotations

import warnings

import jax.numpy as jnp

from bnpjax.infer.checks import deprecated_alias
from bnpjax.models.ilfm import geweke
from bnpjax.models.ilfm.data import ILFMData, ILFMHyper, ILFMState
from bnpjax.models.ilfm.joint import probabilities, single_probabilities
from bnpjax.models.ilfm.predict import predict


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} is deprecated; use {new}", FutureWarning, stacklevel=3)


def link_probabilities(
    state: ILFMState, link: str = "logit", data: ILFMData | None = None
) -> jnp.ndarray:
    """Deprecated: ``P(y^r_ij = 1 | state)`` (R, N, N) of one state; use
    :func:`bnpjax.models.ilfm.predict` on draws."""
    _warn("ilfm.link_probabilities", "ilfm.predict")
    return probabilities(state, link, None if data is None else data.X)


def single_link_probabilities(
    state: ILFMState, link: str = "logit", data: ILFMData | None = None
) -> jnp.ndarray:
    """Deprecated: the link probabilities of one ``mode="single"`` state; use
    :func:`bnpjax.models.ilfm.predict` on draws."""
    _warn("ilfm.single_link_probabilities", "ilfm.predict")
    return single_probabilities(state, link, None if data is None else data.X)


posterior_link_probabilities = deprecated_alias(predict, "posterior_link_probabilities")


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
    """Deprecated: use :func:`bnpjax.models.ilfm.geweke.prior_sample` (from the data)."""
    _warn("ilfm.prior_sample", "ilfm.geweke.prior_sample")
    dtype = jnp.result_type(float)
    shapes = ILFMData(
        jnp.zeros((num_relations, num_entities, num_entities), dtype),
        jnp.zeros((num_relations, num_entities, num_entities), dtype),
        jnp.zeros((num_covariates, num_entities, num_entities), dtype),
    )
    return geweke.prior_sample(key, shapes, hyper, capacity=capacity, step_size=step_size)


def data_sample(key, state: ILFMState, data: ILFMData, link: str = "logit") -> ILFMData:
    """Deprecated: use :func:`bnpjax.models.ilfm.geweke.data_sample`."""
    _warn("ilfm.data_sample", "ilfm.geweke.data_sample")
    return geweke.data_sample(key, state, data, likelihood=link)
