r"""Moves of whole features whose new parameters are drawn where the data put them, for
:class:`bnpjax.infer.IBPGibbs`: an anchored split-merge and an anchored birth-death.

The splits of :mod:`bnpjax.infer.ibp_split_merge` hand a new feature the parameters an empty
column holds (a prior draw), and the births of :mod:`bnpjax.infer.ibp_moves` and
:mod:`bnpjax.infer.ibp_parallel` give a new feature to one row; in many dimensions neither
often happens, so a chain that holds two features as one, or lacks one, stays there. The
moves here follow Jain & Neal (2007)'s split-merge for non-conjugate mixtures: a launch state
built deterministically from anchor rows and what both states of a move share, the rows'
allocations drawn from their likelihood at the launch, and the new parameters drawn from
Laplace approximations of their conditionals (:func:`bnpjax.infer.ibp_moves.laplace`), every
proposal density in the Metropolis-Hastings ratio. Each function says why it is exact.

References
----------
Jain, S. & Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. *J. Comput. Graph. Stat.* 13, 158-182.
Jain, S. & Neal, R. M. (2007). Splitting and merging components of a nonconjugate Dirichlet
process mixture model. *Bayesian Analysis* 2, 445-472.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp

from bnpjax.infer.ibp_moves import gaussian_log_density, gaussian_sample, laplace
from bnpjax.infer.ibp_split_merge import (
    _allocation_log_p,
    _keep,
    _options,
    _pick,
    _scan_proposals,
    _target_log_ratio,
)

__all__ = [
    "anchored_birth_death_log_proposal_ratio",
    "anchored_birth_death_pass",
    "anchored_moves",
    "anchored_split_merge_log_proposal_ratio",
    "anchored_split_merge_pass",
]


def _conditional(target, Z, U, col, *, newton_steps, diagonal):
    """:func:`~bnpjax.infer.ibp_moves.laplace` of the conditional of ``U[col]`` given the rest."""
    return laplace(
        lambda v: target(Z, U.at[col].set(v)), U.shape[1], newton_steps, diagonal=diagonal
    )


def _check_launch_steps(launch_steps):
    if not (isinstance(launch_steps, int) and launch_steps >= 1):
        # with no round, the launch would keep the current state's parameters of the columns
        # it moves, which the two states of the pair do not share
        raise ValueError(f"launch_steps must be a positive integer, got {launch_steps!r}")


def anchored_split_merge_log_proposal_ratio(
    num_active, num_empty, num_holders, num_k_only, num_j_only
):
    r"""``log P(merge picks) - log P(split picks)`` of :func:`anchored_split_merge_pass`, for
    the pair ``(M, S)`` of a merged state with ``num_active`` active and ``num_empty`` empty
    columns and ``num_holders`` rows holding the merged feature, and a split state whose two
    features are held by ``num_k_only`` and ``num_j_only`` rows alone: the split picks ``k``
    (``1/a``), ``j`` (``1/E``) and an ordered pair of anchors (``1 / (m (m - 1))``); the merge
    picks the ordered pair ``(k, j)`` (``1 / ((a + 1) a)``) and one anchor among the rows of each
    alone (``1 / (m_k m_j)``). Kept as a function so that a test can break it."""
    a, e, m = (x.astype(float) for x in (num_active, num_empty, num_holders))
    return (
        jnp.log(e)
        + jnp.log(m)
        + jnp.log(m - 1.0)
        - jnp.log(a + 1.0)
        - jnp.log(num_k_only.astype(float))
        - jnp.log(num_j_only.astype(float))
    )


def anchored_split_merge_pass(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_proposals: int,
    newton_steps: int,
    diagonal: bool = False,
    launch_steps: int = 2,
    log_proposal_ratio=anchored_split_merge_log_proposal_ratio,
):
    r"""``num_proposals`` merge or split proposals in turn, the split drawing both features'
    parameters from Laplace approximations of their conditionals (Jain & Neal 2004, 2007).

    :func:`split_merge_pass` keeps the parameters: its split hands the new feature the empty
    column's value, a draw from the prior, which in many dimensions almost never fits any
    rows, so one feature held where the posterior has two (two bars merged, common under a
    heavy-tailed likelihood that calls half a bar noise) stays merged. Here, for a merged
    state ``M`` (column ``k`` held by the rows ``H``, ``|H| = m``, column ``j`` empty) and a
    split state ``S`` (``k`` and ``j`` active, ``H`` the rows holding either):

    * **launch** (a deterministic function of what ``M`` and ``S`` share: ``H``, the ordered
      anchors ``i != l`` in ``H``, ``Z`` and ``U`` outside columns ``k, j``): ``i`` in ``k`` only,
      ``l`` in ``j`` only, then ``launch_steps`` rounds of ``U_k, U_j`` := the means of
      :func:`~bnpjax.infer.ibp_moves.laplace` of their conditionals given the allocation, and
      each other row of ``H`` := its likeliest of ``k`` only / ``j`` only / both, a two-means
      clustering of the rows' residuals started from the anchors;
    * **split** (``M -> S``; ``k`` active, ``j`` empty and the anchors picked uniformly): each
      row of ``H`` but the anchors draws ``k`` only, ``j`` only or both from ``p_n(o) \propto
      \exp \ell_n(o)`` at the launch's parameters (rows conditionally independent), then
      ``U_k ~ q_k``, the Laplace approximation of its conditional given the new ``Z`` and the
      launch's ``U_j``, and ``U_j ~ q_j`` given the new ``Z`` and ``U_k``; the values ``M`` held
      in ``U_k`` and ``U_j`` (the latter an empty column's parameters) are dropped;
    * **merge** (``S -> M``; an ordered pair of active columns and one anchor among the rows
      that hold each alone picked uniformly): ``Z_k := H``, ``Z_j := 0``, ``U_k ~ q_m``, the
      Laplace approximation of its conditional given the merged ``Z``, and ``U_j ~ q_e``, that
      of an empty column's parameters (its prior, through the model's own density).

    Why the posterior is left invariant: the pair is a reversible jump between ``M`` and ``S``
    on a space of fixed dimension (every column keeps a row of parameters), the parameters
    dropped on one side drawn afresh on the other, and the launch, being the same function of
    the shared part in both directions, is a fixed choice of proposal, not a random one (Jain
    & Neal's argument; here it has no random part at all). With ``\log r = \Delta\log\pi(Z) +
    \Delta\,\mathrm{target} + \log P(\text{merge picks}) - \log P(\text{split picks}) + \log
    q_m(U^M_k) + \log q_e(U^M_j) - \sum_{n \in H \setminus \{i, l\}} \log p_n(o_n) - \log
    q_k(U^S_k) - \log q_j(U^S_j)`` (every ``\Delta`` from ``M`` to ``S``), a split is
    accepted with probability ``\min(1, r)`` and a merge with ``\min(1, 1 / r)``. A move that
    cannot be made (a split with ``m < 2`` or no empty column, which flags that the step
    needed more room; a merge of features without rows that hold one alone; a split that
    leaves a column empty cannot arise, the anchors hold one each) is the identity.

    ``target(Z, U)``: the model's log density but the IBP prior of ``Z`` (``U`` unconstrained,
    one row per column, Jacobian included); ``row_target(Z, U)``: its ``(N,)`` terms per row of
    ``Z``. About ``(2 launch_steps + 4)`` Laplace approximations and ``3 launch_steps + 5``
    model evaluations per proposal. Returns ``(Z, U, wanted_more_room)``.

    References
    ----------
    Jain, S. & Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
    Dirichlet process mixture model. *J. Comput. Graph. Stat.* 13, 158-182.
    Jain, S. & Neal, R. M. (2007). Splitting and merging components of a nonconjugate
    Dirichlet process mixture model. *Bayesian Analysis* 2, 445-472.
    """
    _check_launch_steps(launch_steps)
    num_rows, num_cols = Z.shape
    rows = jnp.arange(num_rows)
    conditional = partial(_conditional, target, newton_steps=newton_steps, diagonal=diagonal)

    def place(Zc, k, j, held, option):
        return jnp.where(held[:, None] > 0, _options(Zc, k, j, held)[option, rows], Zc)

    def launch(Z_base, U_base, k, j, held, i, l):
        """The launch's parameters of ``k`` and ``j`` (module docstring above)."""
        anchored = jnp.where(rows == i, 0, jnp.where(rows == l, 1, -1))
        only_anchors = (anchored >= 0).astype(Z.dtype)
        Zc = place(Z_base, k, j, only_anchors, jnp.maximum(anchored, 0))
        Zc = (
            Zc.at[:, k]
            .multiply(only_anchors + (1.0 - held))
            .at[:, j]
            .multiply(only_anchors + (1.0 - held))
        )
        Uc = U_base
        for _ in range(launch_steps):
            Uc = Uc.at[k].set(conditional(Zc, Uc, k).mean)
            Uc = Uc.at[j].set(conditional(Zc, Uc, j).mean)
            best = jnp.argmax(_allocation_log_p(row_target, Z_base, Uc, k, j, held), 1)
            Zc = place(Z_base, k, j, held, jnp.where(anchored >= 0, anchored, best))
        return Uc

    def propose(carry, key):
        Z, U, ll, short = carry
        k_dir, k_k, k_j, k_i, k_l, k_opt, k_uk, k_uj, k_acc = jax.random.split(key, 9)
        m = jnp.sum(Z, 0)
        active, empty = m > 0, m == 0
        a, e = jnp.sum(active), jnp.sum(empty)
        merge = jax.random.uniform(k_dir) < 0.5
        k = _pick(k_k, active)
        j = _pick(k_j, jnp.where(merge, active & (jnp.arange(num_cols) != k), empty))
        z_k, z_j = Z[:, k], Z[:, j]
        k_only, j_only = z_k * (1 - z_j), z_j * (1 - z_k)
        held = jnp.maximum(z_k, z_j)  # H: the merge's holders, or k's for a split
        # anchors: for a split an ordered pair of distinct holders; for a merge one row of
        # each feature alone (which the reverse split would have picked)
        i = _pick(k_i, jnp.where(merge, k_only, held) > 0)
        l = _pick(k_l, (jnp.where(merge, j_only, held) > 0) & (rows != i))
        num_holders = jnp.sum(held)
        possible = jnp.where(
            merge,
            (a >= 2) & (jnp.sum(k_only) >= 1) & (jnp.sum(j_only) >= 1),
            (a >= 1) & (e >= 1) & (num_holders >= 2),
        )
        short = short | (~merge & (a >= 1) & (e == 0))

        # the merged side M, as the current state (split) or the proposal (merge)
        Z_merged = Z.at[:, k].set(held).at[:, j].set(0.0)
        q_merged = conditional(Z_merged, U, k)
        U_merged_k = jnp.where(merge, gaussian_sample(k_uk, q_merged), U[k])
        q_empty = conditional(Z_merged, U.at[k].set(U_merged_k), j)
        U_merged_j = jnp.where(merge, gaussian_sample(k_uj, q_empty), U[j])
        U_merged = U.at[k].set(U_merged_k).at[j].set(U_merged_j)
        log_q_merge = gaussian_log_density(q_merged, U_merged_k) + gaussian_log_density(
            q_empty, U_merged_j
        )

        # the split side S, as the proposal (split) or the current state (merge)
        U_launch = launch(Z_merged, U, k, j, held, i, l)
        log_p = _allocation_log_p(row_target, Z_merged, U_launch, k, j, held)
        drawn = jax.random.categorical(k_opt, log_p)
        read = jnp.where(z_j > 0, jnp.where(z_k > 0, 2, 1), 0)
        option = jnp.where(rows == i, 0, jnp.where(rows == l, 1, jnp.where(merge, read, drawn)))
        free = held * (rows != i) * (rows != l)
        log_alloc = jnp.sum(free * log_p[rows, option])
        Z_split = place(Z_merged, k, j, held, option)
        q_k = conditional(Z_split, U_launch, k)
        U_split_k = jnp.where(merge, U[k], gaussian_sample(k_uk, q_k))
        q_j = conditional(Z_split, U_launch.at[k].set(U_split_k), j)
        U_split_j = jnp.where(merge, U[j], gaussian_sample(k_uj, q_j))
        U_split = U.at[k].set(U_split_k).at[j].set(U_split_j)
        log_q_split = (
            log_alloc + gaussian_log_density(q_k, U_split_k) + gaussian_log_density(q_j, U_split_j)
        )

        ll_merged = jnp.where(merge, target(Z_merged, U_merged), ll)
        ll_split = jnp.where(merge, ll, target(Z_split, U_split))
        a_merged = jnp.where(merge, a - 1, a)
        e_merged = jnp.where(merge, e + 1, e)
        log_r = (
            _target_log_ratio(ll_split, ll_merged, Z_split, Z_merged, alpha)
            + log_proposal_ratio(
                a_merged,
                e_merged,
                num_holders,
                jnp.sum(Z_split[:, k] * (1 - Z_split[:, j])),
                jnp.sum(Z_split[:, j] * (1 - Z_split[:, k])),
            )
            + log_q_merge
            - log_q_split
        )
        log_ratio = jnp.where(merge, -log_r, log_r)
        accept = possible & (jnp.log(jax.random.uniform(k_acc)) < log_ratio)
        Z_new = jnp.where(merge, Z_merged, Z_split)
        U_new = jnp.where(merge, U_merged, U_split)
        ll_new = jnp.where(merge, ll_merged, ll_split)
        return (*_keep(accept, (Z_new, U_new, ll_new), (Z, U, ll)), short), accept

    return _scan_proposals(propose, key, Z, U, target, num_proposals)


