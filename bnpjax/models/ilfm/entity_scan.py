r"""Steps 1 and 2 of the ILFM sampler: the entities in turn.

For entity ``i``, each feature another entity holds is redrawn from its Gibbs conditional,
prior :math:`m_{-i,k}/N` times the likelihood of the links that involve ``i`` (row ``i``,
column ``i`` and the diagonal entry). With :math:`P_r = W_r F_{-i}^\top` and
:math:`Q_r = F_{-i} W_r` a flip of :math:`f_{ik}` shifts the row and column logits by
:math:`\pm P_r[k]`, :math:`\pm Q_r[:, k]`: ``O(R N)`` per flip. Then the features unique to
``i`` and their weights get a joint Metropolis-Hastings move whose proposal is the prior:
:math:`k^{new} \sim \mathrm{Poisson}(\alpha/N)` truncated at ``kappa`` new features, every
weight involving them drawn from :math:`\mathcal N(0, \sigma_w^2)`; the acceptance ratio is
the likelihood ratio of the links of ``i``.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (the MCMC inference procedure).
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224 (the Gibbs sampler: new features at rate alpha / N per object).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.models.ilfm.joint import _bernoulli
from bnpjax.ops import sample_truncated_poisson
from bnpjax.priors import ibp


def ibp_rate(alpha, N):
    """The Poisson rate of an entity's new features: alpha / N."""
    return alpha / N


def _entity_terms(f, row, col, i, data, W, diag_offset, likelihood):
    """Log-likelihood of the links of entity ``i`` given its features ``f`` and the row/column
    logits without the diagonal. ``row``/``col``: (R, N)."""
    off = jnp.arange(row.shape[1]) != i
    y_row, m_row = data.Y[:, i, :], data.mask[:, i, :] * off
    y_col, m_col = data.Y[:, :, i], data.mask[:, :, i] * off
    diag = jnp.einsum("k,rkl,l->r", f, W, f) + diag_offset
    total = jnp.sum(_bernoulli(y_row, row, m_row, likelihood))
    total = total + jnp.sum(_bernoulli(y_col, col, m_col, likelihood))
    return total + jnp.sum(_bernoulli(data.Y[:, i, i], diag, data.mask[:, i, i], likelihood))


def entity_update(
    carry, xs, *, data, offset, alpha, sigma_w, kappa, likelihood, new_feature_rate=ibp_rate
):
    """Steps 1 and 2 of the sampler for entity ``i = xs[0]`` (module docstring), as a
    ``lax.scan`` body over entities: ``carry = (F, W, m, exceeded, needed, accepted)``."""
    F, W, m, exceeded, needed, accepted = carry
    i, uniforms, key = xs
    N = F.shape[0]
    offset = jnp.broadcast_to(offset, (W.shape[0], N, N))
    row_offset, col_offset, bias = offset[:, i, :], offset[:, :, i], offset[:, i, i]
    f = F[i]
    F_minus = F.at[i].set(0.0)
    m_minus = m - f
    P = jnp.einsum("rkl,jl->rkj", W, F_minus)  # (R, C, N): row logits are f P + s
    Q = jnp.einsum("jk,rkl->rjl", F_minus, W)  # (R, N, C): column logits are Q f + s
    row = jnp.einsum("k,rkj->rj", f, P) + row_offset
    col = jnp.einsum("rjl,l->rj", Q, f) + col_offset
    held = m_minus > 0.5
    order = jnp.argsort(~held)  # held slots first, in slot order

    def flip(j, c):
        f, row, col, current = c
        k = order[j]
        delta = 1.0 - 2.0 * f[k]
        f_new = f.at[k].set(1.0 - f[k])
        row_new = row + delta * P[:, k, :]
        col_new = col + delta * Q[:, :, k]
        proposed = _entity_terms(f_new, row_new, col_new, i, data, W, bias, likelihood)
        p_on = m_minus[k] / N
        log_prior = jnp.where(
            f[k] > 0, jnp.log1p(-p_on) - jnp.log(p_on), jnp.log(p_on) - jnp.log1p(-p_on)
        )
        log_odds = proposed - current + log_prior
        take = jnp.log(uniforms[k]) < -jax.nn.softplus(-log_odds)
        return (
            jnp.where(take, f_new, f),
            jnp.where(take, row_new, row),
            jnp.where(take, col_new, col),
            jnp.where(take, proposed, current),
        )

    current = _entity_terms(f, row, col, i, data, W, bias, likelihood)
    f, row, col, current = jax.lax.fori_loop(0, jnp.sum(held), flip, (f, row, col, current))

    # unique features of i and their weights: joint MH with the prior as proposal
    key_k, key_w, key_u = jax.random.split(key, 3)
    unique = (~held) & (f > 0)
    k_unique = jnp.sum(unique)
    k_new = sample_truncated_poisson(key_k, new_feature_rate(alpha, N), kappa)
    free = ~held
    owned, short = ibp.place_new_features(free, k_new[None])
    owned = owned[0]
    f_prop = jnp.where(held, f, owned.astype(f.dtype))
    fresh = owned[:, None] | owned[None, :]
    active_prop = held | owned
    pair_prop = active_prop[:, None] & active_prop[None, :]
    W_prop = jnp.where(fresh[None], sigma_w * jax.random.normal(key_w, W.shape, W.dtype), W)
    W_prop = jnp.where(pair_prop[None], W_prop, 0.0)
    P_prop = jnp.einsum("rkl,jl->rkj", W_prop, F_minus)
    Q_prop = jnp.einsum("jk,rkl->rjl", F_minus, W_prop)
    row_prop = jnp.einsum("k,rkj->rj", f_prop, P_prop) + row_offset
    col_prop = jnp.einsum("rjl,l->rj", Q_prop, f_prop) + col_offset
    proposed = _entity_terms(f_prop, row_prop, col_prop, i, data, W_prop, bias, likelihood)
    log_ratio = proposed - current
    possible = (k_unique <= kappa) & (short == 0)
    take = possible & (jnp.log(jax.random.uniform(key_u, (), W.dtype)) < log_ratio)
    f = jnp.where(take, f_prop, f)
    W = jnp.where(take, W_prop, W)
    # slots nobody holds any more carry no weights
    active = held | (f > 0)
    W = jnp.where((active[:, None] & active[None, :])[None], W, 0.0)
    F = F.at[i].set(f)
    carry = (
        F,
        W,
        m_minus + f,
        exceeded | (short > 0),
        jnp.maximum(needed, (jnp.sum(held) + k_new).astype(jnp.int32)),
        accepted + take.astype(W.dtype),
    )
    return carry, None
