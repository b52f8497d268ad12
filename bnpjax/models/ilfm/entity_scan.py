r"""Steps 1 and 2 of the ILFM sampler: the entities in turn.

For entity ``i``, each feature another entity holds is redrawn from its Gibbs conditional,
prior :math:`m_{-i,k}/N` times the likelihood of the links that involve ``i`` (row ``i``,
column ``i`` and the diagonal entry). With :math:`P_r = W_r F_{-i}^\top` and
:math:`Q_r = F_{-i} W_r` a flip of :math:`f_{ik}` shifts the row and column logits by
:math:`\pm P_r[k]`, :math:`\pm Q_r[:, k]`: ``O(R N)`` per flip. Then the features unique to
``i`` and their weights get a joint Metropolis-Hastings move whose proposal is the prior:
:math:`k^{new} \sim \mathrm{Poisson}(\alpha/N)` truncated at ``kappa`` new features, every
weight involving them drawn from :math:`\mathcal N(0, \sigma_w^2)`; the acceptance ratio is
the likelihood ratio of the links of ``i``. With many relations weights drawn from the prior
never fit, so by default (:func:`laplace_weights`) the new features' weights come from
Gaussian fits to i's links instead, and the ratio gains the proposal's densities.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (the MCMC inference procedure).
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224 (the Gibbs sampler: new features at rate alpha / N per object).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bnpjax.models.ilfm.joint import _bernoulli
from bnpjax.ops import apply_if, sample_truncated_poisson, softplus
from bnpjax.priors import ibp


def ibp_rate(alpha, N):
    """The Poisson rate of an entity's new features: alpha / N."""
    return alpha / N


class _Links(NamedTuple):
    """The links of one entity ``i``, read once per entity: row ``i`` then column ``i`` of
    every relation (2R, N), their masks (the diagonal entry left out), and the diagonal."""

    y: jax.Array
    mask: jax.Array
    y_diag: jax.Array
    mask_diag: jax.Array
    diag_offset: jax.Array


def _links_of(i, data, diag_offset):
    off = (jnp.arange(data.Y.shape[1]) != i).astype(data.mask.dtype)
    y = jnp.concatenate([data.Y[:, i, :], data.Y[:, :, i]])
    mask = jnp.concatenate([data.mask[:, i, :], data.mask[:, :, i]]) * off
    return _Links(y, mask, data.Y[:, i, i], data.mask[:, i, i], diag_offset)


def _link_weights(W, F_minus):
    """``(2R, C, N)``: how feature ``k`` of entity ``i`` moves the logits of i's row links
    (``W_r F_{-i}^T``, first ``R``) and column links (``(F_{-i} W_r)^T``, last ``R``), so
    that the logits are ``f . PQ`` plus the offsets and a flip of ``f_k`` shifts them by one
    slice."""
    P = jnp.einsum("rkl,jl->rkj", W, F_minus)
    Q = jnp.einsum("jk,rkl->rlj", F_minus, W)
    return jnp.concatenate([P, Q])


def _entity_terms(f, logits, W, links: _Links, likelihood):
    """Log-likelihood of the links of entity ``i`` given its features ``f`` and the logits
    (2R, N) of its row and column links without the diagonal."""
    diag = jnp.einsum("k,rkl,l->r", f, W, f) + links.diag_offset
    total = jnp.sum(_bernoulli(links.y, logits, links.mask, likelihood))
    return total + jnp.sum(_bernoulli(links.y_diag, diag, links.mask_diag, likelihood))


NEWTON_STEPS = 5


