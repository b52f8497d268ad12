r"""Log-determinants and quadratic forms of equicorrelation matrices for all sizes at once.

For :math:`d = a - b` the :math:`k \times k` equicorrelation matrix (Xu, Zhu & Zhang 2013,
*Fast max-margin matrix factorization with data augmentation*, ICML, Appendix A, eq. 29)

.. math::

    X_k = (a - b) I_k + b \mathbf 1_k \mathbf 1_k^\top

has eigenvalue :math:`d` with multiplicity :math:`k - 1` and eigenvalue :math:`d + k b` on
:math:`\mathbf 1_k`, hence (eqs. (31) and (33))

.. math::

    \delta_k = \det X_k = d^{k-1}(k b + d), \qquad
    \mathbf 1_k^\top X_k^{-1} \mathbf 1_k = \frac{k}{k b + d}, \qquad k \ge 0.

Appendix A of the seed needs both for every :math:`k = 0, \dots, \kappa`; evaluating the closed
forms on ``arange(kappa + 1)`` costs :math:`O(\kappa)` instead of the :math:`O(\kappa^4)` of
dense factorizations. :math:`X_k` is positive definite iff :math:`d > 0` and
:math:`d + k b > 0`, so negative :math:`b` is allowed down to :math:`b > -d/k`.

Appendix A of the seed writes :math:`\omega^\top \Sigma^{-1} \omega = \xi^2 \mathbf 1^\top
\Sigma \mathbf 1`; the right-hand side needs :math:`\Sigma^{-1}` (that is what eq. (33) is
applied to), i.e. :math:`\xi^2` times :func:`equicorrelation_quadratic_form`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from bnpjax.ops._dtypes import as_inexact

__all__ = [
    "equicorrelation_logdet",
    "equicorrelation_quadratic_form",
    "equicorrelation_terms",
]


@functools.partial(jax.jit, static_argnames="kappa")
def equicorrelation_terms(a_minus_b, b, kappa: int) -> tuple[jax.Array, jax.Array]:
    r"""Return ``(log det X_k, 1^T X_k^{-1} 1)`` for ``k = 0..kappa``, given ``d = a - b``.

    Implements Xu, Zhu & Zhang (2013), Appendix A, eqs. (31) and (33), with
    :math:`X_k = d I_k + b \mathbf 1 \mathbf 1^\top`:

    .. math::

        \log\det X_k = k \log d + \operatorname{log1p}(k b / d), \qquad
        \mathbf 1_k^\top X_k^{-1} \mathbf 1_k = \frac{k}{k b + d}.

    The log1p form keeps :math:`\log(1 + k b/d)` exact when :math:`k b \ll d` (where
    :math:`\log(d + kb)` would round :math:`kb` away, and the whole log-determinant can be tiny);
    for :math:`|k b / d| > 1` the equal form :math:`(k-1)\log d + \log(d + k b)` is used so that
    :math:`k b / d` cannot overflow. Taking ``d`` directly (the seed's :math:`a - b = 1/\sigma^2`)
    avoids the rounding of forming ``a = d + b`` and subtracting it back.

    Args:
        a_minus_b: :math:`d = a - b`, any shape; must be > 0.
        b: off-diagonal value, broadcast against ``a_minus_b``.
        kappa: largest size, a static Python int.

    Returns:
        Two arrays of shape ``broadcast(a_minus_b, b).shape + (kappa + 1,)``, entry ``k`` for
        :math:`X_k`. :math:`k = 0` (the empty matrix) always gives 0 and 0. Outside the positive
        definite domain (for :math:`k \ge 1`): the log-determinant is ``nan`` if :math:`d \le 0`,
        ``-inf`` if :math:`d + kb = 0` (singular), ``nan`` if :math:`d + kb < 0`; the quadratic
        form is ``nan`` whenever :math:`X_k` is not positive definite. Nothing raises, so the
        function is safe under ``jit``.
    """
    d, b = as_inexact(a_minus_b, b)
    d, b = jnp.broadcast_arrays(d, b)
    d, b = d[..., None], b[..., None]
    k = jnp.arange(kappa + 1, dtype=d.dtype)
    kb = k * b
    ratio = kb / d
    log_d = jnp.log(d)
    small = jnp.abs(ratio) <= 1
    # Both branches are evaluated; the unselected one may be inf/nan, which `where` discards.
    logdet = jnp.where(
        small,
        k * log_d + jnp.log1p(jnp.where(small, ratio, 0)),
        (k - 1) * log_d + jnp.log(d + kb),
    )
    eig = d + kb
    positive_definite = (d > 0) & (eig > 0)
    quad = k / jnp.where(positive_definite, eig, 1)
    is_empty = k == 0
    logdet = jnp.where(is_empty, 0, jnp.where(d > 0, logdet, jnp.nan))
    quad = jnp.where(is_empty, 0, jnp.where(positive_definite, quad, jnp.nan))
    return logdet, quad


@functools.partial(jax.jit, static_argnames="kappa")
def equicorrelation_logdet(a, b, kappa: int) -> jax.Array:
    r"""Return :math:`\log\det X_k` for :math:`X_k = (a-b) I_k + b \mathbf 1 \mathbf 1^\top`.

    Xu, Zhu & Zhang (2013), Appendix A, eq. (31),
    :math:`\delta_k = (a - b)^{k-1}(k b + a - b)`, evaluated for all :math:`k = 0..\kappa` as
    :math:`k \log(a-b) + \operatorname{log1p}(k b / (a - b))` (see
    :func:`equicorrelation_terms` for the numerics and the values outside the domain).

    Requires :math:`a > b` and :math:`a - b + k b > 0` (positive definiteness). ``a`` and ``b``
    broadcast; the result has shape ``broadcast(a, b).shape + (kappa + 1,)`` and is 0 at
    :math:`k = 0`. ``kappa`` is a static Python int.
    """
    a, b = as_inexact(a, b)
    return equicorrelation_terms(a - b, b, kappa)[0]


@functools.partial(jax.jit, static_argnames="kappa")
def equicorrelation_quadratic_form(a, b, kappa: int) -> jax.Array:
    r"""Return :math:`\mathbf 1_k^\top X_k^{-1} \mathbf 1_k = k / (k b + a - b)`, ``k = 0..kappa``.

    Xu, Zhu & Zhang (2013), Appendix A, eq. (33) (from Cramer's rule, eq. (32)),
    for :math:`X_k = (a-b) I_k + b \mathbf 1 \mathbf 1^\top`. Requires :math:`a > b` and
    :math:`a - b + k b > 0`; entries where :math:`X_k` is not positive definite are ``nan``.
    Shape ``broadcast(a, b).shape + (kappa + 1,)``; 0 at :math:`k = 0`. ``kappa`` is a static
    Python int.
    """
    a, b = as_inexact(a, b)
    return equicorrelation_terms(a - b, b, kappa)[1]
