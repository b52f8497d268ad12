r"""Merges and splits of features with their parameters, for :class:`bnpjax.infer.IBPGibbs`.

The flips, births and deaths of :mod:`bnpjax.infer.ibp_moves` change one entry of ``Z`` (and
one row of parameters) at a time. Two features that the chain holds where the posterior has
one are then joined only through a path of unlikely states: two copies of one feature held by
disjoint rows (a row must hold both, or neither, on its way from one to the other), or two
features held by the same rows whose parameters only their sum pins down (``Z @ A`` sees
``A_k + A_j``; the difference drifts with the prior, e.g. to large cancelling values under a
large ``sigma_a``, and ``sigma_a`` follows). A merge proposes the whole change at once, and a
split is its reverse. A third kind of state holds the right features in another basis (``T +
L/2`` and ``L/2 - T`` for two features ``T`` and ``L``, each row holding the combination that
fits it least badly): :func:`reallocation_pass` shears one feature's parameters by a multiple
of the other's and reallocates the rows that hold either (below).

The moves, on the block's target (the buffer law of ``Z`` of :mod:`bnpjax.infer.ibp_moves`
times the model's density of everything else, the feature parameters ``U`` one row per column
in unconstrained coordinates with their Jacobian). A *kind* ``t`` is drawn first, with
probability 1/2 each, independently of the state:

* ``t = 0`` (**plain**): parameters unchanged;
* ``t = 1`` (**shear**): ``U_k + U_j`` is what the merged feature keeps, so that a row that
  held both features keeps its ``Z @ A`` (for a model in which ``A`` enters through ``Z @ A``
  with the identity transform; for any other model the move stays exact, only less useful).

Then a merge or a split, with probability 1/2 each:

* **merge** ``(k, j)``, an ordered pair of distinct active columns picked uniformly: the
  holders of ``j`` join ``k`` (``Z_k := Z_k \vee Z_j``, ``Z_j := 0``), ``U_k := U_k + t U_j``;
  ``U_j`` stays, now the parameters of an empty column.
* **split** ``(k, j)``, an active column ``k`` and an empty column ``j`` picked uniformly:
  ``U_k := U_k - t U_j``, and every holder ``n`` of ``k`` goes to ``k`` only, ``j`` only or both,
  drawn independently from ``p_n(o) \propto \exp \ell_n(o)``, where ``\ell_n(o)`` is row ``n``'s
  log-likelihood (the model's terms that depend on row ``n`` of ``Z``) with every holder of
  ``k`` placed in ``o`` and the parameters after the split (three model evaluations, because
  the rows of ``Z`` are conditionally independent: this move runs only when the block found
  that structure). A split that leaves ``k`` or ``j`` empty is rejected.

Why the posterior is left invariant. For a fixed kind, a merge of ``(k, j)`` and the split of
``k`` onto ``j`` that reproduces the holders of each column are each other's reverse: the
merge's ``Z_k \vee Z_j`` is the split's ``Z_k`` and each of its holders is read off the two
columns, and ``U_k - t U_j + t U_j = U_k``. The map on ``U`` is a shear, Jacobian 1. The
allocation probabilities ``p_n`` are computed at the state before the split, i.e. after the
merge, from quantities both directions know (``Z``, ``U``, ``k``, ``j``, ``t``), so the merge
evaluates the probability that its reverse split draws the holders it came from. With ``a``
active and ``E`` empty columns before the move, the proposal probabilities are
``1/4 * 1 / (a (a - 1))`` for a merge and ``1/4 * 1 / (a E) * prod_n p_n(o_n)`` for a split,
so the Metropolis-Hastings log ratio of a merge is

.. math::

    \log r = \Delta\log\pi(Z) + \Delta\,\mathrm{target} + \log\frac{a}{E + 1}
        + \sum_{n} \log p_n(o_n),

and that of a split ``\Delta\log\pi + \Delta\mathrm{target} + \log(E / (a + 1)) - \sum_n \log
p_n(o_n)``, where ``\log\pi`` is the buffer law itself (``alpha^{K_+} (K - K_+)! / K!`` times
``(N - m_k)! (m_k - 1)! / N!`` per active column), evaluated at both states rather than
written as a ratio. A move that cannot be made (a merge with ``a < 2``, a split with no empty
column, which also flags that the step needed more room, as a birth does) is the identity.
The kernel is thus a mixture over the kind and the direction, each part reversible, so the
target is invariant in any order with the block's other moves; parameters are never drawn
here, which keeps the move free of any approximation.

References
----------
Jain, S. & Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. *J. Comput. Graph. Stat.* 13, 158-182.
Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process mixture
models. Technical report 1086, University of Wisconsin.
Meeds, E., Ghahramani, Z., Neal, R. M. & Roweis, S. T. (2007). Modeling dyadic data with
binary latent factors. *NIPS* 19.
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import gammaln

__all__ = [
    "SHEARS",
    "buffer_log_prior",
    "pair_moves",
    "reallocation_log_proposal_ratio",
    "reallocation_pass",
    "split_merge_log_proposal_ratio",
    "split_merge_pass",
]


def buffer_log_prior(Z, alpha):
    """``log pi(Z)`` of the IBP buffer law (module docstring of
    :mod:`bnpjax.infer.ibp_moves`), up to the constant ``-alpha H_N``."""
    num_rows, num_cols = Z.shape
    m = jnp.sum(Z, 0)
    active = m > 0
    k_plus = jnp.sum(active)
    per_column = (
        gammaln(num_rows - m + 1.0) + gammaln(jnp.maximum(m, 1.0)) - gammaln(num_rows + 1.0)
    )
    return (
        k_plus * jnp.log(alpha)
        + gammaln(num_cols - k_plus + 1.0)
        - gammaln(num_cols + 1.0)
        + jnp.sum(jnp.where(active, per_column, 0.0))
    )


def split_merge_log_proposal_ratio(merge, num_active, num_empty, log_q_alloc):
    """Log of the reverse move's proposal probability over the forward one's (module
    docstring), for a merge (``merge`` true) or a split from a state with ``num_active``
    active and ``num_empty`` empty columns; ``log_q_alloc`` is the log probability of the
    split's allocation of the holders. Kept as a function so that a test can break it."""
    a, e = num_active.astype(float), num_empty.astype(float)
    return jnp.where(
        merge,
        jnp.log(a) - jnp.log(e + 1.0) + log_q_alloc,
        jnp.log(e) - jnp.log(a + 1.0) - log_q_alloc,
    )


