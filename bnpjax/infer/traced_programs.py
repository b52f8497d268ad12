"""Traced programs kept on disk, so that a second process neither traces nor compiles what the
first did.

JAX's persistent compilation cache (:mod:`bnpjax.compilation_cache`) saves XLA's work, but its
key is the lowered program: every process still traces the kernel in Python and lowers it to
StableHLO before it can look the program up, and for a Gibbs sweep that is most of what a warm
cache leaves (0.7-2.4 s per chunk program of the demos, 2026-11-29). So the driver stores each
program it lowers as a serialized :class:`jax.export.Exported` under a key of everything that
decides what tracing produces, and a later process with the same key deserializes it (a few
tens of milliseconds) instead of tracing; XLA then finds the compiled program in its own cache.

The key (:func:`program_key`) holds

* the program's name, its static settings and the kernel functions, fingerprinted by value:
  numbers, strings, tuples, NamedTuples and dtypes as themselves; a function of bnpjax by its
  code (bytecode, names, constants), its closure, its defaults and every global it reads, and
  what it reads through a module (so a module constant or function replaced at run time
  changes the key); JAX's, NumPy's and the standard library's functions by the name they are
  importable under (their versions are in the key; one made at run time, such as a
  ``jax.vmap`` closure, is refused); arrays by their bytes, dtype and weak type;
* the shapes, dtypes, weak types and shardings of the arguments;
* the source of the installed bnpjax package (a digest of its files, read when bnpjax is
  imported; nothing is stored where there is no source), the versions of bnpjax, Python,
  jax, jaxlib, NumPy and the other libraries a kernel may call, the backend and its devices,
  and the JAX settings that change what tracing produces (64-bit mode, the PRNG, promotion
  rules, matmul precision, the partitioner).

Anything that cannot be fingerprinted (a function of the user's own, an object of an unknown
type) gives no key, and that program is traced and lowered as before: a stored program is
only ever used where it is the one tracing would produce. Programs JAX cannot export (host
callbacks) are traced as before too, and so are programs with weakly typed arguments or
results (a deserialized program has none, and would promote differently). A stored program
that fails to load is removed and traced again.

The programs live in ``traced/`` inside the compilation cache's folder (a few tens to hundreds
of kB each) and follow its switch (``BNPJAX_CACHE_DIR``); ``BNPJAX_TRACED_PROGRAMS=off`` turns
off this layer alone. The folder is capped at :data:`MAX_BYTES`, the least recently used
programs removed first. Serialization needs the ``flatbuffers`` package (a dependency of
bnpjax); without it programs are traced in every process. A remote compilation cache
(``gs://...``) keeps no traced programs. The files are read with ``pickle``: the folder must
be as trusted as the code (it is the user's own cache folder by default).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import logging
import os
import pickle
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import numpy as np

__all__ = ["MAX_BYTES", "lower", "program_key", "stats"]

logger = logging.getLogger(__name__)

#: The environment variable that turns the stored programs off (``off``, ``0``, ``false``).
ENABLE_VARIABLE = "BNPJAX_TRACED_PROGRAMS"
#: The most disk the stored programs may take (256 MiB).
MAX_BYTES = 256 * 1024**2
#: The format of a stored file; a file of another format is ignored (and replaced).
_FORMAT = b"bnpjax-traced-program-1\n"
_SUFFIX = ".exported"
#: Libraries whose functions and objects are fingerprinted by name (their versions are in the
#: key); bnpjax's own are fingerprinted by their code.
_BY_NAME = frozenset(
    {"jax", "jaxlib", "numpy", "numpyro", "optax", "scipy", "builtins", "functools",
     "operator", "math", "collections", "typing", "enum", "itertools", "ml_dtypes"}
)  # fmt: skip
_LIBRARIES = ("jax", "jaxlib", "numpy", "ml_dtypes", "numpyro", "optax", "scipy", "flatbuffers")
#: JAX settings that change the traced program.
_CONFIG = (
    "jax_enable_x64",
    "jax_default_prng_impl",
    "jax_threefry_partitionable",
    "jax_numpy_dtype_promotion",
    "jax_numpy_rank_promotion",
    "jax_default_matmul_precision",
    "jax_enable_checks",
    "jax_debug_nans",
    "jax_debug_infs",
    "jax_debug_key_reuse",
    "jax_random_seed_offset",
    "jax_use_shardy_partitioner",
    "jax_dynamic_shapes",
)
_STATS = {"stored": 0, "loaded": 0, "unkeyed": 0, "not_exported": 0}
#: Keys of programs JAX could not export in this process (not tried again).
_NOT_EXPORTED: set[str] = set()


class _Unstable(Exception):
    """An object that cannot be fingerprinted across processes."""


def stats() -> dict[str, int]:
    """What this process did: programs ``stored`` and ``loaded``, programs traced without a
    key (``unkeyed``: a part could not be fingerprinted) and programs JAX could not export
    (``not_exported``).

    Returns
    -------
    dict
    """
    return dict(_STATS)


def _enabled() -> bool:
    return os.environ.get(ENABLE_VARIABLE, "on").strip().lower() not in {"0", "off", "false", "no"}


def _folder() -> Path | None:
    cache = jax.config.jax_compilation_cache_dir
    if not cache or not _enabled() or "://" in str(cache):  # a remote cache: not here
        return None
    return Path(cache) / "traced"


# --------------------------------------------------------------------------------------------
# fingerprints


class _Fingerprint:
    """Tokens that identify an object across processes (raises :class:`_Unstable`)."""

    def __init__(self):
        self.digest = hashlib.sha256()
        self.seen: dict[int, int] = {}
        self.keep: list = []  # the objects behind ``seen`` stay alive, so ids stay theirs

    def emit(self, *parts) -> None:
        for part in parts:
            self.digest.update(str(part).encode())
            self.digest.update(b"\x00")

    def once(self, obj) -> bool:
        """Whether ``obj`` is new (else a reference to its first visit is emitted)."""
        index = self.seen.get(id(obj))
        if index is not None:
            self.emit("ref", index)
            return False
        self.seen[id(obj)] = len(self.seen)
        self.keep.append(obj)
        return True

    def visit(self, obj, depth: int = 0) -> None:
        if depth > 100:
            raise _Unstable("nested too deep")
        kind = type(obj)
        if obj is None or kind in (bool, int, float, complex, str, bytes):
            self.emit(kind.__name__, repr(obj))
        elif isinstance(obj, type):
            self.emit("type", _by_name(obj))
        elif isinstance(obj, types.ModuleType):
            self.emit("module", obj.__name__)
        elif isinstance(obj, np.dtype):
            self.emit("dtype", obj.str, obj.name)
        elif isinstance(obj, np.ndarray | np.generic | jax.Array):
            self._array(obj)
        elif isinstance(obj, enum.Enum):
            self.emit("enum", _by_name(kind), obj.name)
        elif isinstance(obj, jax.tree_util.PyTreeDef):
            self._treedef(obj, depth)
        elif isinstance(obj, jax.sharding.Sharding):
            self.emit("sharding", repr(obj))
        elif isinstance(obj, functools.partial):
            if self.once(obj):
                self.emit("partial")
                for part in (obj.func, obj.args, obj.keywords):
                    self.visit(part, depth + 1)
        elif isinstance(obj, types.MethodType):
            self.emit("method")
            self.visit(obj.__func__, depth + 1)
            self.visit(obj.__self__, depth + 1)
        elif isinstance(obj, types.FunctionType):
            self._function(obj, depth)
        elif isinstance(obj, types.BuiltinFunctionType | np.ufunc):
            owner = getattr(obj, "__self__", None)
            if owner is not None and not isinstance(owner, types.ModuleType):
                self.emit("bound builtin", obj.__name__)  # d.get: the dict d matters
                self.visit(owner, depth + 1)
            else:
                self.emit("builtin", _importable(obj))
        elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
            self.emit("namedtuple", _by_name(kind))
            for name, value in zip(obj._fields, obj, strict=True):
                self.emit(name)
                self.visit(value, depth + 1)
        elif kind in (tuple, list):
            self.emit(kind.__name__, len(obj))
            for item in obj:
                self.visit(item, depth + 1)
        elif kind in (set, frozenset):
            self.emit(kind.__name__, len(obj))
            for token in sorted(_token(item) for item in obj):
                self.emit(token)
        elif kind is dict:
            self.emit("dict", len(obj))
            for token, value in sorted(((_token(k), v) for k, v in obj.items()), key=_first):
                self.emit(token)
                self.visit(value, depth + 1)
        elif dataclasses.is_dataclass(obj):
            self.emit("dataclass", _by_name(kind))
            for field in dataclasses.fields(obj):
                self.emit(field.name)
                self.visit(getattr(obj, field.name), depth + 1)
        elif _root(kind.__module__) in _BY_NAME and callable(obj) and hasattr(obj, "__name__"):
            # a library's function object (jnp.ufunc, jax.jit's, custom_jvp's): by the name it
            # is importable under, so its options are those of that definition (the library's
            # version, or bnpjax's source, is in the key); one made at run time is refused
            self.emit("library", _by_name(kind), _importable(obj))
        elif _root(kind.__module__) in _BY_NAME and hasattr(obj, "dtype") and callable(obj):
            # jnp.float32 and friends: scalar types, identified by their dtype
            self.emit("scalar_type", _by_name(kind), np.dtype(obj.dtype).str)
        elif hasattr(obj, "fun") and type(obj).__name__ == "_HashableCallableShim":
            self.visit(obj.fun, depth + 1)  # the function of a jax.tree_util.Partial
        elif kind.__module__.split(".")[0] == "bnpjax":
            self._bnpjax_object(obj, depth)
        else:
            raise _Unstable(f"{kind.__module__}.{kind.__qualname__} object {obj!r:.80}")

    def _array(self, obj) -> None:
        try:
            value = np.asarray(obj)
        except Exception as err:  # a tracer: no value to fingerprint
            raise _Unstable(f"array without a value ({type(err).__name__})") from None
        weak = bool(getattr(obj, "weak_type", False))
        self.emit("array", str(value.dtype), value.dtype.str, value.shape, weak)
        self.digest.update(np.ascontiguousarray(value).tobytes())

    def _treedef(self, treedef, depth: int) -> None:
        data = treedef.node_data()
        if data is None:
            self.emit("leaf")
            return
        node_type, aux = data
        self.emit("node", _by_name(node_type), treedef.num_leaves)
        self.visit(aux, depth + 1)
        for child in treedef.children():
            self._treedef(child, depth + 1)

    def _bnpjax_object(self, obj, depth: int) -> None:
        """An instance of a bnpjax class: its type and its attributes (a cached hash, which
        Python salts per process, left out)."""
        if not self.once(obj):
            return
        self.emit("object", _by_name(type(obj)))
        names = set(getattr(obj, "__dict__", {}))
        for cls in type(obj).__mro__:
            names.update(getattr(cls, "__slots__", ()))
        for name in sorted(names - {"_hash", "__weakref__", "__dict__"}):
            if hasattr(obj, name):
                self.emit(name)
                self.visit(getattr(obj, name), depth + 1)

    def _function(self, fn, depth: int) -> None:
        if not self.once(fn):
            return
        module = fn.__module__ or ""
        self.emit("function", module, fn.__qualname__)
        if module.split(".")[0] != "bnpjax":
            # a library's: its definition is its name's (a closure made at run time, such as
            # jax.vmap's with its axes, is refused)
            self.emit(_importable(fn))
            return
        names = set()
        self._code(fn.__code__, names)
        self.visit(fn.__defaults__, depth + 1)
        self.visit(fn.__kwdefaults__, depth + 1)
        for cell in fn.__closure__ or ():
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                self.emit("empty cell")
                continue
            self.visit(contents, depth + 1)
        # what the code reads from its module, as it is now: a constant or a function replaced
        # at run time changes the key
        for name in sorted(names):
            if name in fn.__globals__:
                self.emit("global", name)
                self._global(fn.__globals__[name], names, depth + 1, 0)

    def _global(self, value, names, depth: int, level: int) -> None:
        if isinstance(value, types.ModuleType):
            self.emit("module", value.__name__)
            root = value.__name__.split(".")[0]
            if level >= 3 or (root != "bnpjax" and root not in _BY_NAME):
                return
            # the attributes the code may read from it (``module.name``, ``module.sub.name``)
            namespace = vars(value)
            for name in sorted(names):
                if name in namespace:
                    self.emit("attribute", name)
                    self._global(namespace[name], names, depth + 1, level + 1)
            return
        self.visit(value, depth)

    def _code(self, code, names: set) -> None:
        self.emit("code", code.co_qualname, code.co_code.hex(), code.co_argcount)
        # the names in order: the bytecode refers to them by position
        self.emit(code.co_kwonlyargcount, code.co_names, code.co_varnames, code.co_freevars)
        names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self._code(const, names)
            else:
                self.emit(type(const).__name__, repr(const))


def _first(pair):
    return pair[0]


def _token(obj) -> str:
    """A stable string for a (hashable) key of a dict or member of a set (numbers, strings,
    tuples of them: anything else is refused)."""
    if obj is None or type(obj) in (bool, int, float, complex, str, bytes):
        return f"{type(obj).__name__}:{obj!r}"
    if type(obj) is tuple:
        return "(" + ",".join(_token(item) for item in obj) + ")"
    raise _Unstable(f"a key or member {type(obj).__qualname__}")


def _root(module: str) -> str:
    return module.split(".")[0]


def _check_root(module: str, obj) -> None:
    if _root(module) not in _BY_NAME and _root(module) != "bnpjax":
        raise _Unstable(f"{module}.{getattr(obj, '__qualname__', obj)}")


def _by_name(cls) -> str:
    module = getattr(cls, "__module__", None) or "builtins"
    _check_root(module, cls)
    if "<locals>" in cls.__qualname__:
        raise _Unstable(f"a class made at run time, {cls.__qualname__}")
    return f"{module}.{cls.__qualname__}"


def _importable(obj) -> str:
    """``module.qualname`` of a library's object that is that module's attribute of that
    name, so that the name says what it is (else refused)."""
    module = getattr(obj, "__module__", None) or "builtins"
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "")
    _check_root(module, obj)
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not obj:
        raise _Unstable(f"{module}.{qualname} made at run time")
    return f"{module}.{qualname}"


def _installation() -> str | None:
    """Everything about the installation that a stored program depends on: the source of
    bnpjax's files (read when bnpjax is imported, as near as can be to the code that runs),
    Python's and the libraries' versions. None when bnpjax's source cannot be read (an
    installation of compiled files only): nothing is stored then."""
    from importlib.metadata import PackageNotFoundError, version

    digest = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    sources = sorted(package.rglob("*.py"))
    if not sources:
        return None
    for path in sources:
        digest.update(str(path.relative_to(package)).encode())
        digest.update(path.read_bytes())
    parts = [sys.version, digest.hexdigest()]
    for name in ("bnpjax", *_LIBRARIES):
        try:
            parts.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            parts.append(f"{name}=none")
    return "\n".join(parts)


_INSTALLATION = _installation()


def _environment() -> str:
    if _INSTALLATION is None:
        raise _Unstable("bnpjax's source cannot be read")
    devices = jax.devices()
    parts = [_INSTALLATION, jax.default_backend(), str(len(devices))]
    parts += sorted({f"{d.platform}:{d.device_kind}" for d in devices})
    for name in _CONFIG:
        parts.append(f"{name}={getattr(jax.config, name, None)}")
    return "\n".join(parts)


def program_key(name: str, static_key: Any, args: tuple, options: tuple = ()) -> str | None:
    """The key a program is stored under, or None when some part of it cannot be fingerprinted.

    Parameters
    ----------
    name : str
        The program's kind (``"chunk"``, ``"init"``).
    static_key : object
        Its static settings and kernel functions.
    args : tuple
        Its arguments (arrays; only their shapes, dtypes, weak types and shardings count).
    options : tuple
        Its XLA compile options.

    Returns
    -------
    str or None
        A hexadecimal SHA-256.
    """
    fp = _Fingerprint()
    try:
        fp.emit(_environment(), name)
        fp.visit(static_key)
        fp.visit(tuple(options))
        leaves, treedef = jax.tree_util.tree_flatten(args)
        fp.visit(treedef)
        for leaf in leaves:
            if isinstance(leaf, jax.Array | np.ndarray | np.generic):
                sharding = getattr(leaf, "sharding", None) if isinstance(leaf, jax.Array) else None
                fp.emit(
                    "argument", tuple(np.shape(leaf)), str(leaf.dtype),
                    bool(getattr(leaf, "weak_type", False)), repr(sharding),
                )  # fmt: skip
            else:
                fp.visit(leaf)
    except _Unstable as why:
        logger.debug("program %s traced without a stored copy: %s", name, why)
        return None
    except Exception as err:  # anything unforeseen (a cycle too deep): traced, never a failure
        logger.debug("program %s not fingerprinted (%r); traced", name, err)
        return None
    return fp.digest.hexdigest()


# --------------------------------------------------------------------------------------------
# storage


def _load(folder: Path, key: str):
    path = folder / f"{key}{_SUFFIX}"
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    if not blob.startswith(_FORMAT):
        return None
    try:
        stored = pickle.loads(blob[len(_FORMAT) :])
        exported = jax.export.deserialize(bytearray(stored["exported"]))
        out_tree = stored["out_tree"]
    except Exception as err:  # a file from another version, or damaged: traced again
        logger.debug("stored program %s unreadable (%s); tracing it", path.name, err)
        return None
    try:
        os.utime(path)  # least recently used goes first
    except OSError:
        pass
    return exported, out_tree


def _store(folder: Path, key: str, exported, out_tree) -> None:
    try:
        blob = _FORMAT + pickle.dumps(
            {"exported": bytes(exported.serialize()), "out_tree": out_tree}
        )
        folder.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=folder, prefix=f"{key}.", suffix=".partial")
        with os.fdopen(handle, "wb") as file:
            file.write(blob)
        os.replace(partial, folder / f"{key}{_SUFFIX}")  # readers never see half a file
        _STATS["stored"] += 1
        _evict(folder)
    except Exception as err:  # a read-only or full disk: the program is traced next time
        logger.debug("program %s not stored: %s", key, err)


def _evict(folder: Path) -> None:
    files = []
    for path in folder.iterdir():
        try:
            stat = path.stat()
        except OSError:
            continue
        if path.suffix == ".partial" and stat.st_mtime < time.time() - 3600:
            _remove(path)  # left by a process that stopped while writing
        elif path.suffix == _SUFFIX:
            files.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in files)
    for _, size, path in sorted(files, key=_first):
        if total <= MAX_BYTES:
            break
        try:
            path.unlink()
        except OSError:
            continue
        total -= size


def _export(fn: Callable, args: tuple):
    """``fn`` traced and lowered for ``args`` as an Exported of flat arguments and results,
    and the results' tree (bnpjax's NamedTuples need no registration with JAX this way)."""
    leaves, in_tree = jax.tree_util.tree_flatten(args)
    box = {}

    def flat(*flat_args):
        out = fn(*jax.tree_util.tree_unflatten(in_tree, flat_args))
        flat_out, box["out_tree"] = jax.tree_util.tree_flatten(out)
        return flat_out

    exported = jax.export.export(jax.jit(flat))(*leaves)
    return exported, box["out_tree"]


def _shapes(exported, out_tree):
    structs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in exported.out_avals]
    return jax.tree_util.tree_unflatten(out_tree, structs)


def lower(name: str, fn: Callable, static_key: Any, args: tuple, out_shardings=None,
          options: tuple = ()):  # fmt: skip
    """``jax.jit(fn, out_shardings=...).lower(*args)``, from the stored program when there is
    one for this key, else traced (and stored when it can be).

    Parameters
    ----------
    name, static_key, options
        As in :func:`program_key`.
    fn : callable
        The program.
    args : tuple
        Its arguments.
    out_shardings : pytree of shardings, callable or None
        Where the results live; a callable is given the results' shapes (a pytree of
        ``jax.ShapeDtypeStruct``) and returns them.

    Returns
    -------
    jax.stages.Lowered
        Taking ``args`` and returning what ``fn`` returns.
    """
    folder = _folder()
    key = program_key(name, static_key, args, options) if folder is not None else None
    if folder is not None and key is None:
        _STATS["unkeyed"] += 1
    stored = _load(folder, key) if key is not None else None
    if stored is not None:
        try:
            lowered = _lower_stored(*stored, args, out_shardings)
        except Exception as err:  # e.g. written by another jaxlib build: traced again
            logger.debug("stored program %s not usable (%r); traced", name, err)
            _remove(folder / f"{key}{_SUFFIX}")
        else:
            _STATS["loaded"] += 1
            return lowered
    if key is not None and key not in _NOT_EXPORTED and _can_serialize():
        try:
            exported, out_tree = _export(fn, args)
        except Exception as err:  # e.g. a host callback: JAX cannot export it
            _NOT_EXPORTED.add(key)
            _STATS["not_exported"] += 1
            logger.debug("program %s not exported (%s); traced as usual", name, err)
        else:
            avals = (*exported.in_avals, *exported.out_avals)
            if any(getattr(aval, "weak_type", False) for aval in avals):
                # a deserialized program's values are never weakly typed: loaded, it would
                # promote unlike the traced one (a weak float64 scalar with float32 arrays)
                _NOT_EXPORTED.add(key)
                _STATS["not_exported"] += 1
            else:
                _store(folder, key, exported, out_tree)
                try:
                    return _lower_stored(exported, out_tree, args, out_shardings)
                except Exception as err:
                    logger.debug("exported program %s not usable (%r); traced", name, err)
    if callable(out_shardings):
        out_shardings = out_shardings(jax.eval_shape(fn, *args))
    return _jit(fn, out_shardings).lower(*args)


def _lower_stored(exported, out_tree, args, out_shardings):
    if callable(out_shardings):
        out_shardings = out_shardings(_shapes(exported, out_tree))

    def call(*call_args):
        results = exported.call(*jax.tree_util.tree_leaves(call_args))
        return jax.tree_util.tree_unflatten(out_tree, results)

    return _jit(call, out_shardings).lower(*args)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _jit(fn, out_shardings):
    return jax.jit(fn) if out_shardings is None else jax.jit(fn, out_shardings=out_shardings)


@functools.cache
def _can_serialize() -> bool:
    try:
        import flatbuffers  # noqa: F401
    except ImportError:
        logger.debug("flatbuffers is not installed: programs are traced in every process")
        return False
    return True
