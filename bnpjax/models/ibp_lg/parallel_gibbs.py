r"""Row-parallel Gibbs sampler of the linear-Gaussian IBP model.

Instantiating what couples the rows makes them conditionally independent. One sweep: for each
instantiated column ``k`` in random order, ``pi_k | z_k ~ Beta(m_k, N - m_k + 1)`` and then the
whole column ``z_k | pi_k, A, sigma_x, X`` at once, kept non-empty; then every row's
singletons redrawn at once, ``p(k_new = k) ∝ Poisson(k; alpha / N) N(x_i; z_i A,
(sigma_x^2 + k sigma_a^2) I)``, ``k <= kappa``; then ``A | Z, X`` and the hyperparameters as
in the collapsed sampler. Each block is an exact conditional (the IBP as the Bernoulli-process
limit of a beta process, :mod:`bnpjax.priors.ibp`).

Given ``A`` these updates move one entry or one column at a time, and at large ``N`` they
cannot undo a whole feature: a column of the random start that explains nothing walks to
``m = 0`` over some ``N`` sweeps, and a feature held as two disjoint copies never joins. So
each sweep starts with feature moves, ``A`` integrated out (births, deaths, splits and merges
of whole columns, :mod:`~bnpjax.models.ibp_lg.feature_moves`), then ``A | Z, X``; and the
chain starts from a short collapsed run on a random subsample of the rows (``init_sweeps``,
``init_rows``), where the posterior is wider and a sweep cheap, extended to every row by one
row-parallel sweep.

References
----------
Zhang, M. M., Dubey, A. & Williamson, S. A. (2017). Parallel Markov chain Monte Carlo for the
Indian buffet process. arXiv:1703.03457.
Thibaux, R. & Jordan, M. I. (2007). Hierarchical beta processes and the Indian buffet
process. *AISTATS*.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.infer.checks import check_integer
from bnpjax.models.ibp_lg._kernel import (
    FROM_HYPER,
    NUM_INIT_FEATURES,
    build_algorithm,
    init,
    resolve,
    sweep_step,
)
from bnpjax.models.ibp_lg.collapsed_gibbs import _sweep_Z as _collapsed_sweep_Z
from bnpjax.models.ibp_lg.conditionals import finish_sweep, new_feature_log_weights, sample_A
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper
from bnpjax.models.ibp_lg.feature_moves import feature_moves
from bnpjax.ops import sample_categorical
from bnpjax.priors import ibp

__all__ = ["build_step", "init", "parallel_gibbs"]

#: birth-death moves per sweep by default
NUM_MOVES = 10
#: the default warm start: collapsed sweeps on a random subsample of rows
INIT_SWEEPS, INIT_ROWS = 200, 500


def _sweep_Z(keys, state, *, kappa):
    """Every instantiated column for all rows at once, then every row's singletons at once:
    the new ``Z``, whether the buffer was too small, and by how much."""
    key_order, key_cols, key_new = keys
    N, D = state.X.shape
    Z, A, X = state.Z, state.A, state.X
    sigma_x2, sigma_a2 = state.sigma_x**2, state.sigma_a**2
    order = ibp.active_column_order(key_order, Z)

    def column(position, carry):
        Z, resid = carry
        k = order[position]
        key_pi, key_z = jax.random.split(jax.random.fold_in(key_cols, k))
        z_k = Z[:, k]
        # data augmentation: pi_k | z_k ~ Beta(m_k, N - m_k + 1), then z_k | pi_k, kept non-empty
        a_k = A[k]
        resid_off = resid + z_k[:, None] * a_k  # residual with z_ik = 0, every row at once
        gain = (2 * resid_off @ a_k - a_k @ a_k) / (2 * sigma_x2)
        on = ibp.sample_nonempty_column(key_z, ibp.feature_log_odds(key_pi, z_k) + gain)
        on = jnp.where(jnp.sum(z_k) > 0, on, False).astype(Z.dtype)
        return Z.at[:, k].set(on), resid_off - on[:, None] * a_k

    Z, resid = jax.lax.fori_loop(0, jnp.sum(Z.sum(0) > 0), column, (Z, X - Z @ A))

    # singletons of every row redrawn at once: given the columns shared by >= 2 rows the rows'
    # singleton counts are independent, Poisson(alpha / N) a priori, their weights integrated
    singleton = jnp.sum(Z, axis=0) == 1
    resid = resid + (Z * singleton) @ A
    Z = Z * ~singleton
    rss = jnp.sum(resid**2, axis=1)
    log_w = new_feature_log_weights(
        state.alpha, N, kappa, rss, jnp.full((N,), sigma_x2), sigma_a2, D
    )
    k_new = sample_categorical(key_new, log_w)
    free = Z.sum(0) < 0.5
    owned, shortfall = ibp.place_new_features(free, k_new)
    Z = Z + owned.astype(Z.dtype)
    return Z, shortfall > 0, shortfall


def _parallel_step(data, hyper, key, state, *, kappa, flags, num_moves=0, slip=""):
    key_order, key_cols, key_new, key_A, key_rest = jax.random.split(key, 5)
    no_room = jnp.zeros((), bool)
    if num_moves:
        # keys of their own (folded in), so that the sweep's draws are those of num_moves=0
        key_moves = jax.random.fold_in(key, 0xB1D)
        Z, _, no_room = feature_moves(key_moves, state, num_moves, _slip=slip)
        A = sample_A(jax.random.fold_in(key_moves, 1), Z, state.X, state.sigma_x, state.sigma_a)
        state = state._replace(Z=Z, A=A)
    Z, exceeded, shortfall = _sweep_Z((key_order, key_cols, key_new), state, kappa=kappa)
    shortfall = jnp.maximum(shortfall, no_room.astype(shortfall.dtype))
    return finish_sweep(
        (key_A, key_rest), data, hyper, state, Z, exceeded | no_room, shortfall, flags
    )


def _warm_init(data, hyper, key, *, init_sweeps, init_rows, kappa, flags, **settings):
    """The start of the row-parallel chain: the random start (:func:`init`), then
    ``init_sweeps`` collapsed sweeps (each after birth-death moves) on ``init_rows`` rows
    drawn at random, then every row's features from one row-parallel sweep given the
    subsample's features, weights and hyperparameters, and ``A | Z, X``.

    Only the start depends on this; the chain's kernel is the same. On a subsample the
    posterior is wider and a collapsed sweep is cheap, so the features that the random start
    plants in a split or merged form, which the row-parallel sweep on all ``N`` rows could
    only undo over many sweeps, are sorted out before the chain starts."""
    if not init_sweeps:
        return init(key, data, hyper, **settings)
    key_start, key_rows, key_sweeps, key_extend, key_A = jax.random.split(key, 5)
    state = init(key_start, data, hyper, **settings)
    N, D = data.X.shape
    n = min(N, init_rows)
    rows = jnp.sort(jax.random.permutation(key_rows, N)[:n])
    sub_data = data._replace(X=data.X[rows], mask=data.mask[rows], observed=jnp.arange(n * D))
    sub = state._replace(Z=state.Z[rows], X=state.X[rows])
    flags = dict(flags)
    no, zero = jnp.zeros((), bool), jnp.zeros((), jnp.int32)

    def sweep(t, sub):
        key_moves, key_rows, key_A, key_rest = jax.random.split(
            jax.random.fold_in(key_sweeps, t), 4
        )
        Z, _, _ = feature_moves(key_moves, sub, NUM_MOVES)
        Z, _, _ = _collapsed_sweep_Z(key_rows, sub._replace(Z=Z), kappa=kappa)
        return finish_sweep((key_A, key_rest), sub_data, hyper, sub, Z, no, zero, flags)[0]

    sub = jax.lax.fori_loop(0, init_sweeps, sweep, sub)
    X = jnp.where(data.mask > 0, data.X - sub.offset, state.X)
    full = sub._replace(Z=jnp.zeros_like(state.Z).at[rows].set(sub.Z), X=X)
    Z, _, _ = _sweep_Z(jax.random.split(key_extend, 3), full, kappa=kappa)
    return full._replace(Z=Z, A=sample_A(key_A, Z, X, full.sigma_x, full.sigma_a))


class _Step(NamedTuple):
    """The sweep with its number of birth-death moves (hashable: part of the compiled
    program's key); ``slip``: a broken twin's, for the tests."""

    num_moves: int
    slip: str = ""

    def __call__(self, data, hyper, key, state, *, kappa, flags):
        return _parallel_step(
            data,
            hyper,
            key,
            state,
            kappa=kappa,
            flags=flags,
            num_moves=self.num_moves,
            slip=self.slip,
        )


def build_step(
    *,
    num_moves: int = NUM_MOVES,
    kappa: int = 10,
    sample_alpha=True,
    sample_sigma_x=True,
    sample_sigma_a=True,
    sample_offset=True,
):
    """One sweep as ``step(key, state, data, hyper) -> (state, info)``.

    Parameters
    ----------
    num_moves : int
        Feature birth-death moves before each sweep (an integer >= 0; see
        :func:`parallel_gibbs`).
    kappa : int
        Truncation of the number of new features per row.
    sample_alpha, sample_sigma_x, sample_sigma_a : bool
        Which hyperparameters the sweep resamples (the others keep the state's values).
    sample_offset : bool
        Whether the per-column offset is resampled, with the complement moves (else it
        keeps the state's value).

    Returns
    -------
    callable
    """
    num_moves = check_integer(num_moves, "num_moves", 0)
    return sweep_step(
        _Step(num_moves),
        kappa=kappa,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        sample_offset=sample_offset,
    )


def parallel_gibbs(
    data: IBPLGData,
    hyper: IBPLGHyper | None = None,
    *,
    alpha: float = 1.0,
    sigma_x: float = 1.0,
    sigma_a: float = 1.0,
    alpha_prior=FROM_HYPER,
    sample_alpha: bool = True,
    sample_sigma_x: bool = True,
    sample_sigma_a: bool = True,
    sample_offset: bool = True,
    kappa: int = 10,
    num_moves: int = NUM_MOVES,
    init_sweeps: int = INIT_SWEEPS,
    init_rows: int = INIT_ROWS,
    capacity: int = 16,
    num_init_features: int = NUM_INIT_FEATURES,
    trace_features: bool = True,
    pointwise_log_likelihood: bool = True,
) -> SamplingAlgorithm:
    """Row-parallel Gibbs sampler: every row updated at once given instantiated feature
    probabilities and weights.

    Parameters
    ----------
    data : IBPLGData
        From :func:`make_data`.
    hyper : IBPLGHyper, optional
        The hyperpriors (:func:`make_hyper`; default: its defaults).
    alpha, sigma_x, sigma_a : float
        Starting values (fixed values where the matching ``sample_*`` switch is off).
    alpha_prior : (float, float) or None, optional
        ``(a, b)``: alpha ~ Gamma(a, rate b), sampled (replaces the alpha prior of ``hyper``);
        None: alpha fixed at ``alpha``. Default: the prior in ``hyper``, sampled.
    sample_alpha, sample_sigma_x, sample_sigma_a : bool
        Which hyperparameters are sampled.
    sample_offset : bool
        Sample each column's offset (flat prior; the default): the fit is then exactly the
        same whatever the data's origin (see :func:`make_data`), and each sweep ends with
        the complement moves (:func:`~bnpjax.models.ibp_lg.conditionals.complement_moves`)
        that keep a feature and its complement from being held as a second background.
        False holds it at the data's background level (``make_data(..., center=)``,
        default 0): Griffiths and Ghahramani's model.
    kappa : int
        Truncation of the number of new features per row.
    num_moves : int
        Feature birth-death moves before each sweep, ``A`` integrated out
        (:func:`~bnpjax.models.ibp_lg.feature_moves.feature_moves`; then ``A | Z, X``):
        a feature that explains nothing, such as one planted by the random start, is
        removed whole instead of by a walk of its count to zero that takes of the order
        of ``N`` sweeps. 0 turns them off (the sampler of Zhang et al. alone).
    init_sweeps, init_rows : int
        The start: ``init_sweeps`` collapsed Gibbs sweeps, each after ``num_moves``
        birth-death moves, on ``init_rows`` rows drawn at random (all rows when there are
        fewer), from the random start of ``num_init_features`` features; then every row's
        features from one row-parallel sweep given the subsample's. ``init_sweeps=0``: the
        random start itself. Each chain draws its own subsample and start.
    capacity : int
        Initial size of the feature buffer (the driver grows it).
    num_init_features : int
        Number of random starting features (an integer >= 0, at most ``capacity`` used).
    trace_features : bool
        Keep ``Z``, ``A`` and ``active`` per draw.
    pointwise_log_likelihood : bool
        Keep the log density of every observed entry (``log_likelihood`` group, ``obs`` dim)
        for ``az.loo``; missing entries are never scored.

    Returns
    -------
    SamplingAlgorithm

    References
    ----------
    Zhang, M. M., Dubey, A. & Williamson, S. A. (2017). Parallel Markov chain Monte Carlo
    for the Indian buffet process. arXiv:1703.03457.
    Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
    review. *JMLR* 12, 1185-1224.
    """
    s = resolve(
        data,
        hyper,
        alpha=alpha,
        sigma_x=sigma_x,
        sigma_a=sigma_a,
        alpha_prior=alpha_prior,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        sample_offset=sample_offset,
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        trace_features=trace_features,
        pointwise_log_likelihood=pointwise_log_likelihood,
    )
    num_moves = check_integer(num_moves, "num_moves", 0)
    return build_algorithm(
        _Step(num_moves),
        "parallel_gibbs",
        data,
        s,
        _warm_init,
        init_sweeps=check_integer(init_sweeps, "init_sweeps", 0),
        init_rows=check_integer(init_rows, "init_rows", 1),
        kappa=s.kappa,
        flags=s.flags,
    )


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `parallel_gibbs.init` and `.build_step`.
parallel_gibbs.init = init
parallel_gibbs.build_step = build_step