def _options(Z, k, j, holders):
    """``(3, N, K)``: ``Z`` with every holder in ``k`` only, in ``j`` only, in both."""
    in_k = jnp.array([1.0, 0.0, 1.0])[:, None] * holders
    in_j = jnp.array([0.0, 1.0, 1.0])[:, None] * holders
    return jax.vmap(lambda a, b: Z.at[:, k].set(a).at[:, j].set(b))(in_k, in_j)


def _target_log_ratio(ll_new, ll, Z_new, Z, alpha):
    """The log ratio of the block's target: the model's terms and the IBP buffer law."""
    return ll_new - ll + buffer_log_prior(Z_new, alpha) - buffer_log_prior(Z, alpha)


def _pick(key, mask):
    """A uniformly random index where ``mask`` is true (0 when none is)."""
    return jnp.argmax(jnp.where(mask, jax.random.uniform(key, mask.shape), -1.0))


def _keep(accept, proposed, current):
    """The proposed ``(Z, U, ll)`` where the move is accepted, else the current ones."""
    return tuple(jnp.where(accept, new, old) for new, old in zip(proposed, current, strict=True))


def _scan_proposals(propose, key, Z, U, target, num_proposals):
    """``num_proposals`` proposals in turn from ``(Z, U)``; returns ``(Z, U, wanted_more_room)``."""
    keys = jax.random.split(key, num_proposals)
    (Z, U, _, short), _ = lax.scan(propose, (Z, U, target(Z, U), jnp.zeros((), bool)), keys)
    return Z, U, short