def anchored_birth_death_log_proposal_ratio(num_active, num_empty, num_rows, num_holders):
    r"""``log P(death picks) - log P(birth picks)`` of :func:`anchored_birth_death_pass`, for a
    state without the feature (``num_active`` active, ``num_empty`` empty columns) and one with
    it held by ``num_holders`` rows: the birth picks an empty column (``1/E``) and an anchor
    row (``1/N``); the death picks the feature (``1/(a + 1)``) and one of its holders as the
    anchor (``1/m``). Kept as a function so that a test can break it."""
    a, e, m = (jnp.asarray(x, float) for x in (num_active, num_empty, num_holders))
    return jnp.log(e) + jnp.log(float(num_rows)) - jnp.log(a + 1.0) - jnp.log(m)


def anchored_birth_death_pass(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_proposals: int,
    newton_steps: int,
    diagonal: bool = False,
    launch_steps: int = 2,
    log_proposal_ratio=anchored_birth_death_log_proposal_ratio,
):
    r"""``num_proposals`` proposals in turn of a whole new feature, held by as many rows as
    the data want, or of the removal of one: the birth of :func:`anchored_split_merge_pass`
    from nothing.

    The births of :mod:`bnpjax.infer.ibp_moves` and :mod:`bnpjax.infer.ibp_parallel` give a
    new feature to one row, which must pay for a whole row of parameters with its own data:
    in many dimensions a feature that the posterior has but the chain lacks (say a bar that
    a heavy-tailed likelihood has called noise) almost never comes back that way, and no split
    makes it if no feature holds its rows. Here, for a state ``D`` without the feature
    (column ``j`` empty) and a state ``B`` with it:

    * **launch** (a deterministic function of what ``D`` and ``B`` share: ``Z`` and ``U``
      outside column ``j`` and the anchor row ``l``): ``j`` held by ``l`` alone, then
      ``launch_steps`` rounds of ``U_j`` := the mean of
      :func:`~bnpjax.infer.ibp_moves.laplace` of its conditional and every other row :=
      holding ``j`` or not, whichever is likelier;
    * **birth** (``D -> B``; an empty column ``j`` and an anchor ``l`` among all rows picked
      uniformly): every row but ``l`` holds ``j`` with probability ``p_n \propto \exp
      \ell_n`` at the launch's ``U_j`` (rows conditionally independent), ``l`` holds it, and
      ``U_j ~ q_j``, the Laplace approximation of its conditional given the new ``Z``; the
      empty column's value is dropped;
    * **death** (``B -> D``; an active column and one of its holders as the anchor picked
      uniformly): ``Z_j := 0`` and ``U_j ~ q_e``, the Laplace approximation of an empty
      column's parameters (its prior, through the model's own density).

    Why the posterior is left invariant: as for :func:`anchored_split_merge_pass`, a
    reversible pair on a space of fixed dimension, the dropped parameters drawn afresh on the
    other side, the launch a fixed function of the shared part. ``\log r = \Delta\log\pi(Z)
    + \Delta\,\mathrm{target} + \log P(\text{death picks}) - \log P(\text{birth picks}) +
    \log q_e(U^D_j) - \sum_{n \neq l} \log p_n(o_n) - \log q_j(U^B_j)`` (every ``\Delta`` from
    ``D`` to ``B``); a birth is accepted with probability ``\min(1, r)``, a death with
    ``\min(1, 1 / r)``. A birth without an empty column is the identity and flags that the
    step needed more room.

    About ``launch_steps + 2`` Laplace approximations and ``2 launch_steps + 3`` model
    evaluations per proposal. Returns ``(Z, U, wanted_more_room)``."""
    _check_launch_steps(launch_steps)
    num_rows = Z.shape[0]
    rows = jnp.arange(num_rows)
    conditional = partial(_conditional, target, newton_steps=newton_steps, diagonal=diagonal)

    def holding_log_p(Z_base, Uc, j):
        """``(N, 2)``: each row's log probability of not holding and of holding ``j``."""
        ll = jax.vmap(lambda o: row_target(Z_base.at[:, j].set(o), Uc))(
            jnp.stack([jnp.zeros(num_rows), jnp.ones(num_rows)]).astype(Z.dtype)
        )
        return jax.nn.log_softmax(ll.T, axis=1)

    def propose(carry, key):
        Z, U, ll, short = carry
        k_dir, k_j, k_l, k_opt, k_u, k_acc = jax.random.split(key, 6)
        m = jnp.sum(Z, 0)
        active, empty = m > 0, m == 0
        a, e = jnp.sum(active), jnp.sum(empty)
        death = jax.random.uniform(k_dir) < 0.5
        j = _pick(k_j, jnp.where(death, active, empty))
        held = Z[:, j]
        l = _pick(k_l, jnp.where(death, held > 0, jnp.ones(num_rows, bool)))
        possible = jnp.where(death, a >= 1, e >= 1)
        short = short | (~death & (e == 0))

        # the side without the feature: the death's proposal, or the birth's current state
        Z_without = Z.at[:, j].set(0.0)
        q_empty = conditional(Z_without, U, j)
        U_without_j = jnp.where(death, gaussian_sample(k_u, q_empty), U[j])
        U_without = U.at[j].set(U_without_j)

        # the launch: j held by the anchor alone, then rounds of U_j and of the rows
        Zc = Z_without.at[l, j].set(1.0)
        Uc = U
        for _ in range(launch_steps):
            Uc = Uc.at[j].set(conditional(Zc, Uc, j).mean)
            best = jnp.argmax(holding_log_p(Z_without, Uc, j), 1)
            Zc = Z_without.at[:, j].set(jnp.where(rows == l, 1, best).astype(Z.dtype))
        log_p = holding_log_p(Z_without, Uc, j)
        drawn = jax.random.categorical(k_opt, log_p)
        option = jnp.where(rows == l, 1, jnp.where(death, held.astype(jnp.int32), drawn))
        log_alloc = jnp.sum(jnp.where(rows == l, 0.0, log_p[rows, option]))
        Z_with = Z_without.at[:, j].set(option.astype(Z.dtype))
        q_j = conditional(Z_with, Uc, j)
        U_with_j = jnp.where(death, U[j], gaussian_sample(k_u, q_j))
        U_with = U.at[j].set(U_with_j)

        ll_without = jnp.where(death, target(Z_without, U_without), ll)
        ll_with = jnp.where(death, ll, target(Z_with, U_with))
        a_without = jnp.where(death, a - 1, a)
        e_without = jnp.where(death, e + 1, e)
        log_r = (
            _target_log_ratio(ll_with, ll_without, Z_with, Z_without, alpha)
            + log_proposal_ratio(a_without, e_without, num_rows, jnp.sum(Z_with[:, j]))
            + gaussian_log_density(q_empty, U_without_j)
            - log_alloc
            - gaussian_log_density(q_j, U_with_j)
        )
        log_ratio = jnp.where(death, -log_r, log_r)
        accept = possible & (jnp.log(jax.random.uniform(k_acc)) < log_ratio)
        Z_new = jnp.where(death, Z_without, Z_with)
        U_new = jnp.where(death, U_without, U_with)
        ll_new = jnp.where(death, ll_without, ll_with)
        return (*_keep(accept, (Z_new, U_new, ll_new), (Z, U, ll)), short), accept

    return _scan_proposals(propose, key, Z, U, target, num_proposals)


def anchored_moves(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_splits: int,
    num_births: int,
    newton_steps: int,
    diagonal: bool = False,
    log_ratios=(anchored_split_merge_log_proposal_ratio, anchored_birth_death_log_proposal_ratio),
):
    """``num_splits`` proposals of :func:`anchored_split_merge_pass`, then ``num_births`` of
    :func:`anchored_birth_death_pass` (each exact on its own, so in sequence too): what
    :class:`bnpjax.infer.IBPGibbs` runs after the pair moves. ``log_ratios``: the two passes'
    proposal-ratio functions. Returns ``(Z, U, wanted_more_room)``."""
    short = jnp.zeros((), bool)
    passes = (
        (anchored_split_merge_pass, num_splits, log_ratios[0]),
        (anchored_birth_death_pass, num_births, log_ratios[1]),
    )
    for index, (move, count, log_ratio) in enumerate(passes):
        if count:
            Z, U, short_move = move(
                jax.random.fold_in(key, index),
                Z,
                U,
                alpha,
                target,
                row_target,
                num_proposals=count,
                newton_steps=newton_steps,
                diagonal=diagonal,
                log_proposal_ratio=log_ratio,
            )
            short = short | short_move
    return Z, U, short
