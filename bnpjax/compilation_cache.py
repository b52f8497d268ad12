"""The persistent compilation cache: a second process never recompiles what a first compiled.

A first fit's time is mostly XLA compilation (a few seconds per kernel on a CPU). JAX can keep
compiled programs on disk and load them in the next process instead of compiling again;
bnpjax turns that on when it is imported, in a folder of the user's cache directory, unless
the user has already chosen a JAX cache folder or turned it off:

* ``BNPJAX_CACHE_DIR=/some/folder`` puts the cache there;
* ``BNPJAX_CACHE_DIR=off`` (or ``0``, ``none``, ``false``, empty) leaves JAX's setting alone;
* a folder set by JAX's own ``JAX_COMPILATION_CACHE_DIR`` (or ``jax.config``) wins.

What is cached: every program JAX compiles in the process (bnpjax's chunks, inits and
predictions, the small eager programs of the data layout, and the user's own jitted code;
:data:`MIN_COMPILE_SECONDS`). Entries are a few kB to a few MB each (a FM fit on ML-100K
writes about 80 of them, 0.75 MB in all); the folder is
capped at :data:`MAX_CACHE_BYTES` (least recently used entries are deleted, at most once a
day, by :func:`trim_cache`). The key includes
the program, the jax and jaxlib versions, the device and the XLA flags, so a stale entry is
never used: it is just not found. It also holds the cache folder's own path (JAX passes a GPU
autotuning folder inside it to XLA among the compile options, on every backend, jax 0.10), so a
cache copied or moved to another folder is not found either: point every process at the same
folder (measured 2026-11-27: a test module's 91 programs, all found again from the folder that
wrote them, none from a copy of it elsewhere).

The driver's programs are also kept traced, in ``traced/`` inside the same folder
(:mod:`bnpjax.infer.traced_programs`): a later process loads them instead of tracing the
kernel again, which JAX's cache alone does not spare it.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import jax

__all__ = ["cache_dir", "default_cache_dir", "set_compilation_cache", "trim_cache"]

#: The environment variable that moves the cache or turns it off.
CACHE_VARIABLE = "BNPJAX_CACHE_DIR"
#: Programs that compile faster than this are not written (JAX's default is 1 s). Every
#: program is written: a FM fit on ML-100K also compiles about 80 small eager programs (data
#: layout, prediction, 20-50 ms each) whose reuse saved 0.5 s of a 6.3 s fit with a warm cache,
#: for 0.4 MB more on disk (benchmarks/compile_time.py, 2026-11-26).
MIN_COMPILE_SECONDS = 0.0
#: The most disk the cache folder may take (2 GiB; :func:`trim_cache`).
MAX_CACHE_BYTES = 2 * 1024**3
#: Seconds between two trims of a cache folder (one day).
TRIM_SECONDS = 24 * 3600.0
#: The file names of JAX's cache entries and of the access times it writes beside them.
_ENTRY_SUFFIX, _ATIME_SUFFIX = "-cache", "-atime"
_OFF = {"", "0", "off", "none", "false", "no"}


#: The environment variable that sets the LLVM optimisation level of CPU programs.
OPT_LEVEL_VARIABLE = "BNPJAX_XLA_CPU_OPT_LEVEL"
#: The level used on the CPU unless the user chose one (module docstring).
CPU_OPT_LEVEL = 1
_XLA_OPT_FLAG = "xla_backend_optimization_level"

#: The environment variable that sets the size under which XLA runs a CPU loop as one function.
SMALL_LOOP_VARIABLE = "BNPJAX_XLA_CPU_SMALL_LOOP_BYTES"
#: XLA's CPU compiler emits a ``while`` loop whose body reads and writes fewer bytes than this
#: as one compiled function that runs the whole loop, instead of dispatching each operation of
#: each iteration on its own (XLA's default: 1024 bytes). Samplers' sweeps are loops of many
#: small operations, so the dispatch dominates them: per sweep, IBP collapsed 1.7-2.5 ->
#: 0.9-1.2 ms, IBP row-parallel 0.5-0.9 -> 0.4 ms, FM on ML-100K 14.7-20 -> 12.5-15 ms, ILFM
#: and M3F 5-10 % faster, FM on ML-1M unchanged, compile times unchanged (docs/benchmarks.md,
#: "Small loops in one function", 2026-11-30). Loops that call a LAPACK routine (Cholesky
#: factors) are never emitted that way.
CPU_SMALL_LOOP_BYTES = 1_000_000
_XLA_EXTRA_OPTIONS_FLAG = "xla_backend_extra_options"
_SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"


def default_cache_dir() -> Path:
    """The platform's per-user cache folder for bnpjax's compiled programs.

    Returns
    -------
    pathlib.Path
        ``$XDG_CACHE_HOME/bnpjax/xla`` (default ``~/.cache``) on Linux,
        ``~/Library/Caches/bnpjax/xla`` on macOS, ``%LOCALAPPDATA%\\bnpjax\\xla`` on Windows.
    """
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "bnpjax" / "xla"


def cache_dir() -> str | None:
    """The folder JAX's persistent compilation cache writes to now (None: off)."""
    return jax.config.jax_compilation_cache_dir


