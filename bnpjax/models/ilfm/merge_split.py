r"""Moves of the ILFM sampler that change the features but no logit: merging two identical
features or splitting one into two, and taking a feature's subset out of it or putting a
disjoint one in.

**Merge and split.** Two features held by exactly the same entities (identical columns of
``F``) enter every link only through their summed weights: with :math:`f_{\cdot k} = f_{\cdot
l}`,

.. math::

    w'_{kj} = w_{kj} + w_{lj}, \quad w'_{jk} = w_{jk} + w_{jl} \ (j \ne k, l), \quad
    w'_{kk} = w_{kk} + w_{kl} + w_{lk} + w_{ll}

give the same logits for every pair of entities with feature ``l`` removed. Such duplicates
are often favoured by the posterior: the summed weights of ``n`` copies have prior variance
:math:`n \sigma_w^2`, so when the links need weights larger than the prior's scale a copy of a
feature held by many entities pays for its IBP prior with the weights' prior. The Gibbs flips
can only create or remove a copy one entity at a time, through states whose likelihood is
poor, so chains stay for hundreds of sweeps with or without a copy (the number of features
``K+`` mixes slowly). This move jumps between the two directly:

* merge: choose one of the :math:`2D` ordered pairs ``(k, l)`` of identical active features
  uniformly and merge ``l`` into ``k`` as above;
* split: choose one of the :math:`K_+` active features ``k`` uniformly, copy its column into
  the lowest free slot ``p`` and split each summed weight into two (four for
  :math:`w'_{kk}`) from the weights' prior given their sum: :math:`(w_{kj}, w_{pj}) = (s/2 -
  e, s/2 + e)`, :math:`e \sim \mathcal N(0, \sigma_w^2 / 2)`, and the ``2 x 2`` block
  :math:`s/4 + z - \bar z`, :math:`z \sim \mathcal N(0, \sigma_w^2 I_4)`.

The likelihood does not change, the map from (summed weights, draws) to weights has Jacobian 1,
and the proposal of the new weights is their prior given the sums, so the prior's conditional
cancels with it and the Metropolis-Hastings ratio of a split from ``K`` features to a state
with ``D'`` identical pairs is

.. math::

    \alpha\, \frac{(N - m_k)!\,(m_k - 1)!}{N!}\, \frac{K}{2 D'}
    \prod_r \Big[\frac{\mathcal N(w'_{kk}; 0, 4\sigma_w^2)}{\mathcal N(w'_{kk}; 0, \sigma_w^2)}
    \prod_{j \ne k} \frac{\mathcal N(w'_{kj}; 0, 2\sigma_w^2)\, \mathcal N(w'_{jk}; 0,
    2\sigma_w^2)}{\mathcal N(w'_{kj}; 0, \sigma_w^2)\, \mathcal N(w'_{jk}; 0, \sigma_w^2)}\Big]

(the IBP's law of the features as an unordered set, each with its weights, times the weights'
prior; the factor 2 counts the two draws that give the same pair of features, and ``K / D'``
is the ratio of the choices), and a merge's ratio is the reciprocal of the split that undoes
it. Split and merge are chosen with probability 1/2 each; a merge with no identical pair, or a
split with no active feature, changes nothing. A split with no free slot is rejected and
reported as a full buffer (the driver grows it and re-runs the chunk).

**Take out and put in** (:func:`nest_move`). A chain can also hold a planted feature's
entities as a feature ``l`` inside a wider ``k``, the weights of ``l`` cancelling part of
those of ``k`` for its entities: every link is then fitted, and leaving such a state by flips
means moving the entities of ``l`` out of ``k`` one at a time through poor fits (seen on the
planted data of ``bnpjax demo ilfm``: one chain in four held it for all its draws). When the
entities of ``l`` all hold ``k`` (:math:`l \subsetneq k`), an entity's feature vector before is
:math:`f = T f'` with :math:`f'` the vector after removing ``l`` from ``k`` and :math:`T = I +
e_k e_l^\top`, so the weights

.. math::

    W'_r = T^\top W_r T \quad \text{(column } l \mathrel{+}= \text{column } k\text{, then row }
    l \mathrel{+}= \text{row } k\text{)}

give every pair of entities the same logit :math:`f_i^\top W_r f_j = f_i'^\top W'_r f'_j`; the
map is linear with a unit-triangular :math:`T`, so its Jacobian is 1. The move chooses with
probability 1/2 to take out (one of the :math:`P` ordered pairs with :math:`l \subsetneq k`,
uniformly: ``k`` becomes :math:`k \setminus l`) or to put in (one of the :math:`Q` ordered
pairs of disjoint active features, uniformly: ``k`` becomes :math:`k \cup l`, weights by
:math:`T^{-1} = I - e_k e_l^\top`); each undoes the other, and with the likelihood unchanged
the ratio of taking out is

.. math::

    \frac{(N - m_k + m_l)!\,(m_k - m_l - 1)!}{(N - m_k)!\,(m_k - 1)!}\,
    \frac{\mathcal N(W'; 0, \sigma_w^2)}{\mathcal N(W; 0, \sigma_w^2)}\, \frac{P}{Q'}

(``Q'``: the disjoint pairs after the move), and of putting in its reciprocal form. ``K+`` and
the slots do not change. At any temperature of replica exchange both moves are exact, since
neither changes the likelihood.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22 (the model).
Meeds, E., Ghahramani, Z., Neal, R. M. and Roweis, S. T. (2007). Modeling dyadic data with
binary latent factors. NIPS 19 (split-merge moves for IBP features).
Green, P. J. (1995). Reversible jump Markov chain Monte Carlo computation and Bayesian model
determination. Biometrika 82(4), 711-732.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

__all__ = ["merge_split", "merge_split_moves", "nest_move", "nest_moves"]


def _log_normal_ratio(s, n, sigma):
    """``log N(s; 0, n sigma^2) - log N(s; 0, sigma^2)``, elementwise."""
    return -0.5 * jnp.log(n) + 0.5 * (1.0 - 1.0 / n) * s**2 / sigma**2


def _identical_pairs(F):
    """(C, C) bool: ``[k, l]`` when ``k != l`` are active features held by the same entities."""
    m = F.sum(0)
    overlap = F.T @ F
    active = m > 0
    same = (overlap == m[:, None]) & (overlap == m[None, :])
    same = same & active[:, None] & active[None, :]
    return same & ~jnp.eye(F.shape[1], dtype=bool)


def _log_split_ratio(W, k, others, m_k, num_features, num_pairs_after, alpha, N, sigma_w,
                     correct=True):  # fmt: skip
    """Log MH ratio of splitting feature ``k`` of the merged weights ``W`` (module docstring);
    ``others``: the other active features; ``num_features``: K+ before the split;
    ``num_pairs_after``: the unordered identical pairs after it. ``correct=False`` leaves out
    the IBP prior's factor of the copy (the broken twin of the Geweke test: a copy looks free
    because the likelihood does not change)."""
    dtype = W.dtype
    o = others.astype(dtype)
    weights = jnp.sum(o * (_log_normal_ratio(W[:, k, :], 2.0, sigma_w)
                           + _log_normal_ratio(W[:, :, k], 2.0, sigma_w)))  # fmt: skip
    weights = weights + jnp.sum(_log_normal_ratio(W[:, k, k], 4.0, sigma_w))
    log_ibp = jnp.log(alpha) + gammaln(N - m_k + 1.0) + gammaln(m_k) - gammaln(N + 1.0)
    choices = jnp.log(num_features.astype(dtype)) - jnp.log(2.0 * num_pairs_after.astype(dtype))
    return (log_ibp if correct else 0.0) + choices + weights


def merge_split(key, F, W, alpha, sigma_w, correct=True):
    """One merge-or-split move (module docstring) of features ``F`` (N, C) and weights ``W``
    (R, C, C).

    Returns
    -------
    (F, W, accepted, full)
        the new features and weights, whether a merge or split was accepted, and whether a
        split found no free slot (the buffer must grow).
    """
    key_kind, key_pick, key_w, key_u = jax.random.split(key, 4)
    N, C = F.shape
    R = W.shape[0]
    dtype = W.dtype
    m = F.sum(0)
    active = m > 0
    num_features = jnp.sum(active)
    same = _identical_pairs(F)
    num_pairs = jnp.sum(same) // 2
    split = jax.random.bernoulli(key_kind)
    slots = jnp.arange(C)

    # split: feature k (uniform among the active ones) into k and the lowest free slot p
    k_split = jax.random.categorical(key_pick, jnp.where(active, 0.0, -jnp.inf))
    free = ~active
    p = jnp.argmax(free)
    full = ~jnp.any(free)
    others = active & (slots != k_split)
    key_row, key_col, key_block = jax.random.split(key_w, 3)
    half = sigma_w / jnp.sqrt(2.0)
    e_row = half * jax.random.normal(key_row, (R, C), dtype)
    e_col = half * jax.random.normal(key_col, (R, C), dtype)
    z = sigma_w * jax.random.normal(key_block, (R, 4), dtype)
    block = W[:, k_split, k_split][:, None] / 4.0 + z - z.mean(1, keepdims=True)
    row, col = W[:, k_split, :], W[:, :, k_split]
    W_s = W.at[:, k_split, :].set(jnp.where(others, row / 2 - e_row, W[:, k_split, :]))
    W_s = W_s.at[:, p, :].set(jnp.where(others, row / 2 + e_row, 0.0))
    W_s = W_s.at[:, :, k_split].set(jnp.where(others, col / 2 - e_col, W_s[:, :, k_split]))
    W_s = W_s.at[:, :, p].set(jnp.where(others, col / 2 + e_col, 0.0))
    W_s = W_s.at[:, k_split, k_split].set(block[:, 0]).at[:, k_split, p].set(block[:, 1])
    W_s = W_s.at[:, p, k_split].set(block[:, 2]).at[:, p, p].set(block[:, 3])
    F_s = F.at[:, p].set(F[:, k_split])
    log_split = _log_split_ratio(
        W, k_split, others, m[k_split], num_features, jnp.sum(_identical_pairs(F_s)) // 2,
        alpha, N, sigma_w, correct,
    )  # fmt: skip
    can_split = (num_features > 0) & ~full

    # merge: ordered pair (k, l) of identical features (uniform), l into k
    pick = jax.random.categorical(key_pick, jnp.where(same, 0.0, -jnp.inf).reshape(-1))
    k_merge, l_merge = pick // C, pick % C
    W_m = W.at[:, k_merge, :].add(W[:, l_merge, :])
    W_m = W_m.at[:, :, k_merge].add(W_m[:, :, l_merge])
    keep = slots != l_merge
    W_m = W_m * (keep[:, None] & keep[None, :])[None]
    F_m = F * keep.astype(dtype)
    others_m = active & keep & (slots != k_merge)
    log_merge = -_log_split_ratio(
        W_m, k_merge, others_m, m[k_merge], num_features - 1, num_pairs, alpha, N, sigma_w,
        correct,
    )  # fmt: skip
    can_merge = num_pairs > 0

    log_ratio = jnp.where(split, log_split, log_merge)
    possible = jnp.where(split, can_split, can_merge)
    take = possible & (jnp.log(jax.random.uniform(key_u, (), dtype)) < log_ratio)
    F_new = jnp.where(take, jnp.where(split, F_s, F_m), F)
    W_new = jnp.where(take, jnp.where(split, W_s, W_m), W)
    return F_new, W_new, take, split & full & (num_features > 0)


def _log_feature_prior(m, N):
    """``log((N - m)! (m - 1)! / N!)``: the IBP's factor of a feature held by ``m`` entities."""
    return gammaln(N - m + 1.0) + gammaln(m) - gammaln(N + 1.0)


