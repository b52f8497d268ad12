r"""Inverse-Gamma draws: :math:`x = b / g` with :math:`g \sim \mathrm{Gamma}(a, 1)` is
:math:`\mathrm{InvGamma}(a, b)` (shape ``a``, scale ``b``), the conjugate conditional of a Gaussian
variance (the factorization machine's :math:`\sigma^2` updates; the IBP model's
:math:`\sigma_X^2, \sigma_A^2`)."""

import jax
import jax.numpy as jnp

from bnpjax.ops.gamma import sample_gamma

__all__ = ["sample_inverse_gamma"]


def sample_inverse_gamma(key, shape, scale, *, reference: bool = False) -> jax.Array:
    """``InvGamma(shape, scale)`` draws, broadcast over ``shape`` (an array of shape
    parameters); the dtype follows ``scale``. ``reference=True`` draws the Gamma variables
    with ``jax.random.gamma`` instead of :func:`~bnpjax.ops.sample_gamma`: the prior side of
    the Geweke tests uses it, so that the test compares the kernels' sampler against an
    independent one rather than against itself."""
    dtype = jnp.result_type(scale)
    if reference:
        return scale / jax.random.gamma(key, shape, dtype=dtype)
    return scale / sample_gamma(key, shape, dtype)
