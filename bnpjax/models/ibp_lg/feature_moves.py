r"""Moves of whole features of the linear-Gaussian IBP model, ``A`` integrated out: births
and deaths, splits and merges, each proposed independently of the data and accepted by
Metropolis-Hastings from the Gram matrices ``Z'Z`` and ``Z'X``, so a move costs
``O(N (K + D))`` whatever the number of rows holding the features.

Why. Given ``A``, a feature that explains nothing (a column of a random start, with weights
near zero once the real features are found) is flipped row by row from the IBP's ``m / N``
alone, a neutral walk that needs of the order of ``N`` sweeps to reach ``m = 0``; and a
feature the chain holds as two disjoint copies with the same weights is frozen, since a row
can leave one copy only for a state holding both or neither. With ``A`` integrated out the
useless column costs an Occam factor of about ``(m sigma_a^2 / sigma_x^2)^(-D/2)``, and the
second copy that and the IBP's price of a small column: a death, or a merge of the copies,
proposed whole is accepted at once.

One move picks one of four proposals with probability 1/4 each (reversible-jump pairs on
the multiset of non-empty columns):

* **birth**: ``u ~ Uniform(0, 1)``, a new column ``c`` with ``c_n ~ Bernoulli(u)``
  independently, so ``q(c) = m! (N - m)! / (N + 1)!`` with ``m`` its number of ones (an
  empty ``c`` is no move); **death**: one of the ``K+`` columns, picked uniformly, removed;
* **split**: one of the ``K+`` columns, picked uniformly; ``u ~ Uniform(0, 1)`` and each of
  its ``m`` holders moved to a new column with probability ``u`` (``q = m_b! m_a! / (m + 1)!``
  for ``m_b`` moved and ``m_a`` kept; a split leaving either part empty is no move);
  **merge**: an unordered pair of the ``K+`` columns, picked uniformly, replaced by their
  union when no row holds both (else no move).

With the IBP probability of the equivalence class (Griffiths & Ghahramani 2011, eq. 14),
``P([Z]) ∝ alpha^{K+} prod_k f(m_k) / prod_h K_h!``, ``f(m) = (N - m)! (m - 1)! / N!``,
the multiplicities ``K_h`` of identical columns cancel against the number of ways the
proposal reaches the same multiset, and the acceptance probabilities are ``min(1, r)`` with

.. math::

    r_{\mathrm{birth}} = \frac{\alpha f(m)}{(K_+ + 1)\, q(c)}
        \frac{p(X \mid Z')}{p(X \mid Z)}
      = \frac{\alpha (N + 1)}{m (K_+ + 1)} \frac{p(X \mid Z')}{p(X \mid Z)},
    \qquad
    r_{\mathrm{split}} = \frac{\alpha f(m_a) f(m_b)}{f(m) (K_+ + 1)\, q}
        \frac{p(X \mid Z')}{p(X \mid Z)},

from ``K+`` columns; a death and a merge use ``1 / r`` of the birth and split that undo
them. The marginal likelihood (``A`` integrated out) is computed from ``Z'Z`` and ``Z'X``; a
move changes one or two rows and columns of them, recomputed exactly (never accumulated). A
birth or split when the buffer is full is refused and the driver told to grow it, which
keeps the chain exact for the IBP truncated to the buffer. The moves leave
:math:`p(Z \mid X, \alpha, \sigma_x, \sigma_a)` invariant; a sampler that keeps ``A`` draws
it from ``A | Z, X`` after them (a partially collapsed Gibbs sampler, van Dyk & Park 2008).

References
----------
Green, P. J. (1995). Reversible jump Markov chain Monte Carlo computation and Bayesian model
determination. *Biometrika* 82, 711-732.
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224.
Meeds, E., Ghahramani, Z., Neal, R. M. & Roweis, S. T. (2007). Modeling dyadic data with
binary latent factors. *NIPS* 19.
van Dyk, D. A. & Park, T. (2008). Partially collapsed Gibbs samplers. *JASA* 103, 790-796.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve
from jax.scipy.special import gammaln

from bnpjax.models.ibp_lg.data import IBPLGState

__all__ = ["feature_moves"]

#: the broken twins' slips (tests only): "pick", the uniform choice among the ``K+`` columns
#: left out of the ratios (the ``1 / (K+ + 1)`` of the birth's and the split's); "proposal",
#: the split's proposal density ``q`` left out of its ratio
_SLIPS = ("", "pick", "proposal")


def _log_marginal(G, B, sigma_x2, ratio, D):
    """``log p(X | Z)`` from ``G = Z'Z`` and ``B = Z'X`` up to a constant that does not depend
    on ``Z`` (the buffer's empty slots, zero rows of ``G`` and ``B``, contribute the terms
    that make it so)."""
    C = G.shape[0]
    chol = jnp.linalg.cholesky(G + ratio * jnp.eye(C, dtype=G.dtype))
    mean = cho_solve((chol, True), B)
    logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol)))
    return -0.5 * D * logdet + 0.5 * jnp.sum(B * mean) / sigma_x2


def _log_f(m, N):
    """``log((N - m)! (m - 1)! / N!)``: one column's factor of the IBP probability."""
    return gammaln(N - m + 1) + gammaln(m) - gammaln(N + 1)


