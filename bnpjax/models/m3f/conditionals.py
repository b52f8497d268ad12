"""The conditionals Gibbs M3F and Gibbs iPM3F share: the augmentation, the pair terms, the
thresholds, the scores, the rating-level rule and the pseudo-posterior.

With :math:`\\zeta_{ijr} = \\ell - T^r_{ij}(\\theta_{ir} - x_{ij})` and :math:`u = C\\zeta/2`,
the hinge factor :math:`e^{-2\\max(0, u)}` is a scale mixture of Gaussians (Polson & Scott
2011); given the mixing variables :math:`\\omega = 1/\\lambda`, every score :math:`x_{ij}`
enters as :math:`-b_{ij} x^2/2 + \\xi_{ij} x` and every threshold as a univariate Gaussian.
The derivation is on the documentation's M3F page.

References
----------
Polson, N. G. and Scott, S. L. (2011). Data augmentation for support vector machines.
Bayesian Analysis 6(1).
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML, Appendix A (:math:`b_{ij}`, :math:`\\xi_{ij}`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.infer.base import concrete_or_none
from bnpjax.models.m3f.data import M3FData, M3FHyper, M3FState
from bnpjax.ops import sample_inverse_gaussian

__all__ = ["levels_from_scores", "pseudo_log_posterior"]


def _scores(data, F, V):
    return jnp.sum(F[data.users] * V[data.items], axis=1)


def _sample_omega(key, data, hyper, theta, x, lambda_rate=0.0):
    """omega = 1/lambda | rest ~ IG(1/|u|, 1), u = C zeta / 2. A rate ``c = lambda_rate > 0``
    multiplies the density by a proper prior exp(-c lambda / 2) (the Geweke construction of
    :mod:`bnpjax.models.m3f.geweke`); then omega ~ IG(sqrt(1+c)/|u|, 1+c)."""
    zeta = data.margin - data.signs * (theta[data.users] - x[:, None])
    u = 0.5 * hyper.C * jnp.abs(zeta)
    floor = jnp.finfo(x.dtype).tiny ** 0.25  # keeps mean * normal^2 finite; u ~ 0 is lambda ~ chi2
    shape = 1.0 + jnp.asarray(lambda_rate, x.dtype)
    return sample_inverse_gaussian(key, jnp.sqrt(shape) / jnp.maximum(u, floor), shape)


def _pair_terms(data, hyper, theta, omega):
    """b_ij = sum_r C^2 omega_ijr / 4 and xi_ij = -C/2 sum_r T (1 + C omega c / 2), each
    (nnz,)."""
    C = hyper.C
    c = data.margin - data.signs * theta[data.users]
    b = 0.25 * C**2 * jnp.sum(omega, axis=1)
    xi = -0.5 * C * jnp.sum(data.signs * (1.0 + 0.5 * C * omega * c), axis=1)
    return b, xi


def _sample_theta(key, data, hyper, omega, x, num_users):
    """theta_ir | rest ~ N(m/p, 1/p), all at once (segment sums over the pairs)."""
    C, T = hyper.C, data.signs
    w = 0.25 * C**2 * omega
    prec = 1.0 / hyper.varsigma**2 + jax.ops.segment_sum(w, data.users, num_users)
    lin = T * (0.5 * C + w * (data.margin + T * x[:, None]))
    lin = hyper.rho / hyper.varsigma**2 + jax.ops.segment_sum(lin, data.users, num_users)
    eps = jax.random.normal(key, prec.shape, prec.dtype)
    return lin / prec + eps * jax.lax.rsqrt(prec)


def levels_from_scores(scores, thresholds) -> jax.Array:
    """The rating-level rule :math:`1 + \\#\\{r : \\theta_r < x\\}`.

    Parameters
    ----------
    scores : array_like
        Scores :math:`x`, any shape.
    thresholds : array_like
        Thresholds, broadcast against ``scores[..., None]``.

    Returns
    -------
    jax.Array
        Integer levels, the shape of ``scores``.
    """
    return 1 + jnp.sum(thresholds < scores[..., None], axis=-1)


def _hinge_log_posterior(data, hyper, F_prior, V, theta, x):
    zeta = data.margin - data.signs * (theta[data.users] - x[:, None])
    hinge = -hyper.C * jnp.sum(jnp.maximum(zeta, 0.0))
    prior_v = -0.5 * jnp.sum(V**2) / hyper.sigma_v**2
    prior_t = -0.5 * jnp.sum((theta - hyper.rho) ** 2) / hyper.varsigma**2
    return hinge + F_prior + prior_v + prior_t


def _with_bias(U, V, bias):
    """``(U | 1, V | c)``: the factors with the item biases as one more column, so that
    ``F_i . G_j = U_i . V_j + c_j``."""
    ones = jnp.ones((U.shape[0], 1), U.dtype)
    return jnp.concatenate([U, ones], 1), jnp.concatenate([V, bias[:, None]], 1)


def pseudo_log_posterior(data: M3FData, hyper: M3FHyper, state: M3FState) -> jax.Array:
    """The log pseudo-posterior of Gibbs M3F, up to a constant.

    The Gaussian priors plus :math:`-C \\sum_{(i,j), r} \\max(0, \\zeta_{ijr})`, before
    augmentation (the item biases are zero without ``item_bias``).

    Parameters
    ----------
    data : M3FData
    hyper : M3FHyper
    state : M3FState

    Returns
    -------
    jax.Array
        A scalar.

    References
    ----------
    Xu, Zhu & Zhang (2013); Rennie, J. D. M. and Srebro, N. (2005). Fast maximum margin
    matrix factorization for collaborative prediction. ICML.
    """
    x = _scores(data, state.U, state.V) + state.bias[data.items]
    prior_u = -0.5 * jnp.sum(state.U**2) / hyper.sigma_u**2
    prior_u += -0.5 * jnp.sum(state.bias**2) / hyper.sigma_b**2
    return _hinge_log_posterior(data, hyper, prior_u, state.V, state.theta, x)


def _train_mae(data, theta, x):
    level = levels_from_scores(x, theta[data.users])
    return jnp.mean(jnp.abs(level - data.ratings).astype(x.dtype))


def _level_log_probs(x, theta, margin, C):
    """``log p(level = l)``, ``l = 1..L``, per pair (``(n, L)``): the hinge pseudo-likelihood
    :math:`\\exp(-C \\sum_r \\max(0, \\ell - T^r(l)(\\theta_r - x)))` normalized over the L
    levels. ``x`` (n,), ``theta`` (n, L-1), ``margin`` a scalar or (n, L-1)."""
    num_thresholds = theta.shape[-1]
    r = jnp.arange(1, num_thresholds + 1)
    levels = jnp.arange(1, num_thresholds + 2)
    T = jnp.where(r[None, :] >= levels[:, None], 1.0, -1.0).astype(x.dtype)  # (L, L-1)
    margin = jnp.asarray(margin, x.dtype)
    if margin.ndim:
        margin = margin[:, None, :]
    zeta = margin - T * (theta[:, None, :] - x[:, None, None])
    logits = -C * jnp.sum(jnp.maximum(zeta, 0.0), axis=-1)
    return logits - jax.nn.logsumexp(logits, axis=-1, keepdims=True)


def _pointwise_log_likelihood(x, theta, ratings, margin, C):
    """Per pair: the log probability of its rating under :func:`_level_log_probs`."""
    log_p = _level_log_probs(x, theta, margin, C)
    return jnp.take_along_axis(log_p, (ratings - 1)[:, None], axis=1)[:, 0]


def _test_trace(test, F, V, theta, info):
    users, items = test
    scores = jnp.sum(F[users] * V[items], axis=1)
    F_rb, V_rb = info.score_factors
    rb = jnp.sum(F_rb[users] * V_rb[items], axis=1)
    return {
        "score_test": scores,
        "level_test": levels_from_scores(scores, theta[users]),
        "score_test_rb": rb,
    }


def _trace(data, hyper, test, F, V, theta, info, posterior, log_likelihood):
    """The trace every kernel shares: ``posterior`` as given, the sample statistics, the test
    pairs' scores and the pointwise log-likelihood of the training ratings."""
    stats = {"lp": info.lp, "train_mae": info.train_mae}
    if test is not None:
        stats.update(_test_trace(test, F, V, theta, info))
    out = {"posterior": posterior, "sample_stats": stats}
    if log_likelihood:
        x = _scores(data, F, V)
        ll = _pointwise_log_likelihood(x, theta[data.users], data.ratings, data.margin, hyper.C)
        out["log_likelihood"] = {"ratings": ll}
    return out


def _dims(factors: str, axis: str) -> dict:
    return {
        factors: ["user", axis],
        "V": ["item", axis],
        "bias": ["item"],
        "theta": ["user", "threshold"],
        "score_test": ["test_pair"],
        "level_test": ["test_pair"],
        "score_test_rb": ["test_pair"],
        "ratings": ["obs"],
    }


def _observed(data) -> dict:
    """``observed_data`` of the spec: the training ratings (none while tracing)."""
    ratings = concrete_or_none(data.ratings)
    return {} if ratings is None else {"ratings": ratings}
