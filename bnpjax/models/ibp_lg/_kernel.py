"""What both samplers share besides the math: their settings, the random start, the trace,
the ArviZ names and the capacity growth of the feature buffer."""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, as_step, bind, concrete_or_none
from bnpjax.infer.capacity import growable, pad_fields
from bnpjax.infer.checks import check_flag, check_integer, is_positive_finite
from bnpjax.models.ibp_lg.conditionals import entry_log_likelihood, sample_A
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper, IBPLGState, make_hyper

#: ``alpha_prior``'s default: the alpha prior held by ``hyper``, alpha sampled.
FROM_HYPER = "hyper"
#: random starting features by default: few, so that the start plants no surplus the chain
#: must remove and the buffer need not grow for it. With 10 in the default buffer of 16, the
#: first sweeps' births overflowed it and the driver doubled it for the whole run (the
#: collapsed sampler on bars, 2 x (300 + 300) sweeps: 4.3-4.7 s at 32 columns against
#: 1.2-1.3 s with 5 starting features, no growth; 2026-11-29)
NUM_INIT_FEATURES = 5


class Settings(NamedTuple):
    hyper: IBPLGHyper
    alpha: float
    sigma_x: float
    sigma_a: float
    flags: tuple  # sorted (name, bool) pairs: sample_alpha, sample_offset, sample_sigma_*
    kappa: int
    capacity: int
    num_init_features: int
    trace_features: bool
    pointwise_log_likelihood: bool


def resolve(
    data,
    hyper=None,
    *,
    alpha: float = 1.0,
    sigma_x: float = 1.0,
    sigma_a: float = 1.0,
    alpha_prior: Any = FROM_HYPER,
    sample_alpha: bool = True,
    sample_sigma_x: bool = True,
    sample_sigma_a: bool = True,
    sample_offset: bool = True,
    kappa: int = 10,
    capacity: int = 16,
    num_init_features: int = NUM_INIT_FEATURES,
    trace_features: bool = True,
    pointwise_log_likelihood: bool = True,
) -> Settings:
    """Validate the keyword settings of a factory (the same for both samplers and for the
    Geweke protocol); ``ValueError`` naming the argument."""
    if not isinstance(data, IBPLGData):
        raise ValueError("data must come from bnpjax.models.ibp_lg.make_data")
    for label, value in (("alpha", alpha), ("sigma_x", sigma_x), ("sigma_a", sigma_a)):
        if not is_positive_finite(value):
            raise ValueError(f"{label} must be positive, got {value!r}")
    flags = _check_flags(sample_alpha, sample_sigma_x, sample_sigma_a, sample_offset)
    trace_features = check_flag(trace_features, "trace_features")
    pointwise_log_likelihood = check_flag(pointwise_log_likelihood, "pointwise_log_likelihood")
    kappa = check_integer(kappa, "kappa", 1)
    capacity = check_integer(capacity, "capacity", 1)
    num_init_features = min(check_integer(num_init_features, "num_init_features", 0), capacity)
    hyper = make_hyper() if hyper is None else hyper
    if not isinstance(hyper, IBPLGHyper):
        raise ValueError("hyper must come from bnpjax.models.ibp_lg.make_hyper")
    if alpha_prior is None:
        flags["sample_alpha"] = False
    elif not (isinstance(alpha_prior, str) and alpha_prior == FROM_HYPER):
        if not flags["sample_alpha"]:
            raise ValueError("alpha_prior=(a, b) samples alpha: pass alpha_prior=None to fix it")
        shape, rate = make_hyper(alpha_prior=alpha_prior)[:2]
        hyper = hyper._replace(alpha_shape=shape, alpha_rate=rate)
    _check_offset(data, flags["sample_offset"])
    return Settings(
        hyper=hyper,
        alpha=float(alpha),
        sigma_x=float(sigma_x),
        sigma_a=float(sigma_a),
        flags=tuple(sorted(flags.items())),
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        trace_features=trace_features,
        pointwise_log_likelihood=pointwise_log_likelihood,
    )


def _check_flags(sample_alpha, sample_sigma_x, sample_sigma_a, sample_offset) -> dict:
    """The sweep's switches as ``{name: bool}``; ``ValueError`` naming one that is not a
    bool (a truthy string is not read as True)."""
    given = {
        "sample_alpha": sample_alpha,
        "sample_sigma_x": sample_sigma_x,
        "sample_sigma_a": sample_sigma_a,
        "sample_offset": sample_offset,
    }
    return {name: check_flag(value, name) for name, value in given.items()}


def _check_offset(data, sample_offset: bool):
    """A fixed offset far from the data costs a feature and, in float32, digits: warn. (A
    sampled one is exactly shift-invariant; a column with nothing observed keeps its offset
    at the background level, :func:`~bnpjax.models.ibp_lg.conditionals.hyper_updates`.)"""
    if sample_offset:
        return
    background = concrete_or_none(data.background)
    if background is not None and np.max(np.abs(np.asarray(background))) > 100:
        warnings.warn(
            "X's entries sit far from the background level at which sample_offset=False "
            f"holds the offset (up to {np.max(np.abs(np.asarray(background))):.3g} of their "
            "spread): the sampler will spend a feature on the difference, and in float32 the "
            "variation is lost in rounding; pass make_data(..., center=) the background "
            "level, or sample the offset (sample_offset=True: exactly shift-invariant)",
            UserWarning,
            stacklevel=4,
        )