def _log_beta_bernoulli(m, n):
    """``log(m! (n - m)! / (n + 1)!)``: one pattern of ``m`` ones among ``n`` under
    ``u ~ Uniform(0, 1)``, ``Bernoulli(u)`` each."""
    return gammaln(m + 1) + gammaln(n - m + 1) - gammaln(n + 2)


def _set(G, B, Z, X, slot, column):
    """``G`` and ``B`` with slot ``slot`` holding ``column`` (its row and column recomputed)."""
    row = (Z.T @ column).at[slot].set(jnp.sum(column))
    return G.at[slot, :].set(row).at[:, slot].set(row), B.at[slot].set(column @ X)


def _one_move(key, carry, X, alpha, sigma_x2, ratio, slip):
    Z, G, B, log_ml = carry
    N, C = Z.shape
    D = X.shape[1]
    key_kind, key_u, key_c, key_k, key_l, key_acc = jax.random.split(key, 6)
    kind = jax.random.randint(key_kind, (), 0, 4)  # 0 birth, 1 death, 2 split, 3 merge
    m = Z.sum(0)
    active = m > 0.5
    K = jnp.sum(active).astype(Z.dtype)
    free = ~active
    b = jnp.argmax(free)  # the lowest free slot
    gumbel_k = jnp.where(active, jax.random.gumbel(key_k, (C,), Z.dtype), -jnp.inf)
    k = jnp.argmax(gumbel_k)  # a uniformly picked column, and a second one for a merge
    others = active & (jnp.arange(C) != k)
    l = jnp.argmax(jnp.where(others, jax.random.gumbel(key_l, (C,), Z.dtype), -jnp.inf))
    u = jax.random.uniform(key_u, (), Z.dtype)
    draws = jax.random.uniform(key_c, (N,), Z.dtype) < u

    zero = jnp.zeros(N, Z.dtype)
    birth_col = draws.astype(Z.dtype)
    moved = Z[:, k] * draws  # the split's new column, the rest stays in k
    union = Z[:, k] + Z[:, l]
    # the new contents of one or two slots per kind: birth (b), death (k), split (k and b),
    # merge (k and l); a birth or death writes its one slot twice
    first_slot = jnp.where(kind == 0, b, k)
    kinds = [kind == 0, kind == 1, kind == 2]
    first_col = jnp.select(kinds, [birth_col, zero, Z[:, k] - moved], union)
    second_slot = jnp.select([kind == 2, kind == 3], [b, l], first_slot)
    second_col = jnp.select([kind == 2, kind == 3], [moved, zero], first_col)
    Z_new = Z.at[:, first_slot].set(first_col)
    G_new, B_new = _set(G, B, Z_new, X, first_slot, first_col)
    Z_new = Z_new.at[:, second_slot].set(second_col)
    G_new, B_new = _set(G_new, B_new, Z_new, X, second_slot, second_col)
    log_ml_new = _log_marginal(G_new, B_new, sigma_x2, ratio, D)

    # log r of the birth or split that goes from the smaller state to the larger
    grow = (kind == 0) | (kind == 2)
    K_small = jnp.where(grow, K, K - 1)
    pick = 0.0 if slip == "pick" else jnp.log(K_small + 1)
    m_b = jnp.where(kind == 0, jnp.sum(birth_col), jnp.where(kind == 1, m[k], jnp.sum(moved)))
    m_b = jnp.where(kind == 3, m[l], m_b)
    m_big = jnp.where(kind == 2, m[k], m[k] + m[l])  # the column a split divides
    m_a = m_big - m_b
    safe = jnp.maximum
    log_birth = jnp.log(alpha) + jnp.log(N + 1.0) - jnp.log(safe(m_b, 1.0))
    log_split = (
        jnp.log(alpha)
        + _log_f(safe(m_a, 1.0), N)
        + _log_f(safe(m_b, 1.0), N)
        - _log_f(safe(m_big, 1.0), N)
        - (0.0 if slip == "proposal" else _log_beta_bernoulli(m_b, m_big))
    )
    log_r = jnp.where(kind <= 1, log_birth, log_split) - pick
    log_r = jnp.where(grow, log_r, -log_r) + log_ml_new - log_ml
    room = jnp.any(free)
    disjoint = jnp.sum(Z[:, k] * Z[:, l]) < 0.5
    valid = jnp.select(
        [kind == 0, kind == 1, kind == 2],
        [(m_b > 0) & room, K > 0, (K > 0) & (m_b > 0) & (m_a > 0) & room],
        (K > 1) & disjoint,
    )
    accept = valid & (jnp.log(jax.random.uniform(key_acc, (), Z.dtype)) < log_r)
    no_room = ~room & (((kind == 0) & (m_b > 0)) | ((kind == 2) & (m_b > 0) & (m_a > 0)))
    out = (
        jnp.where(accept, Z_new, Z),
        jnp.where(accept, G_new, G),
        jnp.where(accept, B_new, B),
        jnp.where(accept, log_ml_new, log_ml),
    )
    return out, (accept, no_room)


