"""Growing the IBP buffers of a NumPyro model when bnpjax runs NumPyro's loop.

NumPyro's ``MCMC`` compiles one program per shape and cannot change a buffer's size in the
middle of a run, so :class:`~bnpjax.infer.IBPGibbs` can only flag a step that wanted more
feature columns than an ``IndianBuffetProcess`` had free (``needed_more_room``). When the
model takes its capacity as a keyword argument,

::

    def model(X, capacity=16):
        Z = numpyro.sample("Z", IndianBuffetProcess(alpha, N, capacity=capacity))
        A = numpyro.sample("A", dist.Normal(0, 1).expand([capacity, D]).to_event(2))
        ...

    mcmc = MCMC(Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model), None)]), ...)
    grown = run_with_growth(mcmc, key, X, capacity=16)

:func:`run_with_growth` runs the warmup, and then the sampling, and when any chain needed more
room it doubles the capacity and runs again from the start with the same key, until a run
needed none. The draws kept are then those of ``mcmc.run(key, X, capacity=grown.capacity)``
exactly (the test suite checks this), a run in which the buffer never limited a move: every
step is a step of the kernel with unbounded room, as with :func:`bnpjax.sample`'s growth
(:mod:`bnpjax.infer.capacity`), which re-runs only the chunk that overflowed.

Start. :class:`~bnpjax.infer.IBPGibbs` starts a site with feature parameters from
``init_features`` features (10 by default, at most the capacity): a buffer of 10 or fewer
columns then starts full, and the first birth proposed overflows it, so such a run grows
to 16 at least. Give ``IBPGibbs(model, init_features=None)`` (the start drawn from the model)
or fewer ``init_features`` to let a small starting capacity stand.

Why the whole run. A restart from the last state padded to the new capacity would save the
steps before the overflow, but NumPyro's blocks hold state shaped by the capacity that only
they know how to pad (NUTS's mass matrix when it owns per-feature parameters, its step-size
adaptation), and ``init_params`` are unconstrained values for HMC blocks. Overflows happen
early (during warmup, from a start that is too small), and ``run_with_growth`` checks after
the warmup before it samples, so a run that grows pays mostly one extra warmup per doubling
and one compilation per capacity.
"""

from __future__ import annotations

import inspect
import warnings
from typing import Any, NamedTuple

import jax
import numpy as np

__all__ = ["GrowthReport", "run_with_growth"]


class GrowthReport(NamedTuple):
    """What :func:`run_with_growth` did: ``capacity``: the final value of each capacity
    argument; ``num_restarts``: runs started again with a doubled capacity;
    ``model_kwargs``: the keyword arguments of the kept run (for ``Predictive`` and
    ``log_likelihood``)."""

    capacity: dict[str, int]
    num_restarts: int
    model_kwargs: dict[str, Any]


def _ibp_block_states(kernel, state=None):
    """``(IBPGibbs kernel, its state)`` pairs of a kernel and its state, through composites
    (``state=None``: the kernels only)."""
    from bnpjax.infer.ibp_gibbs import IBPGibbs

    if isinstance(kernel, IBPGibbs):
        return [(kernel, state)]
    blocks = getattr(kernel, "blocks", None)
    if not blocks:  # another sampler (NUTS, HMC, a DiscreteGibbs): no IBP site of its own
        return []
    states = (None,) * len(blocks) if state is None else state.block_states
    found = []
    for (block, _), block_state in zip(blocks, states, strict=True):
        found.extend(_ibp_block_states(block, block_state))
    return found


def _num_overflows(kernel, state) -> int:
    pairs = _ibp_block_states(kernel, state)
    return int(sum(np.sum(np.asarray(s.num_overflows)) for _, s in pairs))


def _accepts_keyword(model, name: str) -> bool:
    try:
        parameters = inspect.signature(model).parameters.values()
    except (TypeError, ValueError):  # no signature to read: let the call decide
        return True
    return any(
        p.kind is inspect.Parameter.VAR_KEYWORD
        or (p.name == name and p.kind is not inspect.Parameter.POSITIONAL_ONLY)
        for p in parameters
    )


