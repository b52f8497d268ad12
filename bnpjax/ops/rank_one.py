r"""Sherman-Morrison rank-one updates of an inverse and of a log-determinant.

The collapsed Gibbs sampler of the linear-Gaussian latent feature model with an IBP prior
(Griffiths & Ghahramani 2011, *The Indian buffet process: an introduction and review*, JMLR 12)
needs
:math:`M = Z^\top Z + \frac{\sigma_X^2}{\sigma_A^2} I` with row :math:`z_i` removed and put back,
:math:`M_{-i} = M - z_i z_i^\top`. Updating :math:`M^{-1}` and :math:`\log|M|` costs
:math:`O(K^2)` instead of the :math:`O(K^3)` of a fresh factorization.

All functions broadcast over leading batch axes (``inverse`` of shape ``(..., n, n)``, vectors
``(..., n)``) and are ``jit``/``vmap`` safe. Round-off grows with the condition number of the
updated matrix; long chains of updates should be refreshed from scratch now and then.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.ops._dtypes import as_inexact

__all__ = ["rank_one_update", "sherman_morrison"]


@jax.jit
def rank_one_update(inverse, logdet, u, sign=1.0) -> tuple[jax.Array, jax.Array]:
    r"""Inverse and log-determinant of :math:`M + s\,u u^\top` from those of a symmetric :math:`M`.

    With :math:`w = M^{-1} u` and :math:`q = u^\top M^{-1} u` (Sherman-Morrison and the matrix
    determinant lemma),

    .. math::

        (M + s\,u u^\top)^{-1} = M^{-1} - \frac{s\, w w^\top}{1 + s q}, \qquad
        \log|M + s\,u u^\top| = \log|M| + \operatorname{log1p}(s q).

    :math:`s = +1` adds the row :math:`u` to a Gram matrix, :math:`s = -1` removes it.

    Args:
        inverse: :math:`M^{-1}`, symmetric, shape ``(..., n, n)``.
        logdet: :math:`\log\det M`, shape ``(...)``.
        u: shape ``(..., n)``.
        sign: :math:`s`, usually :math:`\pm 1` (any real scale works), broadcast over the batch.

    Returns:
        ``(new_inverse, new_logdet)``. The updated matrix of a positive definite :math:`M` is
        positive definite iff :math:`1 + s q > 0`. When :math:`1 + s q = 0` it is singular: the
        log-determinant is ``-inf`` and the inverse is ``inf``/``nan``; when :math:`1 + s q < 0`
        the log-determinant is ``nan`` (the determinant changed sign) while the returned inverse
        is still the exact inverse. No exception is raised, so check ``new_logdet`` if needed.
    """
    inverse, logdet, u, sign = as_inexact(inverse, logdet, u, sign)
    w = jnp.einsum("...ij,...j->...i", inverse, u)
    q = jnp.einsum("...i,...i->...", u, w)
    sq = sign * q
    coef = sign / (1 + sq)
    new_inverse = inverse - coef[..., None, None] * (w[..., :, None] * w[..., None, :])
    return new_inverse, logdet + jnp.log1p(sq)


@jax.jit
def sherman_morrison(inverse, u, v) -> jax.Array:
    r"""Return :math:`(M + u v^\top)^{-1}` from :math:`M^{-1}` (any square :math:`M`).

    .. math::

        (M + u v^\top)^{-1} = M^{-1} - \frac{(M^{-1} u)(v^\top M^{-1})}{1 + v^\top M^{-1} u}.

    By the matrix determinant lemma :math:`\det(M + u v^\top) = (1 + v^\top M^{-1} u)\det M`;
    the update is singular (result ``inf``/``nan``) when that factor is 0. Shapes: ``inverse``
    ``(..., n, n)``, ``u`` and ``v`` ``(..., n)``, broadcast.
    """
    inverse, u, v = as_inexact(inverse, u, v)
    left = jnp.einsum("...ij,...j->...i", inverse, u)
    right = jnp.einsum("...i,...ij->...j", v, inverse)
    denom = 1 + jnp.einsum("...i,...i->...", v, left)
    return inverse - (left[..., :, None] * right[..., None, :]) / denom[..., None, None]
