"""Checkpoints: save a run's sampler state and its draws, and continue the same chains later.

A step's key is ``fold_in(run_key, t)`` with ``t`` counted from the first step of the run
(:mod:`bnpjax.infer.driver`), so a chain is a function of its key and step index alone. A
checkpoint therefore needs the sampler state (every chain), the number of steps taken, the
run's key and the feature capacity the buffer had grown to; a run resumed from it draws exactly
what the uninterrupted run would have drawn (tested). It also keeps the draws made so far, so
that the resumed run returns the whole chain::

    result = bnpjax.infer.run(kernel, key, 1500, num_chains=4, checkpoint_path="fit.npz")
    # ... killed at draw 800; later, in a new process:
    ckpt = bnpjax.infer.load_checkpoint("fit.npz", kernel)
    idata = bnpjax.infer.resume(ckpt)  # the 1500 draws of the uninterrupted run

Layout. ``fit.npz`` holds the state's array leaves, the run's key and a JSON record of the
settings; the draws go to the folder ``fit.draws/``, one ``.npz`` file per compiled chunk,
written once and never rewritten (appended). The state file is rewritten after every chunk,
atomically (written beside it, flushed to disk with ``fsync``, then renamed), and lists the
chunk files it covers with a digest of each: a crash at any moment leaves the previous
checkpoint whole, at most one chunk of work is lost, and a chunk file that does not match its
digest is refused. No pickle anywhere.

What a load checks, each failure a ``ValueError`` saying what is wrong: that the file is a
readable, uncorrupted archive (truncated and bit-flipped files included); the record's values
(step counts, chains, warmup); that the state is finite and fits the kernel; and that the
kernel was built on the same data and settings (a fingerprint of its arrays and static
settings; ``allow_other_data=True`` continues the chains on other data of the same shapes).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import zipfile
import zlib
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.infer.checks import nonfinite_leaves

__all__ = [
    "Checkpoint",
    "CheckpointWriter",
    "check_checkpoint_path",
    "check_state",
    "fingerprint",
    "load_checkpoint",
    "save_checkpoint",
]

_FORMAT = "bnpjax-checkpoint-2"
_READABLE = ("bnpjax-checkpoint-1", _FORMAT)
#: what reading a damaged archive raises, turned into one clear ValueError
_READ_ERRORS = (
    OSError,
    EOFError,
    KeyError,
    ValueError,
    TypeError,
    IndexError,
    zipfile.BadZipFile,
    zlib.error,
    UnicodeDecodeError,
    json.JSONDecodeError,
)


class Checkpoint(NamedTuple):
    """What :func:`load_checkpoint` returns: the algorithm (resized to the saved capacity),
    the state of every chain (leading chain axis), the number of steps taken, the run's key,
    the number of chains, the warmup steps the run still had to take, the draws kept so far
    (``draws``: a trace with leading ``(chain, draw)`` axes, None when there are none), the
    steps between kept draws, the kept draws the run still had to make, the file and the
    draw files it lists.

    Continue with :func:`bnpjax.infer.resume` (the whole chain, saved draws first)."""

    algorithm: SamplingAlgorithm
    state: Any
    start_step: int
    key: jax.Array
    num_chains: int
    num_warmup_left: int = 0
    draws: Any = None
    thin: int = 1
    num_samples_left: int = 0
    path: Path | None = None
    chunk_records: list | None = None

    @property
    def num_draws(self) -> int:
        """Kept draws saved with the checkpoint."""
        if self.draws is None:
            return 0
        leaves = jax.tree_util.tree_leaves(self.draws)
        return int(leaves[0].shape[1]) if leaves else 0


# --------------------------------------------------------------------------------------------
# paths, fingerprints, states


def check_checkpoint_path(path) -> Path:
    """``path`` as a :class:`~pathlib.Path` a checkpoint can be written to: it must end in
    ``.npz``; a missing folder is created. Called before anything compiles, so that a bad path
    does not cost a run.

    Raises
    ------
    ValueError
        naming ``checkpoint_path`` and what is wrong.
    """
    try:
        path = Path(path)
    except TypeError:
        raise ValueError(
            f"checkpoint_path must be a file path ending in .npz, got {path!r}"
        ) from None
    if path.suffix != ".npz":
        raise ValueError(f"checkpoint_path must end in .npz, got {str(path)!r}")
    folder = path.parent
    if not folder.exists():
        try:
            folder.mkdir(parents=True)
        except OSError as err:
            raise ValueError(
                f"checkpoint_path: cannot create the folder {str(folder)!r} ({err.strerror})"
            ) from None
    if not folder.is_dir():
        raise ValueError(f"checkpoint_path: {str(folder)!r} is not a folder")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"checkpoint_path: the folder {str(folder)!r} is not writable")
    if path.is_dir():
        raise ValueError(f"checkpoint_path: {str(path)!r} is a folder, not a file")
    return path


def _draws_folder(path: Path) -> Path:
    return path.with_suffix(".draws")


def fingerprint(algorithm: SamplingAlgorithm) -> str:
    """A digest of what ``algorithm`` was built from: its data arrays (shape, dtype, bytes),
    its functions and their static settings, and the kernel's name. Two kernels built the same
    way on the same data have the same fingerprint, in any process."""
    fns = (algorithm.init, algorithm.step, algorithm.warmup_step, algorithm.trace)
    if algorithm.set_adaptation is not None:  # absent: the fingerprints of before it existed
        fns = (*fns, algorithm.set_adaptation)
    leaves, treedef = jax.tree_util.tree_flatten(fns, is_leaf=lambda x: x is None)
    digest = hashlib.blake2b(digest_size=16)
    digest.update(algorithm.spec.name.encode())
    digest.update(re.sub(r" at 0x[0-9a-fA-F]+", "", str(treedef)).encode())
    for leaf in leaves:
        if isinstance(leaf, jax.Array | np.ndarray | np.generic):
            host = np.ascontiguousarray(jax.device_get(leaf))
            digest.update(f"{host.dtype}{host.shape}".encode())
            digest.update(host.tobytes())
        else:
            text = getattr(leaf, "__qualname__", None) or repr(leaf)
            digest.update(re.sub(r" at 0x[0-9a-fA-F]+", "", str(text)).encode())
    return digest.hexdigest()


def check_state(algorithm: SamplingAlgorithm, state, num_chains: int, name: str) -> None:
    """Refuse a state of every chain (``state``, leading chain axis) that is not one of
    ``algorithm``'s: other fields, shapes or dtypes (a state of another kernel, capacity or
    x64 mode), or NaN / infinite values.

    Raises
    ------
    ValueError
        naming ``name`` and the first field that does not fit.
    """
    keys = jax.random.split(jax.random.key(0), num_chains)
    template = jax.eval_shape(jax.vmap(algorithm.init), keys)
    want, want_tree = jax.tree_util.tree_flatten_with_path(template)
    try:
        got, got_tree = jax.tree_util.tree_flatten_with_path(state)
    except Exception:
        raise ValueError(f"{name} is not a state of {algorithm.spec.name!r}") from None
    if got_tree != want_tree:
        raise ValueError(
            f"{name} is not a state of kernel {algorithm.spec.name!r}: it has fields "
            f"{[jax.tree_util.keystr(p) for p, _ in got][:8]}, the kernel's state "
            f"{[jax.tree_util.keystr(p) for p, _ in want][:8]} (a state of another kernel?)"
        )
    for (path, leaf), (_, spec) in zip(got, want, strict=True):
        shape = np.shape(leaf)
        dtype = jax.dtypes.canonicalize_dtype(getattr(leaf, "dtype", None) or np.result_type(leaf))
        if tuple(shape) != tuple(spec.shape) or dtype != spec.dtype:
            raise ValueError(
                f"{name}{jax.tree_util.keystr(path)} is {dtype}{list(shape)}, the kernel's is "
                f"{spec.dtype}{list(spec.shape)} (a state of other data, another capacity or "
                "another x64 mode?)"
            )
    bad = nonfinite_leaves(state)
    if bad:
        raise ValueError(f"{name} has NaN or infinite values in {', '.join(bad)}")


def _key_words(key) -> tuple[np.ndarray, str | None]:
    key = jnp.asarray(key)
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(key), np.uint32), str(jax.random.key_impl(key))
    return np.asarray(key, np.uint32), None


# --------------------------------------------------------------------------------------------
# writing


def _write_atomically(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """``np.savez`` to a temporary file beside ``path``, ``fsync``, rename, ``fsync`` the
    folder: after a crash ``path`` is the old file or the new one, never a part."""
    tmp = path.with_name(path.name + ".tmp.npz")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _flatten_draws(draws) -> tuple[list[list[str]], dict[str, np.ndarray]]:
    names, arrays = [], {}
    for group, variables in draws.items():
        for var, values in variables.items():
            arrays[f"draw_{len(names)}"] = np.asarray(values)
            names.append([group, var])
    return names, arrays


def _state_arrays(state) -> list[np.ndarray]:
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.device_get(state))]
    if not leaves or any(leaf.ndim == 0 for leaf in leaves):
        raise ValueError("state must be the state of every chain, with a leading chain axis")
    return leaves


def save_checkpoint(
    path,
    algorithm: SamplingAlgorithm,
    state,
    num_steps: int,
    key,
    *,
    warmup_end: int = 0,
    draws=None,
    thin: int = 1,
    num_samples_left: int = 0,
) -> Path:
    """Write the state of every chain (``state``, leading chain axis), the number of steps
    taken, the run's ``key`` and (optionally) the kept ``draws`` (a trace with leading
    ``(chain, draw)`` axes, ``thin`` steps apart) to ``path`` (an ``.npz`` file; the draws to
    the folder beside it), atomically. ``warmup_end``: the step at which the run's warmup ends
    (a checkpoint taken before it resumes warmup); ``num_samples_left``: the kept draws the run
    still had to make.

    For a finished run: ``save_checkpoint(path, result.algorithm, result.final_state,
    result.num_steps, key, draws=result.trace)``.
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise ValueError("algorithm must be a bnpjax.infer.SamplingAlgorithm")
    path = check_checkpoint_path(path)
    writer = CheckpointWriter(
        path,
        key,
        warmup_end=warmup_end,
        thin=thin,
        num_samples=num_samples_left + _num_draws(draws),
    )
    writer.save(algorithm, state, num_steps, draws)
    return path


