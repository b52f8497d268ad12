r"""A truncated standard normal sampler that stays exact deep in the tails, in float32 too.

``jax.random.truncated_normal`` maps a uniform through :math:`\Phi^{-1}` of the raw interval;
in float32 an interval beyond about 6 sd has :math:`\Phi(a) = \Phi(b) = 1` to working precision
and it returns the largest float (seen: 3.4e38 for ``[6, inf)``). Here the interval is first
reflected to the left of the mode (``[a, b]`` with ``a > 0`` becomes ``[-b, -a]``), where
:math:`\Phi` is small but relatively accurate; the inverse CDF is taken in log space, with
:math:`r = \Phi(a)/\Phi(b)`,
:math:`\log p = \log\Phi(b) + \log(r + u(1 - r)) = \log\Phi(b) + \mathrm{logaddexp}(\log r,
\log u + \log(1 - r))`, and :math:`u` uniform on :math:`[\text{tiny}, 1)`. (Written as
:math:`\log(1 - (1-u)(1-r))`, it lost the draw whenever :math:`1 - u` rounded to 1: with
:math:`a = -\infty` it gave :math:`\log p = -\infty` and a NaN draw. In float32 that is any
:math:`u < 6 \cdot 10^{-8}`, about once per sweep of an ordinal FM on MovieLens.) It is started from
:math:`\Phi^{-1}(p)` (or, where :math:`p` underflows, from the tail expansion
:math:`x \approx -\sqrt{t - \log t - \log 2\pi}`, :math:`t = -2\log p`) and refined by Newton
steps on :math:`\log\Phi(x) = \log p` (derivative :math:`\phi(x)/\Phi(x)`). The result is the
inverse-CDF draw to working precision at any depth (used by the probit and ordinal FM
likelihoods, Albert & Chib 1993).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr, ndtri

__all__ = ["sample_truncated_normal", "truncated_normal_from_uniform"]


def _inverse_log_ndtr(log_p, num_newton: int = 3):
    """``x`` with ``log Phi(x) = log_p`` for ``log_p <= log(1/2)`` (the left half)."""
    small = log_p < -40.0
    t = -2.0 * jnp.minimum(log_p, -40.0)
    tail = -jnp.sqrt(t - jnp.log(t) - math.log(2 * math.pi))
    x = jnp.where(small, tail, ndtri(jnp.exp(jnp.maximum(log_p, -40.0))))
    for _ in range(num_newton):
        log_phi = -0.5 * x**2 - 0.5 * math.log(2 * math.pi)
        slope = jnp.exp(log_phi - log_ndtr(x))  # d log Phi / dx
        x = x - (log_ndtr(x) - log_p) / slope
    return x


def truncated_normal_from_uniform(u, lower, upper) -> jax.Array:
    """The inverse CDF of :math:`\\mathcal N(0, 1)` restricted to ``[lower, upper]`` at ``u``
    (in ``(0, 1)``; ``u = 0`` is read as the smallest positive float): the stable log-space
    form of the module docstring, elementwise."""
    u = jnp.maximum(u, jnp.finfo(u.dtype).tiny)
    flip = lower > 0
    a = jnp.where(flip, -upper, lower)
    b = jnp.where(flip, -lower, upper)
    log_a, log_b = log_ndtr(a), log_ndtr(b)
    log_r = jnp.minimum(log_a - log_b, 0.0)
    # log(1 - r) by -expm1, exact as r -> 1; -inf for an empty interval (then p = Phi(b))
    log_rest = jnp.log(-jnp.expm1(log_r))
    log_p = log_b + jnp.logaddexp(log_r, jnp.log(u) + log_rest)
    x = jnp.clip(_inverse_log_ndtr(log_p), a, b)
    return jnp.where(flip, -x, x)


def sample_truncated_normal(key, lower, upper, shape=None, dtype=None) -> jax.Array:
    """Draws of :math:`z \\sim \\mathcal N(0, 1)` restricted to ``[lower, upper]`` (either may
    be infinite; ``lower < upper``), by the stable inverse CDF of the module docstring
    (:func:`truncated_normal_from_uniform` of a uniform draw)."""
    lower, upper = jnp.asarray(lower), jnp.asarray(upper)
    dtype = jnp.result_type(lower, upper, float) if dtype is None else dtype
    shape = jnp.broadcast_shapes(lower.shape, upper.shape) if shape is None else shape
    lower, upper = lower.astype(dtype), upper.astype(dtype)
    u = jax.random.uniform(key, shape, dtype)  # 0 is read as tiny below
    return truncated_normal_from_uniform(u, lower, upper)
