r"""Row-parallel Gibbs sampler of the linear-Gaussian IBP model.

Instantiating what couples the rows makes them conditionally independent. One sweep: for each
instantiated column ``k`` in random order, ``pi_k | z_k ~ Beta(m_k, N - m_k + 1)`` and then the
whole column ``z_k | pi_k, A, sigma_x, X`` at once, kept non-empty; then every row's
singletons redrawn at once, ``p(k_new = k) ∝ Poisson(k; alpha / N) N(x_i; z_i A,
(sigma_x^2 + k sigma_a^2) I)``, ``k <= kappa``; then ``A | Z, X`` and the hyperparameters as
in the collapsed sampler. Each block is an exact conditional (the IBP as the Bernoulli-process
limit of a beta process, :mod:`bnpjax.priors.ibp`).

References
----------
Zhang, M. M., Dubey, A. & Williamson, S. A. (2017). Parallel Markov chain Monte Carlo for the
Indian buffet process. arXiv:1703.03457.
Thibaux, R. & Jordan, M. I. (2007). Hierarchical beta processes and the Indian buffet
process. *AISTATS*.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.models.ibp_lg._kernel import FROM_HYPER, build_algorithm, init, resolve, sweep_step
from bnpjax.models.ibp_lg.conditionals import finish_sweep, new_feature_log_weights
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper
from bnpjax.ops import sample_categorical
from bnpjax.priors import ibp

__all__ = ["build_step", "init", "parallel_gibbs"]


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


def _parallel_step(data, hyper, key, state, *, kappa, flags):
    key_order, key_cols, key_new, key_A, key_rest = jax.random.split(key, 5)
    Z, exceeded, shortfall = _sweep_Z((key_order, key_cols, key_new), state, kappa=kappa)
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
        _parallel_step,
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
    capacity: int = 16,
    num_init_features: int = 10,
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
    return build_algorithm(_parallel_step, "parallel_gibbs", data, s)


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `parallel_gibbs.init` and `.build_step`.
parallel_gibbs.init = init
parallel_gibbs.build_step = build_step
