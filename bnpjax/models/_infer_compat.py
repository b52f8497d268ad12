"""Temporary stand-ins for the bnpjax.infer API of issue 21 (capacity, checks, predictive)
until main has it; removed when the branch is merged with main."""

from __future__ import annotations

import functools
import warnings

import jax
import numpy as np

from bnpjax._checks import check_integer, is_positive_finite  # noqa: F401
from bnpjax.infer.base import pad_axis


def renamed_arguments(**renames):
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            for old, new in renames.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{fn.__name__}() got both {old!r} and {new!r}")
                    warnings.warn(
                        f"{fn.__name__}: {old!r} is deprecated, use {new!r}",
                        FutureWarning,
                        stacklevel=2,
                    )
                    kwargs[new] = kwargs.pop(old)
            return fn(*args, **kwargs)

        return wrapper

    return decorate


def deprecated_alias(new_function, old_name):
    @functools.wraps(new_function)
    def wrapper(*args, **kwargs):
        warnings.warn(
            f"{old_name} is deprecated, use {new_function.__name__}", FutureWarning, stacklevel=2
        )
        return new_function(*args, **kwargs)

    wrapper.__name__ = old_name
    return wrapper


def growable(build, capacity, grow_state):
    return build(capacity)._replace(
        capacity=capacity,
        resize=lambda c: growable(build, c, grow_state),
        grow_state=grow_state,
    )


def pad_fields(axes, fill=None):
    fill = fill or {}

    def grow_state(state, new_capacity):
        return state._replace(
            **{
                f: pad_axis(getattr(state, f), a, new_capacity, fill.get(f, 0))
                for f, a in axes.items()
            }
        )

    return grow_state


def map_draws(fn, draws, *, batch_size=None):
    del batch_size
    return jax.tree.map(np.asarray, jax.jit(jax.vmap(jax.vmap(fn)))(draws))


def posterior_arrays(draws, names) -> dict:
    """``{name: array (chain, draw, ...)}`` of the posterior variables ``names`` from the
    InferenceData of ``bnpjax.sample``, a run's trace, or a list of them pooled along the chain
    axis (trailing axes zero-padded to the largest size, as the driver pads grown buffers)."""
    runs = list(draws) if isinstance(draws, list | tuple) else [draws]
    if not runs:
        raise ValueError("draws is empty")
    tables = []
    for run in runs:
        if hasattr(run, "posterior"):
            table = run.posterior
        elif isinstance(run, dict) and "posterior" in run:
            table = run["posterior"]
        else:
            raise ValueError(
                "draws must be the InferenceData of bnpjax.sample, a run's trace, or a list of them"
            )
        missing = [n for n in names if n not in table]
        if missing:
            raise ValueError(f"draws: the posterior lacks {missing}")
        tables.append({n: np.asarray(table[n]) for n in names})
    out = {}
    for n in names:
        values = [t[n] for t in tables]
        if len({v.shape[1] for v in values}) != 1:
            raise ValueError("draws: runs pooled in a list must have the same number of draws")
        shape = np.max([v.shape for v in values], axis=0)
        values = [
            np.pad(v, [(0, 0)] + [(0, s - d) for s, d in zip(shape[1:], v.shape[1:], strict=True)])
            for v in values
        ]
        out[n] = np.concatenate(values, axis=0)
    return out
