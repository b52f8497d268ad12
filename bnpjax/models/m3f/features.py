"""The feature steps of Gibbs iPM3F: the binary features ``Z`` given ``V``, the thresholds
and the augmentation.

Two exact steps leave the same posterior invariant. ``"sequential"`` (the authors'): users
in turn, each flipping the features other users hold (Gibbs, with the IBP's
:math:`m_{-i,k}/N`) and redrawing its own singleton features as a block: their number
:math:`k_i \\in 0..\\kappa` with their weights integrated out (an equicorrelation precision,
:func:`bnpjax.ops.equicorrelation_terms`), then the weights. ``"parallel"``: the feature
probabilities :math:`\\pi_k` instantiated, so every column is redrawn for all users at
once, then all users' singletons at once. The strong-generalization variant (fixed items)
redraws columns given the reference users' counts.

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML, eqs. (29)-(33) and Table 4.
Zhang, M. M., Dubey, A. and Williamson, S. A. (2017). Parallel Markov chain Monte Carlo for
the Indian buffet process. arXiv:1703.03457.
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from bnpjax.models.m3f.conditionals import _scores
from bnpjax.models.m3f.linalg import _extend, column_normals
from bnpjax.ops import equicorrelation_terms, sample_categorical
from bnpjax.priors import ibp

__all__ = ["FEATURE_STEPS", "new_feature_log_weights"]


def new_feature_log_weights(b, xi_res, valid, sigma, alpha, num_users, kappa: int):
    """Unnormalized ``log p(k_i = k | rest)``, ``k = 0..kappa``: the truncated
    Poisson(alpha/N) prior plus, per rated item, ``-k/2 log sigma^2 - 1/2 log|P_k| + xi'^2/2
    1^T P_k^{-1} 1`` with ``P_k = I/sigma^2 + b 1 1^T`` (Xu, Zhu & Zhang 2013, eqs. 29-33)."""
    per_pair = _new_feature_pair_terms(b, xi_res, sigma, kappa)
    loglik = jnp.sum(jnp.where(valid[:, None], per_pair, 0.0), axis=0)
    return ibp.new_feature_log_prior(alpha, num_users, kappa).astype(b.dtype) + loglik


def _new_feature_pair_terms(b, xi_res, sigma, kappa: int):
    """Per rated pair and ``k = 0..kappa``: the log of the new weights' Gaussian integral."""
    logdet, quad = equicorrelation_terms(1.0 / sigma**2, b, kappa)  # (w, kappa + 1)
    k = jnp.arange(kappa + 1, dtype=b.dtype)
    return -k * jnp.log(sigma) - 0.5 * logdet + 0.5 * xi_res[:, None] ** 2 * quad


def _redraw_columns(key, data, b, xi, Z, V, order, num_columns, reference=None):
    """Columns ``order[:num_columns]`` in turn, each for every user at once given its
    :math:`\\pi_k`. Given :math:`\\pi_k`, V and
    the other columns, the users' :math:`z_{ik}` are independent (each touches only its own
    pairs' pseudo-likelihood), so the column is one exact block. Returns ``Z`` and its scores.

    ``reference = (counts, num_rows)``: feature counts of users held fixed outside ``Z``
    (strong generalization). :math:`\\pi_k`'s Beta then counts them too, and a column may
    empty among ``Z``'s users, since the reference users hold it."""
    N = Z.shape[0]
    users, items = data.users, data.items
    dtype = V.dtype

    def column(position, carry):
        Z, x = carry
        k = order[position]
        key_pi, key_z = jax.random.split(jax.random.fold_in(key, k))
        z_k = Z[:, k]
        v = V[items, k]
        x_off = x - z_k[users] * v
        # log pseudo-likelihood ratio of z_ik = 1 against 0, summed over the user's pairs
        gain = jax.ops.segment_sum(v * (xi - b * x_off - 0.5 * b * v), users, num_segments=N)
        if reference is None:
            # only columns active at the start are visited, and they stay non-empty
            on = ibp.sample_nonempty_column(key_z, ibp.feature_log_odds(key_pi, z_k) + gain)
        else:
            counts, num_rows = reference
            log_odds = ibp.feature_log_odds(key_pi, z_k, counts[k], num_rows) + gain
            uniforms = jax.random.uniform(key_z, (N,), dtype)
            on = jnp.log(uniforms) < -jax.nn.softplus(-log_odds)
        on = on.astype(dtype)
        return Z.at[:, k].set(on), x_off + on[users] * v

    return jax.lax.fori_loop(0, num_columns, column, (Z, _scores(data, Z, V)))


