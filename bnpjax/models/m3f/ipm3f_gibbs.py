"""Gibbs iPM3F: infinite latent feature max-margin matrix factorization.

The user factors of M3F become binary features :math:`Z \\sim \\mathrm{IBP}(\\alpha)` with
Gaussian item weights :math:`V_{jk} \\sim \\mathcal N(0, \\sigma^2)`. One sweep draws
:math:`\\lambda`, :math:`V` (all items at once), :math:`\\theta`, then ``Z`` by one of the
feature steps of :mod:`bnpjax.models.m3f.features` (``"sequential"``: the authors', users in
turn; ``"parallel"``: columns for all users at once), then optionally :math:`\\alpha` and the
weight precision by their conjugate draws. The buffer of feature columns grows through the
driver. With ``item_factors`` the item side is held fixed (strong generalization): new users
join the reference users' buffet.

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML.
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12.
Zhang, M. M., Dubey, A. and Williamson, S. A. (2017). Parallel Markov chain Monte Carlo for
the Indian buffet process. arXiv:1703.03457.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln
from jax.scipy.stats import gamma as gamma_distribution

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind
from bnpjax.infer.capacity import growable, pad_fields
from bnpjax.infer.checks import check_flag, check_integer, check_positive
from bnpjax.models.m3f import linalg
from bnpjax.models.m3f.conditionals import (
    _dims,
    _hinge_log_posterior,
    _observed,
    _pair_terms,
    _sample_omega,
    _sample_theta,
    _scores,
    _trace,
    _train_mae,
)
from bnpjax.models.m3f.data import (
    IPM3FState,
    M3FData,
    M3FHyper,
    M3FInfo,
    _check_common,
    _gamma_prior,
    _item_factors,
    _sizes,
    _test_arrays,
)
from bnpjax.models.m3f.features import (
    FEATURE_STEPS,
    _parallel_features,
    _redraw_columns,
    _sequential_features,
)
from bnpjax.ops import sample_gamma
from bnpjax.priors import ibp

__all__ = ["build_step", "init", "ipm3f_gibbs"]


def _step(
    data,
    hyper,
    key,
    state,
    *,
    num_users,
    num_items,
    kappa,
    alpha_prior,
    feature_step,
    weight_precision_prior=None,
    lambda_rate=0.0,
):
    key_w, key_v, key_t, key_z, key_alpha, key_sigma = jax.random.split(key, 6)
    hyper = hyper._replace(sigma_v=state.sigma_v)
    Z, theta = state.Z, state.theta
    active = Z.sum(0) > 0
    x = _scores(data, Z, state.V)
    omega = _sample_omega(key_w, data, hyper, theta, x, lambda_rate)
    b, xi = _pair_terms(data, hyper, theta, omega)
    V, V_mean = linalg._gaussian_rows(
        key_v, Z, data.users, b, xi, data.item_buckets, hyper.sigma_v, state.V
    )
    V = V * active  # inactive columns carry nothing (their draws were from the prior)
    theta = _sample_theta(key_t, data, hyper, omega, _scores(data, Z, V), num_users)
    b, xi = _pair_terms(data, hyper, theta, omega)
    features = _parallel_features if feature_step == "parallel" else _sequential_features
    Z, V, exceeded, needed = features(key_z, data, b, xi, Z, V, state.alpha, hyper.sigma_v, kappa)
    m = Z.sum(0)
    V = V * (m > 0)  # columns of features nobody holds any more carry nothing
    alpha = state.alpha
    if alpha_prior is not None:
        # alpha | Z ~ Gamma(a + K+, b + H_N): the IBP pmf is alpha^K+ exp(-alpha H_N) in alpha
        shape, rate = alpha_prior
        alpha = ibp.sample_alpha(key_alpha, jnp.sum(m > 0), num_users, shape, rate).astype(
            alpha.dtype
        )
    feature_log_prior = ibp.log_prob(Z, alpha)
    if alpha_prior is not None:
        shape, rate = alpha_prior
        feature_log_prior += gamma_distribution.logpdf(alpha, shape, scale=1.0 / rate)
    num_weights = num_items * jnp.sum(m > 0)
    sigma_v = state.sigma_v
    if weight_precision_prior is not None:
        sigma_v = _sample_weight_sd(key_sigma, V, num_weights, weight_precision_prior)
        hyper = hyper._replace(sigma_v=sigma_v)
        # the weights' Normal normalizer and the precision's Gamma density: both vary with sigma
        shape, rate = weight_precision_prior
        feature_log_prior += -num_weights * jnp.log(sigma_v) + gamma_distribution.logpdf(
            sigma_v**-2, shape, scale=1.0 / rate
        )
    new = IPM3FState(Z, V, theta, omega, alpha, sigma_v)
    x = _scores(data, Z, V)
    info = M3FInfo(
        lp=_hinge_log_posterior(data, hyper, feature_log_prior, V, theta, x),
        train_mae=_train_mae(data, theta, x),
        num_features=jnp.sum(m > 0).astype(jnp.int32),
        capacity_exceeded=exceeded,
        capacity_needed=needed,
        score_factors=(state.Z, V_mean * active),
    )
    return new, info


def _sample_weight_sd(key, V, num_weights, prior):
    """sigma_v given the active weights: 1/sigma_v^2 ~ Gamma(a + n/2, b + sum V^2 / 2), n the
    number of active weights (``V`` is zero outside the active columns). Returns sigma_v."""
    shape, rate = prior
    precision = sample_gamma(key, shape + 0.5 * num_weights, V.dtype) / (rate + 0.5 * jnp.sum(V**2))
    return jax.lax.rsqrt(precision)


def _reference_log_prior(Z, counts, num_rows):
    """:math:`\\log p(Z \\mid \\text{reference users})` on the reference users' features:
    per feature, the Beta-Bernoulli marginal :math:`B(m_k + n_k, R - m_k + 1 + N - n_k) /
    B(m_k, R - m_k + 1)` (``m_k`` of ``R`` reference users hold it, ``n_k`` of ``Z``'s N)."""
    n = Z.sum(0)
    N = Z.shape[0]
    tail = num_rows - counts + 1.0
    return jnp.sum(betaln(counts + n, tail + N - n) - betaln(counts, tail))


def _fixed_items_step(data, hyper, reference, key, state, *, num_users, lambda_rate=0.0):
    key_w, key_t, key_order, key_z = jax.random.split(key, 4)
    Z, V = state.Z, state.V
    x = _scores(data, Z, V)
    omega = _sample_omega(key_w, data, hyper, state.theta, x, lambda_rate)
    theta = _sample_theta(key_t, data, hyper, omega, x, num_users)
    b, xi = _pair_terms(data, hyper, theta, omega)
    K = Z.shape[1]
    order = jax.random.permutation(key_order, K)
    Z, x = _redraw_columns(key_z, data, b, xi, Z, V, order, K, reference)
    new = state._replace(Z=Z, theta=theta, omega=omega)
    info = M3FInfo(
        lp=_hinge_log_posterior(data, hyper, _reference_log_prior(Z, *reference), V, theta, x),
        train_mae=_train_mae(data, theta, x),
        num_features=jnp.sum(Z.sum(0) > 0).astype(jnp.int32),
        capacity_exceeded=jnp.zeros((), bool),
        capacity_needed=jnp.zeros((), jnp.int32),
        # V is fixed: nothing to average over, so the draw's own features (not the sweep's
        # starting ones, which would pair each draw's thresholds with the previous features)
        score_factors=(Z, V),
    )
    return new, info


def _fixed_items_init(data, hyper, reference, V, key, *, num_users, alpha, lambda_rate=0.0):
    key_z, key_w = jax.random.split(key)
    counts, num_rows = reference
    dtype = data.signs.dtype
    # each new user as the next customer of the reference users' buffet
    p_on = counts / (num_rows + 1.0)
    Z = (jax.random.uniform(key_z, (num_users, counts.shape[0]), dtype) < p_on).astype(dtype)
    theta = jnp.broadcast_to(hyper.rho, (num_users, hyper.rho.shape[0])).astype(dtype)
    omega = _sample_omega(key_w, data, hyper, theta, _scores(data, Z, V), lambda_rate)
    return IPM3FState(Z, V, theta, omega, jnp.asarray(alpha, dtype), hyper.sigma_v.astype(dtype))


def _reference_features(item_factors, feature_counts, num_reference_users, num_items, dtype):
    """Check the strong-generalization inputs; returns ``None`` or
    ``(V, (counts, num_reference_users))``."""
    given = [v is not None for v in (item_factors, feature_counts, num_reference_users)]
    if not any(given):
        return None
    if not all(given):
        raise ValueError(
            "item_factors, feature_counts and num_reference_users go together (the fixed "
            "features' weights, how many reference users hold each, and how many there are)"
        )
    V = _item_factors(item_factors, num_items)
    rows = check_integer(num_reference_users, "num_reference_users")
    counts = np.asarray(feature_counts, dtype=float)
    if counts.shape != (V.shape[1],):
        raise ValueError(
            f"feature_counts must have one count per column of item_factors ({V.shape[1]}), "
            f"got shape {counts.shape}"
        )
    if not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts)):
        raise ValueError("feature_counts must be integers")
    if counts.min() < 1 or counts.max() > rows:
        raise ValueError(
            "feature_counts must lie in 1..num_reference_users: a fixed feature is one that "
            f"some reference user holds (got {counts.min():g}..{counts.max():g}, {rows} users)"
        )
    return jnp.asarray(V, dtype), (jnp.asarray(counts, dtype), rows)