def _nested_and_disjoint(F):
    """(C, C) bools: ``[k, l]`` when active ``l`` is a proper subset of active ``k``, and when
    ``k != l`` are active and disjoint."""
    m = F.sum(0)
    overlap = F.T @ F
    both = (m > 0)[:, None] & (m > 0)[None, :]
    nested = both & (overlap == m[None, :]) & (m[None, :] < m[:, None])
    disjoint = both & (overlap == 0) & ~jnp.eye(F.shape[1], dtype=bool)
    return nested, disjoint


def _nest(F, W, k, l, take_out, sigma_w, correct=True, pairs=None):
    """Take ``l`` out of ``k`` (``take_out``) or put it in, with the weights that keep every
    logit: ``(F', W', log MH ratio)`` (module docstring). ``pairs``: ``F``'s
    :func:`_nested_and_disjoint`, when the caller has them."""
    N = F.shape[0]
    dtype = W.dtype
    m = F.sum(0)
    nested, disjoint = _nested_and_disjoint(F) if pairs is None else pairs
    sign = jnp.where(take_out, 1.0, -1.0).astype(dtype)
    F_new = F.at[:, k].add(-sign * F[:, l])
    W_new = W.at[:, :, l].add(sign * W[:, :, k])
    W_new = W_new.at[:, l, :].add(sign * W_new[:, k, :])
    nested_new, disjoint_new = _nested_and_disjoint(F_new)
    count = jnp.sum(jnp.where(take_out, nested, disjoint)).astype(dtype)
    count_back = jnp.sum(jnp.where(take_out, disjoint_new, nested_new)).astype(dtype)
    log_ibp = _log_feature_prior(m[k] - sign * m[l], N) - _log_feature_prior(m[k], N)
    log_weights = -(jnp.sum(W_new**2) - jnp.sum(W**2)) / (2.0 * sigma_w**2)
    log_choices = jnp.log(count) - jnp.log(count_back)
    log_ratio = (log_ibp if correct else 0.0) + log_weights + log_choices
    return F_new, W_new, log_ratio