def split_merge_pass(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_proposals: int,
    log_proposal_ratio=split_merge_log_proposal_ratio,
):
    """``num_proposals`` merge or split proposals in turn (module docstring).

    ``target(Z, U)``: the model's log density but the IBP prior of ``Z`` (``U`` unconstrained,
    Jacobian included); ``row_target(Z, U)``: its ``(N,)`` terms that depend on each row of
    ``Z``. Four model evaluations per proposal. Returns ``(Z, U, wanted_more_room)``."""
    num_rows, num_cols = Z.shape
    zero = jnp.zeros((), Z.dtype)

    def propose(carry, key):
        Z, U, ll, short = carry
        k_dir, k_kind, k_k, k_j, k_opt, k_acc = jax.random.split(key, 6)
        m = jnp.sum(Z, 0)
        active, empty = m > 0, m == 0
        a, e = jnp.sum(active), jnp.sum(empty)
        merge = jax.random.uniform(k_dir) < 0.5
        shear = (jax.random.uniform(k_kind) < 0.5).astype(U.dtype)
        k = _pick(k_k, active)
        j = _pick(k_j, jnp.where(merge, active & (jnp.arange(num_cols) != k), empty))
        possible = jnp.where(merge, a >= 2, (a >= 1) & (e >= 1))
        short = short | (~merge & (a >= 1) & (e == 0))

        # the merged side of the pair: the merge's proposal, or the split's current state
        z_k, z_j = Z[:, k], Z[:, j]
        Z_merged = Z.at[:, k].set(jnp.maximum(z_k, z_j)).at[:, j].set(zero)
        U_merged = U.at[k].add(shear * U[j])
        Z_src = jnp.where(merge, Z_merged, Z)
        U_src = jnp.where(merge, U_merged, U)
        holders = Z_src[:, k]
        U_split = U_src.at[k].add(-shear * U_src[j])
        ll_opt = jax.vmap(lambda Zo: row_target(Zo, U_split))(_options(Z_src, k, j, holders))
        log_p = jax.nn.log_softmax(ll_opt.T, axis=1)  # (N, 3)
        # the split's draw, or the merge's holders read off the two columns
        drawn = jax.random.categorical(k_opt, log_p)
        read = jnp.where(z_j > 0, jnp.where(z_k > 0, 2, 1), 0)
        option = jnp.where(merge, read, drawn)
        log_q = jnp.sum(holders * jnp.take_along_axis(log_p, option[:, None], 1)[:, 0])
        Z_split = _options(Z_src, k, j, holders)[option, jnp.arange(num_rows)]
        Z_split = jnp.where(holders[:, None] > 0, Z_split, Z_src)
        both_held = jnp.any(Z_split[:, k] > 0) & jnp.any(Z_split[:, j] > 0)

        Z_new = jnp.where(merge, Z_merged, Z_split)
        U_new = jnp.where(merge, U_merged, U_split)
        ll_new = target(Z_new, U_new)
        log_ratio = _target_log_ratio(ll_new, ll, Z_new, Z, alpha) + log_proposal_ratio(
            merge, a, e, log_q
        )
        valid = possible & (merge | both_held)
        accept = valid & (jnp.log(jax.random.uniform(k_acc)) < log_ratio)
        return (*_keep(accept, (Z_new, U_new, ll_new), (Z, U, ll)), short), accept

    return _scan_proposals(propose, key, Z, U, target, num_proposals)


SHEARS = (-1.0, -0.5, 0.0, 0.5, 1.0)


def reallocation_log_proposal_ratio(log_q_reverse, log_q_forward):
    """``log q_reverse - log q_forward`` of :func:`reallocation_pass`'s allocations; kept as a
    function so that a test can break it."""
    return log_q_reverse - log_q_forward


def _allocation_log_p(row_target, Z, U, k, j, held):
    """``(N, 3)``: each row's log probability of ``k`` only, ``j`` only, both, in proportion to
    its likelihood with every row of ``held`` so placed (rows conditionally independent)."""
    ll = jax.vmap(lambda Zo: row_target(Zo, U))(_options(Z, k, j, held))
    return jax.nn.log_softmax(ll.T, axis=1)