def init(
    key,
    data,
    hyper=None,
    *,
    capacity=16,
    alpha=1.0,
    sigma_x=1.0,
    sigma_a=1.0,
    num_init_features=NUM_INIT_FEATURES,
    sample_offset=True,
) -> IBPLGState:
    """A random start: ``Z`` with ``num_init_features`` columns, each entry on with
    probability 1/2, then ``A | Z, X``; the offset at the column means (held at
    ``data.background`` when it is not sampled); missing entries of ``X`` start at the
    column means and are imputed from the first step on.

    Parameters
    ----------
    key : jax.Array
    data : IBPLGData
    hyper : IBPLGHyper, optional
        Unused (the start does not depend on it); kept for the one signature.
    capacity : int
        Size of the feature buffer.
    alpha, sigma_x, sigma_a : float
        Starting values.
    num_init_features : int
        Number of random starting columns (at most ``capacity``).
    sample_offset : bool
        Whether the offset is sampled (it starts at the column means; a column with nothing
        observed holds it at the background level) or held at the data's background level.

    Returns
    -------
    IBPLGState
    """
    del hyper
    sample_offset = check_flag(sample_offset, "sample_offset")
    key_z, key_a = jax.random.split(key)
    N = data.X.shape[0]
    dtype = data.X.dtype
    slots = jnp.arange(capacity) < num_init_features
    Z = (jax.random.uniform(key_z, (N, capacity), dtype) < 0.5) & slots
    Z = Z.astype(dtype)
    sx = jnp.asarray(sigma_x, dtype)
    sa = jnp.asarray(sigma_a, dtype)
    D = data.X.shape[1]
    background = jnp.broadcast_to(jnp.asarray(data.background, dtype), (D,))
    observed = jnp.sum(data.mask, axis=0) > 0
    offset = jnp.where(observed, 0.0, background) if sample_offset else background
    X = data.X - offset
    A = sample_A(key_a, Z, X, sx, sa)
    return IBPLGState(Z, A, jnp.asarray(alpha, dtype), sx, sa, X, offset)


def _init(data, hyper, key, **settings):
    return init(key, data, hyper, **settings)


def _trace(data, hyper, state, info, *, trace_features, pointwise):
    del hyper
    scale = data.scale  # draws back in the data's units (make_data standardises X)
    out = {
        "posterior": {
            "num_features": info.num_features,
            "alpha": state.alpha,
            "sigma_x": state.sigma_x * scale,
            "sigma_a": state.sigma_a * scale,
            "offset": data.loc + state.offset * scale,
        },
        "sample_stats": {"lp": info.lp, "num_features": info.num_features},
    }
    if trace_features:
        out["posterior"].update(
            Z=state.Z.astype(jnp.int8), A=state.A * scale, active=state.Z.sum(0) > 0
        )
    if pointwise:
        terms = entry_log_likelihood(
            data.X - state.offset, data.observed, state.Z, state.A, state.sigma_x
        )
        out["log_likelihood"] = {"X": terms - jnp.log(scale)}
    return out


def _step(data, hyper, key, state, *, step_fn, kappa, flags):
    return step_fn(data, hyper, key, state, kappa=kappa, flags=dict(flags))


def _spec(name, data, s: Settings) -> ArvizSpec:
    mask = concrete_or_none(data.mask)
    observed = concrete_or_none(data.observed)
    N, D = data.X.shape
    observed_data, coords = {}, {}
    if observed is not None:
        X = np.asarray(data.X, np.float64) * float(data.scale) + np.asarray(data.loc, np.float64)
        observed_data = {"X": X.reshape(-1)[observed]}
        coords = {"obs": observed.tolist()}
    return ArvizSpec(
        name=f"ibp_lg.{name}",
        dims={
            "Z": ["row", "feature"],
            "A": ["feature", "dim"],
            "active": ["feature"],
            "offset": ["dim"],
            "X": ["obs"],
        },
        coords=coords,
        observed_data=observed_data,
        settings={
            "num_rows": N,
            "num_dims": D,
            "kappa": s.kappa,
            **dict(s.flags),
            "num_missing": -1 if mask is None else int(mask.size - mask.sum()),
        },
    )


def build_algorithm(
    step_fn, name: str, data, s: Settings, init_fn=None, **init_settings
) -> SamplingAlgorithm:
    """The kernel of ``step_fn`` (``step_fn(data, hyper, key, state, *, kappa, flags)``) with
    a feature buffer that the driver grows from ``s.capacity``; ``init_fn(data, hyper, key,
    **settings)`` (default: the random start, :func:`init`) with the start's settings and
    ``init_settings`` (hashable) added."""
    init_fn = _init if init_fn is None else init_fn

    def build(capacity):
        return SamplingAlgorithm(
            init=bind(
                init_fn,
                data,
                s.hyper,
                capacity=capacity,
                alpha=s.alpha,
                sigma_x=s.sigma_x,
                sigma_a=s.sigma_a,
                num_init_features=s.num_init_features,
                sample_offset=dict(s.flags)["sample_offset"],
                **init_settings,
            ),
            step=bind(_step, data, s.hyper, step_fn=step_fn, kappa=s.kappa, flags=s.flags),
            trace=bind(
                _trace,
                data,
                s.hyper,
                trace_features=s.trace_features,
                pointwise=s.pointwise_log_likelihood,
            ),
            spec=_spec(name, data, s),
        )

    return growable(build, s.capacity, pad_fields({"Z": 1, "A": 0}))


def sweep_step(step_fn, *, kappa, sample_alpha, sample_sigma_x, sample_sigma_a, sample_offset=True):
    """``step(key, state, data, hyper)`` of one sweep of ``step_fn`` (the ``build_step`` of
    both samplers: they differ only in how ``Z`` is swept)."""
    flags = _check_flags(sample_alpha, sample_sigma_x, sample_sigma_a, sample_offset)
    kappa = check_integer(kappa, "kappa", 1)

    return as_step(step_fn, kappa=kappa, flags=flags)
