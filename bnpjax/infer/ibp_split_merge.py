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
from functools import partial

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import gammaln

from bnpjax.infer.ibp_moves import gaussian_log_density, gaussian_sample, laplace

__all__ = [
    "SHEARS",
    "anchored_birth_death_log_proposal_ratio",
    "anchored_birth_death_pass",
    "anchored_split_merge_log_proposal_ratio",
    "anchored_split_merge_pass",
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


# ---------------------------------------------------------------------------------------------
# splits that draw the new feature's parameters where the data put them


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
        + \Delta\,\mathrm{target} + \log P(	ext{death picks}) - \log P(	ext{birth picks}) +
        \log q_e(U^D_j) - \sum_{n
    e l} \log p_n(o_n) - \log q_j(U^B_j)`` (every ``\Delta`` from
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


def pair_moves(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    row_target: Callable,
    *,
    num_proposals: int,
    num_anchored_splits: int = 0,
    num_anchored_births: int = 0,
    newton_steps: int = 2,
    diagonal: bool = False,
    log_ratios=(
        split_merge_log_proposal_ratio,
        reallocation_log_proposal_ratio,
        anchored_split_merge_log_proposal_ratio,
        anchored_birth_death_log_proposal_ratio,
    ),
):
    """:func:`split_merge_pass`, then :func:`reallocation_pass`, each with ``num_proposals``
    proposals, then ``num_anchored_splits`` proposals of :func:`anchored_split_merge_pass` and
    ``num_anchored_births`` of :func:`anchored_birth_death_pass` (each exact on its own, so in
    sequence too): what
    :class:`bnpjax.infer.IBPGibbs` runs after births and deaths. ``log_ratios``: the passes'
    proposal-ratio functions. Returns ``(Z, U, wanted_more_room)``."""
    key_merge, key_pair = jax.random.split(key)
    key_anchored = jax.random.fold_in(key, 2)  # the other passes' streams as before
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
    if num_anchored_splits:
        Z, U, short_split = anchored_split_merge_pass(
            key_anchored,
            Z,
            U,
            alpha,
            target,
            row_target,
            num_proposals=num_anchored_splits,
            newton_steps=newton_steps,
            diagonal=diagonal,
            log_proposal_ratio=log_ratios[2],
        )
        short = short | short_split
    if num_anchored_births:
        Z, U, short_birth = anchored_birth_death_pass(
            jax.random.fold_in(key, 3),
            Z,
            U,
            alpha,
            target,
            row_target,
            num_proposals=num_anchored_births,
            newton_steps=newton_steps,
            diagonal=diagonal,
            log_proposal_ratio=log_ratios[3],
        )
        short = short | short_birth
    return Z, U, short