def reallocation_pass(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_proposals: int,
    log_proposal_ratio=reallocation_log_proposal_ratio,
):
    r"""``num_proposals`` joint moves of two active features in turn: a shear of their
    parameters and a new allocation of the rows that hold either.

    Pick an ordered pair ``(k, j)`` of distinct active columns uniformly and ``c`` uniformly
    from :data:`SHEARS` (symmetric: ``-c`` as likely as ``c``). Propose ``U_k' = U_k + c U_j``
    (a shear, Jacobian 1) and, for every row ``n`` of ``H`` (the rows holding ``k`` or ``j``),
    ``k`` only, ``j`` only or both, drawn independently from ``p'_n(o) \propto \exp
    \ell_n(o)`` at the new parameters (three model evaluations). ``H`` and the number of
    active columns are unchanged (a proposal that empties ``k`` or ``j`` is rejected), so the
    reverse move is the same pair with ``-c``, whose allocation probabilities ``p_n`` are
    those at the current parameters; the Metropolis-Hastings log ratio is

    .. math::

        \Delta\log\pi(Z) + \Delta\,\mathrm{target}
            + \sum_{n \in H} \left(\log p_n(o_n) - \log p'_n(o'_n)\right).

    ``c = 0`` moves rows between two features with their parameters fixed (two copies of one
    feature held by disjoint rows); ``c = \pm 1/2, \pm 1`` turn a pair that spans the right
    features in another basis (``T + L/2`` and ``L/2 - T`` for features ``T`` and ``L``) into
    it, a step at a time. Seven model evaluations per proposal. Returns ``(Z, U)``."""
    num_rows, num_cols = Z.shape
    shears = jnp.asarray(SHEARS, U.dtype)

    def propose(carry, key):
        Z, U, ll = carry
        k_k, k_j, k_c, k_opt, k_acc = jax.random.split(key, 5)
        active = jnp.sum(Z, 0) > 0
        k = _pick(k_k, active)
        j = _pick(k_j, active & (jnp.arange(num_cols) != k))
        c = shears[jax.random.randint(k_c, (), 0, len(SHEARS))]
        z_k, z_j = Z[:, k], Z[:, j]
        held = jnp.maximum(z_k, z_j)
        U_new = U.at[k].add(c * U[j])
        log_p_new = _allocation_log_p(row_target, Z, U_new, k, j, held)
        log_p_old = _allocation_log_p(row_target, Z, U, k, j, held)
        option = jax.random.categorical(k_opt, log_p_new)
        old = jnp.where(z_j > 0, jnp.where(z_k > 0, 2, 1), 0)
        rows = jnp.arange(num_rows)
        Z_new = jnp.where(held[:, None] > 0, _options(Z, k, j, held)[option, rows], Z)
        log_q_forward = jnp.sum(held * log_p_new[rows, option])
        log_q_reverse = jnp.sum(held * log_p_old[rows, old])
        ll_new = target(Z_new, U_new)
        log_ratio = _target_log_ratio(ll_new, ll, Z_new, Z, alpha) + log_proposal_ratio(
            log_q_reverse, log_q_forward
        )
        valid = (jnp.sum(active) >= 2) & jnp.any(Z_new[:, k] > 0) & jnp.any(Z_new[:, j] > 0)
        accept = valid & (jnp.log(jax.random.uniform(k_acc)) < log_ratio)
        return (
            jnp.where(accept, Z_new, Z),
            jnp.where(accept, U_new, U),
            jnp.where(accept, ll_new, ll),
        ), accept

    keys = jax.random.split(key, num_proposals)
    (Z, U, _), _ = lax.scan(propose, (Z, U, target(Z, U)), keys)
    return Z, U


def pair_moves(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_proposals: int,
    log_ratios=(split_merge_log_proposal_ratio, reallocation_log_proposal_ratio),
):
    """:func:`split_merge_pass`, then :func:`reallocation_pass`, each with ``num_proposals``
    proposals (each exact on its own, so in sequence too): what
    :class:`bnpjax.infer.IBPGibbs` runs after births and deaths (then the anchored moves of
    :mod:`bnpjax.infer.ibp_anchored`). ``log_ratios``: the two passes' proposal-ratio
    functions. Returns ``(Z, U, wanted_more_room)``."""
    if not num_proposals:
        # a scan of length zero still evaluates the model once per pass and traces its body
        return Z, U, jnp.zeros((), bool)
    key_merge, key_pair = jax.random.split(key)
    Z, U, short = split_merge_pass(
        key_merge,
        Z,
        U,
        alpha,
        target,
        row_target,
        num_proposals=num_proposals,
        log_proposal_ratio=log_ratios[0],
    )
    Z, U = reallocation_pass(
        key_pair,
        Z,
        U,
        alpha,
        target,
        row_target,
        num_proposals=num_proposals,
        log_proposal_ratio=log_ratios[1],
    )
    return Z, U, short
