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

Features with parameters (:func:`birth_death_pass`, :func:`feature_pass`). The target is then
the joint conditional of ``(Z, U)`` given the other sites: the buffer law of ``Z`` above times
the model's density of everything else, with ``U`` (one row of feature parameters per column)
in unconstrained coordinates plus the Jacobian. Each move is a Metropolis-Hastings kernel for
it. The Laplace approximations are deterministic functions of the *other* variables (``Z`` as
proposed or current, the remaining rows of ``U``, the other sites): they never look at the
value they replace, so a birth (draw ``U_k'`` from ``q_1``, built at the new ``Z``) and the
death that undoes it (draw ``U_k`` from ``q_0``, built at the old ``Z``) are each other's
reverse, and the ratio ``target' q_0(U_k) / (target q_1(U_k'))`` times the ratio of the
discrete choices (which column, birth or death) satisfies detailed balance whatever the
approximation's quality. An empty column's parameters are, under the target, a draw from
their prior given the rest, and ``q_0`` is the Laplace approximation of exactly that
conditional. The Newton steps (and the diagonal-Hessian shortcut) only change how often a
move is accepted.

Skipped columns and entries (empty columns of the buffer, entries whose column holds no
other row) go through :func:`bnpjax.ops.apply_if` rather than ``lax.cond``: when the chains
are batched with ``vmap``, a ``cond`` runs both branches for every chain, so the model was
evaluated for every column of the buffer; with ``apply_if`` a column no chain uses costs
nothing. The values are those of the ``cond``.

Order of the moves. Each move leaves the same target invariant on its own, so any fixed (or
randomly chosen) order of them does too, and so does the composition with the other blocks of
a Gibbs sweep: the order changes how fast the chain mixes, never its stationary law.
:class:`bnpjax.infer.IBPGibbs` runs flips, then births and deaths, then the parameter rows, so
that a sweep ends with the parameters drawn given its final ``Z`` (exactly, for a Gaussian
conditional). Both orders were checked with the block's Geweke tests (4 chains of 3000
steps, seeds 0-12, capacity 16 or 24). With the parameter rows first, one run failed (seed 0
at 1000 steps, max z 4.86; 3.02 at 3000 steps), 4 runs at capacity 16 ended in sticky
excursions of K+ up to the capacity (prior probability of K+ >= 16: 5e-5 per draw), and the
other 24 runs passed, the time spent at K+ >= 6 and K+ >= 8 matching the prior within its
error. The order used here passed 27 of 28 runs (seed 0: max z 2.89, the same statistics
off in the same direction); the failure was a Poisson run, on its heavy-tailed counts. A
review of the ratios found no inexact move, and neither did invariance checks of each move
from the exact law.

References
----------
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224.
Meeds, E., Ghahramani, Z., Neal, R. & Roweis, S. (2007). Modeling dyadic data with binary
latent factors. NIPS 19.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import lax
from jax.scipy.special import gammaln

from bnpjax.ops import apply_if

__all__ = [
    "Gaussian",
    "birth_death_pass",
    "existing_column_pass",
    "existing_joint_pass",
    "existing_log_odds",
    "feature_pass",
    "gaussian_log_density",
    "gaussian_sample",
    "laplace",
    "proposal_log_ratio",
    "singleton_log_correction",
    "singleton_pass",
    "starting_features",
]


def existing_log_odds(m_minus, num_rows):
    """Prior log odds of ``z_nk = 1`` for a feature other rows hold ``m_minus > 0`` times."""
    return jnp.log(m_minus) - jnp.log(num_rows - m_minus)


def singleton_log_correction(s, s_new, free, lam):
    """Log of the singleton move's target ratio times its proposal ratio (0: module
    docstring); kept as a function so that a test can break it."""
    del s, s_new, free, lam
    return 0.0


def starting_features(key, shape, num_features):
    """A buffer whose first ``num_features`` columns each row holds with probability 1/2: the
    start of :class:`bnpjax.infer.IBPGibbs` for a site with feature parameters (and its
    warmup restart)."""
    start = jax.random.bernoulli(key, 0.5, shape).astype(float)
    return start * (jnp.arange(shape[1]) < num_features)


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

    def update(Z, k):  # k passed in: its uniforms are then not drawn for skipped columns
        both = jnp.stack([Z.at[:, k].set(0.0), Z.at[:, k].set(1.0)])
        ll = jax.vmap(row_log_lik)(both)
        new = _flip_column(jax.random.fold_in(key, k), Z[:, k], ll[1] - ll[0], log_odds)
        return Z.at[:, k].set(new)

    def column(k, Z):
        return apply_if(jnp.any(Z[:, k] > 0), update, Z, Z, k)

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

        return apply_if(m_minus > 0, update, (Z, ll), (Z, ll))

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


# --------------------------------------------------------------------------------------------
# features with parameters: births and deaths that move a column of Z and its parameters


