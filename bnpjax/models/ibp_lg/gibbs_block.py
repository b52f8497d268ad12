"""The linear-Gaussian IBP samplers as a block of :class:`numpyro.infer.Gibbs`
(:class:`bnpjax.infer.KernelBlock`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax.numpy as jnp

from bnpjax.infer.base import concrete_or_none
from bnpjax.models.ibp_lg.collapsed_gibbs import collapsed_gibbs
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper, make_data
from bnpjax.models.ibp_lg.parallel_gibbs import parallel_gibbs

__all__ = ["gibbs_block"]

_SAMPLERS = {"collapsed_gibbs": collapsed_gibbs, "parallel_gibbs": parallel_gibbs}
_HYPER_FIELDS = ("alpha", "sigma_x", "sigma_a")


def _data(X) -> IBPLGData:
    """``make_data(X, standardize=False)`` when ``X`` is concrete (the block's state is the
    user model's own sites, in its units); fully observed ``X`` when traced."""
    if concrete_or_none(X) is not None:
        return make_data(X, standardize=False)  # the state lives in the model's units
    N, D = X.shape
    return IBPLGData(X, jnp.ones_like(X), jnp.arange(N * D))


def gibbs_block(
    model,
    hyper: IBPLGHyper | None = None,
    *,
    given: Mapping[str, str | Callable] | None = None,
    sites: Mapping[str, str | Callable] | None = None,
    sampler: str = "collapsed_gibbs",
    capacity: int = 16,
    **options,
):
    r"""An ``ibp_lg`` sampler as a block of :class:`numpyro.infer.Gibbs` for the user's
    NumPyro model of the linear-Gaussian IBP (the example of :mod:`bnpjax.infer.kernel_block`).

    The block samples ``Z``, ``A`` and the hyperparameters that are not ``given`` with the
    bnpjax model's priors (``hyper``: ``alpha ~ Gamma``, ``sigma_a^2, sigma_x^2 ~
    InvGamma``); the ``given`` ones are held at other blocks' values, so a user may put any
    prior on them (a heavy-tailed or hierarchical noise scale that NUTS samples, say). The
    NumPyro model's likelihood must be ``X ~ Normal(Z @ A, sigma_x)`` (any extra factor
    involving only the ``given`` sites is fine). ``A`` is zero in the buffer's inactive
    columns.

    Parameters
    ----------
    model
        the user's NumPyro model, called as ``model(X, ...)``.
    hyper : IBPLGHyper, optional
        the priors of the block's hyperparameters (:func:`make_hyper`).
    given : dict, optional
        ``{field: site or fn(values)}`` for fields among ``alpha``, ``sigma_x``,
        ``sigma_a`` (sds, not variances) held at other blocks' sites. Default
        ``{"sigma_x": "sigma_x"}``.
    sites : dict, optional
        ``{site: field or fn(state)}``, the model's sites the block samples. Default ``Z``,
        ``A`` and every hyperparameter not given, under the field's name.
    sampler : {"collapsed_gibbs", "parallel_gibbs"}
    capacity : int
        the feature buffer; the same as the model's ``IndianBuffetProcess`` capacity.
    **options
        other settings of the sampler (``kappa``, ``num_init_features``, ...).

    Returns
    -------
    bnpjax.infer.KernelBlock

    Raises
    ------
    ValueError
        for an unknown sampler or ``given`` field.
    """
    if sampler not in _SAMPLERS:
        raise ValueError(f"sampler must be one of {sorted(_SAMPLERS)}, got {sampler!r}")
    given = {"sigma_x": "sigma_x"} if given is None else dict(given)
    unknown = sorted(set(given) - set(_HYPER_FIELDS))
    if unknown:
        raise ValueError(f"given may hold {list(_HYPER_FIELDS)} only, got {unknown}")
    if sites is None:
        sites = {"Z": "Z", "A": "A", **{f: f for f in _HYPER_FIELDS if f not in given}}
    factory = _SAMPLERS[sampler]
    settings = {
        **{f"sample_{f}": f not in given for f in _HYPER_FIELDS},
        # the NumPyro model's likelihood is N(Z A, sigma_x): no offset, its zero is fixed
        "sample_offset": False,
        "capacity": capacity,
        "trace_features": False,
        "pointwise_log_likelihood": False,
        **options,
    }
    if "alpha" in given:
        settings["alpha_prior"] = None

    def kernel(X, *args, **kwargs):
        return factory(_data(X), hyper, **settings)

    from bnpjax.infer.kernel_block import KernelBlock  # imports numpyro: only when asked for

    return KernelBlock(model, kernel, sites=sites, given=given)