def _init(
    data, hyper, key, *, num_users, num_items, capacity, alpha, num_init_features, lambda_rate=0.0
):
    key_z, key_v, key_w = jax.random.split(key, 3)
    dtype = data.signs.dtype
    slots = jnp.arange(capacity) < num_init_features
    Z = ((jax.random.uniform(key_z, (num_users, capacity)) < 0.5) & slots).astype(dtype)
    V = 0.1 * hyper.sigma_v * jax.random.normal(key_v, (num_items, capacity), dtype) * slots
    theta = jnp.broadcast_to(hyper.rho, (num_users, hyper.rho.shape[0])).astype(dtype)
    omega = _sample_omega(key_w, data, hyper, theta, _scores(data, Z, V), lambda_rate)
    return IPM3FState(Z, V, theta, omega, jnp.asarray(alpha, dtype), hyper.sigma_v.astype(dtype))


def _ipm3f_trace(
    data, hyper, test, state, info, *, keep_factors, fixed_items=False, log_likelihood=True
):
    posterior = {"num_features": info.num_features, "theta": state.theta}
    if not fixed_items:
        posterior.update(alpha=state.alpha, sigma_v=state.sigma_v)
    if keep_factors:
        posterior["Z"] = state.Z
        if not fixed_items:
            posterior["V"] = state.V
    return _trace(data, hyper, test, state.Z, state.V, state.theta, info, posterior, log_likelihood)


