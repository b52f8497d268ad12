r"""Collapsed Gibbs sampler of the linear-Gaussian IBP model.

Rows in sequence with ``A`` integrated out: the predictive of row ``i`` given the others is
Gaussian with mean ``z_i mu_-i`` and variance ``sigma_x^2 (1 + z_i M_-i^-1 z_i')``
(``M = Z'Z + sigma_x^2 / sigma_a^2 I``), kept by rank-one (Sherman-Morrison) updates. A row's
singletons stay in the predictive while its other entries are flipped and are then replaced
by ``k_new ~ p(k) ∝ Poisson(k; alpha / N) N(x_i; z_i mu_-i, (sigma_x^2 (1 + q) + k sigma_a^2) I)``,
``k <= kappa``. After the sweep: ``A | Z, X``, then the conjugate hyperparameter updates and
the missing entries. ``M^-1`` and ``mu`` are recomputed by Cholesky at the start of each sweep.

References
----------
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224 (sec. 5).
Doshi-Velez, F. & Ghahramani, Z. (2009). Accelerated sampling for the Indian buffet process.
*ICML*.
van Dyk, D. A. & Park, T. (2008). Partially collapsed Gibbs samplers. *JASA* 103, 790-796.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.models.ibp_lg._kernel import (
    FROM_HYPER,
    NUM_INIT_FEATURES,
    build_algorithm,
    init,
    resolve,
    sweep_step,
)
from bnpjax.models.ibp_lg.conditionals import finish_sweep, new_feature_log_weights, posterior_A
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper
from bnpjax.priors import ibp

__all__ = ["build_step", "collapsed_gibbs", "init"]


def _collapsed_row(carry, xs, *, X, N, D, ratio, sigma_x2, sigma_a2, alpha, kappa):
    Z, m, Minv, mu, exceeded, shortfall = carry
    i, uniforms, gumbels = xs
    C = Z.shape[1]
    z, x = Z[i], X[i]

    # remove row i (Sherman-Morrison downdate of M^-1 and mu)
    v = Minv @ z
    s = z @ v
    Minv = Minv + jnp.outer(v, v) / (1 - s)
    mu = mu + jnp.outer(v, z @ mu - x) / (1 - s)
    m_minus = m - z
    free = m_minus < 0.5
    # free columns hold the prior exactly (no rounding residue from the updates)
    eye = jnp.eye(C, dtype=Z.dtype)
    Minv = jnp.where(free[:, None] | free[None, :], eye / ratio, Minv)
    mu = jnp.where(free[:, None], 0.0, mu)
    # Row i's singletons stay in the predictive while its other features are flipped (each
    # flip conditions on the current state), and are redrawn afterwards as its new features.
    w = Minv @ z
    q = z @ w
    resid = x - z @ mu
    rss = resid @ resid

    def log_pred(q, rss):
        var = sigma_x2 * (1 + q)
        return -0.5 * D * jnp.log(var) - 0.5 * rss / var

    # only the features other rows hold are flipped: loop over those slots alone
    held = jnp.argsort(free)  # stable: the non-free slots first, in slot order

    def flip(j, c):
        k = held[j]
        z, w, q, resid, rss = c
        delta = 1 - 2 * z[k]
        q_new = q + 2 * delta * w[k] + Minv[k, k]
        rss_new = rss - 2 * delta * (resid @ mu[k]) + mu[k] @ mu[k]
        p_on = m_minus[k] / N
        log_prior_cur = jnp.where(z[k] > 0, jnp.log(p_on), jnp.log1p(-p_on))
        log_prior_new = jnp.where(z[k] > 0, jnp.log1p(-p_on), jnp.log(p_on))
        log_odds = log_pred(q_new, rss_new) + log_prior_new - log_pred(q, rss) - log_prior_cur
        do = jnp.log(uniforms[k]) < -jax.nn.softplus(-log_odds)
        return (
            jnp.where(do, z.at[k].set(1 - z[k]), z),
            jnp.where(do, w + delta * Minv[:, k], w),
            jnp.where(do, q_new, q),
            jnp.where(do, resid - delta * mu[k], resid),
            jnp.where(do, rss_new, rss),
        )

    num_held = jnp.sum(~free)
    z, w, q, resid, rss = jax.lax.fori_loop(0, num_held, flip, (z, w, q, resid, rss))
    # singletons have zero predictive mean, so dropping them changes q only
    singles = jnp.where(free, z, 0.0)
    z = z - singles
    q = q - 2 * singles @ w + singles @ Minv @ singles

    log_w = new_feature_log_weights(alpha, N, kappa, rss, sigma_x2 * (1 + q), sigma_a2, D)
    k_new = jnp.argmax(log_w + gumbels)  # Gumbel-max with noise drawn before the loop
    owned, short = ibp.place_new_features(free, k_new[None])
    z = z + owned[0].astype(z.dtype)

    # add row i back (rank-one update)
    v = Minv @ z
    s = z @ v
    Minv = Minv - jnp.outer(v, v) / (1 + s)
    mu = mu + jnp.outer(v, x - z @ mu) / (1 + s)
    Z = Z.at[i].set(z)
    return (Z, m_minus + z, Minv, mu, exceeded | (short > 0), jnp.maximum(shortfall, short)), None


def _sweep_Z(key, state, *, kappa):
    """The rows of ``Z`` in sequence with ``A`` integrated out: the new ``Z``, whether the
    buffer was too small, and by how much."""
    N, D = state.X.shape
    sigma_x2, sigma_a2 = state.sigma_x**2, state.sigma_a**2
    ratio = sigma_x2 / sigma_a2
    chol, mu = posterior_A(state.Z, state.X, ratio)
    Minv = cho_solve((chol, True), jnp.eye(state.Z.shape[1], dtype=state.Z.dtype))
    row = functools.partial(
        _collapsed_row,
        X=state.X,
        N=N,
        D=D,
        ratio=ratio,
        sigma_x2=sigma_x2,
        sigma_a2=sigma_a2,
        alpha=state.alpha,
        kappa=kappa,
    )
    init = (state.Z, state.Z.sum(0), Minv, mu, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    # all random numbers of the sweep drawn up front, outside the sequential loops
    key_flips, key_new = jax.random.split(key)
    uniforms = jax.random.uniform(key_flips, state.Z.shape, state.Z.dtype)
    gumbels = jax.random.gumbel(key_new, (N, kappa + 1), state.Z.dtype)
    xs = (jnp.arange(N), uniforms, gumbels)
    (Z, _, _, _, exceeded, shortfall), _ = jax.lax.scan(row, init, xs)
    return Z, exceeded, shortfall


def _collapsed_step(data, hyper, key, state, *, kappa, flags):
    key_rows, key_A, key_rest = jax.random.split(key, 3)
    Z, exceeded, shortfall = _sweep_Z(key_rows, state, kappa=kappa)
    return finish_sweep((key_A, key_rest), data, hyper, state, Z, exceeded, shortfall, flags)


def build_step(
    *,
    kappa: int = 10,
    sample_alpha=True,
    sample_sigma_x=True,
    sample_sigma_a=True,
    sample_offset=True,
):
    """One sweep as ``step(key, state, data, hyper) -> (state, info)``.

    Parameters
    ----------
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
    return sweep_step(
        _collapsed_step,
        kappa=kappa,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        sample_offset=sample_offset,
    )


def collapsed_gibbs(
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
    capacity: int = 16,
    num_init_features: int = NUM_INIT_FEATURES,
    trace_features: bool = True,
    pointwise_log_likelihood: bool = True,
) -> SamplingAlgorithm:
    """Collapsed Gibbs sampler with rank-one updates (rows in sequence, ``A`` integrated
    out while ``Z`` is updated).

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
    Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
    review. *JMLR* 12, 1185-1224 (sec. 5.1, the collapsed Gibbs sampler).
    Doshi-Velez, F. & Ghahramani, Z. (2009). Accelerated sampling for the Indian buffet
    process. *ICML*.
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
    return build_algorithm(_collapsed_step, "collapsed_gibbs", data, s)


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `collapsed_gibbs.init` and `.build_step`.
collapsed_gibbs.init = init
collapsed_gibbs.build_step = build_step
