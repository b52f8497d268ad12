"""The model's shared math: the Gaussian posterior of the weights ``A``, the conjugate
hyperparameter updates, the weights of the number of new features of a row, the log joint and
the pointwise log-likelihood. Both samplers use these; nothing here is duplicated in them.

References
----------
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224 (sec. 5: the linear-Gaussian model; eq. 14: P([Z])).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import gammaln

from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper, IBPLGInfo, IBPLGState
from bnpjax.ops import sample_gamma, truncated_poisson_log_pmf
from bnpjax.priors import ibp

__all__ = [
    "complement_moves",
    "entry_log_likelihood",
    "finish_sweep",
    "hyper_updates",
    "log_joint",
    "new_feature_log_weights",
    "posterior_A",
    "sample_A",
]

_LOG_2PI = math.log(2 * math.pi)


def _slot_normals(key, capacity, D, dtype):
    return jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(key, k), (D,), dtype))(
        jnp.arange(capacity)
    )


def posterior_A(Z, X, ratio):
    """Cholesky factor of ``M = Z'Z + ratio I`` and the posterior mean ``M^-1 Z'X`` of ``A``."""
    C = Z.shape[1]
    M = Z.T @ Z + ratio * jnp.eye(C, dtype=Z.dtype)
    chol = jnp.linalg.cholesky(M)
    return chol, cho_solve((chol, True), Z.T @ X)


def sample_A(key, Z, X, sigma_x, sigma_a):
    """``A | Z, X ~ N(mu, sigma_x^2 M^-1)`` column by column; inactive columns are zero."""
    chol, mean = posterior_A(Z, X, (sigma_x / sigma_a) ** 2)
    noise = _slot_normals(key, Z.shape[1], X.shape[1], X.dtype)
    A = mean + sigma_x * solve_triangular(chol.T, noise, lower=False)
    return A * (Z.sum(0) > 0)[:, None]


def hyper_updates(key, data, hyper, Z, A, state, flags):
    """``sigma_x``, ``sigma_a``, ``alpha``, the offset and the missing entries from their
    conditionals (each hyperparameter and the offset only where its ``flags`` entry is on).

    The three Gamma variates come from one vectorised draw: one rejection sampler in the
    compiled program instead of three keeps compilation short. ``state.X`` is the data less
    the offset; the offset's conditional, given the imputed data, is Gaussian per column:
    precision ``N / sigma_x^2 + offset_precision``, mean ``sum_n (x_nd - (Z A)_nd) / sigma_x^2``
    over that precision. A column with nothing observed keeps its offset (at the background
    level: under the flat prior it would have no posterior)."""
    key_gamma, key_x = jax.random.split(key)
    N, D = data.X.shape
    active = Z.sum(0) > 0
    k_plus = jnp.sum(active)
    X = state.X
    resid = X - Z @ A
    shapes = jnp.stack(
        [
            hyper.sigma_x_shape + 0.5 * N * D,
            hyper.sigma_a_shape + 0.5 * k_plus * D,
            ibp.alpha_posterior(k_plus, N, hyper.alpha_shape, hyper.alpha_rate)[0],
        ]
    ).astype(X.dtype)
    rates = jnp.stack(
        [
            hyper.sigma_x_scale + 0.5 * jnp.sum(resid**2),
            hyper.sigma_a_scale + 0.5 * jnp.sum(A**2),
            ibp.alpha_posterior(k_plus, N, hyper.alpha_shape, hyper.alpha_rate)[1],
        ]
    ).astype(X.dtype)
    gammas = sample_gamma(key_gamma, shapes, X.dtype) / rates
    sigma_x = jnp.where(flags["sample_sigma_x"], jax.lax.rsqrt(gammas[0]), state.sigma_x)
    sigma_a = jnp.where(flags["sample_sigma_a"], jax.lax.rsqrt(gammas[1]), state.sigma_a)
    alpha = jnp.where(flags["sample_alpha"], gammas[2], state.alpha)
    offset = state.offset
    if flags.get("sample_offset", False):
        # a key of its own (folded in, not split off), so that the draws of a sampler
        # without an offset are those it made before the offset existed
        key_offset = jax.random.fold_in(key, 0x0FF5E7)
        precision = N / sigma_x**2 + hyper.offset_precision
        mean = jnp.sum(resid + offset, axis=0) / sigma_x**2 / precision
        noise = jax.random.normal(key_offset, offset.shape, X.dtype)
        offset = jnp.where(data.mask.sum(0) > 0, mean + noise * jax.lax.rsqrt(precision), offset)
    noise = jax.random.normal(key_x, X.shape, X.dtype)
    X = jnp.where(data.mask > 0, data.X - offset, Z @ A + sigma_x * noise)
    return IBPLGState(Z, A, alpha, sigma_x, sigma_a, X, offset)


def log_joint(data: IBPLGData, hyper: IBPLGHyper, state: IBPLGState, flags=None) -> jax.Array:
    """``log p(X_obs, Z, A, sigma, alpha, offset)``: the observed entries, ``A`` of the active
    columns, the IBP probability of ``[Z]`` (:func:`bnpjax.priors.ibp.log_prob`) and the
    hyperpriors of the hyperparameters (and of the offset, when proper) sampled according to
    ``flags``.

    References
    ----------
    Griffiths & Ghahramani (2011), eq. 14 (P([Z])) and sec. 5 (the likelihood).
    """
    D = data.X.shape[1]
    active = state.Z.sum(0) > 0
    resid = (data.X - state.offset - state.Z @ state.A) * data.mask
    sx2, sa2 = state.sigma_x**2, state.sigma_a**2
    log_x = -0.5 * jnp.sum(data.mask) * (_LOG_2PI + jnp.log(sx2)) - 0.5 * jnp.sum(resid**2) / sx2
    log_a = -0.5 * jnp.sum(active) * D * (_LOG_2PI + jnp.log(sa2)) - 0.5 * jnp.sum(state.A**2) / sa2
    out = log_x + log_a + ibp.log_prob(state.Z, state.alpha)
    flags = flags or {}
    if flags.get("sample_offset", False):  # the flat prior (precision 0) adds a constant
        p = hyper.offset_precision
        safe = jnp.where(p > 0, p, 1.0)
        log_offset = 0.5 * D * (jnp.log(safe) - _LOG_2PI) - 0.5 * p * jnp.sum(state.offset**2)
        out += jnp.where(p > 0, log_offset, 0.0)
    if flags.get("sample_alpha", False):
        a, b = hyper.alpha_shape, hyper.alpha_rate
        out += a * jnp.log(b) - gammaln(a) + (a - 1) * jnp.log(state.alpha) - b * state.alpha
    for name, var in (("sigma_x", sx2), ("sigma_a", sa2)):
        if flags.get(f"sample_{name}", False):
            a, s = getattr(hyper, f"{name}_shape"), getattr(hyper, f"{name}_scale")
            out += a * jnp.log(s) - gammaln(a) - (a + 1) * jnp.log(var) - s / var
    return out


def _info(data, hyper, state, flags, exceeded, needed):
    active = state.Z.sum(0) > 0
    return IBPLGInfo(
        lp=log_joint(data, hyper, state, flags),
        num_features=jnp.sum(active).astype(jnp.int32),
        capacity_exceeded=exceeded,
        capacity_needed=needed.astype(jnp.int32),
    )


def complement_moves(key, hyper, Z, A, state, movable, *, prior_ratio=True):
    r"""One Metropolis-Hastings complement move per live feature (held by 1 to N-1 rows),
    in slot order: ``z_k -> 1 - z_k``, ``a_k -> -a_k``, ``offset -> offset + a_k``.

    With a sampled offset, a feature and its complement explain the data equally well:
    ``Z' A' = Z A - a_k``, so ``offset' + Z' A' = offset + Z A`` entry by entry (the imputed
    entries of ``X`` are held fixed; ``state.X``, the data less the offset, moves by
    ``-a_k``; in a column with nothing observed, ``movable`` False, the offset stays at the
    background level and the imputed entries move instead). The move is a deterministic
    involution with unit Jacobian (a sign change and translations), ``A``'s prior is
    symmetric, and the IBP probability of the slot-labelled ``Z`` changes by the column's
    factor ``(N - m)! (m - 1)! / N!`` alone, so the acceptance ratio is
    ``m_k / (N - m_k)`` times the offset prior's ratio (1 under the default flat prior).
    Without this move a feature held by nearly every row (a second background level) is
    kept for many sweeps: the row-by-row flips reach its sparse complement only through
    states of low probability. ``prior_ratio=False`` is the broken twin of the Geweke
    table (the IBP's ratio forgotten: every proposal accepted).

    References
    ----------
    Griffiths & Ghahramani (2011), eq. 14 (the column factor of P([Z])).
    Tierney, L. (1994). Markov chains for exploring posterior distributions. *Ann. Statist.*
    22, 1701-1762 (deterministic involutions as Metropolis-Hastings proposals).
    """
    N = Z.shape[0]
    m = Z.sum(0)
    live = (m > 0.5) & (m < N - 0.5)
    # one key per slot, as for A's noise: the draws do not depend on the buffer's capacity,
    # so a chain whose buffer grows at another step (a resumed run) makes the same moves
    log_u = jnp.log(
        jax.vmap(lambda k: jax.random.uniform(jax.random.fold_in(key, k), (), Z.dtype))(
            jnp.arange(Z.shape[1])
        )
    )
    p = jnp.asarray(hyper.offset_precision, Z.dtype)

    def column(k, carry):
        Z, A, offset, X = carry
        log_r = jnp.log(m[k]) - jnp.log(N - m[k]) if prior_ratio else 0.0
        new_offset = offset + A[k] * movable
        log_r = log_r - 0.5 * p * (new_offset @ new_offset - offset @ offset)
        do = live[k] & (log_u[k] < log_r)
        return (
            jnp.where(do, Z.at[:, k].set(1 - Z[:, k]), Z),
            jnp.where(do, A.at[k].set(-A[k]), A),
            jnp.where(do, new_offset, offset),
            jnp.where(do, X - A[k], X),
        )

    Z, A, offset, X = jax.lax.fori_loop(0, Z.shape[1], column, (Z, A, state.offset, state.X))
    return Z, A, state._replace(X=X, offset=offset)


def finish_sweep(keys, data, hyper, state, Z, exceeded, shortfall, flags):
    """The end of a sweep of either sampler, given its new ``Z``: ``A | Z, X``, then (with a
    sampled offset) :func:`complement_moves`, then :func:`hyper_updates`, and the step's info
    (``keys``: the keys of the two draws). In the collapsed samplers ``A`` is drawn exactly
    from its conditional here, so the moves see the joint state; the next sweep integrates
    ``A`` out again."""
    key_A, key_rest = keys
    A = sample_A(key_A, Z, state.X, state.sigma_x, state.sigma_a)
    if flags.get("sample_offset", False):
        # a key of its own (folded in), so that the other draws of the step are unchanged
        key_move = jax.random.fold_in(key_A, 0xC0)
        Z, A, state = complement_moves(key_move, hyper, Z, A, state, data.mask.sum(0) > 0)
    new = hyper_updates(key_rest, data, hyper, Z, A, state, flags)
    needed = jnp.sum(Z.sum(0) > 0) + shortfall
    return new, _info(data, hyper, new, flags, exceeded, needed)


def new_feature_log_weights(alpha, rate_rows, kappa, rss, base_var, sigma_a2, D):
    """``log p(k_new = k)`` for ``k = 0..kappa`` up to a constant: a Poisson(alpha / N) prior
    truncated at ``kappa`` times the Gaussian predictive of the row with ``k`` new features
    (variance ``base_var + k sigma_a^2``)."""
    k = jnp.arange(kappa + 1, dtype=rss.dtype)
    var = base_var[..., None] + k * sigma_a2
    log_prior = truncated_poisson_log_pmf(jnp.arange(kappa + 1), alpha / rate_rows, kappa)
    return log_prior - 0.5 * D * jnp.log(var) - 0.5 * rss[..., None] / var


def entry_log_likelihood(X, observed, Z, A, sigma_x) -> jax.Array:
    """``log N(x_nd | (Z A)_nd, sigma_x^2)`` at the flat entries ``observed`` of ``X``
    (row-major indices), shape (len(observed),)."""
    mean = (Z @ A).reshape(-1)[observed]
    x = X.reshape(-1)[observed]
    sx2 = sigma_x**2
    return -0.5 * (_LOG_2PI + jnp.log(sx2)) - 0.5 * (x - mean) ** 2 / sx2
