"""The factorization machine's Gibbs sampler as a block of :class:`numpyro.infer.Gibbs`
(:class:`bnpjax.infer.KernelBlock`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from bnpjax.models.fm.data import FMData, FMHyper
from bnpjax.models.fm.gibbs import gibbs

__all__ = ["gibbs_block"]


def gibbs_block(
    model,
    data: FMData,
    hyper: FMHyper | None = None,
    *,
    given: Mapping[str, str | Callable] | None = None,
    sites: Mapping[str, str | Callable] | None = None,
    **options,
):
    r"""The BFM Gibbs sampler (:func:`gibbs`, gaussian likelihood) as a block of
    :class:`numpyro.infer.Gibbs`, with the noise variance held at another block's value, so
    that a user may put any prior on the noise scale and let NUTS sample it.

    The block samples ``b``, ``w``, ``V`` and, as its own auxiliary variables, the group
    hyperparameters ``mu_w, var_w, mu_v, var_v`` under the model's hierarchical priors
    (``hyper``). The user's NumPyro model must give the targets the FM's likelihood,
    ``y ~ Normal(b + X w + sum_{i<j} <v_i, v_j> x_i x_j, sqrt(noise_var))``, and hold the
    noise in a site of another block (:mod:`bnpjax.infer.kernel_block` says why the
    composition is then exact).

    Parameters
    ----------
    model
        the user's NumPyro model.
    data : FMData
        from ``make_data(X, y, standardize=False)``, the same design and targets the model is
        given (the block's state is the model's own sites, in the targets' units).
    hyper : FMHyper, optional
        the hierarchical priors of ``w`` and ``V`` (:func:`make_hyper`).
    given : dict, optional
        ``{"noise_var": site or fn(values)}``. Default ``{"noise_var": lambda v:
        v["sigma"] ** 2}``: a site ``sigma``, the noise sd.
    sites : dict, optional
        ``{site: field or fn(state)}``; default ``{"b": "b", "w": "w", "V": "V"}``.
    **options
        other settings of :func:`gibbs` (``rank``, ``init_scale``, ``fit_w0``, ...).

    Returns
    -------
    bnpjax.infer.KernelBlock

    Raises
    ------
    ValueError
        when ``given`` holds anything but ``noise_var`` or the likelihood is not gaussian.
    """
    if given is None:
        given = {"noise_var": lambda values: values["sigma"] ** 2}
    given = dict(given)
    if set(given) != {"noise_var"}:
        raise ValueError(f"given must hold exactly 'noise_var', got {sorted(given)}")
    if options.get("likelihood", "gaussian") != "gaussian":
        raise ValueError("gibbs_block holds the noise variance: the likelihood must be gaussian")
    if float(data.y_loc) != 0.0 or float(data.y_scale) != 1.0:
        raise ValueError(
            "data: the block's b, w, V are the model's sites in the targets' units; build it "
            "with fm.make_data(X, y, standardize=False)"
        )
    sites = {"b": "b", "w": "w", "V": "V"} if sites is None else dict(sites)
    options = {"pointwise_log_likelihood": False, **options, "sample_noise": False}
    kernel = gibbs(data, hyper, **options)

    from bnpjax.infer.kernel_block import KernelBlock  # imports numpyro: only when asked for

    return KernelBlock(model, kernel, sites=sites, given=given)