def run_with_growth(
    mcmc,
    rng_key,
    *args,
    capacity_arg: str | tuple[str, ...] = "capacity",
    max_capacity: int = 4096,
    extra_fields: tuple = (),
    init_params=None,
    **kwargs,
) -> GrowthReport:
    """``mcmc.run(rng_key, *args, **kwargs)`` with the model's IBP capacity doubled and the
    run started again until no step of any chain needed more feature columns (module
    docstring).

    Parameters
    ----------
    mcmc : numpyro.infer.MCMC
        A fresh ``MCMC`` (no ``post_warmup_state``) whose kernel is an
        :class:`~bnpjax.infer.IBPGibbs` or a ``numpyro.infer.Gibbs`` with at least one
        ``IBPGibbs`` block.
    rng_key : jax.Array
        The run's key; every restart uses it again.
    *args
        The model's positional arguments.
    capacity_arg : str or tuple of str
        The model's keyword argument(s) that give the ``IndianBuffetProcess`` capacities (and
        the leading axis of the per-feature parameters); each must be in ``kwargs``. All are
        doubled together when a step needed more room (the block's flag does not say which
        site).
    max_capacity : int
        A run that would need more than this raises ``RuntimeError`` instead of growing.
    extra_fields, init_params
        As in ``MCMC.run`` (``init_params`` must not hold a capacity-shaped site: its shape
        changes with the capacity).
    **kwargs
        The model's keyword arguments, the capacities among them.

    Returns
    -------
    GrowthReport
        The final capacities, the number of restarts, and the model's keyword arguments of
        the kept run; ``mcmc`` holds the kept run (``get_samples``, ``az.from_numpyro``).

    Raises
    ------
    ValueError
        Before anything is traced: ``mcmc`` not an ``MCMC``, already warmed up, or built
        with ``jit_model_args=True`` (the capacity would be traced); no
        ``IBPGibbs`` block; a capacity argument missing from ``kwargs``, not a positive
        integer, or not a keyword of the model; ``max_capacity`` below a capacity.
    RuntimeError
        When a run still needed more room at ``max_capacity``.
    """
    from numpyro.infer import MCMC

    from bnpjax.infer.ibp_gibbs import _OVERFLOW_MESSAGE

    if not isinstance(mcmc, MCMC):
        raise ValueError(f"mcmc must be a numpyro.infer.MCMC, got {type(mcmc).__name__}")
    if mcmc.post_warmup_state is not None:
        raise ValueError(
            "mcmc has a post_warmup_state: run_with_growth runs the warmup itself and may "
            "start again from the beginning; give it a fresh MCMC"
        )
    if getattr(mcmc, "_jit_model_args", False):
        raise ValueError(
            "mcmc has jit_model_args=True: the model's arguments are traced, so a capacity "
            "passed to it cannot shape the IndianBuffetProcess; build the MCMC with "
            "jit_model_args=False (the default)"
        )
    names = (capacity_arg,) if isinstance(capacity_arg, str) else tuple(capacity_arg)
    if not names or not all(isinstance(n, str) for n in names):
        raise ValueError(
            f"capacity_arg must name the model's capacity argument(s), got {capacity_arg!r}"
        )
    blocks = _ibp_block_states(mcmc.sampler)
    if not blocks:
        raise ValueError(
            "mcmc's kernel has no IBPGibbs block: run_with_growth grows the capacity of "
            "IndianBuffetProcess sites sampled by bnpjax.infer.IBPGibbs (bnpjax's own "
            "samplers grow their buffers in bnpjax.sample)"
        )
    model = blocks[0][0].model
    for name in names:
        if name not in kwargs:
            raise ValueError(
                f"capacity_arg: {name!r} is not among the model's keyword arguments given "
                f"({sorted(kwargs)}); pass it, e.g. run_with_growth(mcmc, key, X, {name}=16)"
            )
        value = kwargs[name]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if not _accepts_keyword(model, name):
            raise ValueError(
                f"capacity_arg: the model takes no keyword argument {name!r}; give it one and use "
                "it for the IndianBuffetProcess capacity and the per-feature parameters' shape"
            )
    if isinstance(max_capacity, bool) or not isinstance(max_capacity, (int, np.integer)):
        raise ValueError(f"max_capacity must be an integer, got {max_capacity!r}")
    if max_capacity < max(int(kwargs[n]) for n in names):
        raise ValueError(
            f"max_capacity ({max_capacity}) is below the starting capacity "
            f"({max(int(kwargs[n]) for n in names)})"
        )

    kwargs = dict(kwargs)
    restarts = 0
    while True:
        # the block warns from inside the compiled run on an overflow; here the overflow is
        # handled (the run starts again), so that warning would only mislead. The results
        # are waited for inside the filter: the warning is raised while the program runs.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_OVERFLOW_MESSAGE[:40])
            # a starting value drawn from the prior that did not fit is only a start: the
            # chain's law does not depend on it
            warnings.filterwarnings("ignore", message="an IndianBuffetProcess draw had")
            mcmc.post_warmup_state = None
            overflowed = False
            if mcmc.num_warmup > 0:
                mcmc.warmup(
                    rng_key,
                    *args,
                    extra_fields=extra_fields,
                    collect_warmup=False,
                    init_params=init_params,
                    **kwargs,
                )
                state = jax.block_until_ready(mcmc.post_warmup_state)
                overflowed = _num_overflows(mcmc.sampler, state) > 0
            if not overflowed:
                if mcmc.num_warmup > 0:
                    mcmc.run(mcmc.post_warmup_state.rng_key, *args, extra_fields=extra_fields,
                             **kwargs)  # fmt: skip
                else:
                    mcmc.run(rng_key, *args, extra_fields=extra_fields,
                             init_params=init_params, **kwargs)  # fmt: skip
                state = jax.block_until_ready(mcmc.last_state)
                overflowed = _num_overflows(mcmc.sampler, state) > 0
        if not overflowed:
            return GrowthReport({n: int(kwargs[n]) for n in names}, restarts, dict(kwargs))
        grown = {n: 2 * int(kwargs[n]) for n in names}
        if max(grown.values()) > max_capacity:
            raise RuntimeError(
                f"a run at capacity {[int(kwargs[n]) for n in names]} still needed more "
                f"feature columns, and doubling passes max_capacity={max_capacity}: raise "
                "max_capacity, or check the model (a concentration alpha that the data "
                "cannot bound lets K+ grow without limit)"
            )
        kwargs.update(grown)
        restarts += 1
