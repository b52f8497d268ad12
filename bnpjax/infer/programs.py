"""Compiled programs of the driver and their cache.

A kernel's functions are split into array leaves (the data, passed to the compiled program as
arguments) and hashable static structure (functions and settings, the cache key), so that a
second fit with data of the same shapes and dtypes reuses the program. The cache is bounded
(least recently used first out).

On the CPU the programs are compiled at LLVM's optimisation level 1 instead of XLA's default
(2): measured on every demo and on the FM MovieLens fits (``benchmarks/compile_time.py``,
docs/benchmarks.md "Compile time"), the level set by ``XLA_FLAGS`` (what ``import bnpjax``
does, :mod:`bnpjax.compilation_cache`) cuts compile time by 10-40 % and leaves run time
unchanged within noise, since these kernels spend their time in gathers, scatters and LAPACK
calls rather than in loops LLVM would vectorise better. Passed here as a compile option it
saves only about 3 %; it stays for processes whose backend started before bnpjax was
imported. ``BNPJAX_XLA_CPU_OPT_LEVEL`` sets
another level (``default``: XLA's own); an ``--xla_backend_optimization_level`` in
``XLA_FLAGS`` wins over both. The level is part of the persistent cache's key.

The programs are also compiled with XLA's classic elemental emitters rather than its newer
CPU fusion emitters (``xla_cpu_use_fusion_emitters=False``): a kernel's sweep is hundreds of
small fusions (the PRNG's hash rounds, gathers, scatters, a few LAPACK calls), which the
classic emitters compile faster and run as fast. Measured on the FM MovieLens sweep (ML-100K
u1, rank 10, a chunk of 10 sweeps, one core, 2026-11-28): compile 4.0-4.3 s against 7.3-12.0 s
with the fusion emitters, 347 fusions against 450; 35-45 % less compile time on every
``bnpjax demo`` with a sampler, run times unchanged within the machine's noise.
A kernel may add options of its own (``SamplingAlgorithm.compiler_options``). M3F's and the
FM's kernels switch off XLA's YNNPACK fusions (:data:`WITHOUT_YNN_FUSIONS`): jaxlib 0.10 hands
their small dot products to YNNPACK library calls of about 100 us each, where XLA's own loops
are faster; other kernels' batched products gain from them. Measured through the driver
(``benchmarks/cpu_library_fusions.py``, docs/benchmarks.md, fit time without / with them):
M3F 0.68-0.71, the FM demo's fit 0.70, FM ML-100K 1.00, the ILFM demo's kernel 1.20-1.22,
so only M3F and the FM opt out, the FM only below rank 15, where its wide segment sums do not
gain from them (:func:`bnpjax.models.fm.conditionals.wide_segments`).
The options are dropped, once and for the rest of the process, by a jaxlib that does not know
them; ``BNPJAX_XLA_CPU_OPT_LEVEL=default`` or the flag in ``XLA_FLAGS`` leaves XLA's choice.
"""

from __future__ import annotations

import functools
import inspect
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.compilation_cache import (
    _XLA_OPT_FLAG,
    CPU_OPT_LEVEL,
    requested_cpu_opt_level,
)
from bnpjax.infer import traced_programs
from bnpjax.infer.arviz_adapter import backend_ready

__all__ = [
    "MAX_COMPILED_PROGRAMS",
    "clear_compile_cache",
    "compile_count",
    "compile_lowered",
    "compiler_options",
    "jit",
]


def compiler_options(extra: tuple = ()) -> dict | None:
    """XLA options of the driver's programs on the CPU (module docstring): LLVM's optimisation
    level and the classic emitters, each unless ``XLA_FLAGS`` sets it; None (XLA's defaults)
    on other backends and when ``BNPJAX_XLA_CPU_OPT_LEVEL=default``.

    Parameters
    ----------
    extra : tuple
        ``(name, value)`` pairs a kernel adds (``SamplingAlgorithm.compiler_options``), each
        unless ``XLA_FLAGS`` sets it or the installed XLA refused it.

    Returns
    -------
    dict or None

    Raises
    ------
    ValueError
        If ``BNPJAX_XLA_CPU_OPT_LEVEL`` is neither ``default`` nor an integer in 0..3.
    """
    chosen = requested_cpu_opt_level()
    if chosen == "default" or jax.default_backend() != "cpu":
        return None
    flags = os.environ.get("XLA_FLAGS", "")
    options = {}
    if _XLA_OPT_FLAG not in flags:  # the user's flag wins
        options[_XLA_OPT_FLAG] = CPU_OPT_LEVEL if chosen is None else chosen
    for name, value in ((_FUSION_EMITTERS_OPTION, False), *extra):
        if name not in flags and name not in _UNKNOWN_OPTIONS:
            options[name] = value
    return options or None


