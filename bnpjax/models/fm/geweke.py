r"""The Geweke protocol of the Bayesian factorization machine: prior draws of the state,
fresh targets given a state, and ``refresh`` (nothing of the state derives from the targets).

``settings`` are :func:`bnpjax.models.fm.gibbs`'s keywords (``rank``, ``likelihood``,
``num_levels``, ``fit_w0``, ``fit_linear``; the others are ignored).

References
----------
Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
JASA 99(467), 799-804.

Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57, section 4.3 (the
generative model).
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp

from bnpjax.models.fm.conditionals import _predict_parts
from bnpjax.models.fm.data import LIKELIHOODS, FMData, FMHyper, FMState, make_hyper
from bnpjax.models.fm.likelihoods import _cutpoints_from
from bnpjax.ops import sample_inverse_gamma

__all__ = ["data_sample", "prior_sample", "refresh"]

#: the factory's keywords that do not change the model
_IGNORED = {"init_scale", "init_stdev", "test", "num_test", "log_likelihood"}


def _check_ignored(unused: dict, name: str) -> None:
    extra = set(unused) - _IGNORED
    if extra:
        raise TypeError(f"{name} got unexpected keyword arguments {sorted(extra)}")


def _prior_draw(key, hyper, group, num_groups, rank, likelihood, num_levels, fit_w0, fit_linear):
    keys = jax.random.split(key, 9)
    dtype = hyper.alpha_0.dtype
    num_features = group.shape[0]

    def variance_and_mean(k1, k2, shape):
        var = sample_inverse_gamma(
            k1, jnp.full(shape, hyper.alpha_0 / 2), hyper.beta_0 / 2, reference=True
        )
        mean = hyper.mu_0 + jnp.sqrt(var / hyper.gamma_0) * jax.random.normal(k2, shape, dtype)
        return mean, var

    mu_w, var_w = variance_and_mean(keys[0], keys[1], (num_groups,))
    mu_v, var_v = variance_and_mean(keys[2], keys[3], (num_groups, rank))
    w = mu_w[group] + jnp.sqrt(var_w[group]) * jax.random.normal(keys[4], (num_features,), dtype)
    w = w if fit_linear else jnp.zeros_like(w)
    V = mu_v[group] + jnp.sqrt(var_v[group]) * jax.random.normal(
        keys[5], (num_features, rank), dtype
    )
    b = jax.random.normal(keys[6], (), dtype) / jnp.sqrt(hyper.reg_0) if fit_w0 else 0.0
    if likelihood == "gaussian":
        noise_var = sample_inverse_gamma(
            keys[7], hyper.alpha_0 / 2, hyper.beta_0 / 2, reference=True
        )
    else:
        noise_var = jnp.ones((), dtype)
    if likelihood == "ordinal":
        params = hyper.cutpoint_scale * jax.random.normal(keys[8], (num_levels - 1,), dtype)
        cutpoints = _cutpoints_from(params)
    else:
        cutpoints = jnp.zeros((0,), dtype)
    return FMState(jnp.asarray(b, dtype), w, V, noise_var, mu_w, var_w, mu_v, var_v, cutpoints)


def prior_sample(
    key, data: FMData, hyper: FMHyper | None = None, *, rank: int = 10,
    likelihood: str = "gaussian", num_levels: int | None = None, fit_w0: bool = True,
    fit_linear: bool = True, **unused,
) -> FMState:  # fmt: skip
    r"""A state drawn from the prior: the group hyperparameters
    (:math:`\sigma^2 \sim \mathrm{InvGamma}(\alpha_0/2, \beta_0/2)`, :math:`\mu \sim
    \mathcal N(\mu_0, \sigma^2/\gamma_0)`), then ``b``, ``w``, ``V`` and the noise variance,
    and the ordinal cutpoints from their own prior.

    Parameters
    ----------
    key : jax.random.key
    data : FMData
        gives the number of features and their groups.
    hyper : FMHyper, optional
    rank, likelihood, num_levels, fit_w0, fit_linear
        :func:`bnpjax.models.fm.gibbs`'s settings (ordinal models need ``num_levels`` and fix
        ``b = 0``).

    Returns
    -------
    FMState
    """
    if not isinstance(data, FMData):
        raise ValueError(
            "data must come from bnpjax.models.fm.make_data (the old prior_sample(key, "
            "num_features, rank, hyper, ...) is prior_sample(key, data, hyper, rank=...))"
        )
    _check_ignored(unused, "prior_sample")
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    if likelihood == "ordinal" and num_levels is None:
        raise ValueError("prior_sample needs num_levels for likelihood 'ordinal'")
    hyper = make_hyper() if hyper is None else hyper
    return _prior_draw(
        key, hyper, data.group, data.group_sizes.shape[0], rank, likelihood,
        num_levels or 0, bool(fit_w0) and likelihood != "ordinal", bool(fit_linear),
    )  # fmt: skip


def data_sample(
    key, state: FMState, data: FMData, hyper=None, *, likelihood: str = "gaussian", **unused
) -> FMData:
    """Fresh targets ``y | state`` on the design of ``data``.

    Parameters
    ----------
    key : jax.random.key
    state : FMState
    data : FMData
    hyper : FMHyper, optional
        unused (the targets depend on the state only).
    likelihood : {"gaussian", "probit", "ordinal"}

    Returns
    -------
    FMData
        ``data`` with new ``y``.
    """
    if isinstance(hyper, str):  # the old signature data_sample(key, state, data, likelihood)
        warnings.warn(
            "data_sample(key, state, data, likelihood) is deprecated: use "
            "data_sample(key, state, data, hyper, likelihood=...)",
            FutureWarning,
            stacklevel=2,
        )
        likelihood, hyper = hyper, None
    unused.pop("rank", None)
    unused.pop("num_levels", None)
    unused.pop("fit_w0", None)
    unused.pop("fit_linear", None)
    _check_ignored(unused, "data_sample")
    yhat, _ = _predict_parts(data, state.b, state.w, state.V)
    if likelihood == "gaussian":
        y = yhat + jnp.sqrt(state.noise_var) * jax.random.normal(key, yhat.shape, yhat.dtype)
    else:
        z = yhat + jax.random.normal(key, yhat.shape, yhat.dtype)
        if likelihood == "probit":
            y = (z > 0).astype(yhat.dtype)
        else:
            y = jnp.sum(z[:, None] > state.cutpoints[None, :], axis=1).astype(yhat.dtype)
    return data._replace(y=y)


def refresh(data: FMData, state: FMState, **settings) -> FMState:
    """No field of the state derives from the targets: ``state`` unchanged."""
    return state
