r"""Inverse-Gamma draws: :math:`x = b / g` with :math:`g \sim \mathrm{Gamma}(a, 1)` is
:math:`\mathrm{InvGamma}(a, b)` (shape ``a``, scale ``b``), the conjugate conditional of a Gaussian
variance (the factorization machine's :math:`\sigma^2` updates; the IBP model's
:math:`\sigma_X^2, \sigma_A^2`)."""

import jax
import jax.numpy as jnp

from bnpjax.ops.gamma import sample_gamma

__all__ = ["sample_inverse_gamma"]


def sample_inverse_gamma(key, shape, scale) -> jax.Array:
    """``InvGamma(shape, scale)`` draws, broadcast over ``shape`` (an array of shape
    parameters); the dtype follows ``scale``."""
    return scale / sample_gamma(key, shape, jnp.result_type(scale))