#: XLA's switch between its CPU fusion emitters and the classic ones (module docstring).
_FUSION_EMITTERS_OPTION = "xla_cpu_use_fusion_emitters"
#: ``SamplingAlgorithm.compiler_options`` of a kernel whose CPU programs run faster without
#: XLA's YNNPACK fusions (module docstring): the empty list of fusion kinds (jaxlib 0.10).
WITHOUT_YNN_FUSIONS = (("xla_cpu_experimental_ynn_fusion_type", ""),)
#: Options this process's jaxlib refused ("No such compile option"): not passed again.
_UNKNOWN_OPTIONS: set[str] = set()


def compile_lowered(lowered, extra: tuple = ()):
    """Compile a lowered program with :func:`compiler_options`; an option the installed XLA
    does not know is dropped (and not passed again) instead of failing the fit.

    Parameters
    ----------
    lowered : jax.stages.Lowered
    extra : tuple
        a kernel's own options, as in :func:`compiler_options`.

    Returns
    -------
    jax.stages.Compiled
    """
    while True:
        options = compiler_options(extra)
        try:
            return lowered.compile(compiler_options=options)
        except Exception as err:  # jaxlib's runtime error type moves between releases
            if not _drop_unknown(options, err):
                raise


class _KernelFunctions(NamedTuple):
    init: Callable
    step: Callable
    warmup_step: Callable | None
    trace: Callable


def _is_array(x) -> bool:
    return isinstance(x, jax.Array | np.ndarray | np.generic)


def _partition(fns: _KernelFunctions):
    """Array leaves become arguments of the compiled program; everything else (functions,
    Python settings) is hashable static structure."""
    leaves, treedef = jax.tree_util.tree_flatten(fns, is_leaf=lambda x: x is None)
    dynamic, static = [], []
    for leaf in leaves:
        if _is_array(leaf):
            # jnp.asarray costs about 35 us even for a device array, and a kernel's data
            # can have hundreds of leaves, partitioned again at every chunk
            dynamic.append(leaf if isinstance(leaf, jax.Array) else jnp.asarray(leaf))
            static.append(_ARRAY)
        else:
            try:
                hash(leaf)
            except TypeError as err:
                raise TypeError(
                    f"kernel argument {leaf!r} is neither an array nor hashable; bind data with "
                    "bnpjax.infer.bind(fn, data, **static_settings)"
                ) from err
            static.append(leaf)
    return dynamic, (treedef, tuple(static))


class _ArrayMarker:
    def __repr__(self):
        return "<array>"


_ARRAY = _ArrayMarker()


def _merge(dynamic, static) -> _KernelFunctions:
    treedef, static_leaves = static
    it = iter(dynamic)
    leaves = [next(it) if leaf is _ARRAY else leaf for leaf in static_leaves]
    return jax.tree_util.tree_unflatten(treedef, leaves)


def _aval_key(tree) -> tuple:
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    return (
        treedef,
        tuple(
            (
                tuple(x.shape),
                str(x.dtype),
                bool(getattr(x, "weak_type", False)),
                getattr(x, "sharding", None) if isinstance(x, jax.Array) else None,
            )
            if hasattr(x, "shape")
            else (type(x), x)
            for x in leaves
        ),
    )