def nest_move(key, F, W, sigma_w, correct=True):
    """One take-out-or-put-in move (module docstring) of features ``F`` (N, C) and weights
    ``W`` (R, C, C). ``correct=False`` leaves the IBP prior's factor out of the ratio (the
    broken twin of the tests: feature sizes look free because no logit changes).

    Returns
    -------
    (F, W, accepted)
    """
    key_kind, key_pick, key_u = jax.random.split(key, 3)
    C = F.shape[1]
    nested, disjoint = _nested_and_disjoint(F)
    take_out = jax.random.bernoulli(key_kind)
    pairs = jnp.where(take_out, nested, disjoint)
    pick = jax.random.categorical(key_pick, jnp.where(pairs, 0.0, -jnp.inf).reshape(-1))
    F_new, W_new, log_ratio = _nest(
        F, W, pick // C, pick % C, take_out, sigma_w, correct, pairs=(nested, disjoint)
    )
    log_u = jnp.log(jax.random.uniform(key_u, (), W.dtype))
    take = jnp.any(pairs) & (log_u < log_ratio)
    return jnp.where(take, F_new, F), jnp.where(take, W_new, W), take


def merge_split_moves(key, F, W, alpha, sigma_w, num_moves, correct=True):
    """``num_moves`` :func:`merge_split` moves in turn. Returns ``(F, W, accepted, full)``:
    the number accepted and whether any split found the buffer full."""

    def one(t, carry):
        F, W, accepted, full = carry
        F, W, take, short = merge_split(jax.random.fold_in(key, t), F, W, alpha, sigma_w, correct)
        return F, W, accepted + take.astype(W.dtype), full | short

    zero = jnp.zeros((), W.dtype)
    return jax.lax.fori_loop(0, num_moves, one, (F, W, zero, jnp.zeros((), bool)))


def nest_moves(key, F, W, sigma_w, num_moves, correct=True):
    """``num_moves`` :func:`nest_move` moves in turn. Returns ``(F, W, accepted)``: the number
    accepted."""

    def one(t, carry):
        F, W, accepted = carry
        F, W, take = nest_move(jax.random.fold_in(key, t), F, W, sigma_w, correct)
        return F, W, accepted + take.astype(W.dtype)

    return jax.lax.fori_loop(0, num_moves, one, (F, W, jnp.zeros((), W.dtype)))
