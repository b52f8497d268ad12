"""The kernel protocol every bnpjax sampler follows.

A sampler is a pair of pure functions, as in BlackJAX::

    init(key) -> State
    step(key, state) -> (State, Info)

made by a factory that closes over the data, ``bnpjax.models.<model>.<sampler>(data, ...)``.
States and infos are NamedTuples (pytrees). The driver (:func:`bnpjax.infer.sample`) decides
about ``jit``, ``vmap`` and ``lax.scan``; a kernel never runs its own loop.

Factories should bind data with :class:`jax.tree_util.Partial` (see :func:`bind`) rather than
with a Python closure: the driver then passes the data to the compiled program as arguments,
so a second fit with data of the same shapes reuses the compiled code instead of baking the
arrays into a new program.

Info conventions read by the driver (all optional):

``lp``
    joint log density of the state (reported in ``sample_stats``);
``acceptance_rate``
    for Metropolis-Hastings steps;
``num_features``
    number of active features in variable-dimension models;
``capacity_exceeded`` (bool) and ``capacity_needed`` (int)
    a step that would have needed more room than the fixed-capacity buffer had. The driver
    then grows the buffer (via ``resize`` / ``grow_state``) and re-runs the chunk from its saved
    start state, so the kept chain is that of an unbounded sampler
    (:mod:`bnpjax.infer.capacity`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "ArvizSpec",
    "CapacityGrowth",
    "SamplingAlgorithm",
    "as_step",
    "bind",
    "concrete_or_none",
    "default_trace",
    "pad_axis",
]

PRNGKey = jax.Array
State = Any
Info = Any
#: A kept draw: ``{"posterior": {...}, "sample_stats": {...}, "log_likelihood": {...}}``.
Trace = dict[str, dict[str, jax.Array]]

#: Info fields used by the driver for capacity growth; never stored in ``sample_stats``.
CAPACITY_FIELDS = ("capacity_exceeded", "capacity_needed")


class ArvizSpec(NamedTuple):
    """How the draws of a kernel are named in :class:`arviz.InferenceData`.

    ``dims`` maps a variable name to the names of its non-(chain, draw) axes, ``coords`` maps a
    dim name to its labels (dims without coords get 0..n-1). ``observed_data`` and
    ``constant_data`` are host arrays stored once. ``settings`` (JSON-serialisable) are written
    to the ``attrs`` of every group together with the seed and package versions.
    """

    name: str = "kernel"
    dims: Mapping[str, Sequence[str]] = {}
    coords: Mapping[str, Sequence[Any]] = {}
    observed_data: Mapping[str, Any] = {}
    constant_data: Mapping[str, Any] = {}
    settings: Mapping[str, Any] = {}


class CapacityGrowth(NamedTuple):
    """How the driver grows a kernel's fixed-capacity feature buffer.

    Built by :func:`bnpjax.infer.capacity.growable`; models never fill it by hand.

    Attributes
    ----------
    capacity
        the buffer size the kernel was built for.
    resize
        ``resize(new_capacity) -> SamplingAlgorithm``: the same kernel at a larger capacity.
    grow_state
        ``grow_state(state, new_capacity) -> state``: one chain's state padded to it.
    """

    capacity: int
    resize: Callable[[int], SamplingAlgorithm]
    grow_state: Callable[[State, int], State]


class SamplingAlgorithm(NamedTuple):
    """A Markov chain Monte Carlo kernel and what the driver needs to run it.

    What a kernel is (the BlackJAX shape):

    ``init``
        ``init(key) -> State``.
    ``step``
        ``step(key, state) -> (State, Info)``, leaving the target invariant.
    ``warmup_step``
        used instead of ``step`` during warmup (adaptation of proposal scales and the like);
        the kept chain uses ``step`` only, so adaptation never breaks detailed balance of the
        kept draws.
    ``set_adaptation``
        the other way to adapt, and the cheaper one: ``set_adaptation(state, on) -> State``
        switches adaptation on or off in the state itself (``on`` a boolean array), and
        ``step`` adapts only while it is on. The driver switches it on for warmup and off for
        the kept draws, so that warmup runs the sampling program (the step traced and compiled
        once, not twice); ``init`` returns it off, and so does a finished run, so a step in a
        user's own loop from those states is exact (a state saved during warmup still has it
        on).

    What the driver needs:

    ``trace``
        ``trace(state, info) -> Trace``: what to keep per draw (defaults to
        :func:`default_trace`). Runs inside the compiled program, only at kept draws.
    ``spec``
        an :class:`ArvizSpec` naming the output.
    ``growth``
        a :class:`CapacityGrowth` for kernels with a fixed-capacity buffer (None otherwise).
    ``compiler_options``
        ``(name, value)`` pairs of XLA options for this kernel's programs on the CPU, over
        the driver's (:func:`bnpjax.infer.programs.compiler_options`), e.g.
        :data:`bnpjax.infer.programs.WITHOUT_YNN_FUSIONS`; an option that ``XLA_FLAGS`` sets
        wins, and ``BNPJAX_XLA_CPU_OPT_LEVEL=default`` drops them all (XLA's own choices).
    """

    init: Callable[[PRNGKey], State]
    step: Callable[[PRNGKey, State], tuple[State, Info]]
    warmup_step: Callable[[PRNGKey, State], tuple[State, Info]] | None = None
    trace: Callable[[State, Info], Trace] | None = None
    spec: ArvizSpec = ArvizSpec()
    growth: CapacityGrowth | None = None
    compiler_options: tuple = ()
    set_adaptation: Callable[[State, Any], State] | None = None

    @property
    def capacity(self) -> int | None:
        """The feature buffer's size, or None for a kernel of fixed dimension."""
        return None if self.growth is None else self.growth.capacity


@jax.jit
def _switch_adaptation(set_adaptation, states, on):
    return jax.vmap(set_adaptation, (0, None))(states, on)


def adapting(algorithm: SamplingAlgorithm, states, on) -> State:
    """``states`` (a leading chain axis) with the kernel's adaptation switched on (warmup) or
    off (the kept draws), for a kernel that adapts through its state
    (``SamplingAlgorithm.set_adaptation``); the states themselves otherwise."""
    fn = algorithm.set_adaptation
    if fn is None:
        return states
    if not isinstance(fn, jax.tree_util.Partial):  # a plain function: static in the program
        fn = jax.tree_util.Partial(fn)
    return _switch_adaptation(fn, states, jnp.asarray(on))


def _fields(tree) -> dict[str, Any]:
    if hasattr(tree, "_asdict"):
        return dict(tree._asdict())
    if isinstance(tree, Mapping):
        return dict(tree)
    return {"value": tree}


def default_trace(state: State, info: Info) -> Trace:
    """Keep every array field of the state as a posterior variable and of the info as a
    sample statistic (capacity bookkeeping excluded)."""
    stats = {k: v for k, v in _fields(info).items() if k not in CAPACITY_FIELDS}
    return {"posterior": _fields(state), "sample_stats": stats}


class _StaticFunction:
    """A function plus hashable keyword settings, compared by value (unlike functools.partial),
    so that rebuilding a kernel with the same settings hits the compilation cache."""

    __slots__ = ("_hash", "fn", "static")

    def __init__(self, fn: Callable, static: tuple[tuple[str, Any], ...]):
        self.fn = fn
        self.static = static
        self._hash = hash((fn, static))

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **dict(self.static), **kwargs)

    def __eq__(self, other):
        return (
            isinstance(other, _StaticFunction)
            and self.fn is other.fn
            and self.static == other.static
        )

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"bind({getattr(self.fn, '__qualname__', self.fn)}, {dict(self.static)})"


