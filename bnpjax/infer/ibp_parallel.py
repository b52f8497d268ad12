r"""Births and deaths of features in every row at once, for :class:`bnpjax.infer.IBPGibbs`.

:func:`bnpjax.infer.ibp_moves.birth_death_pass` visits the rows one after another, two Laplace
approximations per row. When the model's log density splits into a term per row of ``Z`` and
a term per feature column,

.. math::

    \log p(\text{rest} \mid Z, U) = \sum_n \ell_n(z_n, U) + \sum_k c_k(U_k) + \text{const},

where ``ell_n`` depends on ``U_k`` only when ``z_nk = 1`` (as for ``X_n ~ f(z_n A)``) and ``c_k``
is the density of feature ``k``'s parameters (the linked sites, element by element along their
feature axis, plus the Jacobian of their unconstrained coordinates), :func:`birth_death_pass`
here moves every row in one vectorised step. :class:`~bnpjax.infer.IBPGibbs` checks this
structure at ``init`` (:func:`footprint_is_separable`) and keeps the row-by-row move otherwise.

The move. Row ``n`` has ``s_n`` singletons (features no other row holds); the buffer has ``e``
empty columns and ``f`` columns held by at most one row. Each row proposes, independently, a
birth with probability ``rho = min(1/2, f / 2N)`` or else (when ``s_n > 0``) the death of one of
its singletons chosen uniformly. The ``b`` rows that propose a birth get distinct empty columns
by a uniformly random injective allocation (probability ``(e - b)! / e!``); when ``b > e`` the
whole move is skipped (``rho`` keeps ``b`` near ``f / 2``, so this is rare unless the buffer is
crowded), and when a birth was proposed with no empty column at all the step flags that it
needed more room, as the row-by-row move does. Each moved column's
parameters are drawn from the Laplace approximation of their conditional (``q_1`` with the row
holding the feature, ``q_0`` with the column empty, as in the row-by-row move), and each row is
accepted or rejected on its own.

Why it leaves the posterior invariant. Given the choices and the allocation (auxiliary
variables drawn given the state), every row's proposal is an involution on its own block
(``z_nk`` of its column and ``U_k``), and the blocks are disjoint. The buffer law of
:mod:`bnpjax.infer.ibp_moves` carries ``alpha^{K_+} (K - K_+)! / K!`` and ``1/N`` per singleton;
``(K - K_+)! = e!`` couples the rows. It cancels: any subset of accepted rows changes ``e`` and
the number of birth proposals of the reverse move by the same amount (a row whose birth is
accepted proposes its death in reverse, a row whose death is accepted proposes a birth into the
column it left, a rejected row proposes the same move again), so ``e - b`` is unchanged, and
the target ratio ``e'! / e!`` times the allocation ratio ``((e' - b')! / e'!) / ((e - b)! / e!)``
is 1. What is left is a product over accepted rows of per-row ratios, each depending only on
that row's block (the separable structure above):

.. math::

    \log r_n^{\text{birth}} = \ell_n' - \ell_n + c_k' - c_k + \log\frac{\alpha}{N}
        + \log\frac{1 - \rho}{\rho\,(s_n + 1)} + \log q_0(U_k) - \log q_1(U_k'),

and its mirror image for a death.
Independent acceptances with probability ``min(1, r_n)`` then satisfy detailed balance for
every subset of accepted rows (a rejected row's ratio is the same before and after the others
move), so the move is a Metropolis-Hastings kernel for the joint law of ``(Z, U)``; ``rho``
depends only on ``f``, which no birth or death of a singleton changes. With ``b > e`` the
identity is taken; ``b - e`` is the same for a move and its reverse, so the two are skipped
together and detailed balance holds (for the IBP truncated to the capacity, as everywhere in
the block). The random allocation is what keeps the move exact without assuming that the
model treats its feature columns exchangeably (a fixed assignment of slots, e.g. by a prefix
sum over the rows, would not be reversible). Every row and every column draws from its own
``fold_in`` key, so a row's draws do not change with the capacity.

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
import numpy as np

from bnpjax.infer.ibp_moves import (
    Gaussian,
    gaussian_log_density,
    gaussian_sample,
    proposal_log_ratio,
)

__all__ = [
    "birth_death_pass",
    "block_laplace",
    "empty_feature_pass",
    "footprint_is_separable",
    "new_feature_log_rate",
]


def new_feature_log_rate(alpha, num_rows):
    """``log(alpha / N)``: the IBP's prior ratio of one more singleton (``alpha`` for the new
    feature, ``1/N`` for its ``(N - 1)! 0! / N!``); kept as a function so that a test can break
    it."""
    return jnp.log(alpha / num_rows)


def block_laplace(
    log_density: Callable[[jax.Array], jax.Array],
    shape: tuple[int, int],
    steps: int,
    *,
    diagonal: bool,
) -> Gaussian:
    """:func:`bnpjax.infer.ibp_moves.laplace` of ``B`` blocks at once: ``log_density`` maps a
    ``(B, dim)`` array to a sum of ``B`` terms, each depending on one row only, so the Hessian is
    block diagonal and ``dim`` Hessian-vector products (one with the tangent ``e_j`` in every
    block) give every block's Hessian; one product when ``diagonal``. Each block's result is the
    one :func:`~bnpjax.infer.ibp_moves.laplace` would give for that block alone."""
    num_blocks, dim = shape
    grad = jax.grad(log_density)

    def floor(prec):
        # per block, as laplace() floors each approximation on its own
        return jnp.maximum(prec, 1e-3 * jnp.maximum(jnp.max(prec, -1, keepdims=True), 1.0))

    u = jnp.zeros(shape)
    vecs, prec = None, jnp.ones(shape)
    basis = jnp.broadcast_to(jnp.eye(dim)[:, None, :], (dim, num_blocks, dim))
    for _ in range(steps):  # a handful of steps, unrolled
        if diagonal:
            g, curvature = jax.jvp(grad, (u,), (jnp.ones(shape),))
            prec = floor(-curvature)
            u = u + g / prec
        else:
            g = grad(u)
            # columns[j, b, i] = d2 / du_bi du_bj
            columns = jax.vmap(lambda t: jax.jvp(grad, (u,), (t,))[1])(basis)
            hessian = jnp.transpose(columns, (1, 2, 0))
            prec, vecs = jnp.linalg.eigh(-0.5 * (hessian + jnp.swapaxes(hessian, 1, 2)))
            prec = floor(prec)
            step = jnp.einsum("bij,bj->bi", vecs, jnp.einsum("bji,bj->bi", vecs, g) / prec)
            u = u + step
    return Gaussian(u, vecs, prec)


def _uniforms(key, count):
    # one uniform per index from its own fold_in key: the draw of index i does not depend on
    # how many indices there are (the capacity)
    return jax.vmap(lambda i: jax.random.uniform(jax.random.fold_in(key, i)))(jnp.arange(count))


def birth_death_pass(
    key,
    Z,
    U,
    alpha,
    split_target: Callable,
    *,
    newton_steps: int,
    diagonal: bool = False,
    log_proposal_ratio=proposal_log_ratio,
    log_rate=new_feature_log_rate,
):
    """A birth or death of one singleton feature in every row at once (module docstring).

    ``split_target(Z, U)`` returns ``(rows, columns)``: the ``(N,)`` per-row and ``(K,)``
    per-column terms of the model's log density but the IBP prior of ``Z`` (``U`` unconstrained,
    Jacobian included), whose sum is that density up to terms the move does not change. Returns
    ``(Z, U, wanted_more_room)``; the flag is set when a row proposed a birth and the buffer had
    no empty column (the move is then skipped, as whenever more rows propose a birth than there
    are empty columns)."""
    num_rows, num_cols = Z.shape
    dim = U.shape[1]
    rows = jnp.arange(num_rows)
    m = jnp.sum(Z, 0)
    single = (Z > 0) & (m == 1)
    empty = m == 0
    s = jnp.sum(single, 1).astype(U.dtype)
    num_empty = jnp.sum(empty)
    # f = columns held by at most one row: no birth or death of a singleton changes it, so
    # rho is the same for the move and its reverse
    rho = jnp.minimum(0.5, jnp.sum(m <= 1) / (2.0 * num_rows))

    key_rows, key_slots = jax.random.split(key)
    row_keys = jax.vmap(lambda n: jax.random.split(jax.random.fold_in(key_rows, n), 5))(rows)
    k_type, k_col, k_prop, k_acc, k_order = (row_keys[:, i] for i in range(5))
    uniform = jax.vmap(jax.random.uniform)

    wants_birth = uniform(k_type) < rho
    # the death candidate: one of the row's singletons, uniformly
    col_u = jax.vmap(lambda k: _uniforms(k, num_cols))(k_col)
    death_col = jnp.argmax(jnp.where(single, col_u, -1.0), 1)
    # the allocation: birth rows in a uniformly random order take the empty columns in a
    # uniformly random order, i.e. a uniform injection of the birth rows into the empty columns
    row_rank = jnp.argsort(jnp.argsort(jnp.where(wants_birth, uniform(k_order), 2.0)))
    slot_order = jnp.argsort(jnp.where(empty, _uniforms(key_slots, num_cols), 2.0))
    birth_col = slot_order[jnp.minimum(row_rank, num_cols - 1)]
    skip = jnp.sum(wants_birth) > num_empty
    active = ~skip & (wants_birth | (s > 0))
    birth = wants_birth & active
    col = jnp.where(birth, birth_col, death_col)
    index = jnp.where(active, col, num_cols)  # out of range: dropped by the scatters below

    def place(V, index=index):
        return U.at[index].set(V, mode="drop")

    def set_z(value, index=index):
        return Z.at[rows, index].set(value, mode="drop")

    def joint(Zc):
        def log_density(V):
            row_terms, col_terms = split_target(Zc, place(V))
            return jnp.sum(row_terms) + jnp.sum(col_terms)

        return log_density

    # the rows' blocks are separable (module docstring): one joint Laplace per configuration
    q_on = block_laplace(joint(set_z(1.0)), (num_rows, dim), newton_steps, diagonal=diagonal)
    q_off = block_laplace(joint(set_z(0.0)), (num_rows, dim), newton_steps, diagonal=diagonal)

    def pick(a, b):
        return jnp.where(jnp.reshape(birth, (-1,) + (1,) * (a.ndim - 1)), a, b)

    q_new = jax.tree.map(pick, q_on, q_off)
    q_old = jax.tree.map(pick, q_off, q_on)
    V = jax.vmap(gaussian_sample)(k_prop, q_new)
    Z_prop = set_z(birth.astype(Z.dtype))
    rows0, cols0 = split_target(Z, U)
    rows1, cols1 = split_target(Z_prop, place(V))
    delta = rows1 - rows0 + (cols1 - cols0)[col]
    log_lam = log_rate(alpha, num_rows)
    log_birth = log_lam - jnp.log(s + 1.0) + jnp.log1p(-rho) - jnp.log(rho)
    log_death = -log_lam + jnp.log(s) + jnp.log(rho) - jnp.log1p(-rho)
    proposal = jax.vmap(log_proposal_ratio)(q_old, q_new, U[col], V)
    log_ratio = delta + jnp.where(birth, log_birth, log_death) + proposal
    accept = active & (jnp.log(uniform(k_acc)) < log_ratio)
    accepted = jnp.where(accept, col, num_cols)
    return (
        set_z(birth.astype(Z.dtype), index=accepted),
        place(V, index=accepted),
        jnp.any(wants_birth) & (num_empty == 0),
    )


def empty_feature_pass(
    key, Z, U, split_target: Callable, *, newton_steps: int, diagonal: bool = False
):
    """The parameters of every empty feature column at once: an independence
    Metropolis-Hastings step per column from the Laplace approximation of its conditional,
    which (with the density split as in the module docstring) involves that column's own
    term ``c_k`` only. The columns are disjoint blocks whose ratios depend on nothing the
    other blocks move, so independent acceptances leave the joint law invariant, as
    :func:`bnpjax.infer.ibp_moves.feature_pass` would one column after another (a Gibbs draw
    from the prior when that is Gaussian). Returns ``U``."""
    num_cols, dim = U.shape
    empty = jnp.sum(Z, 0) == 0
    index = jnp.where(empty, jnp.arange(num_cols), num_cols)

    def columns(V):
        return split_target(Z, U.at[index].set(V, mode="drop"))[1]

    q = block_laplace(
        lambda V: jnp.sum(columns(V)), (num_cols, dim), newton_steps, diagonal=diagonal
    )
    keys = jax.vmap(lambda k: jax.random.split(jax.random.fold_in(key, k)))(jnp.arange(num_cols))
    V = jax.vmap(gaussian_sample)(keys[:, 0], q)
    log_ratio = (
        columns(V)
        - split_target(Z, U)[1]
        + jax.vmap(gaussian_log_density)(q, U)
        - jax.vmap(gaussian_log_density)(q, V)
    )
    accept = empty & (jnp.log(jax.vmap(jax.random.uniform)(keys[:, 1])) < log_ratio)
    return jnp.where(accept[:, None], V, U)


def footprint_is_separable(terms: Callable, values, name, linked, axes, key) -> bool:
    """Whether the model's density splits as the module docstring needs, probed on concrete
    random values: with feature ``0`` held by row 0 alone and feature ``1`` by no row, moving
    ``U_0`` may change only row 0's slice of the sites that depend on ``Z`` (``axes``: site ->
    row axis) and slice 0 of the linked sites' leading axis; moving ``U_1`` only slice 1 of
    the linked sites; no other site may change. ``terms(values)`` returns every site's
    elementwise log density (the IBP site's excluded). Only which move is used depends on the
    answer, never the chain's correctness when it is right; a probe that cannot run says
    False."""
    keys = jax.random.split(key, 3)
    Z = values[name]
    num_rows, num_cols = Z.shape
    if num_cols < 2:
        return False
    Z = jax.random.bernoulli(keys[0], 0.5, Z.shape).astype(float)
    Z = Z.at[:, 0].set(0.0).at[0, 0].set(1.0).at[:, 1].set(0.0)
    U = linked.pack(values) + 0.1 * jax.random.normal(keys[1], (num_cols, sum(_dims(linked))))

    def logs(U):
        return terms({**values, name: Z, **linked.unpack(U)})

    reference = logs(U)
    for k in (0, 1):
        moved = logs(
            U.at[k].add(0.5 + jax.random.normal(jax.random.fold_in(keys[2], k), U[k].shape))
        )
        for site, ref in reference.items():
            changed = ~((ref == moved[site]) | (np.isnan(ref) & np.isnan(moved[site])))
            if site in axes:
                changed = np.moveaxis(changed, axes[site], 0)
                allowed = np.zeros(num_rows, bool)
                allowed[0] = k == 0
            elif site in linked.names:
                if changed.ndim == 0 or changed.shape[0] != num_cols:
                    return False
                allowed = np.arange(num_cols) == k
            else:
                allowed = None
            if allowed is None:
                if np.any(changed):
                    return False
            elif np.any(changed[~allowed]):
                return False
    return True


def _dims(linked):
    return [int(np.prod(shape)) for shape in linked.row_shapes]
