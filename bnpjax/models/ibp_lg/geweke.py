"""The Geweke protocol of the linear-Gaussian IBP model (one signature in every model).

``settings`` are the keyword settings of the factories (``capacity``, ``alpha``, ``sigma_x``,
``sigma_a``, ``alpha_prior``, ``sample_*``, ...): hyperparameters that are not sampled stay at
their given values.

References
----------
Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
*JASA* 99, 799-804.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.models.ibp_lg._kernel import resolve
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper, IBPLGState
from bnpjax.ops import sample_inverse_gamma
from bnpjax.priors import ibp

__all__ = ["data_sample", "prior_sample", "refresh"]


def _prior_state(
    key, num_rows, num_dims, hyper, *, capacity, flags, alpha, sigma_x, sigma_a, background
):
    key_alpha, key_sx, key_sa, key_z, key_a = jax.random.split(key, 5)
    dtype = jnp.result_type(float)
    alpha = jnp.asarray(alpha, dtype)
    sx = jnp.asarray(sigma_x, dtype)
    sa = jnp.asarray(sigma_a, dtype)
    if flags.get("sample_alpha"):
        alpha = jax.random.gamma(key_alpha, hyper.alpha_shape, dtype=dtype) / hyper.alpha_rate
    if flags.get("sample_sigma_x"):
        sx = jnp.sqrt(
            sample_inverse_gamma(key_sx, hyper.sigma_x_shape, hyper.sigma_x_scale, reference=True)
        )
    if flags.get("sample_sigma_a"):
        sa = jnp.sqrt(
            sample_inverse_gamma(key_sa, hyper.sigma_a_shape, hyper.sigma_a_scale, reference=True)
        )
    draw = ibp.sample_buffet(key_z, alpha, num_rows, capacity)
    A = sa * jax.random.normal(key_a, (capacity, num_dims), dtype) * draw.active[:, None]
    offset = jnp.broadcast_to(jnp.asarray(background, dtype), (num_dims,))
    if flags.get("sample_offset"):
        noise = jax.random.normal(jax.random.fold_in(key, 1), (num_dims,), dtype)
        offset = noise * jax.lax.rsqrt(jnp.asarray(hyper.offset_precision, dtype))
    X = jnp.zeros((num_rows, num_dims), dtype)
    return IBPLGState(draw.Z, A, alpha, sx, sa, X, offset)


def prior_sample(key, data: IBPLGData, hyper: IBPLGHyper | None = None, **settings) -> IBPLGState:
    """The parameters from the prior in a buffer of ``capacity`` features (``X`` left at zero:
    :func:`refresh` puts the data in). A sampled offset needs a proper prior
    (``make_hyper(offset_sd=...)``)."""
    s = resolve(data, hyper, **settings)
    if dict(s.flags)["sample_offset"] and not float(s.hyper.offset_precision) > 0:
        raise ValueError(
            "Geweke's test draws the offset from its prior: pass a hyper with a proper one, "
            "make_hyper(offset_sd=...), or sample_offset=False"
        )
    N, D = data.X.shape
    return _prior_state(
        key,
        N,
        D,
        s.hyper,
        capacity=s.capacity,
        flags=dict(s.flags),
        alpha=s.alpha,
        sigma_x=s.sigma_x,
        sigma_a=s.sigma_a,
        background=data.background,
    )


def data_sample(
    key, state: IBPLGState, data: IBPLGData, hyper: IBPLGHyper | None = None, **settings
) -> IBPLGData:
    """Fresh ``X ~ N(offset + Z A, sigma_x^2)`` on the mask of ``data``."""
    del hyper, settings
    noise = jax.random.normal(key, state.X.shape, state.X.dtype)
    X = state.offset + state.Z @ state.A + state.sigma_x * noise
    return data._replace(X=X * data.mask)


def refresh(data: IBPLGData, state: IBPLGState, **settings) -> IBPLGState:
    """Put freshly drawn data into the state, less the offset (observed entries; missing ones
    keep their imputed values)."""
    del settings
    return state._replace(X=jnp.where(data.mask > 0, data.X - state.offset, state.X))
