r"""Categorical sampling and normalization from unnormalized log weights."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp

from bnpjax.ops._dtypes import as_inexact

__all__ = ["log_normalize", "sample_categorical"]


@functools.partial(jax.jit, static_argnames="axis")
def log_normalize(log_weights, axis: int = -1) -> jax.Array:
    r"""Return normalized log probabilities :math:`\ell_j - \log\sum_i e^{\ell_i}` along ``axis``.

    The log-sum-exp subtracts the maximum first, so offsets like :math:`\ell_j + 10^4` neither
    overflow nor lose the differences between entries. ``-inf`` entries (excluded categories)
    stay ``-inf``; a slice that is entirely ``-inf`` has no distribution and gives ``nan``.
    """
    (log_weights,) = as_inexact(log_weights)
    return log_weights - jax.nn.logsumexp(log_weights, axis=axis, keepdims=True)


@functools.partial(jax.jit, static_argnames=("axis", "shape"))
def _sample_categorical(key, log_weights, axis, shape):
    (log_weights,) = as_inexact(log_weights)
    log_weights = jnp.moveaxis(log_weights, axis, -1)
    batch_shape = log_weights.shape[:-1]
    shape = batch_shape if shape is None else shape
    top = jnp.max(log_weights, axis=-1, keepdims=True)
    # An all -inf slice has top = -inf; shifting by it would give nan instead of -inf.
    shifted = log_weights - jax.lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0))
    gumbel = jax.random.gumbel(key, shape + log_weights.shape[-1:], log_weights.dtype)
    return jnp.argmax(shifted + gumbel, axis=-1)


def sample_categorical(
    key, log_weights, axis: int = -1, shape: Sequence[int] | None = None
) -> jax.Array:
    r"""Draw :math:`j` with :math:`P(j) = e^{\ell_j} / \sum_i e^{\ell_i}` by the Gumbel-max trick.

    .. math::

        j = \arg\max_i\, (\ell_i - \max_m \ell_m + g_i), \qquad g_i \overset{iid}{\sim}
        \mathrm{Gumbel}(0, 1),

    which is exact for unnormalized :math:`\ell` (the argmax is invariant to a common shift).
    The shift by the maximum keeps the Gumbel noise at full resolution when the weights are huge
    (e.g. :math:`10^4` in float32, whose spacing would otherwise be :math:`10^{-3}`). Entries
    equal to ``-inf`` are never chosen; a slice that is entirely ``-inf`` returns index 0.

    Parameters
    ----------
    key
        PRNG key.
    log_weights
        unnormalized log weights; categories along ``axis``, every other axis is a
        batch axis.
    axis
        the category axis.
    shape
        batch shape of the result; must be broadcast-compatible with the batch shape of
        ``log_weights`` (its shape without ``axis``), e.g. ``(n,) + batch`` for ``n`` draws
        per batch element. Defaults to the batch shape. Static.

    Returns
    -------
    jax.Array
        Integer indices of shape ``shape``.
    """
    shape = None if shape is None else tuple(int(s) for s in shape)
    return _sample_categorical(key, log_weights, axis, shape)
