r"""The linear-Gaussian latent feature model with an Indian buffet process prior.

Model (``../shared/seeds/002_c2a7c7ffebfd8867.txt``; Griffiths & Ghahramani 2011, sec. 5)::

    alpha ~ Gamma(a_alpha, rate b_alpha)         Z | alpha ~ IBP(alpha)          (N x K+)
    sigma_A^2 ~ InvGamma(a_A, b_A)               A_kd ~ N(0, sigma_A^2)           (K+ x D)
    sigma_X^2 ~ InvGamma(a_X, b_X)               X = Z A + E,  E_nd ~ N(0, sigma_X^2)

Entries of ``X`` may be missing at random (``mask`` False); they are imputed as part of the
state (data augmentation), which keeps every conditional below exact.

Two samplers, both kernels for :func:`bnpjax.sample`, share the state
:class:`IBPLGState` (``Z``, ``A``, ``alpha``, ``sigma_x``, ``sigma_a``, imputed ``X``) kept in a
fixed-capacity feature buffer that the driver grows.

**Collapsed Gibbs** (:func:`collapsed_gibbs`). Rows in sequence with ``A`` integrated out.
With :math:`M = Z^\top Z + (\sigma_X^2 / \sigma_A^2) I` and :math:`\mu = M^{-1} Z^\top X`
(the posterior mean of ``A``; its covariance is :math:`\sigma_X^2 M^{-1}` for every column),
the predictive of row ``i`` given the other rows is

.. math::

    x_i \mid z_i, X_{-i}, Z_{-i} \sim \mathcal N\!\left(z_i \mu_{-i},\;
        \sigma_X^2 (1 + z_i M_{-i}^{-1} z_i^\top)\, I_D\right),

and :math:`p(X \mid Z) = p(X_{-i} \mid Z_{-i})\, p(x_i \mid z_i, X_{-i}, Z_{-i})`, so this
predictive is all the collapsed conditional of :math:`z_{ik}` needs. Removing and re-adding row
``i`` are rank-one updates (Sherman-Morrison; Doshi-Velez & Ghahramani 2009's accelerated
scheme): with :math:`v = M^{-1} z_i^\top`, :math:`s = z_i v`,

.. math::

    M_{-i}^{-1} = M^{-1} + \frac{v v^\top}{1 - s}, \qquad
    \mu_{-i} = \mu + \frac{v (z_i \mu - x_i)}{1 - s},

(and the reverse with signs flipped), ``O(K^2 + KD)``; each flip of :math:`z_{ik}` changes the
predictive mean by :math:`\pm\mu_{-i,k}` and :math:`z_i M_{-i}^{-1} z_i^\top` by
:math:`\pm 2 (M_{-i}^{-1} z_i^\top)_k + (M_{-i}^{-1})_{kk}`, ``O(K + D)``. The prior of an
existing column is :math:`m_{-i,k} / N` (seed 002 with INDEX's correction); the singletons of
row ``i`` are replaced by :math:`k_{new} \in 0..\kappa` new features drawn exactly from

.. math::

    p(k_{new} = k) \propto \mathrm{Poisson}(k; \alpha / N)\;
        \mathcal N\!\left(x_i; z_i \mu_{-i}, (\sigma_X^2(1 + z_i M_{-i}^{-1} z_i^\top)
        + k \sigma_A^2) I_D\right)

(new features have prior weights, so the covariance gains :math:`k \sigma_A^2`; an ``O(kappa)``
closed form). Row ``i``'s singletons stay in the predictive while its other entries are
flipped and are only then replaced by the new features: seed 002's algorithm deletes them
first, which is exact for the prior alone but biases the posterior once the likelihood couples
a row's features (the Geweke test of this module catches that variant). :math:`M^{-1}` and
:math:`\mu` are recomputed exactly by Cholesky at the start of each sweep, so rounding errors
of the updates never accumulate past one sweep.

After the sweep: :math:`A \sim p(A \mid Z, X, \sigma)` (Gaussian), then the conjugate updates
:math:`\sigma_X^2 \mid Z, A, X \sim \mathrm{InvGamma}(a_X + ND/2, b_X + \lVert X - ZA\rVert^2/2)`,
:math:`\sigma_A^2 \mid A \sim \mathrm{InvGamma}(a_A + K_+ D/2, b_A + \lVert A \rVert^2/2)`,
missing entries :math:`x_{nd} \sim \mathcal N((ZA)_{nd}, \sigma_X^2)`, and
:math:`\alpha \mid Z \sim \mathrm{Gamma}(a_\alpha + K_+, b_\alpha + H_N)`. This is a partially
collapsed Gibbs sampler (van Dyk & Park 2008) whose blocks are :math:`(Z, A)` drawn as
:math:`Z \mid \cdot` with ``A`` marginalised followed by :math:`A \mid Z, \cdot`; then
:math:`\sigma`, the missing entries and :math:`\alpha` from their full conditionals. Every block
is an exact conditional of the joint, so the joint posterior is invariant.

**Row-parallel Gibbs** (:func:`parallel_gibbs`). Rows are coupled in the collapsed sampler
through the counts :math:`m_{-i,k}` and through ``A``. Instantiating what couples them makes the
rows conditionally independent (Zhang, Dubey & Williamson 2017's hybrid scheme, here with every
row parallel). One sweep:

1. for each instantiated column :math:`k`, in a uniformly random order: draw
   :math:`\pi_k \mid z_k \sim \mathrm{Beta}(m_k, N - m_k + 1)`, then the whole column
   :math:`z_k \mid \pi_k, A, \sigma_X, X` for all rows at once (given :math:`\pi_k` and ``A``
   the rows share nothing), conditioned on staying non-empty;
2. remove every row's singleton columns and redraw them for all rows at once: row ``i``
   switches on :math:`k` new columns with

   .. math::

       p(k_{new} = k) \propto \mathrm{Poisson}(k; \alpha / N)\;
           \mathcal N\!\left(x_i; z_i A, (\sigma_X^2 + k \sigma_A^2) I_D\right);

3. :math:`A \mid Z, X` and the rest as in the collapsed sampler.

Each block is an exact conditional of the IBP model; the argument (the IBP's features as a
Poisson process of probability-column pairs) is in :mod:`bnpjax.priors.ibp`. :math:`\pi` is
redrawn before every use, so it is not kept in the state. The sweep costs ``O(N K D)`` as
``K`` sequential steps over all rows in parallel, plus ``O(N K^2 + K^3)`` for ``A``.

Both samplers truncate the number of new features per row at ``kappa`` (seed 001, App. A).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve, solve_triangular
from jax.scipy.special import gammaln

from bnpjax._checks import check_integer as _integer
from bnpjax._checks import is_positive_finite as _positive_finite
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, concrete_or_none, pad_axis
from bnpjax.ops import sample_categorical, sample_inverse_gamma, truncated_poisson_log_pmf
from bnpjax.priors import ibp

__all__ = [
    "IBPLGData",
    "IBPLGHyper",
    "IBPLGInfo",
    "IBPLGState",
    "collapsed_gibbs",
    "data_sample",
    "heldout_log_likelihood",
    "log_joint",
    "make_data",
    "make_hyper",
    "parallel_gibbs",
    "posterior_mean_features",
    "prior_sample",
    "refresh",
]

_LOG_2PI = math.log(2 * math.pi)


class IBPLGData(NamedTuple):
    """``X`` (N, D) with unobserved entries set to 0, ``mask`` (N, D) 1.0 where observed."""

    X: jax.Array
    mask: jax.Array


class IBPLGHyper(NamedTuple):
    """Gamma(shape, rate) prior of alpha; InvGamma(shape, scale) priors of the variances."""

    alpha_shape: jax.Array
    alpha_rate: jax.Array
    sigma_x_shape: jax.Array
    sigma_x_scale: jax.Array
    sigma_a_shape: jax.Array
    sigma_a_scale: jax.Array


class IBPLGState(NamedTuple):
    """Sampler state: features ``Z`` (N, capacity), weights ``A`` (capacity, D; zero in
    inactive columns), the IBP mass ``alpha``, the noise and weight sds ``sigma_x`` and
    ``sigma_a``, and the data ``X`` with its missing entries imputed."""

    Z: jax.Array  # (N, capacity) in {0, 1}
    A: jax.Array  # (capacity, D); zero in inactive columns
    alpha: jax.Array
    sigma_x: jax.Array
    sigma_a: jax.Array
    X: jax.Array  # (N, D) the data with missing entries imputed


class IBPLGInfo(NamedTuple):
    """Per-step diagnostics: the log joint ``lp`` (:func:`log_joint`), the number of active
    features, and whether (and to what size) the feature buffer must grow."""

    lp: jax.Array
    num_features: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def make_data(X, mask=None) -> IBPLGData:
    """Validate ``X`` (N, D) and the observation ``mask`` (True = observed).

    NaN in ``X`` is accepted only where ``mask`` is False; every row needs at least one
    observed entry. Raises ``ValueError`` naming the argument.
    """
    X = np.asarray(X, dtype=float) if not isinstance(X, np.ndarray) else X
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D array (N, D), got shape {X.shape}")
    if not np.issubdtype(X.dtype, np.number):
        raise ValueError("X must be numeric")
    if mask is None:
        if not np.all(np.isfinite(X)):
            raise ValueError("X contains NaN or inf; pass mask=... (False where missing)")
        mask = np.ones(X.shape, bool)
    mask = np.asarray(mask)
    if mask.shape != X.shape or mask.dtype != bool:
        raise ValueError(f"mask must be a boolean array of shape {X.shape}")
    if not np.all(np.isfinite(X[mask])):
        raise ValueError("X must be finite where mask is True")
    empty = np.flatnonzero(~mask.any(axis=1))
    if empty.size:
        raise ValueError(f"mask leaves rows without any observed entry: {empty[:10].tolist()}")
    dtype = jnp.result_type(float)
    return IBPLGData(jnp.asarray(np.where(mask, X, 0.0), dtype), jnp.asarray(mask, dtype))


def make_hyper(
    *,
    alpha=(1.0, 1.0),
    sigma_x=(1.0, 1.0),
    sigma_a=(1.0, 1.0),
) -> IBPLGHyper:
    """Hyperpriors: ``alpha=(shape, rate)`` of a Gamma, ``sigma_x``/``sigma_a`` = ``(shape,
    scale)`` of the inverse-Gamma priors of the variances."""
    values = [*alpha, *sigma_x, *sigma_a]
    if len(values) != 6 or not all(np.isfinite(v) and v > 0 for v in values):
        raise ValueError("hyperparameters must be pairs of positive numbers")
    dtype = jnp.result_type(float)
    return IBPLGHyper(*(jnp.asarray(v, dtype) for v in values))


# --------------------------------------------------------------------------------------------
# shared pieces


def _slot_normals(key, capacity, D, dtype):
    return jax.vmap(lambda k: jax.random.normal(jax.random.fold_in(key, k), (D,), dtype))(
        jnp.arange(capacity)
    )


def _posterior_A(Z, X, ratio):
    """Cholesky factor of M = Z'Z + ratio I and the posterior mean M^-1 Z'X."""
    C = Z.shape[1]
    M = Z.T @ Z + ratio * jnp.eye(C, dtype=Z.dtype)
    chol = jnp.linalg.cholesky(M)
    return chol, cho_solve((chol, True), Z.T @ X)


def _sample_A(key, Z, X, sigma_x, sigma_a):
    """``A | Z, X ~ N(mu, sigma_x^2 M^-1)`` column by column; inactive columns are zero."""
    chol, mean = _posterior_A(Z, X, (sigma_x / sigma_a) ** 2)
    noise = _slot_normals(key, Z.shape[1], X.shape[1], X.dtype)
    A = mean + sigma_x * solve_triangular(chol.T, noise, lower=False)
    return A * (Z.sum(0) > 0)[:, None]


def _hyper_updates(key, data, hyper, Z, A, state, flags):
    """sigma_X, sigma_A, missing entries, alpha (module docstring), each switchable.

    The three Gamma variates come from one vectorised draw: one rejection sampler in the
    compiled program instead of three keeps compilation short."""
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
    gammas = jax.random.gamma(key_gamma, shapes, dtype=X.dtype) / rates
    sigma_x = jnp.where(flags["sample_sigma_x"], jax.lax.rsqrt(gammas[0]), state.sigma_x)
    sigma_a = jnp.where(flags["sample_sigma_a"], jax.lax.rsqrt(gammas[1]), state.sigma_a)
    alpha = jnp.where(flags["sample_alpha"], gammas[2], state.alpha)
    noise = jax.random.normal(key_x, X.shape, X.dtype)
    X = jnp.where(data.mask > 0, data.X, Z @ A + sigma_x * noise)
    return IBPLGState(Z, A, alpha, sigma_x, sigma_a, X)


def log_joint(data: IBPLGData, hyper: IBPLGHyper, state: IBPLGState, flags=None) -> jax.Array:
    """``log p(X_obs, Z, A, sigma, alpha)``: observed entries, ``A`` of active columns, the
    IBP probability of ``[Z]`` (``../shared/seeds/002_c2a7c7ffebfd8867.txt``, the equation
    after Figure 2.1, in its left-ordered form; :func:`bnpjax.priors.ibp.log_prob`) and the
    hyperpriors of the sampled hyperparameters (``flags``): the joint whose conditionals
    ``P(z_ik = 1 | Z_-(ik), X) ∝ p(X | Z) P(z_ik = 1 | Z_-(ik))`` (seed 002, "Gibbs Sampler for
    Indian Buffet Process") the samplers draw from."""
    D = data.X.shape[1]
    active = state.Z.sum(0) > 0
    resid = (data.X - state.Z @ state.A) * data.mask
    sx2, sa2 = state.sigma_x**2, state.sigma_a**2
    log_x = -0.5 * jnp.sum(data.mask) * (_LOG_2PI + jnp.log(sx2)) - 0.5 * jnp.sum(resid**2) / sx2
    log_a = -0.5 * jnp.sum(active) * D * (_LOG_2PI + jnp.log(sa2)) - 0.5 * jnp.sum(state.A**2) / sa2
    out = log_x + log_a + ibp.log_prob(state.Z, state.alpha)
    flags = flags or {}
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


def _new_feature_log_weights(alpha, rate_rows, kappa, rss, base_var, sigma_a2, D):
    """log p(k_new = k) for k = 0..kappa, up to a constant (module docstring)."""
    k = jnp.arange(kappa + 1, dtype=rss.dtype)
    var = base_var[..., None] + k * sigma_a2
    log_prior = truncated_poisson_log_pmf(jnp.arange(kappa + 1), alpha / rate_rows, kappa)
    return log_prior - 0.5 * D * jnp.log(var) - 0.5 * rss[..., None] / var


# --------------------------------------------------------------------------------------------
# collapsed Gibbs


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

    log_w = _new_feature_log_weights(alpha, N, kappa, rss, sigma_x2 * (1 + q), sigma_a2, D)
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


def _collapsed_step(data, hyper, key, state, *, kappa, flags):
    key_rows, key_A, key_rest = jax.random.split(key, 3)
    N, D = data.X.shape
    sigma_x2, sigma_a2 = state.sigma_x**2, state.sigma_a**2
    ratio = sigma_x2 / sigma_a2
    chol, mu = _posterior_A(state.Z, state.X, ratio)
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
    key_flips, key_new = jax.random.split(key_rows)
    uniforms = jax.random.uniform(key_flips, state.Z.shape, state.Z.dtype)
    gumbels = jax.random.gumbel(key_new, (N, kappa + 1), state.Z.dtype)
    xs = (jnp.arange(N), uniforms, gumbels)
    (Z, _, _, _, exceeded, shortfall), _ = jax.lax.scan(row, init, xs)
    A = _sample_A(key_A, Z, state.X, state.sigma_x, state.sigma_a)
    new = _hyper_updates(key_rest, data, hyper, Z, A, state, flags)
    needed = jnp.sum(Z.sum(0) > 0) + shortfall
    return new, _info(data, hyper, new, flags, exceeded, needed)


# --------------------------------------------------------------------------------------------
# row-parallel Gibbs


def _parallel_step(data, hyper, key, state, *, kappa, flags):
    key_order, key_cols, key_new, key_A, key_rest = jax.random.split(key, 5)
    N, D = data.X.shape
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
    log_w = _new_feature_log_weights(
        state.alpha, N, kappa, rss, jnp.full((N,), sigma_x2), sigma_a2, D
    )
    k_new = sample_categorical(key_new, log_w)
    free = Z.sum(0) < 0.5
    owned, shortfall = ibp.place_new_features(free, k_new)
    Z = Z + owned.astype(Z.dtype)

    A = _sample_A(key_A, Z, X, state.sigma_x, state.sigma_a)
    new = _hyper_updates(key_rest, data, hyper, Z, A, state, flags)
    needed = jnp.sum(Z.sum(0) > 0) + shortfall
    return new, _info(data, hyper, new, flags, shortfall > 0, needed)


# --------------------------------------------------------------------------------------------
# factories


def _init(data, hyper, key, *, capacity, alpha, sigma_x, sigma_a, num_init_features):
    """Start from a random Z with ``num_init_features`` columns (each entry on w.p. 1/2)."""
    key_z, key_a = jax.random.split(key)
    N = data.X.shape[0]
    dtype = data.X.dtype
    slots = jnp.arange(capacity) < num_init_features
    Z = (jax.random.uniform(key_z, (N, capacity), dtype) < 0.5) & slots
    Z = Z.astype(dtype)
    sx = jnp.asarray(sigma_x, dtype)
    sa = jnp.asarray(sigma_a, dtype)
    X = data.X  # missing entries start at 0 and are imputed from the first step on
    A = _sample_A(key_a, Z, X, sx, sa)
    return IBPLGState(Z, A, jnp.asarray(alpha, dtype), sx, sa, X)


def _trace(data, hyper, state, info, *, trace_features, pointwise):
    out = {
        "posterior": {
            "num_features": info.num_features,
            "alpha": state.alpha,
            "sigma_x": state.sigma_x,
            "sigma_a": state.sigma_a,
        },
        "sample_stats": {"lp": info.lp, "num_features": info.num_features},
    }
    if trace_features:
        out["posterior"].update(Z=state.Z.astype(jnp.int8), A=state.A, active=state.Z.sum(0) > 0)
    if pointwise:
        resid = data.X - state.Z @ state.A
        sx2 = state.sigma_x**2
        out["log_likelihood"] = {
            "X": jnp.where(
                data.mask > 0, -0.5 * (_LOG_2PI + jnp.log(sx2)) - 0.5 * resid**2 / sx2, 0.0
            )
        }
    return out


def _grow_state(state: IBPLGState, capacity: int) -> IBPLGState:
    return state._replace(Z=pad_axis(state.Z, 1, capacity), A=pad_axis(state.A, 0, capacity))


def _factory(
    step_fn,
    name,
    data,
    *,
    hyper,
    alpha,
    sigma_x,
    sigma_a,
    sample_alpha,
    sample_sigma_x,
    sample_sigma_a,
    kappa,
    capacity,
    num_init_features,
    trace_features,
    pointwise_log_likelihood,
):
    if not isinstance(data, IBPLGData):
        raise ValueError("data must come from bnpjax.models.ibp_lg.make_data")
    for label, value in (("alpha", alpha), ("sigma_x", sigma_x), ("sigma_a", sigma_a)):
        if not _positive_finite(value):
            raise ValueError(f"{label} must be positive, got {value!r}")
    kappa = _integer(kappa, "kappa", 1)
    capacity = _integer(capacity, "capacity", 1)
    num_init_features = min(_integer(num_init_features, "num_init_features", 0), capacity)
    hyper = make_hyper() if hyper is None else hyper
    if not isinstance(hyper, IBPLGHyper):
        raise ValueError("hyper must come from bnpjax.models.ibp_lg.make_hyper")
    flags = {
        "sample_alpha": bool(sample_alpha),
        "sample_sigma_x": bool(sample_sigma_x),
        "sample_sigma_a": bool(sample_sigma_a),
    }
    frozen_flags = tuple(sorted(flags.items()))
    mask = concrete_or_none(data.mask)
    N, D = data.X.shape
    settings = dict(
        hyper=hyper,
        alpha=alpha,
        sigma_x=sigma_x,
        sigma_a=sigma_a,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        kappa=kappa,
        num_init_features=num_init_features,
        trace_features=trace_features,
        pointwise_log_likelihood=pointwise_log_likelihood,
    )
    return SamplingAlgorithm(
        init=bind(
            _init,
            data,
            hyper,
            capacity=capacity,
            alpha=float(alpha),
            sigma_x=float(sigma_x),
            sigma_a=float(sigma_a),
            num_init_features=num_init_features,
        ),
        step=bind(_step_dispatch, data, hyper, step_fn=step_fn, kappa=kappa, flags=frozen_flags),
        trace=bind(
            _trace,
            data,
            hyper,
            trace_features=bool(trace_features),
            pointwise=bool(pointwise_log_likelihood),
        ),
        spec=ArvizSpec(
            name=f"ibp_lg.{name}",
            dims={
                "Z": ["row", "feature"],
                "A": ["feature", "dim"],
                "active": ["feature"],
                "X": ["row", "dim"],
            },
            observed_data={},
            settings={
                "num_rows": N,
                "num_dims": D,
                "kappa": kappa,
                **flags,
                "num_missing": -1 if mask is None else int(mask.size - mask.sum()),
            },
        ),
        capacity=capacity,
        resize=lambda c: _factory(step_fn, name, data, capacity=c, **settings),
        grow_state=_grow_state,
    )


def _step_dispatch(data, hyper, key, state, *, step_fn, kappa, flags):
    return step_fn(data, hyper, key, state, kappa=kappa, flags=dict(flags))


def collapsed_gibbs(
    data: IBPLGData,
    *,
    hyper: IBPLGHyper | None = None,
    alpha: float = 1.0,
    sigma_x: float = 1.0,
    sigma_a: float = 1.0,
    sample_alpha: bool = True,
    sample_sigma_x: bool = True,
    sample_sigma_a: bool = True,
    kappa: int = 10,
    capacity: int = 16,
    num_init_features: int = 10,
    trace_features: bool = True,
    pointwise_log_likelihood: bool = False,
) -> SamplingAlgorithm:
    """Collapsed Gibbs sampler with rank-one updates (module docstring, "Collapsed Gibbs").

    ``alpha``, ``sigma_x``, ``sigma_a`` are starting values (fixed values when the matching
    ``sample_*`` switch is off); ``hyper`` their priors (:func:`make_hyper`). ``kappa`` truncates
    the number of new features per row; ``capacity`` is the initial feature buffer (grown by
    the driver). ``trace_features`` keeps ``Z``, ``A`` per draw; ``pointwise_log_likelihood``
    stores the observed entries' log densities for ``az.loo``.

    Implements ``../shared/seeds/002_c2a7c7ffebfd8867.txt``, "Gibbs Sampler for Indian Buffet
    Process": the complete conditional ``P(z_ik = 1 | Z_-(ik), X) ∝ p(X | Z) P(z_ik = 1 |
    Z_-(ik))`` with prior ``m_{-i,k}/N`` (INDEX's correction of the seed's ``m_{-i,k}/i``),
    ``Poisson(alpha/N)`` new columns per row (truncated at ``kappa``, seed 001 App. A), and
    alpha from the seed's last equation, ``Gamma(a + K_+, rate b + H_N)`` (the seed's ``b``
    is a scale; :func:`make_hyper` takes the rate).
    ``num_init_features`` (an integer >= 0, at most ``capacity`` used) sets the random start.
    """
    return _factory(
        _collapsed_step,
        "collapsed_gibbs",
        data,
        hyper=hyper,
        alpha=alpha,
        sigma_x=sigma_x,
        sigma_a=sigma_a,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        trace_features=trace_features,
        pointwise_log_likelihood=pointwise_log_likelihood,
    )


def parallel_gibbs(
    data: IBPLGData,
    *,
    hyper: IBPLGHyper | None = None,
    alpha: float = 1.0,
    sigma_x: float = 1.0,
    sigma_a: float = 1.0,
    sample_alpha: bool = True,
    sample_sigma_x: bool = True,
    sample_sigma_a: bool = True,
    kappa: int = 10,
    capacity: int = 16,
    num_init_features: int = 10,
    trace_features: bool = True,
    pointwise_log_likelihood: bool = False,
) -> SamplingAlgorithm:
    """Row-parallel Gibbs sampler (module docstring, "Row-parallel Gibbs"): every row updated
    at once given instantiated feature probabilities and weights; same options as
    :func:`collapsed_gibbs`.

    The IBP conditionals of ``../shared/seeds/002_c2a7c7ffebfd8867.txt`` ("Gibbs Sampler for
    Indian Buffet Process": ``Poisson(alpha/N)`` new columns per row; alpha from its last
    equation) in their instantiated, row-parallel form (:mod:`bnpjax.priors.ibp`)."""
    return _factory(
        _parallel_step,
        "parallel_gibbs",
        data,
        hyper=hyper,
        alpha=alpha,
        sigma_x=sigma_x,
        sigma_a=sigma_a,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        trace_features=trace_features,
        pointwise_log_likelihood=pointwise_log_likelihood,
    )


# --------------------------------------------------------------------------------------------
# Geweke and evaluation helpers


def prior_sample(
    key,
    num_rows: int,
    num_dims: int,
    hyper: IBPLGHyper,
    *,
    capacity: int,
    flags: dict,
    alpha: float = 1.0,
    sigma_x: float = 1.0,
    sigma_a: float = 1.0,
) -> IBPLGState:
    """Parameters from the prior (``X`` left at zero: see :func:`data_sample`). Hyperparameters
    whose ``sample_*`` flag is off stay at the given values."""
    key_alpha, key_sx, key_sa, key_z, key_a = jax.random.split(key, 5)
    dtype = jnp.result_type(float)
    alpha = jnp.asarray(alpha, dtype)
    sx = jnp.asarray(sigma_x, dtype)
    sa = jnp.asarray(sigma_a, dtype)
    if flags.get("sample_alpha"):
        alpha = jax.random.gamma(key_alpha, hyper.alpha_shape, dtype=dtype) / hyper.alpha_rate
    if flags.get("sample_sigma_x"):
        sx = jnp.sqrt(sample_inverse_gamma(key_sx, hyper.sigma_x_shape, hyper.sigma_x_scale))
    if flags.get("sample_sigma_a"):
        sa = jnp.sqrt(sample_inverse_gamma(key_sa, hyper.sigma_a_shape, hyper.sigma_a_scale))
    draw = ibp.sample_buffet(key_z, alpha, num_rows, capacity)
    A = sa * jax.random.normal(key_a, (capacity, num_dims), dtype) * draw.active[:, None]
    X = jnp.zeros((num_rows, num_dims), dtype)
    return IBPLGState(draw.Z, A, alpha, sx, sa, X)


def data_sample(key, state: IBPLGState, data: IBPLGData) -> IBPLGData:
    """Fresh ``X ~ N(Z A, sigma_X^2)`` on the mask of ``data`` (for the Geweke harness)."""
    X = state.Z @ state.A + state.sigma_x * jax.random.normal(key, state.X.shape, state.X.dtype)
    return IBPLGData(X * data.mask, data.mask)


def refresh(data: IBPLGData, state: IBPLGState) -> IBPLGState:
    """Put freshly drawn data into the state (observed entries; missing ones keep their
    imputed values)."""
    return state._replace(X=jnp.where(data.mask > 0, data.X, state.X))


def posterior_mean_features(Z, X, sigma_x: float, sigma_a: float, mask=None) -> np.ndarray:
    """``E[A | Z, X] = (Z'Z + sigma_x^2/sigma_a^2 I)^-1 Z'X`` for the active columns of ``Z``
    (host NumPy; per column of ``X`` over its observed rows when ``mask`` is given): the
    posterior mean of the weights of the linear-Gaussian model behind ``p(X | Z)`` in
    ``../shared/seeds/002_c2a7c7ffebfd8867.txt``'s posterior sampler (module docstring, ``mu``
    of the collapsed predictive)."""
    Z = np.asarray(Z, float)
    Z = Z[:, Z.sum(0) > 0]
    X = np.asarray(X, float)
    mask = np.isfinite(X) if mask is None else np.asarray(mask, bool)
    ratio = (sigma_x / sigma_a) ** 2
    out = np.empty((Z.shape[1], X.shape[1]))
    for d in range(X.shape[1]):
        Zd = Z[mask[:, d]]
        out[:, d] = np.linalg.solve(Zd.T @ Zd + ratio * np.eye(Z.shape[1]), Zd.T @ X[mask[:, d], d])
    return out


def heldout_log_likelihood(idata, X_true, heldout_mask) -> dict[str, float | np.ndarray]:
    """Posterior predictive log density of held-out entries.

    ``log p(x_nd | X_obs) ~= log mean_s N(x_nd | (Z_s A_s)_nd, sigma_X,s^2)`` over the kept
    draws (needs ``trace_features=True``). Returns the pointwise values and their mean.
    """
    from bnpjax.metrics import log_mean_exp

    heldout_mask = np.asarray(heldout_mask, bool)
    X_true = np.asarray(X_true, float)
    if X_true.shape != heldout_mask.shape:
        raise ValueError("X_true and heldout_mask must have the same shape")
    post = idata.posterior
    if "Z" not in post:
        raise ValueError("the fit kept no features: sample with trace_features=True")
    Z = post["Z"].values.reshape((-1, *post["Z"].shape[2:])).astype(float)
    A = post["A"].values.reshape((-1, *post["A"].shape[2:]))
    sx = post["sigma_x"].values.reshape(-1)
    rows, cols = np.nonzero(heldout_mask)
    mean = np.einsum("sik,skd->sid", Z, A)[:, rows, cols]
    logp = (
        -0.5 * (_LOG_2PI + 2 * np.log(sx))[:, None]
        - 0.5 * ((X_true[rows, cols][None] - mean) / sx[:, None]) ** 2
    )
    pointwise = log_mean_exp(logp, axis=0)
    return {"pointwise": pointwise, "mean": float(pointwise.mean())}