def feature_moves(key, state: IBPLGState, num_moves: int, *, _slip: str = ""):
    """``num_moves`` feature moves (birth, death, split or merge, :mod:`this module
    <bnpjax.models.ibp_lg.feature_moves>`) in sequence, each accepted by Metropolis-Hastings
    (``A`` integrated out; ``state.A`` is not read).

    Parameters
    ----------
    key : jax.Array
    state : IBPLGState
    num_moves : int
        Number of proposals.

    Returns
    -------
    Z : jax.Array
        The new feature matrix.
    num_accepted : jax.Array
        Accepted proposals.
    no_room : jax.Array
        Whether a birth or split was refused because the buffer had no free slot.
    """
    Z, X = state.Z, state.X
    sigma_x2 = state.sigma_x**2
    ratio = sigma_x2 / state.sigma_a**2
    G, B = Z.T @ Z, Z.T @ X
    log_ml = _log_marginal(G, B, sigma_x2, ratio, X.shape[1])

    def body(carry, key):
        return _one_move(key, carry, X, state.alpha, sigma_x2, ratio, _slip)

    keys = jax.random.split(key, num_moves)
    (Z, _, _, _), (accepted, no_room) = jax.lax.scan(body, (Z, G, B, log_ml), keys)
    return Z, jnp.sum(accepted), jnp.any(no_room)