def _laplace_fit(y, mask, base, X, prior_precision, likelihood):
    """Gaussian (Laplace) fit of the coefficients ``a`` (R, C) of the logits ``base + a X^T``
    of the links ``y`` (R, N) under the prior N(0, 1 / prior_precision): ``NEWTON_STEPS``
    Newton steps from 0, then the mean and the Cholesky factor of the precision there. Any
    deterministic function of what the move leaves unchanged keeps the MH ratio exact; the
    fit only decides how often proposals are accepted."""
    C = X.shape[1]

    def derivatives(eta):
        def total(e):
            return jnp.sum(_bernoulli(y, e, mask, likelihood))

        # the log-likelihood is a sum over entries: its Hessian is diagonal, H 1 = diag(H)
        return jax.jvp(jax.grad(total), (eta,), (jnp.ones_like(eta),))

    def precision(eta):
        d1, d2 = derivatives(eta)
        H = jnp.einsum("rn,nk,nl->rkl", -d2, X, X) + prior_precision * jnp.eye(C, dtype=X.dtype)
        return d1, H

    def newton(_, a):
        d1, H = precision(base + a @ X.T)
        g = d1 @ X - prior_precision * a
        # H is the prior's precision plus a sum of outer products with weights -d2 >= 0:
        # symmetric positive definite, so a Cholesky solve (a third of an LU's time here)
        chol = jnp.linalg.cholesky(H)
        half = jax.scipy.linalg.solve_triangular(chol, g[..., None], lower=True)
        return a + jax.scipy.linalg.solve_triangular(chol, half, lower=True, trans=1)[..., 0]

    a = jax.lax.fori_loop(0, NEWTON_STEPS, newton, jnp.zeros((y.shape[0], C), X.dtype))
    _, H = precision(base + a @ X.T)
    return a, jnp.linalg.cholesky(H)


def _log_q_minus_prior(a, mean, chol, prior_precision, held):
    """``log N(a; mean, (L L^T)^-1) - log N(a; 0, 1 / prior_precision)`` summed over
    relations and the features others hold (``held``; the 2 pi terms cancel). The other
    coordinates are not drawn (they stay 0): ``H`` does not couple them to the held ones, so
    ``L``'s held block is the Cholesky factor of ``H``'s and they drop out of both densities."""
    z = jnp.einsum("rkl,rk->rl", chol, a - mean)  # L^T (a - mean), 0 off the held block
    h = held.astype(a.dtype)
    diagonal = jnp.diagonal(chol, axis1=-2, axis2=-1)
    log_q = jnp.sum(h * jnp.log(diagonal)) - 0.5 * jnp.sum(z**2)
    log_p = 0.5 * jnp.sum(h) * a.shape[0] * jnp.log(prior_precision)
    return log_q - (log_p - 0.5 * prior_precision * jnp.sum(h * a**2))