class Gaussian(NamedTuple):
    """``N(mean, V diag(1 / prec) V^T)``: a proposal in its eigenbasis (``vecs=None``: the
    identity, a diagonal covariance)."""

    mean: jax.Array
    vecs: jax.Array | None
    prec: jax.Array


# step lengths tried along each Newton direction (0: stay where the last step ended)
_STEP_LENGTHS = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.0)


def laplace(
    log_density: Callable[[jax.Array], jax.Array], dim: int, steps: int, *, diagonal: bool = False
) -> Gaussian:
    """Gaussian approximation of ``exp(log_density)`` on ``R^dim`` by ``steps`` damped Newton
    steps from the origin; its precision is the negative Hessian where the last step ended,
    with eigenvalues floored so that it stays positive definite. Each step goes the length
    along the Newton direction, among 1, 1/2, ..., 1/16 and 0, where ``log_density`` is
    highest (one batched evaluation): where the density is not log-concave (a Student-t
    likelihood with a residual beyond its inflection point) a full Newton step from a weakly
    curved point overshoots by orders of magnitude. ``diagonal=True`` uses the Hessian's
    diagonal only (read off one Hessian-vector product, exact when the coordinates do not
    interact, as for ``Z @ A`` in an elementwise likelihood): one pass instead of ``dim``.

    The result is a deterministic function of ``log_density`` alone (it never looks at the
    chain's current value of the argument): as a proposal it is an independence proposal given
    everything else, whose density can be evaluated at the current and proposed points, so
    the Metropolis-Hastings correction is exact however rough the approximation is. Exact in
    one step when ``log_density`` is quadratic (a Gaussian conditional)."""
    grad = jax.grad(log_density)
    lengths = jnp.asarray(_STEP_LENGTHS)

    def floor(prec):
        # a non-concave direction would make the Newton step go uphill: floor the curvature
        return jnp.maximum(prec, 1e-3 * jnp.maximum(jnp.max(prec), 1.0))

    def curvature(u):
        if diagonal:
            # with a diagonal Hessian, H @ 1 is its diagonal
            g, hessian_diagonal = jax.jvp(grad, (u,), (jnp.ones(dim),))
            return g, None, floor(-hessian_diagonal)
        hessian, g = jax.jacfwd(lambda v: (grad(v), grad(v)), has_aux=True)(u)
        prec, vecs = jnp.linalg.eigh(-0.5 * (hessian + hessian.T))
        return g, vecs, floor(prec)

    u = jnp.zeros(dim)
    for _ in range(steps):  # a handful of steps, unrolled
        g, vecs, prec = curvature(u)
        step = g / prec if vecs is None else vecs @ ((vecs.T @ g) / prec)
        tried = u + lengths[:, None] * step
        values = jax.vmap(log_density)(tried)
        u = tried[jnp.argmax(jnp.where(jnp.isnan(values), -jnp.inf, values))]
    _, vecs, prec = curvature(u)
    return Gaussian(u, vecs, prec)


def gaussian_log_density(g: Gaussian, x: jax.Array) -> jax.Array:
    w = x - g.mean if g.vecs is None else g.vecs.T @ (x - g.mean)
    return 0.5 * jnp.sum(jnp.log(g.prec) - g.prec * w**2 - jnp.log(2 * jnp.pi))


def gaussian_sample(key, g: Gaussian) -> jax.Array:
    w = jax.random.normal(key, g.mean.shape) / jnp.sqrt(g.prec)
    return g.mean + (w if g.vecs is None else g.vecs @ w)


def proposal_log_ratio(q_reverse: Gaussian, q_forward: Gaussian, current, proposed):
    """``log q_reverse(current) - log q_forward(proposed)``: the proposal part of the
    birth-death move's ratio for the feature's parameters; kept as a function so that a test
    can break it."""
    return gaussian_log_density(q_reverse, current) - gaussian_log_density(q_forward, proposed)


def feature_pass(
    key,
    Z,
    U,
    target: Callable,
    ll,
    *,
    newton_steps: int,
    diagonal: bool = False,
    columns: jax.Array | None = None,
):
    """Metropolis-Hastings update of every row ``U[k]`` of the (unconstrained, packed) feature
    parameters given ``Z`` and the rest: an independence proposal from :func:`laplace` of the
    conditional of ``U[k]`` (exact Gibbs when that conditional is Gaussian). ``target(Z, U)`` is
    the log density of everything but the IBP prior of ``Z``, ``ll = target(Z, U)``. One
    Laplace approximation and one model evaluation per column; returns ``(U, ll)``.
    ``columns``: a ``(K,)`` mask of the columns to update (default all); each update is exact
    on its own, so any subset is too."""
    num_cols, dim = U.shape

    def column(k, carry):
        if columns is None:
            return update(k, carry)
        return apply_if(columns[k], update, carry, k, carry)

    def update(k, carry):
        U, ll = carry
        k_prop, k_acc = jax.random.split(jax.random.fold_in(key, k))
        g = laplace(lambda v: target(Z, U.at[k].set(v)), dim, newton_steps, diagonal=diagonal)
        v = gaussian_sample(k_prop, g)
        ll_new = target(Z, U.at[k].set(v))
        log_ratio = ll_new - ll + gaussian_log_density(g, U[k]) - gaussian_log_density(g, v)
        accept = jnp.log(jax.random.uniform(k_acc)) < log_ratio
        return jnp.where(accept, U.at[k].set(v), U), jnp.where(accept, ll_new, ll)

    return lax.fori_loop(0, num_cols, column, (U, ll))


