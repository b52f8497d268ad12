r"""Inverse Gaussian (Wald) distribution with mean :math:`\mu` and shape :math:`\lambda`.

.. math::

    p(x \mid \mu, \lambda) = \sqrt{\frac{\lambda}{2\pi x^3}}
        \exp\!\Big(-\frac{\lambda (x - \mu)^2}{2 \mu^2 x}\Big), \qquad x > 0,

with :math:`E[x] = \mu` and :math:`\mathrm{Var}[x] = \mu^3/\lambda`. In max-margin samplers
with Polson-Scott data augmentation (the :math:`\lambda_{ijr}` of Xu, Zhu &
Zhang 2013, *Fast max-margin matrix factorization with data augmentation*, ICML) the inverse
augmentation variables have inverse Gaussian full conditionals. Not to be confused with the
inverse *gamma* :math:`\mathcal{IG}` of the Bayesian factorization machine's variances. In
scipy's parametrization this is
``invgauss(mu / lambda, scale=lambda)``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from bnpjax.ops._dtypes import as_inexact

__all__ = ["inverse_gaussian_log_pdf", "sample_inverse_gaussian"]


@jax.jit
def inverse_gaussian_log_pdf(x, mean, shape_param) -> jax.Array:
    r"""Log density of the inverse Gaussian :math:`\mathrm{IG}(\mu, \lambda)` at ``x``.

    .. math::

        \log p(x) = \tfrac12\big(\log\lambda - \log 2\pi - 3\log x\big)
            - \frac{\lambda}{2x}\Big(\frac{x}{\mu} - 1\Big)^2,

    the exponent written with :math:`x/\mu` so that :math:`\mu^2` is never formed (no overflow
    for large means in float32). ``-inf`` for :math:`x \le 0`. Arguments broadcast.
    """
    x, mean, lam = as_inexact(x, mean, shape_param)
    positive = x > 0
    x_safe = jnp.where(positive, x, 1)
    logp = 0.5 * (jnp.log(lam) - math.log(2 * math.pi) - 3 * jnp.log(x_safe)) - (
        lam / (2 * x_safe)
    ) * jnp.square(x_safe / mean - 1)
    return jnp.where(positive, logp, -jnp.inf)


@functools.partial(jax.jit, static_argnames="shape")
def _sample_inverse_gaussian(key, mean, shape_param, shape):
    mean, lam = as_inexact(mean, shape_param)
    shape = jnp.broadcast_shapes(mean.shape, lam.shape) if shape is None else shape
    key_normal, key_uniform = jax.random.split(key)
    nu = jax.random.normal(key_normal, shape, mean.dtype)
    u = jax.random.uniform(key_uniform, shape, mean.dtype)
    r = mean * jnp.square(nu) / (2 * lam)
    t = 1 + r + jnp.sqrt(r) * jnp.sqrt(r + 2)
    x = jnp.where(u * (1 + t) <= t, mean / t, mean * t)
    return jnp.maximum(x, jnp.finfo(mean.dtype).tiny)


def sample_inverse_gaussian(
    key, mean, shape_param, shape: Sequence[int] | None = None
) -> jax.Array:
    r"""Draw from :math:`\mathrm{IG}(\mu, \lambda)` by Michael, Schucany & Haas (1976).

    With :math:`\nu \sim N(0, 1)` and :math:`r = \mu\nu^2 / (2\lambda)`, the two roots of the
    MSH transformation are :math:`x_1 = \mu(1 + r - \sqrt{r(r+2)})` and :math:`x_2 = \mu^2/x_1`;
    the draw is :math:`x_1` with probability :math:`\mu/(\mu + x_1)`, else :math:`x_2`. Using
    :math:`(1+r)^2 - r(r+2) = 1` and :math:`t = 1 + r + \sqrt{r}\sqrt{r+2}`,

    .. math::

        x_1 = \mu / t, \qquad x_2 = \mu t, \qquad \frac{\mu}{\mu + x_1} = \frac{t}{1 + t},

    which has no cancellation (the textbook :math:`\mu + \mu^2\nu^2/2\lambda - \ldots`
    loses every digit of :math:`x_1` when :math:`r` is large, e.g. :math:`\mu = 10^3`,
    :math:`\lambda = 10^{-2}` in float32), never squares :math:`\mu`, and splits the square root
    so that :math:`r(r+2)` cannot overflow. The draw is floored at the smallest normal number
    so that it stays strictly positive for later logarithms; only draws that underflow anyway are
    affected.

    Args:
        key: PRNG key.
        mean: :math:`\mu > 0`.
        shape_param: :math:`\lambda > 0`, broadcast with ``mean``.
        shape: result shape, broadcast-compatible with ``broadcast(mean, shape_param).shape``;
            defaults to it. Static.

    Returns:
        Positive draws of shape ``shape``, in the floating dtype of the inputs.
    """
    shape = None if shape is None else tuple(int(s) for s in shape)
    return _sample_inverse_gaussian(key, mean, shape_param, shape)