def _settings(
    alpha, kappa, capacity, num_init_features, alpha_prior, feature_step, weight_precision_prior
):
    """Validate the settings of the growing-buffer sampler."""
    kappa = check_integer(kappa, "kappa")
    capacity = check_integer(capacity, "capacity")
    if capacity < kappa:
        raise ValueError(f"capacity ({capacity}) must be at least kappa ({kappa})")
    check_positive(alpha, "alpha")
    if feature_step not in FEATURE_STEPS:
        raise ValueError(f"feature_step must be one of {FEATURE_STEPS}, got {feature_step!r}")
    num_init_features = check_integer(num_init_features, "num_init_features", 0)
    if num_init_features > capacity:
        raise ValueError(
            f"num_init_features ({num_init_features}) must be at most capacity ({capacity})"
        )
    return dict(
        alpha=float(alpha),
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        alpha_prior=_gamma_prior(alpha_prior, "alpha_prior"),
        feature_step=feature_step,
        weight_precision_prior=_gamma_prior(weight_precision_prior, "weight_precision_prior"),
    )


def init(
    key,
    data: M3FData,
    hyper: M3FHyper | None = None,
    *,
    alpha: float = 3.0,
    capacity: int = 32,
    num_init_features: int = 8,
    item_factors=None,
    feature_counts=None,
    num_reference_users: int | None = None,
) -> IPM3FState:
    """A starting state of Gibbs iPM3F.

    Parameters
    ----------
    key : jax.Array
        A ``jax.random.key``.
    data : M3FData
    hyper : M3FHyper, optional
    alpha, capacity, num_init_features
        As in :func:`ipm3f_gibbs`: half of the users hold each of the first
        ``num_init_features`` features, with small random weights.
    item_factors, feature_counts, num_reference_users
        A fixed item side (as in :func:`ipm3f_gibbs`): each user starts as the next customer
        of the reference users' buffet.

    Returns
    -------
    IPM3FState
    """
    hyper = _check_common(data, hyper)
    sizes = _sizes(data)
    fixed = _reference_features(
        item_factors, feature_counts, num_reference_users, sizes["num_items"], data.signs.dtype
    )
    if fixed is not None:
        V, reference = fixed
        return _fixed_items_init(
            data, hyper, reference, V, key, num_users=sizes["num_users"], alpha=float(alpha)
        )
    s = _settings(alpha, 1, capacity, num_init_features, None, "sequential", None)
    return _init(
        data,
        hyper,
        key,
        capacity=s["capacity"],
        alpha=s["alpha"],
        num_init_features=s["num_init_features"],
        **sizes,
    )