def bind(fn: Callable, *dynamic: Any, **static: Any) -> jax.tree_util.Partial:
    """Bind data (``dynamic``: pytrees of arrays) and settings (``static``: hashable Python
    values such as capacities or truncation levels) to a kernel function.

    ``bind(_step, data, capacity=8)(key, state) == _step(data, key, state, capacity=8)``.
    The result is a pytree whose leaves are the data arrays, so the driver passes them to the
    compiled program as arguments; the function and its static settings form the cache key.
    """
    for name, value in static.items():
        try:
            hash(value)
        except TypeError as err:
            raise TypeError(f"static setting {name!r} must be hashable, got {value!r}") from err
    target = _StaticFunction(fn, tuple(sorted(static.items()))) if static else fn
    return jax.tree_util.Partial(target, *dynamic)


def as_step(
    fn: Callable, *, derive: Callable | None = None, **settings: Any
) -> Callable[[PRNGKey, State, Any, Any], tuple[State, Info]]:
    """BlackJAX's ``build_kernel`` level from a model's private step function.

    Every model writes its sweep once as ``fn(data, hyper, *derived, key, state, **settings)``,
    the argument order :func:`bind` uses to close a factory's kernel over its data; the public
    ``build_step`` returns the same sweep in the order BlackJAX and the Geweke harness call a
    kernel: ``step(key, state, data, hyper)``.

    Parameters
    ----------
    fn : callable
        ``fn(data, hyper, *derived, key, state, **settings) -> (state, info)``.
    derive : callable, optional
        ``derive(data, hyper) -> tuple``: arguments computed from the data at each call
        (factorisations, layouts, sizes read off shapes) that the factory computes once.
    **settings
        Keyword settings passed to every call.

    Returns
    -------
    callable
        ``step(key, state, data, hyper) -> (state, info)``.
    """

    def step(key, state, data, hyper):
        derived = () if derive is None else tuple(derive(data, hyper))
        return fn(data, hyper, *derived, key, state, **settings)

    return step


def concrete_or_none(x) -> np.ndarray | None:
    """Host copy of ``x``, or None while tracing (factories called inside compiled code, as
    the Geweke harness does, have no concrete data for metadata such as coords)."""
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def pad_axis(x: jax.Array, axis: int, new_size: int, fill: Any = 0) -> jax.Array:
    """Pad ``x`` along ``axis`` to length ``new_size`` with ``fill`` (for ``grow_state``)."""
    x = jnp.asarray(x)
    axis = axis % x.ndim
    extra = new_size - x.shape[axis]
    if extra < 0:
        raise ValueError(f"cannot shrink axis {axis} from {x.shape[axis]} to {new_size}")
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, extra)
    return jnp.pad(x, widths, constant_values=np.asarray(fill, dtype=x.dtype))