def set_compilation_cache(path: str | os.PathLike | None = "default") -> str | None:
    """Turn the persistent compilation cache on in ``path``, or off.

    Parameters
    ----------
    path : str, path-like or None
        The folder (created if missing); ``"default"``: :func:`default_cache_dir`; None: off
        for the rest of the process.

    Returns
    -------
    str or None
        The folder in use.

    Raises
    ------
    ValueError
        If ``path`` exists and is not a folder.
    """
    if path is None:
        jax.config.update("jax_compilation_cache_dir", None)
        _reset()
        return None
    folder = default_cache_dir() if isinstance(path, str) and path == "default" else Path(path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"path must be a folder for the compilation cache, got file {folder}")
    folder.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    # unbounded for JAX, trimmed here: JAX's own bound lists and reads the whole folder at
    # every write (trim_cache)
    jax.config.update("jax_compilation_cache_max_size", -1)
    _reset()
    trim_cache(folder)
    return str(folder)


def trim_cache(
    folder: str | os.PathLike, max_bytes: int = MAX_CACHE_BYTES, *, every: float = TRIM_SECONDS
) -> int:
    """Delete the least recently used entries of the compilation cache in ``folder`` until
    its entries take at most ``max_bytes``; at most once per ``every`` seconds per folder.

    JAX bounds the folder itself when given a maximum size, but then lists every entry and
    reads its access-time file at each write: with the 3,666 entries a development machine's
    default folder held, each new program cost 85 ms more to store (16 small programs: 1.64 s
    against 0.26 s in an empty folder, 2026-11-30, 2-core CPU), and the test suite, whose
    folder grows to thousands of entries, paid it at every compilation. bnpjax leaves JAX's
    folder unbounded and trims it here, when the cache is set up (``import bnpjax``), if the
    last trim is older than ``every``. An entry's last use is the later of its access and
    modification times (and of the access-time file JAX writes when it bounds the folder).

    Parameters
    ----------
    folder : str or path-like
        the cache folder.
    max_bytes : int
        the most its entries may take.
    every : float
        seconds between two trims of the folder (0: trim now).

    Returns
    -------
    int
        the number of entries deleted.

    Raises
    ------
    ValueError
        naming the argument: ``max_bytes`` not an integer >= 0, ``every`` not a number >= 0
        (NaN included), ``folder`` not an existing folder.
    """
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise ValueError(f"max_bytes must be an integer >= 0, got {max_bytes!r}")
    if isinstance(every, bool) or not isinstance(every, int | float) or not every >= 0:
        raise ValueError(f"every must be a number of seconds >= 0, got {every!r}")
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder must be an existing folder, got {str(folder)!r}")
    stamp = folder / ".bnpjax-trimmed"
    try:
        if every > 0 and time.time() - stamp.stat().st_mtime < every:
            return 0
    except OSError:
        pass  # never trimmed
    entries, total = [], 0
    for path in folder.glob(f"*{_ENTRY_SUFFIX}"):
        try:
            info = path.stat()
        except OSError:  # deleted by another process meanwhile
            continue
        used = max(info.st_atime, info.st_mtime)
        companion = path.with_name(path.name[: -len(_ENTRY_SUFFIX)] + _ATIME_SUFFIX)
        try:
            used = max(used, int.from_bytes(companion.read_bytes(), "little") / 1e9)
        except (OSError, ValueError):
            pass
        entries.append((used, info.st_size, path, companion))
        total += info.st_size
    deleted = 0
    for _, size, path, companion in sorted(entries, key=lambda entry: entry[0]):
        if total <= max_bytes:
            break
        for victim in (path, companion):
            try:
                victim.unlink()
            except OSError:  # gone already, or not ours to delete
                pass
        total -= size
        deleted += 1
    try:
        stamp.touch()
    except OSError:
        pass
    return deleted