def build_step(
    *,
    kappa: int = 10,
    alpha_prior=None,
    feature_step: str = "sequential",
    weight_precision_prior=None,
    feature_counts=None,
    num_reference_users: int | None = None,
):
    """The Gibbs iPM3F sweep as ``step(key, state, data, hyper) -> (state, info)``.

    Parameters
    ----------
    kappa, alpha_prior, feature_step, weight_precision_prior
        As in :func:`ipm3f_gibbs`.
    feature_counts, num_reference_users
        With both, the fixed-items sweep (``V`` held as it is in the state).

    Returns
    -------
    callable
    """
    if feature_counts is not None or num_reference_users is not None:
        rows = check_integer(num_reference_users, "num_reference_users")
        counts = jnp.asarray(np.asarray(feature_counts, float))

        def fixed_step(key, state, data, hyper):
            reference = (counts.astype(state.V.dtype), rows)
            return _fixed_items_step(
                data, hyper, reference, key, state, num_users=_sizes(data)["num_users"]
            )

        return fixed_step
    s = _settings(1.0, kappa, kappa, 0, alpha_prior, feature_step, weight_precision_prior)

    def step(key, state, data, hyper):
        return _step(
            data,
            hyper,
            key,
            state,
            kappa=s["kappa"],
            alpha_prior=s["alpha_prior"],
            feature_step=s["feature_step"],
            weight_precision_prior=s["weight_precision_prior"],
            **_sizes(data),
        )

    return step


def _ipm3f_gibbs(
    data,
    hyper,
    *,
    alpha=3.0,
    kappa=10,
    capacity=32,
    num_init_features=8,
    test=None,
    keep_factors=True,
    alpha_prior=None,
    feature_step="sequential",
    weight_precision_prior=None,
    item_factors=None,
    feature_counts=None,
    num_reference_users=None,
    log_likelihood=True,
    lambda_rate=0.0,
):
    hyper = _check_common(data, hyper)
    keep_factors = check_flag(keep_factors, "keep_factors")
    log_likelihood = check_flag(log_likelihood, "pointwise_log_likelihood")
    sizes = _sizes(data)
    private = {"lambda_rate": float(lambda_rate)} if lambda_rate else {}
    observed = _observed(data) if log_likelihood else {}
    fixed = _reference_features(
        item_factors, feature_counts, num_reference_users, sizes["num_items"], data.signs.dtype
    )
    if fixed is not None:
        if alpha_prior is not None or weight_precision_prior is not None:
            raise ValueError(
                "alpha_prior and weight_precision_prior have no part with fixed item_factors"
            )
        V, reference = fixed
        num_users = sizes["num_users"]
        return SamplingAlgorithm(
            init=bind(
                _fixed_items_init,
                data,
                hyper,
                reference,
                V,
                num_users=num_users,
                alpha=float(alpha),
                **private,
            ),
            step=bind(_fixed_items_step, data, hyper, reference, num_users=num_users, **private),
            trace=bind(
                _ipm3f_trace,
                data,
                hyper,
                _test_arrays(test, data),
                keep_factors=keep_factors,
                fixed_items=True,
                log_likelihood=log_likelihood,
            ),
            spec=ArvizSpec(
                name="m3f.ipm3f_gibbs",
                dims=_dims("Z", "feature"),
                observed_data=observed,
                settings={
                    "fixed_items": True,
                    "num_reference_users": reference[1],
                    "C": float(hyper.C),
                },
            ),
        )
    s = _settings(
        alpha,
        kappa,
        capacity,
        num_init_features,
        alpha_prior,
        feature_step,
        weight_precision_prior,
    )
    test_arrays = _test_arrays(test, data)
    spec = ArvizSpec(
        name="m3f.ipm3f_gibbs",
        dims=_dims("Z", "feature"),
        observed_data=observed,
        settings={
            "kappa": s["kappa"],
            "alpha": s["alpha"],
            "alpha_prior": "fixed" if s["alpha_prior"] is None else list(s["alpha_prior"]),
            "feature_step": s["feature_step"],
            "weight_precision_prior": (
                "fixed"
                if s["weight_precision_prior"] is None
                else list(s["weight_precision_prior"])
            ),
            "C": float(hyper.C),
        },
    )

    def build(capacity: int) -> SamplingAlgorithm:
        return SamplingAlgorithm(
            init=bind(
                _init,
                data,
                hyper,
                capacity=capacity,
                alpha=s["alpha"],
                num_init_features=s["num_init_features"],
                **sizes,
                **private,
            ),
            step=bind(
                _step,
                data,
                hyper,
                kappa=s["kappa"],
                alpha_prior=s["alpha_prior"],
                feature_step=s["feature_step"],
                weight_precision_prior=s["weight_precision_prior"],
                **sizes,
                **private,
            ),
            trace=bind(
                _ipm3f_trace,
                data,
                hyper,
                test_arrays,
                keep_factors=keep_factors,
                log_likelihood=log_likelihood,
            ),
            spec=spec,
        )

    return growable(build, s["capacity"], pad_fields({"Z": 1, "V": 1}))