def jit(fn: Callable | None = None, *, static_argnums=(), static_argnames=()):
    """``jax.jit`` for bnpjax's programs outside the driver (variational chunks, predictions),
    compiled as the driver compiles its own; usable as ``@jit`` or ``@jit(static_argnames=...)``.

    Each program goes through :func:`_compiled`: it is compiled with :func:`compiler_options`
    (an option the installed XLA does not know is dropped), kept in the driver's bounded cache
    of compiled programs, and loaded from :mod:`bnpjax.infer.traced_programs` when another
    process traced it (the functions it is given as :class:`jax.tree_util.Partial` arguments
    are part of the key; a user's own function is traced as before).

    Parameters
    ----------
    fn : callable, optional
    static_argnums, static_argnames : int, str or tuple
        As for ``jax.jit``: these arguments are hashable settings, part of the program.

    Returns
    -------
    callable
    """
    if fn is None:
        return functools.partial(
            jit, static_argnums=static_argnums, static_argnames=static_argnames
        )
    as_tuple = lambda v: (v,) if isinstance(v, (int, str)) else tuple(v)  # noqa: E731
    static_argnums, static_argnames = set(as_tuple(static_argnums)), set(as_tuple(static_argnames))
    try:  # static arguments named but passed by position, as jax.jit finds them
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        parameters = []
    for index, parameter in enumerate(parameters):
        positional = parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
        if positional and parameter.name in static_argnames:
            static_argnums.add(index)
        if positional and index in static_argnums:
            static_argnames.add(parameter.name)
    label = f"jit:{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"
    seen: set = set()
    # inside another traced function the program is traced into it, as jax.jit's would be
    traced_into = jax.jit(
        fn, static_argnums=tuple(static_argnums), static_argnames=tuple(static_argnames)
    )

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs))):
            return traced_into(*args, **kwargs)
        static = (
            len(args),
            tuple((i, a) for i, a in enumerate(args) if i in static_argnums),
            tuple(sorted((k, v) for k, v in kwargs.items() if k in static_argnames)),
        )
        dynamic = (
            tuple(a for i, a in enumerate(args) if i not in static_argnums),
            {k: v for k, v in kwargs.items() if k not in static_argnames},
        )
        program = _compiled(
            label, functools.partial(_call_split, fn, static), (fn, static), dynamic, {}
        )
        seen.add((static, _aval_key(dynamic)))
        return program(*dynamic)

    # how many programs this function has compiled (no-recompile tests)
    call._cache_size = lambda: len(seen)
    return call


def _call_split(fn, static, args, kwargs):
    """``fn`` called with its dynamic ``args`` and ``kwargs`` merged with the static ones."""
    num_args, static_args, static_kwargs = static
    given, rest = dict(static_args), iter(args)
    merged = [given[i] if i in given else next(rest) for i in range(num_args)]
    return fn(*merged, **kwargs, **dict(static_kwargs))


def _drop_unknown(options: dict | None, err: Exception) -> bool:
    """Record the options ``err`` says XLA does not know; False when it says none."""
    unknown = [k for k in options or () if f"No such compile option: '{k}'" in str(err)]
    _UNKNOWN_OPTIONS.update(unknown)
    return bool(unknown)


#: Compiled programs, least recently used first. Bounded: every XLA CPU executable holds
#: memory mappings of its own, and a process that fits many models of different shapes would
#: otherwise keep them all (and can run into the kernel's limit on mappings).
_COMPILED: OrderedDict[tuple, Any] = OrderedDict()
MAX_COMPILED_PROGRAMS = 64
_COMPILE_COUNT = 0


def compile_count() -> int:
    """How many programs the driver has compiled in this process (for no-recompile tests)."""
    return _COMPILE_COUNT


def clear_compile_cache() -> None:
    """Drop the driver's compiled programs (with ``jax.clear_caches()`` this releases their
    memory); the next run of each kernel compiles again."""
    _COMPILED.clear()


def _compiled(
    name: str, fn: Callable, static_key: tuple, args: tuple, timings: dict, out_shardings=None,
    options: tuple = (),
):  # fmt: skip
    """Return an ahead-of-time compiled ``fn`` for ``args``, from the cache when possible.

    The key holds the arguments' shapes, dtypes and shardings (a program compiled for one
    layout over devices refuses arrays laid out another way); ``out_shardings`` pins where
    the results live, so a chunk's output state is laid out as its input was and the next
    chunk reuses the program (a callable: given the results' shapes, it returns them);
    ``options``: the kernel's own XLA options. A program another process traced is loaded
    instead of traced again (:mod:`bnpjax.infer.traced_programs`)."""
    global _COMPILE_COUNT
    options = tuple(tuple(pair) for pair in options)  # hashable, for the key
    key = (name, static_key, _aval_key(args), options)
    program = _COMPILED.get(key)
    if program is None:
        # lowering may import modules (jax's LAPACK kernels import scipy.linalg): not while
        # another thread imports ArviZ, which imports some of the same
        backend_ready()
        start = time.perf_counter()
        lowered = traced_programs.lower(name, fn, static_key, args, out_shardings, options)
        program = compile_lowered(lowered, options)
        timings["compile_s"] = timings.get("compile_s", 0.0) + time.perf_counter() - start
        _COMPILE_COUNT += 1
        _COMPILED[key] = program
        evicted = False
        while len(_COMPILED) > MAX_COMPILED_PROGRAMS:
            _COMPILED.popitem(last=False)
            evicted = True
        if evicted:
            # JAX's own tracing caches keep the jaxprs of every shape ever traced (about
            # 14 MB per evicted linear-regression program) and would grow without bound in a
            # long-lived process; the programs kept here are compiled ahead of time and do
            # not need them
            jax.clear_caches()
    else:
        _COMPILED.move_to_end(key)
    return program
