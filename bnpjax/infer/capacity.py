"""Fixed-capacity feature buffers that grow: the one recipe every nonparametric kernel uses.

A kernel over an unbounded number of features keeps them in a buffer of ``capacity`` slots
with an active mask. When a step needs more room it reports ``capacity_exceeded`` (and
``capacity_needed``) in its info; the driver then rebuilds the kernel at a larger capacity,
pads the chunk's saved start state and re-runs the chunk with the same keys, so the kept chain
is that of a sampler with unbounded room (:mod:`bnpjax.infer.driver`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from bnpjax.infer.base import CapacityGrowth, SamplingAlgorithm, State, pad_axis

__all__ = ["capacity_flags", "growable", "pad_fields"]


def capacity_flags(info) -> tuple:
    """Whether a step's ``info`` says the buffer was too small (any chain), and the largest
    capacity it asked for (0 when it has no such fields): what the driver grows from."""
    import jax.numpy as jnp

    exceeded = getattr(info, "capacity_exceeded", None)
    needed = getattr(info, "capacity_needed", None)
    exceeded = jnp.zeros((), bool) if exceeded is None else jnp.any(exceeded)
    needed = jnp.zeros((), jnp.int32) if needed is None else jnp.max(needed).astype(jnp.int32)
    return exceeded, needed


def growable(
    build: Callable[[int], SamplingAlgorithm],
    capacity: int,
    grow_state: Callable[[State, int], State],
) -> SamplingAlgorithm:
    """The kernel ``build(capacity)``, made growable by the driver.

    Parameters
    ----------
    build
        ``build(capacity) -> SamplingAlgorithm``: the kernel at a given buffer size.
    capacity
        the initial buffer size.
    grow_state
        ``grow_state(state, new_capacity) -> state`` for one chain (see :func:`pad_fields`).

    Returns
    -------
    SamplingAlgorithm
        ``build(capacity)`` with its ``growth`` set; ``growth.resize(c)`` rebuilds it the same
        way at capacity ``c``.
    """
    algorithm = build(capacity)
    growth = CapacityGrowth(
        capacity=capacity,
        resize=lambda new_capacity: growable(build, new_capacity, grow_state),
        grow_state=grow_state,
    )
    return algorithm._replace(growth=growth)


class _PadFields:
    """``grow_state`` padding named fields of a NamedTuple state (hashable, comparable)."""

    def __init__(self, axes: Mapping[str, Any], fill: Mapping[str, Any]):
        self.axes = dict(axes)
        self.fill = dict(fill)

    def __call__(self, state, capacity: int):
        updates = {}
        for name, axes in self.axes.items():
            value = getattr(state, name)
            for axis in (axes,) if isinstance(axes, int) else axes:
                value = pad_axis(value, axis, capacity, self.fill.get(name, 0))
            updates[name] = value
        return state._replace(**updates)

    def __repr__(self):
        return f"pad_fields({self.axes}, fill={self.fill})"


def pad_fields(axes: Mapping[str, int | tuple[int, ...]], fill: Mapping[str, Any] | None = None):
    """A ``grow_state`` that pads the fields ``axes`` names along the axis it gives.

    Parameters
    ----------
    axes
        ``{field: axis}``, e.g. ``{"Z": 1, "A": 0}`` for a state with ``Z`` (rows, capacity)
        and ``A`` (capacity, dims); a tuple of axes pads each of them (``{"W": (-2, -1)}``
        for feature-by-feature weights).
    fill
        ``{field: value}`` for the new slots (default 0, i.e. inactive).

    Returns
    -------
    callable
        ``grow_state(state, new_capacity) -> state``.
    """
    unknown = set(fill or {}) - set(axes)
    if unknown:
        raise ValueError(f"fill names fields that axes does not: {sorted(unknown)}")
    return _PadFields(axes, fill or {})