def ipm3f_gibbs(
    data: M3FData,
    hyper: M3FHyper | None = None,
    *,
    alpha: float = 3.0,
    kappa: int = 10,
    capacity: int = 32,
    num_init_features: int = 8,
    test=None,
    keep_factors: bool = True,
    alpha_prior: tuple[float, float] | None = None,
    feature_step: str = "sequential",
    weight_precision_prior: tuple[float, float] | None = None,
    item_factors=None,
    feature_counts=None,
    num_reference_users: int | None = None,
    pointwise_log_likelihood: bool = True,
) -> SamplingAlgorithm:
    """Gibbs iPM3F as a kernel for :func:`bnpjax.sample`.

    ``Z ~ IBP(alpha)``, at most ``kappa`` new features per user per sweep (the authors'
    truncation), a feature buffer of ``capacity`` columns grown by the driver.
    ``hyper.sigma_v`` is the weight sd :math:`\\sigma`.

    Strong generalization: ``item_factors=V``, ``feature_counts=m`` and
    ``num_reference_users=R`` hold the item side at a draw of a run on R other users, of whom
    :math:`m_k` hold feature k, and fit this data's users as new customers of that buffet:
    :math:`z_{ik} \\mid \\pi_k \\sim \\mathrm{Bernoulli}(\\pi_k)`, :math:`\\pi_k \\sim
    \\mathrm{Beta}(m_k, R - m_k + 1)`. The sweep is then :math:`\\lambda`, :math:`\theta`
    and every column for all users at once; ``alpha``, ``kappa`` and the weight scale play no
    part and ``V`` is never traced.

    ``C`` (in ``hyper``) sets how many features the pseudo-posterior wants. At small ``C`` a
    few, and chains from few and from many features agree; above a threshold (about 0.06 on
    50 MovieLens users with the authors' margin 9; expected lower with more ratings) a
    second regime of more features than users appears, and a chain keeps whichever regime it
    enters first (R-hat of the number of features over chains from different starts shows
    it). Choose ``C`` on held-out data, as the authors do.

    Parameters
    ----------
    data : M3FData
    hyper : M3FHyper, optional
        Default ``make_hyper(L)``.
    alpha : float
        IBP concentration (the authors' 3), or its starting value with ``alpha_prior``.
    kappa : int
        Largest number of new features per user per sweep (the authors' 10).
    capacity : int
        Starting size of the feature buffer (at least ``kappa``).
    num_init_features : int
        Features of the random start.
    test, keep_factors, pointwise_log_likelihood
        As in :func:`bnpjax.models.m3f.gibbs`.
    alpha_prior : tuple of float, optional
        ``(a, b)``: a Gamma(a, rate b) hyperprior on alpha, drawn each sweep from
        :math:`\\mathrm{Gamma}(a + K_+, b + H_N)`.
    feature_step : {"sequential", "parallel"}
        The authors' user-by-user step, or the row-parallel one (columns for all users at
        once; suits a GPU).
    weight_precision_prior : tuple of float, optional
        ``(a, b)``: a Gamma(a, rate b) hyperprior on :math:`1/\\sigma^2`, drawn each sweep from
        :math:`\\mathrm{Gamma}(a + M K_+/2, b + \\sum V_{jk}^2/2)` over the active weights.
    item_factors, feature_counts, num_reference_users
        The fixed item side (strong generalization), all three or none.

    Returns
    -------
    SamplingAlgorithm

    References
    ----------
    Xu, Zhu & Zhang (2013); Griffiths & Ghahramani (2011); Zhang, Dubey & Williamson (2017).
    """
    return _ipm3f_gibbs(
        data,
        hyper,
        alpha=alpha,
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        test=test,
        keep_factors=keep_factors,
        alpha_prior=alpha_prior,
        feature_step=feature_step,
        weight_precision_prior=weight_precision_prior,
        item_factors=item_factors,
        feature_counts=feature_counts,
        num_reference_users=num_reference_users,
        log_likelihood=pointwise_log_likelihood,
    )


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `ipm3f_gibbs.init` and `.build_step`.
ipm3f_gibbs.init = init
ipm3f_gibbs.build_step = build_step
