r"""The moves of :class:`bnpjax.infer.IBPGibbs` on one feature matrix, as pure functions.

The target is the law of a binary ``N x K`` buffer ``Z`` (``K`` the capacity) whose
left-ordered-form class has the IBP's law (Griffiths & Ghahramani 2011, eq. 14), spread
uniformly over the ``K! / ((K - K_+)! \prod_h K_h!)`` arrangements of the class in the
buffer. The ``K_h!`` cancel:

.. math::

    \pi(Z) \propto \alpha^{K_+} \frac{(K - K_+)!}{K!} e^{-\alpha H_N}
        \prod_{k:\, m_k > 0} \frac{(N - m_k)!\,(m_k - 1)!}{N!},

times the likelihood ``L(Z)`` (every other factor of the model that depends on ``Z``, with the
other sites fixed). Each move below leaves :math:`\pi(Z) L(Z)` invariant:

* :func:`existing_column_pass` / :func:`existing_joint_pass`: Gibbs flips of ``z_nk`` with
  ``m_{-n,k} > 0``, prior odds ``m_{-n,k} / (N - m_{-n,k})`` (the ratio of the product above
  when ``m_k`` moves by one with ``K_+`` fixed). Whether ``z_nk`` is visited depends on
  ``z_{-n,k}`` only, so each visit is a Gibbs update of ``z_nk`` given the rest.
* :func:`singleton_pass`: for each row, Meeds et al. (2007)'s move of the row's singletons.
  Let ``F`` be the columns empty outside row ``n`` (``f = |F|``; the move keeps ``F``), ``s``
  the row's ones in ``F``. Propose ``s' ~ Poisson(alpha / N)`` truncated to ``{0..f}`` and a
  uniform ``s'``-subset of ``F`` for the row's ones there. With ``lambda = alpha / N`` the
  target ratio is ``lambda^(s'-s) (f - s')! / (f - s)!`` (the ``(m-1)!(N-m)!/N!`` of a
  singleton is ``1 / N``), the proposal ratio ``q(s) C(f, s)^-1 / (q(s') C(f, s')^-1)`` is
  ``lambda^(s-s') (f - s)! / (f - s')!``: their product is 1, so the Metropolis-Hastings
  ratio is the likelihood ratio ``L(Z') / L(Z)`` alone. The parameters of a new feature are
  those the model holds in that (empty) column of its per-feature sites: under the target
  they are draws from the prior given everything else, and the move is a Metropolis-Hastings
  update of ``Z`` given them (detailed balance for :math:`\pi(Z) L(Z)` with all else fixed).

References
----------
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224.
Meeds, E., Ghahramani, Z., Neal, R. & Roweis, S. (2007). Modeling dyadic data with binary
latent factors. NIPS 19.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import gammaln

__all__ = [
    "existing_column_pass",
    "existing_joint_pass",
    "existing_log_odds",
    "singleton_log_correction",
    "singleton_pass",
]


def existing_log_odds(m_minus, num_rows):
    """Prior log odds of ``z_nk = 1`` for a feature other rows hold ``m_minus > 0`` times."""
    return jnp.log(m_minus) - jnp.log(num_rows - m_minus)


def singleton_log_correction(s, s_new, free, lam):
    """Log of the singleton move's target ratio times its proposal ratio (0: module
    docstring); kept as a function so that a test can break it."""
    del s, s_new, free, lam
    return 0.0


def _flip_column(key, column, delta, log_odds):
    """Gibbs flips down one column, given each row's likelihood log ratio ``delta`` (valid
    for every row at once because rows are conditionally independent)."""
    num_rows = column.shape[0]
    log_u = jnp.log(jax.random.uniform(key, (num_rows,)))

    def row(m, inputs):
        z, d, lu = inputs
        m_minus = m - z
        odds = d + log_odds(jnp.maximum(m_minus, 1.0), num_rows)
        new = jnp.where(m_minus > 0, (lu < jax.nn.log_sigmoid(odds)).astype(z.dtype), z)
        return m_minus + new, new

    _, new_column = lax.scan(row, jnp.sum(column), (column, delta, log_u))
    return new_column


def existing_column_pass(
    key, Z, row_log_lik: Callable[[jax.Array], jax.Array], log_odds=existing_log_odds
):
    """Flip every ``z_nk`` with ``m_{-n,k} > 0``, column by column; ``row_log_lik(Z)`` returns
    the ``(N,)`` per-row log-likelihood. Two model evaluations per non-empty column."""
    num_cols = Z.shape[1]

    def column(k, Z):
        def update(Z):
            both = jnp.stack([Z.at[:, k].set(0.0), Z.at[:, k].set(1.0)])
            ll = jax.vmap(row_log_lik)(both)
            new = _flip_column(jax.random.fold_in(key, k), Z[:, k], ll[1] - ll[0], log_odds)
            return Z.at[:, k].set(new)

        return lax.cond(jnp.any(Z[:, k] > 0), update, lambda Z: Z, Z)

    return lax.fori_loop(0, num_cols, column, Z)


def existing_joint_pass(
    key, Z, log_lik: Callable[[jax.Array], jax.Array], ll, log_odds=existing_log_odds
):
    """The same flips one entry at a time (column-major), for likelihoods that couple rows:
    one model evaluation per visited entry. ``ll`` is ``log_lik(Z)``; returns ``(Z, ll)``."""
    num_rows, num_cols = Z.shape
    log_u = jnp.log(jax.random.uniform(key, (num_rows * num_cols,)))

    def entry(i, carry):
        Z, ll = carry
        k, n = i // num_rows, i % num_rows
        z = Z[n, k]
        m_minus = jnp.sum(Z[:, k]) - z

        def update(carry):
            Z, ll = carry
            flipped = Z.at[n, k].set(1.0 - z)
            ll_flip = log_lik(flipped)
            ll1, ll0 = jnp.where(z > 0, ll, ll_flip), jnp.where(z > 0, ll_flip, ll)
            new = (log_u[i] < jax.nn.log_sigmoid(ll1 - ll0 + log_odds(m_minus, num_rows))).astype(
                Z.dtype
            )
            return Z.at[n, k].set(new), jnp.where(new == z, ll, ll_flip)

        return lax.cond(m_minus > 0, update, lambda c: c, (Z, ll))

    return lax.fori_loop(0, num_rows * num_cols, entry, (Z, ll))


def singleton_pass(
    key,
    Z,
    alpha,
    log_lik: Callable[[jax.Array], jax.Array],
    ll,
    log_correction=singleton_log_correction,
):
    """Meeds et al.'s singleton move for every row in turn (module docstring): one model
    evaluation per row. Returns ``(Z, wanted_more_room)``, the flag set when an untruncated
    ``Poisson(alpha / N)`` draw exceeded the free columns of some row (the capacity then
    truncates the number of new features; the move stays exact for the truncated prior)."""
    num_rows, num_cols = Z.shape
    lam = alpha / num_rows
    sizes = jnp.arange(num_cols + 1)
    log_q = sizes * jnp.log(lam) - gammaln(sizes + 1.0)

    def row(carry, n):
        Z, ll, short = carry
        k_raw, k_size, k_pick, k_acc = jax.random.split(jax.random.fold_in(key, n), 4)
        zn = Z[n]
        free = (jnp.sum(Z, 0) - zn) == 0
        f = jnp.sum(free)
        s = jnp.sum(zn * free)
        short = short | (jax.random.poisson(k_raw, lam) > f)
        s_new = jax.random.categorical(k_size, jnp.where(sizes <= f, log_q, -jnp.inf))
        keys = jnp.where(free, jax.random.uniform(k_pick, (num_cols,)), 2.0)
        rank = jnp.argsort(jnp.argsort(keys))
        proposal = Z.at[n].set(jnp.where(free, (rank < s_new).astype(Z.dtype), zn))
        ll_new = log_lik(proposal)
        log_ratio = ll_new - ll + log_correction(s, s_new, f, lam)
        accept = jnp.log(jax.random.uniform(k_acc)) < log_ratio
        return (
            jnp.where(accept, proposal, Z),
            jnp.where(accept, ll_new, ll),
            short,
        ), None

    (Z, _, short), _ = lax.scan(row, (Z, ll, jnp.zeros((), bool)), jnp.arange(num_rows))
    return Z, short