def _reset() -> None:
    """JAX decides once, at the first compilation, whether and where the process caches; a
    change made after that needs the cache object reset (public since jax 0.4.2x)."""
    try:
        from jax.experimental.compilation_cache.compilation_cache import reset_cache
    except ImportError:  # an older JAX: the setting takes effect if nothing was compiled yet
        return
    reset_cache()


def requested_cpu_opt_level() -> int | str | None:
    """The CPU's LLVM optimisation level the user asked for through ``BNPJAX_XLA_CPU_OPT_LEVEL``:
    an integer in 0..3, ``"default"`` (XLA's own), or None when unset.

    Raises
    ------
    ValueError
        If ``BNPJAX_XLA_CPU_OPT_LEVEL`` is neither ``default`` nor an integer in 0..3.
    """
    chosen = os.environ.get(OPT_LEVEL_VARIABLE, "").strip().lower()
    if not chosen or chosen == "default":
        return chosen or None
    if chosen not in {"0", "1", "2", "3"}:
        raise ValueError(
            f"{OPT_LEVEL_VARIABLE} must be 'default' or an integer in 0..3, got {chosen!r}"
        )
    return int(chosen)


def requested_cpu_small_loop_bytes() -> int | str | None:
    """The threshold of XLA's one-function CPU loops the user asked for through
    ``BNPJAX_XLA_CPU_SMALL_LOOP_BYTES``: an integer >= 0, ``"default"`` (XLA's own), or None
    when unset.

    Raises
    ------
    ValueError
        If ``BNPJAX_XLA_CPU_SMALL_LOOP_BYTES`` is neither ``default`` nor an integer >= 0.
    """
    chosen = os.environ.get(SMALL_LOOP_VARIABLE, "").strip().lower()
    if not chosen or chosen == "default":
        return chosen or None
    if not chosen.isdigit():
        raise ValueError(
            f"{SMALL_LOOP_VARIABLE} must be 'default' or an integer >= 0, got {chosen!r}"
        )
    return int(chosen)


def _cpu_only() -> bool:
    """No GPU or TPU backend can be initialised: ``JAX_PLATFORMS`` is ``cpu``, or no
    accelerator plugin of jaxlib is installed."""
    if os.environ.get("JAX_PLATFORMS", "").strip().lower() == "cpu":
        return True
    from importlib.metadata import distributions

    names = {(d.metadata["Name"] or "").lower().replace("_", "-") for d in distributions()}
    return not any(n.startswith(("jax-cuda", "jax-rocm", "libtpu", "jax-tpu")) for n in names)


def jax_backend_started() -> bool:
    """Whether JAX has started a backend (after it, ``XLA_FLAGS``, ``NPROC`` and
    ``jax_num_cpu_devices`` are no longer read). True when that cannot be told."""
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge._backends)
    except (ImportError, AttributeError):  # pragma: no cover - JAX reorganised
        return True


