"""Checkpoints: save a run's sampler state to disk and continue the same chains later.

A step's key is ``fold_in(run_key, t)`` with ``t`` counted from the first step of the run
(:mod:`bnpjax.infer.driver`), so a chain is a function of its key and step index alone. A
checkpoint therefore needs only the sampler state (every chain), the number of steps taken,
the run's key and the feature capacity the buffer had grown to; a run resumed from it draws
exactly what the uninterrupted run would have drawn (tested)::

    result = bnpjax.infer.run(kernel, key, 500, num_chains=4, checkpoint_path="fit.npz")
    # ... later, or after a crash (the file holds the state after the last finished chunk):
    ckpt = bnpjax.infer.load_checkpoint("fit.npz", kernel)
    idata = bnpjax.infer.resume(ckpt, 1000)  # 1000 more draws (bnpjax.infer.driver.resume)

``run(..., checkpoint_path=...)`` rewrites the file after every compiled chunk (atomically:
written beside it, then renamed), so at most one chunk of work is lost. The file is a NumPy
``.npz`` archive of the state's array leaves plus a few settings; no pickle.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import SamplingAlgorithm

__all__ = ["Checkpoint", "load_checkpoint", "save_checkpoint"]

_FORMAT = "bnpjax-checkpoint-1"


class Checkpoint(NamedTuple):
    """What :func:`load_checkpoint` returns: the algorithm (resized to the saved capacity),
    the state of every chain (leading chain axis), the number of steps taken, the run's key
    the number of chains, and the warmup steps the run still had to take. Pass them to
    :func:`bnpjax.infer.run` as ``initial_state``, ``start_step``, ``key``, ``num_chains`` and
    ``num_warmup``, or use :func:`resume`."""

    algorithm: SamplingAlgorithm
    state: Any
    start_step: int
    key: jax.Array
    num_chains: int
    num_warmup_left: int = 0


def _key_words(key) -> tuple[np.ndarray, str | None]:
    key = jnp.asarray(key)
    if jnp.issubdtype(key.dtype, jax.dtypes.prng_key):
        return np.asarray(jax.random.key_data(key), np.uint32), str(jax.random.key_impl(key))
    return np.asarray(key, np.uint32), None


def save_checkpoint(
    path, algorithm: SamplingAlgorithm, state, num_steps: int, key, *, warmup_end: int = 0
) -> Path:
    """Write the state of every chain (``state``, leading chain axis), the number of steps
    taken and the run's ``key`` to ``path`` (an ``.npz`` file), atomically. ``warmup_end``:
    the step at which the run's warmup ends (a checkpoint taken before it resumes warmup).

    For a finished run: ``save_checkpoint(path, result.algorithm, result.final_state,
    result.num_steps, key)``.
    """
    if not isinstance(algorithm, SamplingAlgorithm):
        raise ValueError("algorithm must be a bnpjax.infer.SamplingAlgorithm")
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(jax.device_get(state))]
    if not leaves or any(leaf.ndim == 0 for leaf in leaves):
        raise ValueError("state must be the state of every chain, with a leading chain axis")
    num_chains = leaves[0].shape[0]
    meta = {
        "format": _FORMAT,
        "kernel": algorithm.spec.name,
        "capacity": algorithm.capacity,
        "num_steps": int(num_steps),
        "num_chains": int(num_chains),
        "num_leaves": len(leaves),
        "warmup_end": int(warmup_end),
        "key_impl": None,
    }
    path = Path(path)
    if path.suffix != ".npz":
        raise ValueError(f"path must end in .npz, got {str(path)!r}")
    arrays = {f"leaf_{i}": leaf for i, leaf in enumerate(leaves)}
    key_words, meta["key_impl"] = _key_words(key)
    tmp = path.with_name(path.name + ".tmp.npz")
    with open(tmp, "wb") as f:
        np.savez(f, meta=np.asarray(json.dumps(meta)), key=key_words, **arrays)
    os.replace(tmp, path)
    return path


def load_checkpoint(path, algorithm: SamplingAlgorithm) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint` (or by ``run(...,
    checkpoint_path=...)``) for ``algorithm``: the same kernel built on the same data, at any
    capacity (it is resized to the saved one). Raises ``ValueError`` when the file belongs to
    another kernel or its arrays do not fit the kernel's state."""
    if not isinstance(algorithm, SamplingAlgorithm):
        raise ValueError("algorithm must be a bnpjax.infer.SamplingAlgorithm")
    with np.load(path, allow_pickle=False) as archive:
        if "meta" not in archive:
            raise ValueError(f"{path} is not a bnpjax checkpoint")
        meta = json.loads(str(archive["meta"]))
        if meta.get("format") != _FORMAT:
            raise ValueError(f"{path} is not a bnpjax checkpoint ({meta.get('format')!r})")
        leaves = [archive[f"leaf_{i}"] for i in range(meta["num_leaves"])]
        key_words = archive["key"]
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
    for i, (leaf, want) in enumerate(zip(leaves, expected, strict=True)):
        if leaf.shape != want.shape or leaf.dtype != want.dtype:
            raise ValueError(
                f"state array {i} of the checkpoint is {leaf.dtype}{list(leaf.shape)}, the "
                f"kernel's is {want.dtype}{list(want.shape)} (other data, or another x64 mode?)"
            )
    state = jax.tree_util.tree_unflatten(treedef, [jnp.asarray(leaf) for leaf in leaves])
    key_words = jnp.asarray(key_words, jnp.uint32)
    impl = meta.get("key_impl")
    key = jax.random.wrap_key_data(key_words, impl=impl) if impl else key_words
    return Checkpoint(
        algorithm,
        state,
        int(meta["num_steps"]),
        key,
        int(num_chains),
        max(int(meta.get("warmup_end", 0)) - int(meta["num_steps"]), 0),
    )