def _log_birth_probability(s, e):
    # the move's choice: birth surely when the row has no singleton, never without an empty
    # column, else with probability 1/2
    return jnp.where(e == 0, -jnp.inf, jnp.where(s == 0, 0.0, jnp.log(0.5)))


def _log_death_probability(s, e):
    return jnp.where(s == 0, -jnp.inf, jnp.where(e == 0, 0.0, jnp.log(0.5)))


def birth_death_pass(
    key,
    Z,
    U,
    alpha,
    target: Callable,
    ll,
    *,
    newton_steps: int,
    diagonal: bool = False,
    log_proposal_ratio=proposal_log_ratio,
):
    r"""For every row in turn, a birth or a death of one of its singleton features together
    with the feature's parameters ``U[k]`` (the module docstring of :class:`IBPGibbs` explains
    why this leaves the joint law invariant). ``target(Z, U)``: log density of everything but
    the IBP prior of ``Z``; ``ll = target(Z, U)``. Returns ``(Z, U, ll, wanted_more_room)``, the
    flag set when a row drew a birth but the buffer had no empty column.

    Row ``n`` has ``s`` singletons (features no other row holds) and the buffer ``e`` empty
    columns. Birth (probability 1/2, 1 when ``s = 0``, 0 when ``e = 0``): pick an empty column
    ``k`` uniformly, set ``z_nk = 1``, draw ``U[k]`` from the Laplace approximation ``q_1`` of its
    conditional given the new ``Z``. Death (the other case): pick one of the ``s`` singletons
    uniformly, set ``z_nk = 0``, draw ``U[k]`` from the Laplace approximation ``q_0`` of its
    conditional with the column empty (the prior, when the parameters enter only through
    ``Z``). Birth and death are each other's reverse; with ``lambda = alpha / N`` the IBP
    buffer law of the module docstring gives the target ratio ``lambda / e`` of a birth, so the
    Metropolis-Hastings log ratio of a birth is

    .. math::

        \Delta \mathrm{target} + \log\lambda - \log(s + 1) + \log p_d(s + 1, e - 1)
        - \log p_b(s, e) + \log q_0(U_k) - \log q_1(U_k'),

    and that of a death its mirror image."""
    num_rows, num_cols = Z.shape
    dim = U.shape[1]
    log_lam = jnp.log(alpha / num_rows)

    def row(carry, n):
        Z, U, ll, short = carry
        k_type, k_col, k_prop, k_acc = jax.random.split(jax.random.fold_in(key, n), 4)
        m = jnp.sum(Z, 0)
        single = (Z[n] > 0) & (m == 1)
        empty = m == 0
        s, e = jnp.sum(single), jnp.sum(empty)
        wants_birth = (jax.random.uniform(k_type) < 0.5) | (s == 0)
        short = short | (wants_birth & (e == 0))
        birth = wants_birth & (e > 0)
        pool = jnp.where(birth, empty, single)
        k = jnp.argmax(jnp.where(pool, jax.random.uniform(k_col, (num_cols,)), -1.0))
        Z_new = Z.at[n, k].set(birth.astype(Z.dtype))
        q_new = laplace(
            lambda v: target(Z_new, U.at[k].set(v)), dim, newton_steps, diagonal=diagonal
        )
        q_old = laplace(lambda v: target(Z, U.at[k].set(v)), dim, newton_steps, diagonal=diagonal)
        v = gaussian_sample(k_prop, q_new)
        U_new = U.at[k].set(v)
        ll_new = target(Z_new, U_new)
        log_birth = (
            log_lam
            - jnp.log(s + 1.0)
            + _log_death_probability(s + 1, e - 1)
            - _log_birth_probability(s, e)
        )
        log_death = (
            -log_lam
            + jnp.log(s)
            + _log_birth_probability(s - 1, e + 1)
            - _log_death_probability(s, e)
        )
        log_ratio = (
            ll_new
            - ll
            + jnp.where(birth, log_birth, log_death)
            + log_proposal_ratio(q_old, q_new, U[k], v)
        )
        accept = jnp.any(pool) & (jnp.log(jax.random.uniform(k_acc)) < log_ratio)
        return (
            jnp.where(accept, Z_new, Z),
            jnp.where(accept, U_new, U),
            jnp.where(accept, ll_new, ll),
            short,
        ), None

    (Z, U, ll, short), _ = lax.scan(row, (Z, U, ll, jnp.zeros((), bool)), jnp.arange(num_rows))
    return Z, U, ll, short