def _set_cpu_opt_level() -> None:
    """LLVM optimisation level 1 for the CPU (``XLA_FLAGS``), before JAX starts its backend:
    measured on every demo and on the FM MovieLens fits (``benchmarks/compile_time.py``,
    docs/benchmarks.md "Compile time"), it compiles 10-40 % faster than XLA's default (2) and
    runs as fast. The per-program compile option of :mod:`bnpjax.infer.programs` alone saved
    only about 3 %: the flag also reaches the eager programs and, read at start-up, the whole
    pipeline. Left alone when ``XLA_FLAGS`` sets a level, when ``BNPJAX_XLA_CPU_OPT_LEVEL``
    is ``default`` (it may also name another level), when an accelerator may be used, or when
    JAX's backend is already running (then only the per-program option applies)."""
    try:
        chosen = requested_cpu_opt_level()
    except ValueError:  # raised, with its message, when the first program is compiled
        return
    if chosen != "default":
        level = CPU_OPT_LEVEL if chosen is None else chosen
        _add_cpu_flag(_XLA_OPT_FLAG, f"--{_XLA_OPT_FLAG}={level}")


def _add_cpu_flag(name: str, flag: str) -> None:
    """Append ``flag`` to ``XLA_FLAGS`` unless ``XLA_FLAGS`` already names ``name`` (the
    user's wins), an accelerator may be used, or JAX's backend has started (too late: the
    flags were read)."""
    flags = os.environ.get("XLA_FLAGS", "")
    if name in flags or not _cpu_only() or jax_backend_started():
        return
    os.environ["XLA_FLAGS"] = f"{flags} {flag}".strip()


def _set_cpu_small_loop_bytes() -> None:
    """XLA's threshold of one-function CPU loops (:data:`CPU_SMALL_LOOP_BYTES`) in
    ``XLA_FLAGS``, before JAX starts its backend. Left alone when ``XLA_FLAGS`` already passes
    backend options (``--xla_backend_extra_options``: they are one flag, and the user's wins),
    when ``BNPJAX_XLA_CPU_SMALL_LOOP_BYTES`` is ``default`` (it may also name another size),
    when an accelerator may be used, or when JAX's backend is already running. There is no
    per-program route: XLA reads backend options only from its flags."""
    try:
        chosen = requested_cpu_small_loop_bytes()
    except ValueError as err:  # a typo must not pass silently, nor stop the import
        warnings.warn(f"{err}; XLA's default is used", RuntimeWarning, stacklevel=4)
        return
    if chosen != "default":
        size = CPU_SMALL_LOOP_BYTES if chosen is None else chosen
        option = f"--{_XLA_EXTRA_OPTIONS_FLAG}={_SMALL_LOOP_OPTION}={size}"
        _add_cpu_flag(_XLA_EXTRA_OPTIONS_FLAG, option)


def _enable_on_import() -> None:
    """What ``import bnpjax`` does: the CPU's LLVM level (:func:`_set_cpu_opt_level`), the size
    of one-function loops (:func:`_set_cpu_small_loop_bytes`) and the
    default cache, unless the user chose otherwise. A default folder that cannot be created
    (a read-only home) leaves the cache off quietly, compiling again being the only cost; a
    folder the user named warns."""
    _set_cpu_opt_level()
    _set_cpu_small_loop_bytes()
    if jax.config.jax_compilation_cache_dir:  # the user's own JAX setting wins
        return
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen is not None and chosen.strip().lower() in _OFF:
        return
    try:
        set_compilation_cache(chosen or "default")
    except (OSError, ValueError) as err:
        if chosen:
            warnings.warn(
                f"{CACHE_VARIABLE}={chosen!r} cannot hold the compilation cache ({err}); "
                "programs will be compiled in every process",
                RuntimeWarning,
                stacklevel=3,
            )
