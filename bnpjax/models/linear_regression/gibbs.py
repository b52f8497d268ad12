"""Two-block Gibbs sampler of the Normal-Gamma linear regression: ``beta | tau, y`` then
``tau | beta, y``, both exact conditionals, so the joint posterior is invariant.

``Lambda_n`` and its Cholesky factor do not depend on the state: :func:`gibbs` computes them
once, so a sweep costs ``O(np + p^2)``.

References
----------
Gelfand, A. E. & Smith, A. F. M. (1990). Sampling-based approaches to calculating marginal
densities. *JASA* 85, 398-409.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import numpy as np

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, as_step, bind, concrete_or_none
from bnpjax.infer.checks import renamed_arguments
from bnpjax.infer.scaling import location_scale
from bnpjax.models.linear_regression.conditionals import (
    _conditional_pieces,
    _sample_gamma,
    log_joint,
    pointwise_log_likelihood,
    sample_beta,
    tau_conditional,
)
from bnpjax.models.linear_regression.data import (
    LinearRegressionData,
    LinearRegressionHyper,
    LinearRegressionState,
    make_hyper,
)

__all__ = ["GibbsInfo", "build_step", "gibbs", "init"]


class GibbsInfo(NamedTuple):
    """Per-step diagnostics: ``lp``, the log joint of the new state."""

    lp: jax.Array


def init(key, data: LinearRegressionData, hyper: LinearRegressionHyper) -> LinearRegressionState:
    """A start: ``tau`` from its prior, then ``beta | tau, y``.

    Parameters
    ----------
    key : jax.Array
        A ``jax.random.key``.
    data : LinearRegressionData
    hyper : LinearRegressionHyper

    Returns
    -------
    LinearRegressionState
    """
    key_tau, key_beta = jax.random.split(key)
    tau = _sample_gamma(key_tau, hyper.a, hyper.b)
    beta = sample_beta(key_beta, _conditional_pieces(data, hyper), tau)
    return LinearRegressionState(beta, tau)


def _step(data, hyper, pieces, key, state):
    key_beta, key_tau = jax.random.split(key)
    beta = sample_beta(key_beta, pieces, state.tau)
    tau = _sample_gamma(key_tau, *tau_conditional(data, hyper, pieces, beta))
    new = LinearRegressionState(beta, tau)
    return new, GibbsInfo(lp=log_joint(data, hyper, new))


def build_step():
    """The Gibbs sweep as ``step(key, state, data, hyper) -> (state, info)``.

    Returns
    -------
    callable
        One sweep; it factorises ``Lambda_n`` at each call (:func:`gibbs` does it once).
    """

    return as_step(_step, derive=lambda data, hyper: (_conditional_pieces(data, hyper),))


def _init(data, hyper, key):
    return init(key, data, hyper)


def _trace(data, state, info):
    return {
        "posterior": {"beta": state.beta, "tau": state.tau, "sigma": jax.lax.rsqrt(state.tau)},
        "sample_stats": {"lp": info.lp},
        "log_likelihood": {"y": pointwise_log_likelihood(data, state)},
    }


def _default_hyper(data: LinearRegressionData) -> LinearRegressionHyper:
    """The default prior, scaled to the data: ``make_hyper(p, b=-log(0.9) s2)``, with ``s2``
    the variance of the observed ``y`` (their mean square when they are all equal; ``b = 1``
    for traced data).

    ``tau ~ Gamma(1, b)`` makes the noise variance ``InvGamma(1, b)``, which puts 90% of its
    mass below ``s2``: BART's calibration of the noise prior against the spread of ``y``
    (Chipman, George & McCulloch 2010, sec. 2.2.4), here with ``a = 1``. Multiplying ``y`` by
    ``c`` multiplies ``b`` by ``c^2``, and with ``beta | tau ~ N(0, (tau I)^-1)`` the posterior
    of ``(beta, sigma)`` is then multiplied by ``c`` exactly: the fit does not depend on the
    units of ``y``. A fixed ``b = 1`` put a prior noise variance near 1 whatever the units: ``y``
    in millionths got a noise sd near 1 and coefficients shrunk to 0. Shifting ``y`` is
    absorbed by an intercept column of ``X``, whose prior still centres it at 0 with sd
    ``sigma``: centre ``y``, or give the intercept a small ``precision``, when its value is
    large against the noise.

    Parameters
    ----------
    data : LinearRegressionData

    Returns
    -------
    LinearRegressionHyper

    References
    ----------
    Chipman, H. A., George, E. I. and McCulloch, R. E. (2010). BART: Bayesian additive
    regression trees. Annals of Applied Statistics 4(1), 266-298.
    """
    p = data.X.shape[1]
    y = concrete_or_none(data.y)
    observed = concrete_or_none(data.observed)
    if y is None or observed is None:
        return make_hyper(p)
    values = np.asarray(y, np.float64)[observed]
    return make_hyper(p, b=-np.log(0.9) * location_scale(values, "mean")[1] ** 2)


@renamed_arguments(prior="hyper")
def gibbs(
    data: LinearRegressionData,
    hyper: LinearRegressionHyper | None = None,
    *,
    feature_names=None,
) -> SamplingAlgorithm:
    """Two-block Gibbs sampler for the Normal-Gamma regression.

    Parameters
    ----------
    data : LinearRegressionData
        From :func:`make_data`.
    hyper : LinearRegressionHyper, optional
        From :func:`make_hyper`. Default: zero mean, unit precision, ``a = 1`` and
        ``b = 0.105 var(y)`` over the observed ``y`` (90% of the prior noise variance below
        ``var(y)``, as BART calibrates it), so that the fit does not depend on the units of
        ``y``. ``prior=`` is its deprecated name.
    feature_names : sequence, optional
        Coordinates of the ``coef`` dim (default ``0..p-1``).

    Returns
    -------
    SamplingAlgorithm
        Kernel for :func:`bnpjax.sample`; its trace keeps ``beta``, ``tau``, ``sigma``, the
        log joint ``lp`` and the pointwise log-likelihood ``y`` of the observed entries.
    """
    if not isinstance(data, LinearRegressionData):
        raise ValueError("data must come from bnpjax.models.linear_regression.make_data")
    p = data.X.shape[1]
    hyper = _default_hyper(data) if hyper is None else hyper
    if not isinstance(hyper, LinearRegressionHyper):
        raise ValueError("hyper must come from bnpjax.models.linear_regression.make_hyper")
    if hyper.mean.shape != (p,) or hyper.precision.shape != (p, p):
        raise ValueError(
            f"hyper is for {hyper.mean.shape[0] if hyper.mean.ndim else '?'} coefficients but X "
            f"has {p} columns; build it with make_hyper({p}, ...)"
        )
    pieces = _conditional_pieces(data, hyper)
    names = list(feature_names) if feature_names is not None else list(range(p))
    if len(names) != p:
        raise ValueError(f"feature_names must have {p} entries, got {len(names)}")
    repeated = sorted({str(n) for n in names if names.count(n) > 1})
    if repeated:  # the coordinates of beta would share a label, and ArviZ select the first
        raise ValueError(f"feature_names must be distinct, got {repeated} more than once")
    observed = concrete_or_none(data.observed)
    spec = ArvizSpec(
        name="linear_regression.gibbs",
        dims={"beta": ["coef"], "y": ["obs"]},
        coords={"coef": names, **({"obs": observed.tolist()} if observed is not None else {})},
        observed_data={"y": np.asarray(data.y)[observed]} if observed is not None else {},
        settings={"num_features": p},
    )
    return SamplingAlgorithm(
        init=bind(_init, data, hyper),
        step=bind(_step, data, hyper, pieces),
        trace=bind(_trace, data),
        spec=spec,
    )


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `gibbs.init` and `.build_step`.
gibbs.init = init
gibbs.build_step = build_step