def laplace_weights(
    key, W, W_prop, F_minus, held, unique, owned, k_unique, k_new, base, links, sigma_w,
    likelihood, correct=True,
):  # fmt: skip
    r"""Data-informed weights for the new features of entity ``i`` and the proposal's part of
    the MH ratio.

    Only entity ``i`` holds its unique features, so its row links see their weights only
    through the sums :math:`a_l = \sum_{u \in U} w_{ul}` over the unique features ``U``
    (for each feature ``l`` others hold) and its column links through
    :math:`b_l = \sum_u w_{lu}`. Under the prior :math:`a, b \sim \mathcal N(0, |U|
    \sigma_w^2)`. The proposal draws ``a`` and ``b`` of every relation from a Laplace fit to
    i's row and column links (:func:`_laplace_fit`) and the individual weights from their
    prior given these sums; the weights among new features (seen by the diagonal only) come
    from the prior. The prior's and the proposal's conditionals given the sums cancel, so the
    proposal's part of the log ratio is :math:`\log p(a') - \log q(a') - \log p(a) +
    \log q(a)` (and the same for ``b``). ``correct=False`` drops it (the broken twin of the
    Geweke test).

    One fit serves both directions: it is made under the prior of one feature's sums,
    whatever ``|U|`` and the number proposed, so it is a function of what the move leaves
    unchanged (the links, the features others hold and their weights) and the reverse move
    would make the same fit. The row and column fits are one batched fit, and it is skipped
    when ``i`` has no unique feature and proposes none (most entities in most sweeps; under
    ``vmap`` over chains and temperatures, unless some chain needs it:
    :func:`bnpjax.ops.apply_if`). ``base``: the logits (2R, N) of i's links (``links``) from
    the features others hold.

    Returns
    -------
    (W_prop, log_q_ratio)
    """
    R = W.shape[0]
    dtype = W.dtype
    u = unique.astype(dtype)
    sums_old = (
        jnp.concatenate([jnp.einsum("u,rul->rl", u, W), jnp.einsum("u,rlu->rl", u, W)]) * held
    )  # (2R, C)
    fit_precision = 1.0 / sigma_w**2

    def fitted(y, mask, base, F_minus):
        return _laplace_fit(y, mask, base, F_minus, fit_precision, likelihood)

    C = F_minus.shape[1]
    identity = jnp.broadcast_to(jnp.eye(C, dtype=dtype), (2 * R, C, C))
    skipped = (jnp.zeros((2 * R, C), dtype), identity)
    needed = (k_new > 0) | (k_unique > 0)
    mean, chol = apply_if(needed, fitted, skipped, links.y, links.mask, base, F_minus)
    z = jax.random.normal(key, mean.shape, dtype) * held
    # a = mean + L^-T z has precision L L^T; features nobody else holds stay at 0
    step = jax.scipy.linalg.solve_triangular(chol, z[..., None], lower=True, trans=1)
    sums_new = (mean + step[..., 0]) * held
    prec_new = 1.0 / (jnp.maximum(k_new, 1) * sigma_w**2)
    prec_old = 1.0 / (jnp.maximum(k_unique, 1) * sigma_w**2)
    forward = _log_q_minus_prior(sums_new, mean, chol, prec_new, held)
    reverse = _log_q_minus_prior(sums_old, mean, chol, prec_old, held)
    total = jnp.where(k_unique > 0, reverse, 0.0) - jnp.where(k_new > 0, forward, 0.0)
    # the individual weights: the prior draws in W_prop, shifted to the drawn sums
    k = jnp.maximum(k_new, 1).astype(dtype)
    o = owned.astype(dtype)
    rows, cols = sums_new[:R], sums_new[R:]
    drawn = jnp.einsum("u,rul->rl", o, W_prop) / k  # rows u of the new features, l held
    W_prop = jnp.where(
        (owned[:, None] & held[None, :])[None],
        W_prop + (rows / k - drawn)[:, None, :],
        W_prop,
    )
    drawn = jnp.einsum("u,rlu->rl", o, W_prop) / k  # columns u of the new features, l held
    W_prop = jnp.where(
        (held[:, None] & owned[None, :])[None],
        W_prop + (cols / k - drawn)[:, :, None],
        W_prop,
    )
    return W_prop, total if correct else jnp.zeros_like(total)