def _parallel_features(key, data, b, xi, Z, V, alpha, sigma, kappa):
    """Row-parallel Z step: the instantiated columns
    in a random order, each for every user at once given ``pi_k``, then every user's
    singletons and their weights at once. Returns ``Z, V, exceeded, needed``."""
    key_order, key_cols, key_new, key_v = jax.random.split(key, 4)
    N, cap = Z.shape
    M = V.shape[0]
    users, items = data.users, data.items
    dtype = V.dtype
    order = ibp.active_column_order(key_order, Z)
    Z, x = _redraw_columns(key_cols, data, b, xi, Z, V, order, jnp.sum(Z.sum(0) > 0))

    # every user's singletons redrawn at once, their weights integrated out
    singleton = (Z.sum(0) == 1).astype(dtype)
    x0 = x - _scores(data, Z * singleton, V)
    Z = Z * (1.0 - singleton)
    xi_res = xi - b * x0
    per_pair = _new_feature_pair_terms(b, xi_res, sigma, kappa)
    log_w = ibp.new_feature_log_prior(alpha, N, kappa).astype(dtype) + jax.ops.segment_sum(
        per_pair, users, num_segments=N
    )
    k_new = sample_categorical(key_new, log_w)
    owned, shortfall = ibp.place_new_features(Z.sum(0) < 0.5, k_new)
    Z = Z + owned.astype(dtype)

    # weights of the new columns: prior for every item, posterior for each owner's rated items
    opened = owned.any(0)
    eps = column_normals(key_v, M, cap, dtype)
    V = jnp.where(opened[None, :], sigma * eps, V)
    placed = owned.sum(1)  # k_new, or fewer when the buffer ran short (the step is redone)
    slots = jnp.argsort(~owned, axis=1)[:, :kappa]  # each user's new columns first
    use = (jnp.arange(kappa)[None, :] < placed[:, None])[users]
    pair_slots = slots[users]
    kf = placed[users].astype(dtype)
    sig2 = sigma**2
    eta = (1.0 - jax.lax.rsqrt(1.0 + kf * b * sig2)) / jnp.maximum(kf, 1.0)
    mean = xi_res / (1.0 / sig2 + kf * b)
    eps_w = eps[items[:, None], pair_slots] * use
    rated = mean[:, None] + sigma * (eps_w - eta[:, None] * jnp.sum(eps_w, 1, keepdims=True))
    rows = jnp.where(use, items[:, None], M)  # M: dropped on write
    V = V.at[rows, pair_slots].set(rated, mode="drop")
    needed = (jnp.sum(Z.sum(0) > 0) + shortfall).astype(jnp.int32)
    return Z, V, shortfall > 0, needed


FEATURE_STEPS = ("sequential", "parallel")


