"""Variational and optimisation algorithms, and the driver that runs them.

A variational algorithm (collapsed variational Bayes, its stochastic version, a MAP
optimiser) is not a Markov chain: its steps converge to a point, the variational parameters,
from which a posterior approximation is read. It therefore has its own type, as BlackJAX's
``VIAlgorithm`` and NumPyro's ``SVI`` stand beside their MCMC kernels, and its own driver,
:func:`fit`. The key discipline is the MCMC driver's: step ``t`` uses ``fold_in(run_key, t)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.sharding import Mesh

from bnpjax.infer.arviz_adapter import groups_to_inference_data, package_versions
from bnpjax.infer.base import ArvizSpec, PRNGKey, State, Trace
from bnpjax.infer.checks import check_flag, check_integer
from bnpjax.infer.keys import check_key
from bnpjax.infer.programs import jit
from bnpjax.infer.sharding import place, resolve_devices

__all__ = ["FitResult", "VariationalAlgorithm", "fit", "fit_run"]

#: Default number of chunks a fit is cut into (progress updates).
DEFAULT_NUM_CHUNKS = 20


class VariationalAlgorithm(NamedTuple):
    """An optimiser of a variational objective (or of a posterior density).

    Attributes
    ----------
    init
        ``init(key) -> State``: the starting variational parameters.
    step
        ``step(key, state) -> (State, Info)``: one update; ``Info`` fields (objective values,
        step sizes, ...) are kept per step as the fit's history.
    sample
        ``sample(key, state, num_draws) -> Trace``: draws from the variational posterior,
        grouped like InferenceData (``{"posterior": {...}, "log_likelihood": {...}}``, each
        array with a leading ``num_draws`` axis); None for a point estimate.
    trace
        ``trace(state) -> Trace``: the point estimate's groups (no leading draw axis), used
        when ``sample`` is None; by default every field of the state.
    spec
        an :class:`~bnpjax.infer.ArvizSpec` naming the output.
    """

    init: Callable[[PRNGKey], State]
    step: Callable[[PRNGKey, State], tuple[State, Any]]
    sample: Callable[[PRNGKey, State, int], Trace] | None = None
    trace: Callable[[State], Trace] | None = None
    spec: ArvizSpec = ArvizSpec()


class FitResult(NamedTuple):
    """What :func:`fit_run` produced.

    Attributes
    ----------
    state
        the final variational parameters.
    history
        ``{info field: array (num_steps, ...)}`` on the host.
    draws
        groups of draws from the variational posterior, leading axis ``num_draws`` (or the
        point estimate with a leading axis of length 1).
    algorithm, num_steps, settings, timings
        what was run, for the record.
    """

    state: Any
    history: dict[str, np.ndarray]
    draws: dict[str, dict[str, np.ndarray]]
    algorithm: VariationalAlgorithm
    num_steps: int
    settings: dict[str, Any]
    timings: dict[str, float]


def _fields(tree) -> dict[str, Any]:
    if hasattr(tree, "_asdict"):
        return dict(tree._asdict())
    if isinstance(tree, dict):
        return dict(tree)
    return {"value": tree}


def _as_pytree(fn):
    # plain functions become Partials so that jit takes them as (static) pytree arguments
    return fn if isinstance(fn, jax.tree_util.Partial) else jax.tree_util.Partial(fn)


@jit
def _init(init, key):
    return init(key)


@jit
def _chunk(step, run_key, state, steps):
    def body(state, t):
        return step(jax.random.fold_in(run_key, t), state)

    return lax.scan(body, state, steps)


@jit
def _point(trace, state):
    return trace(state)


def _sample(sample, key, state, num_draws: int):
    return jit(sample, static_argnums=2)(key, state, num_draws)


def _keys(key):
    # the MCMC driver's split of a one-chain run, so a kernel moved from sample() to fit()
    # takes the same steps for the same key
    chain_key = jax.random.split(key, 1)[0]
    init_key, run_key = jax.random.split(chain_key)
    return init_key, run_key, jax.random.fold_in(chain_key, 1)


def fit_run(
    algorithm: VariationalAlgorithm,
    key,
    num_steps: int,
    *,
    num_draws: int = 200,
    progress_bar: bool = True,
    chunk_size: int | None = None,
    initial_state: Any = None,
    devices=None,
) -> FitResult:
    """Run ``algorithm`` for ``num_steps`` updates and draw from its posterior approximation.

    Parameters
    ----------
    algorithm
        a :class:`VariationalAlgorithm` from a model factory.
    key
        a ``jax.random.key``; the fit is a deterministic function of it.
    num_steps
        number of updates.
    num_draws
        draws from the variational posterior (ignored for point estimates).
    progress_bar
        a tqdm bar advanced between compiled chunks.
    chunk_size
        updates per compiled chunk (default: the fit cut into about 20 chunks); it changes
        nothing in the result.
    initial_state
        continue from this state instead of ``algorithm.init``.
    devices
        a :class:`jax.sharding.Mesh` with a ``"data"`` axis (:func:`bnpjax.infer.make_mesh`)
        splits the pairs (rows) a model declares over its devices
        (:mod:`bnpjax.infer.sharding`); the fit equals the one-device fit up to the order of
        floating-point sums. Default: one device.

    Returns
    -------
    FitResult
    """
    if not isinstance(algorithm, VariationalAlgorithm):
        raise ValueError(
            f"algorithm must be a bnpjax.infer.VariationalAlgorithm, got "
            f"{type(algorithm).__name__} (MCMC kernels run with bnpjax.sample)"
        )
    num_steps = check_integer(num_steps, "num_steps", 1)
    num_draws = check_integer(num_draws, "num_draws", 1)
    progress_bar = check_flag(progress_bar, "progress_bar")
    if chunk_size is None:
        chunk_size = max(1, math.ceil(num_steps / DEFAULT_NUM_CHUNKS))
    chunk_size = check_integer(chunk_size, "chunk_size", 1)
    init_key, run_key, draw_key = _keys(check_key(key))
    timings: dict[str, float] = {}

    # one "chain": only a data axis splits anything
    if devices is not None and not isinstance(devices, Mesh):
        raise ValueError(
            "devices: a variational fit has one state; give a jax.sharding.Mesh with a 'data' "
            "axis (bnpjax.infer.make_mesh) to split its pairs, or None"
        )
    placement = None if devices is None else resolve_devices(devices, 1)
    init_fn, step = _as_pytree(algorithm.init), _as_pytree(algorithm.step)
    if placement is not None:
        init_fn, step = place((init_fn, step), placement)

    t0 = time.perf_counter()
    if initial_state is None:
        state = jax.block_until_ready(_init(init_fn, init_key))
    else:
        state = initial_state
    if placement is not None:
        state = place(state, placement)
    progress = None
    if progress_bar:
        from tqdm.auto import tqdm

        progress = tqdm(total=num_steps, unit="step", desc=algorithm.spec.name, leave=True)
    history: list[Any] = []
    try:
        done = 0
        while done < num_steps:
            length = min(chunk_size, num_steps - done)
            steps = jnp.arange(done, done + length, dtype=jnp.int32)
            state, infos = _chunk(step, run_key, state, steps)
            history.append(jax.device_get(infos))
            done += length
            if progress is not None:
                progress.update(length)
    finally:
        if progress is not None:
            progress.close()
    timings["run_s"] = time.perf_counter() - t0
    stacked = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *history)

    t0 = time.perf_counter()
    if algorithm.sample is not None:
        draws = _sample(algorithm.sample, draw_key, state, num_draws)
    else:
        trace = algorithm.trace or (lambda s: {"posterior": _fields(s)})
        draws = jax.tree_util.tree_map(lambda x: x[None], _point(_as_pytree(trace), state))
    draws = {g: {k: np.asarray(v) for k, v in d.items()} for g, d in jax.device_get(draws).items()}
    timings["draw_s"] = time.perf_counter() - t0
    settings = {
        "num_steps": num_steps,
        "num_draws": num_draws if algorithm.sample is not None else 1,
        "chunk_size": chunk_size,
        "seed": np.asarray(
            jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        )
        .ravel()
        .tolist(),
    }
    return FitResult(
        state=state,
        history={k: np.asarray(v) for k, v in _fields(stacked).items()},
        draws=draws,
        algorithm=algorithm,
        num_steps=num_steps,
        settings=settings,
        timings=timings,
    )


def fit(algorithm: VariationalAlgorithm, key, num_steps: int, **kwargs):
    """Fit a variational algorithm and return :class:`arviz.InferenceData`.

    Parameters
    ----------
    algorithm
        a :class:`VariationalAlgorithm` from a model factory (CVB0, SCVB0, MAP baselines).
    key
        a ``jax.random.key``.
    num_steps
        number of updates.
    **kwargs
        as for :func:`fit_run` (``num_draws``, ``progress_bar``, ``chunk_size``,
        ``initial_state``).

    Returns
    -------
    arviz.InferenceData
        ``posterior`` holds draws from the variational posterior as one chain (a point
        estimate as one draw), with ``log_likelihood`` and ``observed_data`` where the model
        provides them; the last value of every history field is in ``attrs`` as ``final_*``.
    """
    result = fit_run(algorithm, key, num_steps, **kwargs)
    return fit_to_inference_data(result)


def fit_to_inference_data(result: FitResult):
    """:class:`arviz.InferenceData` of a :class:`FitResult` (see :func:`fit`)."""
    spec = result.algorithm.spec
    groups = {g: {k: v[None] for k, v in d.items()} for g, d in result.draws.items()}
    groups["observed_data"] = dict(spec.observed_data)
    groups["constant_data"] = dict(spec.constant_data)
    final = {
        f"final_{k}": float(np.ravel(v[-1])[0])
        for k, v in result.history.items()
        if v.size and np.ndim(v[-1]) == 0
    }
    attrs = {
        "kernel": spec.name,
        "kernel_settings": dict(spec.settings),
        "inference_library": "bnpjax",
        "inference_method": "variational",
        **result.settings,
        **final,
        **{k: float(v) for k, v in result.timings.items()},
        **package_versions(),
    }
    return groups_to_inference_data(
        groups, dims=dict(spec.dims), coords=dict(spec.coords), attrs=attrs
    )