def _num_draws(draws) -> int:
    leaves = jax.tree_util.tree_leaves(draws) if draws else []
    return int(np.shape(leaves[0])[1]) if leaves else 0


class CheckpointWriter:
    """Writes the checkpoints of one run (:func:`bnpjax.infer.run`'s ``checkpoint_path``):
    each call of :meth:`save` appends the chunk of draws it is given as a new file and
    rewrites the state file, which lists every chunk file of the run.

    ``previous``: a :class:`Checkpoint` the run continues; its saved draws start this run's
    list (reused when they lie in the same folder, else copied once)."""

    def __init__(
        self,
        path,
        key,
        *,
        warmup_end: int,
        thin: int,
        num_samples: int,
        previous: Checkpoint | None = None,
    ):
        self.path = check_checkpoint_path(path)
        self.key = key
        self.warmup_end = int(warmup_end)
        self.thin = int(thin)
        self.num_samples = int(num_samples)
        self.run_id = secrets.token_hex(4)
        self.chunks: list[dict] = []
        self.num_draws = 0
        self._fingerprints: dict[int, tuple[SamplingAlgorithm, str]] = {}
        self._pending = None
        if previous is not None and previous.num_draws:
            same = (
                previous.path is not None and Path(previous.path).resolve() == self.path.resolve()
            )
            if same and previous.chunk_records is not None:
                self.chunks = list(previous.chunk_records)
                self.num_draws = previous.num_draws
            else:
                self._pending = previous.draws

    def _fingerprint(self, algorithm) -> str:
        cached = self._fingerprints.get(id(algorithm))
        if cached is None or cached[0] is not algorithm:
            cached = (algorithm, fingerprint(algorithm))
            self._fingerprints = {id(algorithm): cached}
        return cached[1]

    def _append(self, draws) -> None:
        names, arrays = _flatten_draws(draws)
        n = _num_draws(draws)
        if not n:
            return
        folder = _draws_folder(self.path)
        folder.mkdir(exist_ok=True)
        name = f"chunk-{self.run_id}-{len(self.chunks):05d}.npz"
        meta = {"names": names, "num_draws": n}
        _write_atomically(folder / name, {"meta": np.asarray(json.dumps(meta)), **arrays})
        self.chunks.append({"file": name, "num_draws": n, "digest": _file_digest(folder / name)})
        self.num_draws += n

    def save(self, algorithm: SamplingAlgorithm, state, num_steps: int, draws=None) -> None:
        """Append ``draws`` (the chunk just kept, or None) and write the state after
        ``num_steps`` steps."""
        leaves = _state_arrays(state)
        if self._pending is not None:
            self._append(self._pending)
            self._pending = None
        if draws:
            self._append(draws)
        meta = {
            "format": _FORMAT,
            "kernel": algorithm.spec.name,
            "capacity": algorithm.capacity,
            "num_steps": int(num_steps),
            "num_chains": int(leaves[0].shape[0]),
            "num_leaves": len(leaves),
            "warmup_end": self.warmup_end,
            "thin": self.thin,
            "num_samples": self.num_samples,
            "chunks": self.chunks,
            "fingerprint": self._fingerprint(algorithm),
            "key_impl": None,
        }
        key_words, meta["key_impl"] = _key_words(self.key)
        arrays = {f"leaf_{i}": leaf for i, leaf in enumerate(leaves)}
        _write_atomically(
            self.path, {"meta": np.asarray(json.dumps(meta)), "key": key_words, **arrays}
        )
        self._collect_garbage()

    def _collect_garbage(self) -> None:
        """Remove chunk files of the folder that the state file no longer lists (an earlier
        run's), now that the new state file is on disk."""
        folder = _draws_folder(self.path)
        if not folder.is_dir():
            return
        listed = {chunk["file"] for chunk in self.chunks}
        for stale in folder.glob("chunk-*.npz"):
            if stale.name not in listed:
                stale.unlink(missing_ok=True)