def _user_features(carry, xs, *, data, b_ext, xi_ext, sigma, alpha, kappa):
    """One user's Z step: Gibbs flips of shared features, then the block
    (number of singletons, their weights)."""
    Z, V, m, exceeded, needed = carry
    i, pairs, key = xs
    N, cap = Z.shape
    M = V.shape[0]
    key_flip, key_k, key_v = jax.random.split(key, 3)
    valid = pairs < data.users.shape[0]
    items = jnp.where(valid, _extend(data.items)[pairs], M)  # M: dropped on write
    b, xi = b_ext[pairs], xi_ext[pairs]
    Vw = jnp.where(valid[:, None], V[jnp.minimum(items, M - 1)], 0.0)
    z = Z[i]
    m_minus = m - z
    held = m_minus > 0.5
    x = Vw @ z
    order = jnp.argsort(~held)
    uniforms = jax.random.uniform(key_flip, (cap,), V.dtype)

    def flip(t, c):
        z, x = c
        k = order[t]
        delta = 1.0 - 2.0 * z[k]
        x_new = x + delta * Vw[:, k]
        gain = jnp.sum(-0.5 * b * (x_new**2 - x**2) + xi * (x_new - x))
        p_on = m_minus[k] / N
        prior = jnp.where(
            z[k] > 0, jnp.log1p(-p_on) - jnp.log(p_on), jnp.log(p_on) - jnp.log1p(-p_on)
        )
        take = jnp.log(uniforms[k]) < -jax.nn.softplus(-(gain + prior))
        return jnp.where(take, z.at[k].set(1.0 - z[k]), z), jnp.where(take, x_new, x)

    z, x = jax.lax.fori_loop(0, jnp.sum(held), flip, (z, x))
    singles = z * (~held)
    x0 = x - Vw @ singles
    xi_res = xi - b * x0
    logw = new_feature_log_weights(b, xi_res, valid, sigma, alpha, N, kappa)
    k_new = sample_categorical(key_k, logw)
    owned, short = ibp.place_new_features(~held, k_new[None])
    owned = owned[0]
    z = jnp.where(held, z, owned.astype(z.dtype))

    placed = jnp.sum(owned)  # k_new, or fewer when the buffer ran short (the step is redone)

    def write_new_columns(V):
        # weights of the new columns: prior for every item, posterior for the rated ones
        slots = jnp.argsort(~owned)[:kappa]
        use = jnp.arange(kappa) < placed
        eps = jax.random.normal(key_v, (M, kappa), V.dtype) * use
        kf = placed.astype(V.dtype)
        sig2 = sigma**2
        grow = 1.0 + kf * b * sig2
        eta = (1.0 - jax.lax.rsqrt(grow)) / jnp.maximum(kf, 1.0)
        mean = xi_res / (1.0 / sig2 + kf * b)
        eps_w = eps[jnp.minimum(items, M - 1)]
        rated = mean[:, None] + sigma * (eps_w - eta[:, None] * jnp.sum(eps_w, 1, keepdims=True))
        cols = jnp.where(use[None, :], sigma * eps, V[:, slots])
        cols = cols.at[items].set(
            jnp.where(use[None, :], rated, cols[jnp.minimum(items, M - 1)]), mode="drop"
        )
        return V.at[:, slots].set(cols)

    # Most users open no feature in a sweep; skipping the M x kappa prior draws for them is
    # what keeps the sequential user loop cheap (those draws dominated the sweep on a CPU).
    # Under vmap (several chains in one program) the cond becomes a select and both branches
    # run: still exact, no longer cheaper.
    V = jax.lax.cond(placed > 0, write_new_columns, lambda V: V, V)
    Z = Z.at[i].set(z)
    carry = (
        Z,
        V,
        m_minus + z,
        exceeded | (short > 0),
        jnp.maximum(needed, (jnp.sum(held) + k_new).astype(jnp.int32)),
    )
    return carry, None


def _sequential_features(key, data, b, xi, Z, V, alpha, sigma, kappa):
    """The authors' Z step: users in turn, bucket by bucket.
    Returns ``Z, V, exceeded, needed``."""
    b_ext, xi_ext = _extend(b), _extend(xi)
    carry = (Z, V, Z.sum(0), jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    for t, bucket in enumerate(data.user_buckets):
        keys = jax.random.split(jax.random.fold_in(key, t), bucket.ids.shape[0])
        user = functools.partial(
            _user_features,
            data=data,
            b_ext=b_ext,
            xi_ext=xi_ext,
            sigma=sigma,
            alpha=alpha,
            kappa=kappa,
        )
        carry, _ = jax.lax.scan(user, carry, (bucket.ids, bucket.pairs, keys))
    Z, V, _, exceeded, needed = carry
    return Z, V, exceeded, needed
