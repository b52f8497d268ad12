"""The one run loop of bnpjax: warmup, thinning, chains, progress, capacity growth.

Structure of a run (``num_chains`` chains, ``num_warmup`` warmup steps, ``num_samples`` kept
draws, ``thin`` steps per kept draw):

* Keys. ``split(key, num_chains)`` gives one key per chain; each is split into an init key and
  a run key, and step ``t`` (counted from 0 at the first warmup step, globally across chunks)
  uses ``fold_in(run_key, t)``. Draws therefore depend on nothing but the key and the step
  index: the same key gives bit-identical chains whatever the chunk size, the progress setting
  or a capacity re-run, and ``thin=2`` keeps exactly every second draw of ``thin=1``.
* Chunks. The steps run as a compiled ``lax.scan`` over a chunk of draws (chains ``vmap``-ed
  inside). Between chunks control returns to Python: progress, kept draws to host memory, the
  full state at hand (checkpoints). The last, shorter chunk and warmup (without a warmup step
  of the kernel's own) reuse the sampling program (extra iterations are skipped by a
  ``lax.cond`` on an unbatched predicate, which stays a real branch).
* NaN guard. Each chunk also returns whether every state array is finite (one reduction per
  chunk); a chain that turned non-finite stops the run with a
  :class:`~bnpjax.infer.guard.NonFiniteStateError` naming the step and the variables
  (:mod:`bnpjax.infer.guard`), before the bad state reaches a checkpoint or the trace.
* Capacity growth. If any step of a chunk reports ``info.capacity_exceeded`` the chunk is
  abandoned, the algorithm is rebuilt with ``max(2 * capacity, capacity_needed)`` via
  ``algorithm.resize`` and the chunk's saved start state padded with ``algorithm.grow_state``;
  the chunk is then re-run with the same step keys. Nothing is truncated: the kept chain is the
  chain of a sampler with unbounded room. Kept draws from before the growth are zero-padded
  to the final capacity (padding is inactive by the kernel's own mask).
* Compilation. Compiled chunk programs are cached on the kernel functions, their static
  settings and the shapes and dtypes of the data, so a second fit with data of the same shapes
  does not recompile (:mod:`bnpjax.infer.programs`). Compile time is measured and reported
  apart from run time.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bnpjax.infer.arviz_adapter import prepare_backend, to_inference_data
from bnpjax.infer.base import SamplingAlgorithm, Trace, adapting, default_trace
from bnpjax.infer.capacity import capacity_flags
from bnpjax.infer.checkpoint import (
    Checkpoint,
    CheckpointWriter,
    check_checkpoint_path,
    check_state,
    concat_draws,
)
from bnpjax.infer.checks import check_flag, check_integer
from bnpjax.infer.diagnostics import check_convergence as _check_convergence
from bnpjax.infer.guard import chunk_error, finite_flags
from bnpjax.infer.keys import chain_keys as _chain_keys
from bnpjax.infer.keys import seed_of as _seed_of
from bnpjax.infer.programs import (
    _compiled,
    _KernelFunctions,
    _merge,
    _partition,
    clear_compile_cache,
    compile_count,
)
from bnpjax.infer.sharding import (
    CHAIN_AXIS,
    Placement,
    chain_shardings,
    chains_apart,
    init_apart,
    lay_out_chunk,
    place,
    place_chains,
    resolve_devices,
    runs_apart,
    to_host,
)

__all__ = ["SamplingResult", "clear_compile_cache", "compile_count", "resume", "run", "sample"]

#: Default number of chunks a run is cut into (progress updates, growth checkpoints).
DEFAULT_NUM_CHUNKS = 20


class SamplingResult(NamedTuple):
    """Everything a run produced.

    ``trace`` holds host (NumPy) arrays with leading ``(chain, draw)`` axes, grouped like
    InferenceData (``posterior``, ``sample_stats``, ``log_likelihood``). ``final_state`` has a
    leading chain axis; pass it back as ``initial_state`` with ``start_step=num_steps`` to
    continue the same chains with fresh step keys.
    """

    trace: dict[str, dict[str, np.ndarray]]
    final_state: Any
    algorithm: SamplingAlgorithm
    num_steps: int
    settings: dict[str, Any]
    timings: dict[str, float]


# --------------------------------------------------------------------------------------------
# the compiled chunk


def _over_chains(fn, in_axes=0):
    """``jax.vmap(fn, in_axes)``, except that a single chain is run unbatched (its leading axis
    squeezed and restored): a batched dynamic index is a gather and a batched loop bound a
    predicate per iteration, which cost sequential kernels several times their speed on CPU
    for nothing when there is one chain. Draws are identical either way."""
    batched = jax.vmap(fn, in_axes)

    def mapped(*args):
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        sizes = {
            leaf.shape[0]
            for arg, axis in zip(args, axes, strict=True)
            if axis is not None
            for leaf in jax.tree_util.tree_leaves(arg)
        }
        if sizes != {1}:
            return batched(*args)
        squeezed = [
            a if axis is None else jax.tree_util.tree_map(lambda x: x[0], a)
            for a, axis in zip(args, axes, strict=True)
        ]
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x)[None], fn(*squeezed))

    return mapped


def _make_chunk(
    static, chunk_len: int, thin: int, warmup: bool, record: bool, chain_axis: str | None = None
):
    """The chunk program, the kernel's step once in it (a draw loops over it, carrying its
    info); with ``chain_axis`` one per device (:func:`~bnpjax.infer.sharding.chains_apart`).
    An overflowing chunk is rerun whole after growth, so each device stops at its own first
    overflow and they meet once, at the end: the capacity needed up to the first draw at which
    any chain overflowed (meeting every draw cost the row-parallel IBP warmup a third)."""

    def chunk(dynamic, states, run_keys, first_step, num_valid):
        fns = _merge(dynamic, static)
        step_fn = fns.warmup_step if (warmup and fns.warmup_step is not None) else fns.step

        def one_step(states, t):
            keys = jax.vmap(jax.random.fold_in, (0, None))(run_keys, t)
            return _over_chains(step_fn)(keys, states)

        def zeros(shapes):
            return jax.tree_util.tree_map(lambda a: jnp.zeros(a.shape, a.dtype), shapes)

        # a draw's loop carries the step's info: its shapes traced once here, not in every draw
        no_info = zeros(jax.eval_shape(one_step, states, first_step)[1]) if thin > 1 else None

        def one_draw(carry_states, draw):
            t0 = first_step + draw * thin

            def thinned(j, carry):
                s, _, exceeded, needed = carry
                s, info = one_step(s, t0 + j)
                e, n = capacity_flags(info)
                return s, info, exceeded | e, jnp.maximum(needed, n)

            if thin == 1:  # no loop of one step (it costs a cheap kernel about 14 %)
                s, info = one_step(carry_states, t0)
                exceeded, needed = capacity_flags(info)
            else:
                init = (carry_states, no_info, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
                s, info, exceeded, needed = lax.fori_loop(0, thin, thinned, init)
            kept = _over_chains(fns.trace)(s, info) if record else None
            return s, kept, exceeded, needed

        draw_once = jax.jit(one_draw)  # traced once: for the skip's shapes and for the draw
        out_shapes = jax.eval_shape(draw_once, states, jnp.zeros((), jnp.int32))

        def body(carry, draw):
            states, exceeded = carry

            def skip(s):
                return s, *zeros(out_shapes[1:])

            active = (draw < num_valid) & ~exceeded
            s, kept, e, n = lax.cond(active, lambda s: draw_once(s, draw), skip, states)
            return (s, exceeded | e), (kept, e, n)

        draws = jnp.arange(chunk_len, dtype=jnp.int32)
        (states, _), (kept, exceeded, needed) = lax.scan(body, (states, jnp.zeros((), bool)), draws)
        finite = finite_flags(states)
        if chain_axis is not None:
            exceeded = lax.pmax(exceeded.astype(jnp.int32), chain_axis) > 0
            needed = lax.pmax(needed, chain_axis)
            finite = lax.pmin(finite.astype(jnp.int32), chain_axis) > 0
        up_to_first = jnp.arange(chunk_len) <= jnp.argmax(exceeded)
        needed = jnp.max(jnp.where(up_to_first | ~jnp.any(exceeded), needed, 0))
        return states, kept, jnp.any(exceeded), needed, finite

    return chunk


def _make_init(static):
    def init(dynamic, init_keys):
        return _over_chains(_merge(dynamic, static).init)(init_keys)

    return init


# --------------------------------------------------------------------------------------------
# host-side loop


def _kernel_functions(algorithm: SamplingAlgorithm) -> _KernelFunctions:
    return _KernelFunctions(
        algorithm.init,
        algorithm.step,
        algorithm.warmup_step,
        algorithm.trace if algorithm.trace is not None else default_trace,
    )


def _grow(algorithm: SamplingAlgorithm, states, needed: int):
    growth = algorithm.growth
    if growth is None:
        raise RuntimeError(
            f"kernel {algorithm.spec.name!r} ran out of capacity but cannot grow (no "
            "bnpjax.infer.capacity.growable); set a larger capacity"
        )
    new_capacity = max(2 * growth.capacity, int(needed))
    grown = growth.resize(new_capacity)
    if grown.capacity != new_capacity:
        raise RuntimeError(f"resize({new_capacity}) returned capacity {grown.capacity}")
    return grown, jax.vmap(lambda s: growth.grow_state(s, new_capacity))(states)


def _run_phase(
    algorithm,
    states,
    run_keys,
    first_step: int,
    num_draws: int,
    *,
    thin: int,
    chunk_draws: int,
    warmup: bool,
    progress,
    timings: dict,
    counters: dict,
    compile_as_sampling: bool = False,
    on_chunk: Callable | None = None,
    guard: dict | None = None,
    placement: Placement | None = None,
    while_running: Callable = lambda: None,
):
    """Run ``num_draws`` draws (``thin`` steps each) in chunks; return kept draws per chunk.

    ``compile_as_sampling`` runs warmup with a program of the sampling kind (the kernel's
    step, draws recorded and then dropped). ``while_running()`` is called after each chunk
    is dispatched, before its results are awaited."""
    program_warmup = warmup and not compile_as_sampling
    kept_chunks: list = []
    done = 0
    laid_out = None  # placed once per phase and after growth (lay_out_chunk)
    while done < num_draws:
        n = min(chunk_draws, num_draws - done)
        start_state = states
        while True:
            if laid_out is None:
                fns, start_state, shardings = lay_out_chunk(
                    _kernel_functions(algorithm), start_state, placement, program_warmup
                )
                laid_out = (_partition(fns), shardings)
            (dynamic, static), out_shardings = laid_out
            args = (
                dynamic,
                start_state,
                run_keys,
                jnp.asarray(first_step + done * thin, jnp.int32),
                jnp.asarray(n, jnp.int32),
            )
            apart = runs_apart(placement)
            chunk = _make_chunk(
                static, chunk_draws, thin, program_warmup, not program_warmup,
                CHAIN_AXIS if apart else None,
            )  # fmt: skip
            program = _compiled(
                "chunk", chains_apart(chunk, placement, not program_warmup),
                (static, chunk_draws, thin, program_warmup, apart), args, timings,
                out_shardings, algorithm.compiler_options,
            )  # fmt: skip
            t0 = time.perf_counter()
            new_states, kept, exceeded, needed, finite = program(*args)
            while_running()
            exceeded = bool(exceeded)
            if not warmup:
                kept = to_host(kept)
            phase = "warmup_s" if warmup else "sampling_s"
            timings[phase] = timings.get(phase, 0.0) + time.perf_counter() - t0
            if not exceeded:
                break
            counters["resizes"] += 1
            algorithm, start_state = _grow(algorithm, start_state, int(needed))
            laid_out = None
        if not np.all(np.asarray(finite)):
            raise _nonfinite(
                algorithm, start_state, run_keys, first_step + done * thin, n * thin,
                program_warmup, guard,
            )  # fmt: skip
        states = new_states
        chunk = None
        if not warmup:
            chunk = jax.tree_util.tree_map(lambda a: np.moveaxis(a[:n], 0, 1), kept)
            kept_chunks.append(chunk)
        done += n
        if on_chunk is not None:
            on_chunk(algorithm, states, first_step + done * thin, chunk)
        if progress is not None:
            progress.update(n * thin)
            if not warmup:
                _progress_postfix(progress, kept_chunks[-1], algorithm)
    return algorithm, states, kept_chunks


def _nonfinite(algorithm, states, run_keys, first_step, num_steps, warmup, guard):
    """The error for a chunk that ended non-finite (:func:`bnpjax.infer.guard.chunk_error`)."""
    fns = _kernel_functions(algorithm)
    step_fn = fns.warmup_step if (warmup and fns.warmup_step is not None) else fns.step
    return chunk_error(_over_chains(step_fn), run_keys, states, first_step, num_steps, guard)


def _progress_postfix(progress, kept, algorithm) -> None:
    stats = kept.get("sample_stats", {}) if isinstance(kept, dict) else {}
    shown = {}
    for name in ("acceptance_rate", "num_features", "lp"):
        if name in stats and np.ndim(stats[name]) == 2:
            shown[name] = f"{float(np.mean(stats[name][:, -1])):.3g}"
    if algorithm.capacity is not None:
        shown["capacity"] = algorithm.capacity
    if shown:
        progress.set_postfix(shown, refresh=False)


def run(
    algorithm: SamplingAlgorithm,
    key,
    num_samples: int,
    *,
    num_warmup: int = 0,
    thin: int = 1,
    num_chains: int = 1,
    progress_bar: bool = True,
    chunk_size: int | None = None,
    initial_state: Any = None,
    start_step: int = 0,
    checkpoint_path=None,
    resume_from: Checkpoint | None = None,
    devices=None,
    while_running: Callable | None = None,
) -> SamplingResult:
    """Run ``algorithm`` and return the kept draws and final state (see :func:`sample`).

    ``chunk_size`` is the number of steps per compiled chunk (default: the run cut into about
    20 chunks); it changes nothing in the draws, only how often control returns to Python.
    ``initial_state`` (with a leading chain axis) and ``start_step`` continue an earlier run.
    ``checkpoint_path`` (an ``.npz`` file, checked before anything compiles): the state of
    every chain and the draws so far are saved there after each chunk
    (:mod:`bnpjax.infer.checkpoint`; continue with ``load_checkpoint`` and ``resume``).
    ``resume_from``: the :class:`~bnpjax.infer.Checkpoint` whose chains this run continues
    (as :func:`resume` passes it): its saved draws start the trace and every checkpoint.
    ``while_running()`` is called once, as soon as the first chunk is dispatched, while the
    devices compute (:func:`sample` starts importing ArviZ there, in a thread: 1-2 s fresh).

    A chain whose state turns NaN or infinite stops the run with a
    :class:`~bnpjax.infer.guard.NonFiniteStateError` naming the step and the variables.
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise ValueError(
            f"algorithm must be a bnpjax.infer.SamplingAlgorithm, got {type(algorithm).__name__}"
        )
    num_samples = check_integer(num_samples, "num_samples", 1)
    num_warmup = check_integer(num_warmup, "num_warmup", 0)
    thin = check_integer(thin, "thin", 1)
    num_chains = check_integer(num_chains, "num_chains", 1)
    start_step = check_integer(start_step, "start_step", 0)
    progress_bar = check_flag(progress_bar, "progress_bar")
    if while_running is not None and not callable(while_running):
        raise ValueError(f"while_running must be callable, got {type(while_running).__name__}")
    total_steps = num_warmup + num_samples * thin
    default = max(1, math.ceil(total_steps / DEFAULT_NUM_CHUNKS))
    chunk_size = check_integer(default if chunk_size is None else chunk_size, "chunk_size", 1)
    if total_steps + start_step >= 2**31:
        raise ValueError("the run is too long for 32-bit step indices")
    if checkpoint_path is not None:
        checkpoint_path = check_checkpoint_path(checkpoint_path)
    if resume_from is not None:
        if not isinstance(resume_from, Checkpoint):
            raise ValueError("resume_from must be a Checkpoint (bnpjax.infer.load_checkpoint)")
        if resume_from.num_draws and thin != resume_from.thin:
            raise ValueError(
                f"thin must be {resume_from.thin}, the thinning of the draws saved in the "
                "checkpoint the run continues"
            )

    placement = resolve_devices(devices, num_chains)
    if placement is not None and checkpoint_path is not None and jax.process_count() > 1:
        raise ValueError(
            "checkpoint_path: checkpoints of a run over several processes are not supported; "
            "checkpoint a run within one process"
        )

    timings: dict[str, float] = {}
    counters = {"resizes": 0}
    init_keys, run_keys = _chain_keys(key, num_chains)
    init_fns, out_shardings = _kernel_functions(algorithm), None
    if placement is not None:
        init_keys, run_keys = place_chains((init_keys, run_keys), placement)
        init_fns = place(init_fns, placement)

    if initial_state is None:
        dynamic, static = _partition(init_fns)
        args = (dynamic, init_keys)
        if placement is not None:
            # from the results' shapes, which a stored program knows without tracing
            out_shardings = lambda shapes: chain_shardings(shapes, placement)  # noqa: E731
        program = _compiled(
            "init", init_apart(_make_init(static), placement), (static, runs_apart(placement)),
            args, timings, out_shardings, algorithm.compiler_options,
        )  # fmt: skip
        t0 = time.perf_counter()
        states = jax.block_until_ready(program(*args))
        timings["init_s"] = time.perf_counter() - t0
    else:
        states = initial_state
        for leaf in jax.tree_util.tree_leaves(states):
            if np.ndim(leaf) == 0 or np.shape(leaf)[0] != num_chains:
                raise ValueError(
                    f"initial_state must have a leading chain axis of length {num_chains}"
                )
        check_state(algorithm, states, num_chains, "initial_state")

    on_chunk = None
    guard: dict[str, Any] = {}
    saved = resume_from.draws if resume_from is not None and resume_from.num_draws else None
    if checkpoint_path is not None:
        writer = CheckpointWriter(
            checkpoint_path,
            key,
            warmup_end=start_step + num_warmup,
            thin=thin,
            num_samples=num_samples + (resume_from.num_draws if saved is not None else 0),
            previous=resume_from,
        )

        def on_chunk(algorithm_now, states_now, steps_done, draws):
            writer.save(algorithm_now, states_now, steps_done, draws)
            guard.update(path=checkpoint_path, step=steps_done)

    once = functools.cache(while_running or (lambda: None))  # called at most once
    progress = None
    if progress_bar:
        from tqdm.auto import tqdm

        progress = tqdm(total=total_steps, unit="step", desc=algorithm.spec.name, leave=True)
    try:
        # Without a separate warmup step, warmup runs the sampling program (``thin`` steps a
        # draw; steps left over in a program of single steps), recording draws it drops.
        reuse, rest = algorithm.warmup_step is None, num_warmup % thin
        chunk_draws = max(1, min(chunk_size // thin, max(num_samples, reuse * num_warmup // thin)))
        phases = [(num_warmup // thin, thin, chunk_draws), (rest, 1, min(chunk_size, rest))]
        if not reuse:
            phases = [(num_warmup, 1, min(chunk_size, num_warmup))]
        if num_warmup and progress is not None:
            progress.set_description(f"{algorithm.spec.name} warmup")
        warmup_step, states = start_step, adapting(algorithm, states, num_warmup > 0)
        for num_draws, warmup_thin, draws_per_chunk in (phase for phase in phases if phase[0]):
            algorithm, states, _ = _run_phase(
                algorithm,
                states,
                run_keys,
                warmup_step,
                num_draws,
                thin=warmup_thin,
                chunk_draws=draws_per_chunk,
                warmup=True,
                compile_as_sampling=reuse,
                progress=progress,
                timings=timings,
                counters=counters,
                on_chunk=on_chunk,
                guard=guard,
                placement=placement,
                while_running=once,
            )
            warmup_step += num_draws * warmup_thin
        if progress is not None:
            progress.set_description(f"{algorithm.spec.name} sample")
        algorithm, states, chunks = _run_phase(
            algorithm,
            adapting(algorithm, states, False),
            run_keys,
            start_step + num_warmup,
            num_samples,
            thin=thin,
            chunk_draws=chunk_draws,
            warmup=False,
            progress=progress,
            timings=timings,
            counters=counters,
            on_chunk=on_chunk,
            guard=guard,
            placement=placement,
            while_running=once,
        )
    finally:
        if progress is not None:
            progress.close()

    trace: Trace = concat_draws(([saved] if saved is not None else []) + chunks)
    settings = {
        "num_samples": num_samples + (resume_from.num_draws if saved is not None else 0),
        "num_warmup": num_warmup,
        "thin": thin,
        "num_chains": num_chains,
        "start_step": start_step,
        "chunk_size": chunk_size,
        "num_resizes": counters["resizes"],
        "num_devices": 1 if placement is None else placement.mesh.size,
        "seed": _seed_of(key),
    }
    if algorithm.capacity is not None:
        settings["capacity"] = algorithm.capacity
    return SamplingResult(
        trace=trace,
        final_state=states,
        algorithm=algorithm,
        num_steps=start_step + total_steps,
        settings=settings,
        timings=timings,
    )


def sample(
    algorithm: SamplingAlgorithm,
    key,
    num_samples: int,
    *,
    num_warmup: int = 0,
    thin: int = 1,
    num_chains: int = 1,
    progress_bar: bool = True,
    chunk_size: int | None = None,
    initial_state: Any = None,
    start_step: int = 0,
    checkpoint_path=None,
    resume_from: Checkpoint | None = None,
    check_convergence: bool = True,
    devices=None,
):
    """Run any bnpjax kernel and return :class:`arviz.InferenceData`.

    Parameters
    ----------
    algorithm
        a :class:`~bnpjax.infer.SamplingAlgorithm` from a model factory.
    key
        a ``jax.random.key``; the whole run is a deterministic function of it.
    num_samples
        kept draws per chain, after ``num_warmup`` warmup steps and with ``thin`` steps
        between kept draws.
    num_chains
        independent chains, run together with ``vmap`` and spread over ``devices``.
    progress_bar
        a tqdm bar advanced between compiled chunks (no host round-trip per step).
    checkpoint_path
        an ``.npz`` file the state of every chain and the draws so far are saved to after
        each chunk, to continue the same chains later (:func:`bnpjax.infer.load_checkpoint`,
        :func:`bnpjax.infer.resume`).
    resume_from
        a :class:`~bnpjax.infer.Checkpoint` this run continues (set by :func:`resume`).
    devices
        where the run goes (:mod:`bnpjax.infer.sharding`): None (default) spreads the chains
        over every local device of the default backend (the most of them that divide
        ``num_chains``; one device is the plain run); a sequence of devices does the same over
        those; a :class:`jax.sharding.Mesh` with axes ``"chain"`` and ``"data"``
        (:func:`bnpjax.infer.make_mesh`) also splits the rows of row-parallel data. Chain
        sharding gives the draws of a one-device run bit for bit; data sharding the same up to
        the order of floating-point sums.
    check_convergence
        warn (:class:`~bnpjax.infer.diagnostics.ConvergenceWarning`) when R-hat or ESS says the
        chains have not converged (:func:`bnpjax.infer.diagnostics.check_convergence`).

    Returns
    -------
    arviz.InferenceData
        with ``posterior``, ``sample_stats``, and where the kernel provides them
        ``log_likelihood`` and ``observed_data``; ``attrs`` record the seed, the kernel, its
        settings, timings and package versions.
    """
    check_convergence = check_flag(check_convergence, "check_convergence")
    result = run(
        algorithm,
        key,
        num_samples,
        num_warmup=num_warmup,
        thin=thin,
        num_chains=num_chains,
        progress_bar=progress_bar,
        chunk_size=chunk_size,
        initial_state=initial_state,
        start_step=start_step,
        checkpoint_path=checkpoint_path,
        resume_from=resume_from,
        devices=devices,
        while_running=prepare_backend,
    )
    idata = to_inference_data(result)
    if check_convergence:
        _check_convergence(idata, stacklevel=3)
    return idata


def resume(checkpoint: Checkpoint, num_samples: int | None = None, **kwargs):
    """Continue the chains of ``checkpoint`` and return :class:`arviz.InferenceData` of the
    whole chain: the draws saved in the checkpoint, then ``num_samples`` more (default: the
    draws its run still had to make). Keywords as for :func:`bnpjax.sample` (``progress_bar``,
    ``chunk_size``, ``checkpoint_path``, ...). A checkpoint taken during warmup first finishes
    the warmup (``num_warmup`` defaults to the steps it had left). The draws are those the
    uninterrupted run would have made."""
    for name in ("initial_state", "start_step", "num_chains", "resume_from"):
        if name in kwargs:
            raise ValueError(f"{name} comes from the checkpoint")
    if num_samples is None:
        num_samples = checkpoint.num_samples_left
        if num_samples < 1:
            raise ValueError(
                "the checkpoint's run had made all its draws; give num_samples for more"
            )
    kwargs.setdefault("num_warmup", checkpoint.num_warmup_left)
    kwargs.setdefault("thin", checkpoint.thin)
    return sample(
        checkpoint.algorithm,
        checkpoint.key,
        num_samples,
        num_chains=checkpoint.num_chains,
        initial_state=checkpoint.state,
        start_step=checkpoint.start_step,
        resume_from=checkpoint,
        **kwargs,
    )