# --------------------------------------------------------------------------------------------
# reading


def _refuse(path, what: str):
    return ValueError(f"{path} is not a usable bnpjax checkpoint: {what}")


def _read_archive(path, what: str) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` archive, read whole (so that zip CRCs are checked);
    ``ValueError`` saying what is wrong for a file that cannot be read."""
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except FileNotFoundError:
        raise
    except _READ_ERRORS as err:
        raise _refuse(path, f"{what} cannot be read ({type(err).__name__}: {err})") from None


def _meta_int(meta, name, path, minimum=0, maximum=2**31 - 1, optional=False) -> int | None:
    value = meta.get(name)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise _refuse(path, f"its {name} is {value!r}, not an integer in [{minimum}, {maximum}]")
    return value


def _read_meta(path, archive) -> dict:
    if "meta" not in archive:
        raise _refuse(path, "it has no bnpjax record (not a bnpjax checkpoint)")
    try:
        meta = json.loads(str(archive["meta"]))
    except (json.JSONDecodeError, ValueError) as err:
        raise _refuse(path, f"its record is damaged ({err})") from None
    if not isinstance(meta, dict) or meta.get("format") not in _READABLE:
        found = meta.get("format") if isinstance(meta, dict) else meta
        raise _refuse(path, f"not a bnpjax checkpoint (format {found!r})")
    if not isinstance(meta.get("kernel"), str):
        raise _refuse(path, f"its kernel name is {meta.get('kernel')!r}")
    meta["num_steps"] = _meta_int(meta, "num_steps", path)
    meta["num_chains"] = _meta_int(meta, "num_chains", path, 1, 2**20)
    meta["num_leaves"] = _meta_int(meta, "num_leaves", path, 1, 10**6)
    meta["warmup_end"] = _meta_int(meta, "warmup_end", path, optional=True) or 0
    meta["thin"] = _meta_int(meta, "thin", path, 1, optional=True) or 1
    meta["num_samples"] = _meta_int(meta, "num_samples", path, optional=True) or 0
    meta["capacity"] = _meta_int(meta, "capacity", path, 1, optional=True)
    chunks = meta.get("chunks", [])
    if not isinstance(chunks, list) or not all(
        isinstance(c, dict)
        and isinstance(c.get("file"), str)
        and re.fullmatch(r"chunk-[0-9a-f]+-[0-9]{5}\.npz", c["file"])
        and isinstance(c.get("digest"), str)
        and isinstance(c.get("num_draws"), int)
        and c["num_draws"] > 0
        for c in chunks
    ):
        raise _refuse(path, "its list of draw files is damaged")
    meta["chunks"] = chunks
    return meta


def _read_draws(path: Path, chunks: list[dict], num_chains: int):
    """The saved draws (chain, draw, ...) of every chunk file, checked against the digests
    the state file recorded, concatenated (feature axes zero-padded to the widest)."""
    if not chunks:
        return None
    folder = _draws_folder(path)
    parts = []
    for chunk in chunks:
        file = folder / chunk["file"]
        if not file.is_file():
            raise _refuse(path, f"its draw file {str(file)!r} is missing")
        if _file_digest(file) != chunk["digest"]:
            raise _refuse(path, f"its draw file {str(file)!r} is damaged (digest mismatch)")
        arrays = _read_archive(file, f"the draw file {str(file)!r}")
        meta = json.loads(str(arrays["meta"]))
        draws: dict[str, dict[str, np.ndarray]] = {}
        for i, (group, var) in enumerate(meta["names"]):
            values = arrays[f"draw_{i}"]
            if values.ndim < 2 or values.shape[:2] != (num_chains, chunk["num_draws"]):
                raise _refuse(
                    path,
                    f"its draw file {str(file)!r} holds {var} of shape "
                    f"{values.shape}, not ({num_chains}, {chunk['num_draws']}, ...)",
                )
            draws.setdefault(group, {})[var] = values
        parts.append(draws)
    return concat_draws(parts)


def concat_draws(chunks: list) -> Any:
    """Concatenate per-chunk draws along the draw axis, zero-padding feature axes that grew
    (padding is inactive by the kernel's own mask)."""
    if not chunks:
        return {}

    def concat(*arrays):
        shape = np.max([a.shape for a in arrays], axis=0)
        padded = []
        for a in arrays:
            grow = [int(m - s) for s, m in zip(a.shape[2:], shape[2:], strict=True)]
            widths = [(0, 0), (0, 0)] + [(0, g) for g in grow]
            padded.append(np.pad(a, widths) if any(w[1] for w in widths) else a)
        return np.concatenate(padded, axis=1)

    return jax.tree_util.tree_map(concat, *chunks)


def load_checkpoint(
    path, algorithm: SamplingAlgorithm, *, allow_other_data: bool = False
) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (or by ``run(...,
    checkpoint_path=...)``) for ``algorithm``: the same kernel built on the same data, at any
    capacity (it is resized to the saved one).

    Parameters
    ----------
    path
        the ``.npz`` file.
    algorithm
        the kernel to continue, built as for the run that wrote the checkpoint.
    allow_other_data
        continue the chains although ``algorithm`` was built on other data or settings (of
        the same shapes) than the run that wrote the checkpoint; refused by default.

    Returns
    -------
    Checkpoint

    Raises
    ------
    ValueError
        saying what is wrong: a file that cannot be read (truncated, corrupted, not a bnpjax
        checkpoint), a damaged record, a state of another kernel or with NaN, a kernel built on
        other data or settings, a missing or damaged draw file.
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise ValueError("algorithm must be a bnpjax.infer.SamplingAlgorithm")
    path = Path(path)
    archive = _read_archive(path, "the file")
    meta = _read_meta(path, archive)
    try:
        leaves = [archive[f"leaf_{i}"] for i in range(meta["num_leaves"])]
        key_words = archive["key"]
    except KeyError as err:
        raise _refuse(path, f"the array {err} is missing") from None
    if meta["kernel"] != algorithm.spec.name:
        raise ValueError(
            f"the checkpoint is of kernel {meta['kernel']!r}, not {algorithm.spec.name!r}"
        )
    capacity = meta["capacity"]
    if capacity is not None and algorithm.capacity != capacity:
        if algorithm.growth is None:
            raise ValueError(
                f"the checkpoint has capacity {capacity}, the kernel {algorithm.capacity}, "
                "and the kernel cannot be resized"
            )
        algorithm = algorithm.growth.resize(capacity)
    num_chains = meta["num_chains"]
    keys = jax.random.split(jax.random.key(0), num_chains)
    template = jax.eval_shape(jax.vmap(algorithm.init), keys)
    expected, treedef = jax.tree_util.tree_flatten(template)
    if len(expected) != len(leaves):
        raise ValueError(
            f"the checkpoint holds {len(leaves)} arrays, the kernel's state has {len(expected)}"
        )
    state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(leaf) for leaf in leaves])
    check_state(algorithm, state, num_chains, "the checkpoint's state")
    saved = meta.get("fingerprint")
    if saved is not None and not allow_other_data and saved != fingerprint(algorithm):
        raise ValueError(
            f"the checkpoint {path} was made by a {meta['kernel']!r} kernel built on other data "
            "or settings than this one (their fingerprints differ); build the kernel as for "
            "the run that wrote it, or pass allow_other_data=True to continue its chains on "
            "this data"
        )
    if key_words.dtype.kind not in "iu" or key_words.ndim != 1 or not key_words.size:
        raise _refuse(path, f"its key is {key_words.dtype}{list(key_words.shape)}")
    key_words = jnp.asarray(key_words, jnp.uint32)
    impl = meta.get("key_impl")
    key = jax.random.wrap_key_data(key_words, impl=impl) if impl else key_words
    draws = _read_draws(path, meta["chunks"], num_chains)
    num_draws = sum(c["num_draws"] for c in meta["chunks"])
    return Checkpoint(
        algorithm,
        state,
        meta["num_steps"],
        key,
        num_chains,
        max(meta["warmup_end"] - meta["num_steps"], 0),
        draws,
        meta["thin"],
        max(meta["num_samples"] - num_draws, 0),
        path,
        meta["chunks"],
    )
