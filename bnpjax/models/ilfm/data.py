"""Data, hyperparameters, state and diagnostics of the infinite latent feature relational model.

:func:`make_data` validates links (and optional covariates) once at the boundary and returns
an :class:`ILFMData` of static-shaped arrays; :func:`make_hyper` builds the priors.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import check_flag, check_positive, check_real_array, renamed_arguments
from bnpjax.infer.scaling import location_scale
from bnpjax.ops._dtypes import device_array

__all__ = ["ILFMData", "ILFMHyper", "ILFMInfo", "ILFMState", "make_data", "make_hyper"]


class ILFMData(NamedTuple):
    """Links and pair covariates (from :func:`make_data`).

    Attributes
    ----------
    Y
        (R, N, N) links in {0, 1}; 0 where unobserved.
    mask
        (R, N, N), 1.0 where observed (held-out, missing and, by default, diagonal entries 0).
    X
        (C, N, N) pair covariates (C = 0 without), each standardised by :func:`make_data`:
        ``(x - X_loc[c]) / X_scale[c]``.
    X_loc, X_scale
        (C,) the standardisation of each covariate (None: none, as in data built by hand).
    """

    Y: jax.Array
    mask: jax.Array
    X: jax.Array
    X_loc: jax.Array | None = None
    X_scale: jax.Array | None = None


class ILFMHyper(NamedTuple):
    """Hyperparameters (from :func:`make_hyper`).

    Attributes
    ----------
    alpha_shape, alpha_rate
        the Gamma(shape, rate) prior of the IBP concentration alpha.
    sigma_w, sigma_s, sigma_beta
        prior standard deviations of the feature weights, the relation biases and the
        covariate coefficients; with a prior on the weights' scale, ``sigma_w`` is where
        its chains start.
    sigma_w_shape, sigma_w_scale
        the inverse-Gamma(shape, scale) prior of ``sigma_w^2`` (None: ``sigma_w`` is fixed).
    """

    alpha_shape: jax.Array
    alpha_rate: jax.Array
    sigma_w: jax.Array
    sigma_s: jax.Array
    sigma_beta: jax.Array
    sigma_w_shape: jax.Array | None = None
    sigma_w_scale: jax.Array | None = None


class ILFMState(NamedTuple):
    """Sampler state. With ``mode="single"`` every field has a leading relation axis (and
    ``W``, ``bias``, ``beta`` a relation axis of length 1 per model).

    Attributes
    ----------
    F
        (N, capacity) binary features.
    W
        (R, capacity, capacity) weights, zero outside the active block.
    bias
        (R,) relation biases.
    alpha
        the IBP concentration.
    log_step_size
        log of the HMC (or random-walk) step size, adapted during warmup only.
    beta
        (R, C) covariate coefficients.
    adapting
        whether a step adapts the step size (boolean; the driver switches it on for warmup
        and off for the kept draws: ``SamplingAlgorithm.set_adaptation``). ``None`` (a state
        built by hand) adapts only in a step built with ``adapt=True``.
    sigma_w
        the weights' prior standard deviation, sampled when the hyperparameters put a prior
        on it (``make_hyper(sigma_w_prior=...)``); ``None`` otherwise (then
        ``ILFMHyper.sigma_w`` is used).
    pair_weights
        (R, N, N) the Fisher weights of the observed pairs that set the HMC move's dense
        mass (``gibbs(mass="fisher")``, :mod:`~bnpjax.models.ilfm.mass`), adapted while
        ``adapting`` is on; ``None``: unit mass.
    """

    F: jax.Array
    W: jax.Array
    bias: jax.Array
    alpha: jax.Array
    log_step_size: jax.Array
    beta: jax.Array
    adapting: jax.Array | None = None
    sigma_w: jax.Array | None = None
    pair_weights: jax.Array | None = None


class ILFMInfo(NamedTuple):
    """Per-step diagnostics.

    Attributes
    ----------
    lp
        the log joint density of the new state.
    num_features
        the number of active features K+.
    acceptance_rate
        the weight move's acceptance probability.
    birth_acceptance
        the fraction of entities whose unique-feature move was accepted, counting the moves
        that change nothing (no unique feature before, none proposed).
    capacity_exceeded, capacity_needed
        whether (and to what size) the feature buffer must grow.
    births_deaths
        the number of accepted unique-feature moves that changed something (a birth, a
        death or new weights of an entity's own features) in the sweep.
    merges_splits
        the number of accepted moves that merged two identical features or split one, or
        took a nested feature out of another or put a disjoint one in
        (:mod:`~bnpjax.models.ilfm.merge_split`) in the sweep.
    """

    lp: jax.Array
    num_features: jax.Array
    acceptance_rate: jax.Array
    birth_acceptance: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array
    births_deaths: jax.Array = None
    merges_splits: jax.Array = None


def current_hyper(hyper: ILFMHyper, state: ILFMState) -> ILFMHyper:
    """``hyper`` with the weights' scale of ``state`` when the state samples it: every move
    of a sweep is exact given the current scale, and reads it from the hyperparameters."""
    if (state.sigma_w is None) != (hyper.sigma_w_shape is None):
        raise ValueError(
            "state.sigma_w must be a value exactly when hyper has a sigma_w_prior: build the "
            "state with init (or prior_sample) from the same hyper"
        )
    if state.sigma_w is None:
        return hyper
    return hyper._replace(sigma_w=state.sigma_w)


@renamed_arguments(alpha="alpha_prior")
def make_hyper(
    alpha_prior=(1.0, 1.0),
    sigma_w: float = 1.0,
    sigma_s: float = 3.0,
    sigma_beta: float = 1.0,
    sigma_w_prior=None,
) -> ILFMHyper:
    """Hyperparameters of the model.

    Parameters
    ----------
    alpha_prior
        ``(a, b)``: the Gamma(a, rate b) prior of the IBP concentration alpha (``alpha=`` is
        the deprecated spelling).
    sigma_w, sigma_s, sigma_beta
        prior standard deviations of the weights, the biases and the covariate coefficients.
    sigma_w_prior
        ``(shape, scale)`` of an inverse-Gamma prior of ``sigma_w^2``: the sampler then draws
        the weights' scale from its conditional every sweep, starting at ``sigma_w``. None
        (the default, as Miller et al. 2009) keeps ``sigma_w`` fixed. The weights' scale sets
        how many features the links need: weights narrower than the data's make the posterior
        build a strong feature from several weak ones (nested features or copies), so a fixed
        ``sigma_w`` far from the weights the links need changes ``K+``, where a sampled one
        adapts to them. ``(2, 2)``, for example, gives ``sigma_w^2`` mean 2 and puts 95 % of
        ``sigma_w`` between 0.6 and 2.9 a priori.

    Returns
    -------
    ILFMHyper
    """
    if alpha_prior is None:
        raise ValueError("alpha_prior must be (shape, rate): the ILFM samples alpha")
    if np.ndim(alpha_prior) != 1 or len(alpha_prior) != 2:
        raise ValueError(f"alpha_prior must be (shape, rate), got {alpha_prior!r}")
    shape, rate = alpha_prior
    values = [shape, rate, sigma_w, sigma_s, sigma_beta]
    names = ["alpha_prior shape", "alpha_prior rate", "sigma_w", "sigma_s", "sigma_beta"]
    if sigma_w_prior is not None:
        if np.ndim(sigma_w_prior) != 1 or len(sigma_w_prior) != 2:
            raise ValueError(f"sigma_w_prior must be (shape, scale), got {sigma_w_prior!r}")
        values += list(sigma_w_prior)
        names += ["sigma_w_prior shape", "sigma_w_prior scale"]
    for name, value in zip(names, values, strict=True):
        check_positive(value, name)
    dtype = jnp.result_type(float)
    return ILFMHyper(*(device_array(v, dtype) for v in values))


def _covariates(covariates, entity_covariates, N: int) -> np.ndarray:
    """Stack pair covariates ``(C, N, N)`` and, for entity covariates ``A`` (N, E), the sender
    term ``A[i, e]`` and the receiver term ``A[j, e]`` of every pair: (C + 2E, N, N)."""
    parts = [np.zeros((0, N, N))]
    if covariates is not None:
        X = check_real_array(covariates, "covariates")
        X = X[None] if X.ndim == 2 else X
        if X.ndim != 3 or X.shape[1:] != (N, N):
            raise ValueError(f"covariates must be (N, N) or (C, N, N) with N = {N}, got {X.shape}")
        parts.append(X)
    if entity_covariates is not None:
        A = check_real_array(entity_covariates, "entity_covariates")
        A = A[:, None] if A.ndim == 1 else A
        if A.ndim != 2 or A.shape[0] != N:
            raise ValueError(f"entity_covariates must be (N, E) with N = {N}, got {A.shape}")
        sender = np.broadcast_to(A.T[:, :, None], (A.shape[1], N, N))
        receiver = np.broadcast_to(A.T[:, None, :], (A.shape[1], N, N))
        parts += [sender, receiver]
    return np.concatenate(parts)


def make_data(
    Y,
    mask=None,
    *,
    observe_diagonal: bool = False,
    covariates=None,
    entity_covariates=None,
    standardize: bool = True,
) -> ILFMData:
    """Validate links and covariates, and standardise the covariates.

    Each covariate ``c`` (a pair covariate, or the sender or receiver term of an entity
    covariate) is stored as ``(x - X_loc[c]) / X_scale[c]``, its mean and root mean square
    deviation over the N x N pairs, computed on the host in float64. The sampler moves the
    coefficients on that unit scale, where the prior ``N(0, sigma_beta^2)`` and the HMC step
    size fit every covariate, and traces them back in the covariates' units:
    ``beta = beta' / X_scale`` and ``bias = bias' - sum_c beta'_c X_loc[c] / X_scale[c]``.
    So multiplying a covariate by ``k`` divides its coefficient by ``k``, and shifting it
    moves only the relation bias.

    Parameters
    ----------
    Y
        (N, N) or (R, N, N) links, 0/1 where observed; NaN marks an unobserved entry.
    mask
        optional boolean array of the shape of ``Y`` (or (N, N)); True = observed.
    observe_diagonal
        count the self-links ``y_ii`` as observations (default: unobserved).
    covariates
        (N, N) or (C, N, N) pair covariates ``x_ij``.
    entity_covariates
        (N, E): each column enters as a sender term ``A[i, e]`` and a receiver term
        ``A[j, e]`` of every pair (Miller et al.'s entity covariates).
    standardize
        False stores the covariates as given (then ``sigma_beta`` is in their units).

    Returns
    -------
    ILFMData

    Raises
    ------
    ValueError
        naming the argument that is malformed.
    """
    observe_diagonal = check_flag(observe_diagonal, "observe_diagonal")
    standardize = check_flag(standardize, "standardize")
    Y = check_real_array(Y, "Y", finite=False)
    if np.any(np.isinf(Y)):
        raise ValueError("Y must not contain +-inf (only NaN marks an unobserved entry)")
    if Y.ndim == 2:
        Y = Y[None]
    if Y.ndim != 3 or Y.shape[1] != Y.shape[2] or Y.shape[1] < 2:
        raise ValueError(f"Y must be (N, N) or (R, N, N) with N >= 2, got shape {Y.shape}")
    observed = ~np.isnan(Y)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != Y.shape and mask.shape != Y.shape[1:]:
            raise ValueError(f"mask must have the shape of Y {Y.shape}, got {mask.shape}")
        if mask.dtype != bool and not np.all((mask == 0) | (mask == 1)):
            raise ValueError("mask must be boolean (True = observed)")
        observed &= np.broadcast_to(mask.astype(bool), Y.shape)
    values = Y[observed]
    bad = values[(values != 0) & (values != 1)]
    if bad.size:
        raise ValueError(
            f"Y must hold binary links (0 or 1) where observed, got {float(bad[0])}; mark an "
            "unobserved pair with NaN or in mask, and threshold weighted links (Y > 0)"
        )
    if not observe_diagonal:
        N = Y.shape[1]
        observed[:, np.arange(N), np.arange(N)] = False
    if not observed.any():
        raise ValueError("mask leaves no observed entry")
    dtype = jnp.result_type(float)
    X = _covariates(covariates, entity_covariates, Y.shape[1])
    loc = scale = None
    if standardize and X.shape[0]:
        loc, scale = np.array([location_scale(channel, "mean") for channel in X]).T
        X = (X - loc[:, None, None]) / scale[:, None, None]
        loc, scale = device_array(loc, dtype), device_array(scale, dtype)
    return ILFMData(
        device_array(np.where(observed, np.nan_to_num(Y), 0.0), dtype),
        device_array(observed, dtype),
        device_array(X, dtype),
        loc,
        scale,
    )


def covariates_in_units(data: ILFMData) -> jax.Array:
    """The covariates ``(C, N, N)`` of ``data`` in their own units (undoing :func:`make_data`'s
    standardisation), the units of traced coefficients."""
    if data.X_scale is None:
        return data.X
    return data.X * data.X_scale[:, None, None] + data.X_loc[:, None, None]
