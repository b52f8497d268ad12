"""The Geweke protocol of Gibbs M3F and Gibbs iPM3F: a proper joint to test the samplers on.

The M3F pseudo-likelihood :math:`\\exp(-C \\sum \\max(0, \\zeta))` is no normalized density
of the ratings, but the augmented factor :math:`(2\\pi\\lambda)^{-1/2}
\\exp(-(\\lambda + u)^2 / (2\\lambda))`, :math:`u = C\\zeta/2`, is, in :math:`u`, the density
of :math:`\\mathcal N(-\\lambda, \\lambda)`. Giving :math:`\\lambda` a proper prior
:math:`\\mathrm{Exponential}(c/2)` (``lambda_rate = c > 0``) and treating the margin
:math:`\\ell` of every (pair, threshold) as the datum, :math:`\\ell = 2u/C + T(\\theta - x)`,
makes a proper joint whose posterior given the margins is the augmented pseudo-posterior
with the extra factor :math:`e^{-c\\lambda/2}`; a kernel built with the same rate samples it
exactly (the kernels of ``tests/geweke_cases/m3f.py``).

``settings`` select the model as the factories do: ``rank`` (and ``item_bias``,
``item_factors``, ``item_biases``) for Gibbs M3F; ``capacity`` (with ``alpha``,
``alpha_prior``, ``weight_precision_prior``), or ``item_factors``, ``feature_counts`` and
``num_reference_users`` (fixed items), for Gibbs iPM3F. Settings of the kernel alone
(``kappa``, ``feature_step``, ...) are accepted and ignored.

References
----------
Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
JASA 99(467).
Polson, N. G. and Scott, S. L. (2011). Data augmentation for support vector machines.
Bayesian Analysis 6(1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.infer.checks import deprecated_alias
from bnpjax.models.m3f.conditionals import _scores
from bnpjax.models.m3f.data import IPM3FState, M3FData, M3FHyper, M3FState, _gamma_prior
from bnpjax.models.m3f.ipm3f_gibbs import _reference_features
from bnpjax.priors import ibp

__all__ = ["data_sample", "ipm3f_prior_sample", "prior_sample", "refresh"]


def _exponential(key, shape, dtype):
    """Exponential(1) draws that are never 0: ``-log U`` with ``U`` at the midpoints of the
    uniform's grid, strictly inside (0, 1).

    ``jax.random.exponential`` returns exactly 0 when its uniform draw is 0, which in float32
    happens once in 2^23 draws: about once in 20,000 of this protocol's marginal draws of 18
    margins each, enough to make ``1 / lambda`` infinite (found by the Geweke table run in
    float32, tests/test_float32.py). The midpoint keeps the law on the grid's resolution: the
    smallest uniform stands for the upper 2^-23 quantile of the exponential, at 16.6."""
    half_spacing = 0.5 * jnp.finfo(dtype).eps  # jax.random.uniform's grid is eps apart
    return -jnp.log(jax.random.uniform(key, shape, dtype) + half_spacing)


def _m3f_prior(key, data, hyper, rank, item_bias, lambda_rate):
    key_u, key_v, key_t, key_l = jax.random.split(key, 4)
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    dtype = data.signs.dtype
    U = hyper.sigma_u * jax.random.normal(key_u, (N, rank), dtype)
    V = hyper.sigma_v * jax.random.normal(key_v, (M, rank), dtype)
    theta = hyper.rho + hyper.varsigma * jax.random.normal(key_t, (N, hyper.rho.shape[0]), dtype)
    lam = _exponential(key_l, data.signs.shape, dtype) * 2.0 / lambda_rate
    bias = jnp.zeros((M,), dtype)
    if item_bias:
        bias = hyper.sigma_b * jax.random.normal(jax.random.fold_in(key, 1), (M,), dtype)
    return M3FState(U, V, theta, 1.0 / lam, bias)


def _ipm3f_prior(
    key,
    data,
    hyper,
    *,
    alpha,
    capacity,
    alpha_prior,
    weight_precision_prior,
    item_factors,
    feature_counts,
    num_reference_users,
    lambda_rate,
):
    key_z, key_rest, key_alpha, key_sigma = jax.random.split(key, 4)
    dtype = data.signs.dtype
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    fixed = _reference_features(item_factors, feature_counts, num_reference_users, M, dtype)
    if fixed is not None:
        V, (counts, num_rows) = fixed
        g = jax.random.gamma(key_z, jnp.stack([counts, num_rows - counts + 1.0]), dtype=dtype)
        pi = g[0] / (g[0] + g[1])
        Z = (jax.random.uniform(key_alpha, (N, V.shape[1]), dtype) < pi).astype(dtype)
        base = _m3f_prior(key_rest, data, hyper, V.shape[1], False, lambda_rate)
        return IPM3FState(
            Z, V, base.theta, base.omega, jnp.asarray(alpha, dtype), hyper.sigma_v.astype(dtype)
        )
    if alpha_prior is not None:
        shape, rate = _gamma_prior(alpha_prior, "alpha_prior")
        alpha = jax.random.gamma(key_alpha, shape, dtype=dtype) / rate
    if weight_precision_prior is not None:
        shape, rate = _gamma_prior(weight_precision_prior, "weight_precision_prior")
        precision = jax.random.gamma(key_sigma, shape, dtype=dtype) / rate
        hyper = hyper._replace(sigma_v=jax.lax.rsqrt(precision))
    draw = ibp.sample_buffet(key_z, alpha, N, capacity)
    base = _m3f_prior(key_rest, data, hyper, capacity, False, lambda_rate)
    return IPM3FState(
        draw.Z.astype(dtype),
        base.V * draw.active,
        base.theta,
        base.omega,
        jnp.asarray(alpha, dtype),
        jnp.asarray(hyper.sigma_v, dtype),
    )


def prior_sample(
    key,
    data: M3FData,
    hyper: M3FHyper,
    *,
    rank: int | None = None,
    item_bias: bool = False,
    lambda_rate: float = 1.0,
    item_factors=None,
    item_biases=None,
    alpha: float = 3.0,
    capacity: int | None = None,
    alpha_prior=None,
    weight_precision_prior=None,
    feature_counts=None,
    num_reference_users: int | None = None,
    **settings,
):
    """A draw of the state from the Geweke joint's prior.

    Gibbs M3F (``rank``): ``U, V, theta`` (and the item biases with ``item_bias``) from their
    priors; a fixed item side (``item_factors``, ``item_biases``) replaces ``V`` and the
    biases. Gibbs iPM3F (``capacity``): ``Z ~ IBP(alpha)`` by the buffet process (alpha first
    from Gamma(a, rate b) with ``alpha_prior``; the weight precision likewise with
    ``weight_precision_prior``), the active weights from their prior; with the fixed items
    of ``item_factors``, ``feature_counts`` and ``num_reference_users``, ``Z`` from the
    reference users' buffet, :math:`\\pi_k \\sim \\mathrm{Beta}(m_k, R - m_k + 1)`. Always
    :math:`\\lambda \\sim \\mathrm{Exponential}(c/2)` with ``c = lambda_rate``.

    Parameters
    ----------
    key : jax.Array
    data : M3FData
    hyper : M3FHyper
    rank, item_bias, item_factors, item_biases
        Gibbs M3F's settings (as in :func:`bnpjax.models.m3f.gibbs`).
    lambda_rate : float
        The rate ``c > 0`` of the proper prior on the augmentation.
    alpha, capacity, alpha_prior, weight_precision_prior, feature_counts, num_reference_users
        Gibbs iPM3F's settings (as in :func:`bnpjax.models.m3f.ipm3f_gibbs`).
    **settings
        Other settings of the kernels, ignored.

    Returns
    -------
    M3FState or IPM3FState
    """
    del settings
    if capacity is not None or feature_counts is not None:
        return _ipm3f_prior(
            key,
            data,
            hyper,
            alpha=alpha,
            capacity=capacity,
            alpha_prior=alpha_prior,
            weight_precision_prior=weight_precision_prior,
            item_factors=item_factors,
            feature_counts=feature_counts,
            num_reference_users=num_reference_users,
            lambda_rate=lambda_rate,
        )
    if item_factors is not None:
        V = jnp.asarray(item_factors, data.signs.dtype)
        state = _m3f_prior(key, data, hyper, V.shape[1], False, lambda_rate)
        bias = state.bias if item_biases is None else jnp.asarray(item_biases, V.dtype)
        return state._replace(V=V, bias=bias)
    return _m3f_prior(key, data, hyper, 10 if rank is None else rank, item_bias, lambda_rate)


def data_sample(key, state, data: M3FData, hyper: M3FHyper, **settings) -> M3FData:
    """Fresh per-(pair, threshold) margins given the state.

    ``u ~ N(-lambda, lambda)`` (the augmented factor as a density in ``u``) and
    ``margin = 2u/C + T (theta_i - x_ij)``.

    Parameters
    ----------
    key : jax.Array
    state : M3FState or IPM3FState
    data : M3FData
    hyper : M3FHyper
    **settings
        Ignored (the margins do not depend on them).

    Returns
    -------
    M3FData
        ``data`` with the new margins.
    """
    del settings
    if isinstance(state, M3FState):
        x = _scores(data, state.U, state.V) + state.bias[data.items]
    else:
        x = _scores(data, state.Z, state.V)
    lam = 1.0 / state.omega
    u = -lam + jnp.sqrt(lam) * jax.random.normal(key, lam.shape, lam.dtype)
    margin = 2.0 * u / hyper.C + data.signs * (state.theta[data.users] - x[:, None])
    return data._replace(margin=margin)


def refresh(data: M3FData, state, **settings):
    """No state field is derived from the margins: returns ``state`` unchanged."""
    del data, settings
    return state


def _ipm3f_prior_sample(
    key,
    data,
    hyper,
    alpha,
    capacity,
    alpha_prior=None,
    weight_precision_prior=None,
    item_factors=None,
    feature_counts=None,
    num_reference_users=None,
):
    """The previous signature of the iPM3F prior draw (positional ``alpha``, ``capacity``)."""
    return prior_sample(
        key,
        data,
        hyper,
        alpha=alpha,
        capacity=capacity,
        alpha_prior=alpha_prior,
        weight_precision_prior=weight_precision_prior,
        item_factors=item_factors,
        feature_counts=feature_counts,
        num_reference_users=num_reference_users,
    )


_ipm3f_prior_sample.__name__ = "prior_sample"
ipm3f_prior_sample = deprecated_alias(_ipm3f_prior_sample, "ipm3f_prior_sample")