def entity_update(
    carry, xs, *, data, offset, alpha, sigma_w, kappa, likelihood, new_feature_rate=ibp_rate,
    birth_weights=None,
):  # fmt: skip
    """Steps 1 and 2 of the sampler for entity ``i = xs[0]`` (module docstring), as a
    ``lax.scan`` body over entities: ``carry = (F, W, m, exceeded, needed, accepted,
    changes)``; ``accepted`` counts the accepted unique-feature moves, ``changes`` those of
    them that changed something. ``birth_weights`` (None: the prior) proposes the
    new features' weights (:func:`laplace_weights`)."""
    F, W, m, exceeded, needed, accepted, changes = carry
    i, uniforms, key = xs
    N = F.shape[0]
    offset = jnp.broadcast_to(offset, (W.shape[0], N, N))
    row_offset, col_offset, bias = offset[:, i, :], offset[:, :, i], offset[:, i, i]
    f = F[i]
    F_minus = F.at[i].set(0.0)
    m_minus = m - f
    PQ = _link_weights(W, F_minus)
    offsets = jnp.concatenate([row_offset, col_offset])
    links = _links_of(i, data, bias)
    logits = jnp.einsum("k,rkj->rj", f, PQ) + offsets
    held = m_minus > 0.5
    order = jnp.argsort(~held)  # held slots first, in slot order
    log_p_on = jnp.log(m_minus / N)
    log_p_off = jnp.log1p(-m_minus / N)

    def flip(j, c):
        f, logits, current = c
        k = order[j]
        delta = 1.0 - 2.0 * f[k]
        f_new = f.at[k].set(1.0 - f[k])
        logits_new = logits + delta * PQ[:, k, :]
        proposed = _entity_terms(f_new, logits_new, W, links, likelihood)
        log_prior = delta * (log_p_on[k] - log_p_off[k])
        log_odds = proposed - current + log_prior
        take = jnp.log(uniforms[k]) < -softplus(-log_odds)
        return (
            jnp.where(take, f_new, f),
            jnp.where(take, logits_new, logits),
            jnp.where(take, proposed, current),
        )

    current = _entity_terms(f, logits, W, links, likelihood)
    f, logits, current = jax.lax.fori_loop(0, jnp.sum(held), flip, (f, logits, current))

    # unique features of i and their weights: joint MH, new features at the prior's rate,
    # their weights from the prior (birth_weights None) or from birth_weights (laplace_weights)
    key_k, key_w, key_u = jax.random.split(key, 3)
    unique = (~held) & (f > 0)
    k_unique = jnp.sum(unique)
    k_new = sample_truncated_poisson(key_k, new_feature_rate(alpha, N), kappa)
    free = ~held
    owned, short = ibp.place_new_features(free, k_new[None])
    owned = owned[0]
    possible = (k_unique <= kappa) & (short == 0)

    def birth_death(f, W, held, owned, unique, k_unique, k_new, PQ, offsets, F_minus, links,
                    current, possible, keys):  # fmt: skip
        key_w, key_u = keys
        f_prop = jnp.where(held, f, owned.astype(f.dtype))
        fresh = owned[:, None] | owned[None, :]
        active_prop = held | owned
        pair_prop = active_prop[:, None] & active_prop[None, :]
        W_prop = jnp.where(fresh[None], sigma_w * jax.random.normal(key_w, W.shape, W.dtype), W)
        log_q_ratio = jnp.zeros((), W.dtype)
        if birth_weights is not None:
            base = jnp.einsum("k,rkj->rj", f * held, PQ) + offsets
            W_prop, log_q_ratio = birth_weights(
                jax.random.fold_in(key_w, 1), W, W_prop, F_minus, held, unique, owned,
                k_unique, k_new, base, links, sigma_w, likelihood,
            )  # fmt: skip
        W_prop = jnp.where(pair_prop[None], W_prop, 0.0)
        logits_prop = jnp.einsum("k,rkj->rj", f_prop, _link_weights(W_prop, F_minus)) + offsets
        proposed = _entity_terms(f_prop, logits_prop, W_prop, links, likelihood)
        log_ratio = proposed - current + log_q_ratio
        take = possible & (jnp.log(jax.random.uniform(key_u, (), W.dtype)) < log_ratio)
        return jnp.where(take, f_prop, f), jnp.where(take, W_prop, W), take

    # with no unique feature and none proposed the move proposes f itself, and a W_prop that
    # differs from W only off the pairs of held features, which the cleanup below zeroes
    # either way: accepted, nothing changes, so it is not computed (under vmap over chains
    # and temperatures: unless some member proposes something). Everything the move reads is
    # passed in, so that XLA cannot hoist a part of it (the weights' draws) out of the skip.
    trivial = (k_new == 0) & (k_unique == 0)
    f, W, take = apply_if(
        ~trivial, birth_death, (f, W, possible), f, W, held, owned, unique, k_unique, k_new,
        PQ, offsets, F_minus, links, current, possible, (key_w, key_u),
    )  # fmt: skip
    changed = (k_unique + k_new) > 0
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
        changes + (take & changed).astype(W.dtype),
    )
    return carry, None
