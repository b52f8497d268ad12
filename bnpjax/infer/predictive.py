"""Functions of posterior draws: the model-agnostic part of every ``predict.py``.

As NumPyro's ``Predictive`` maps a model over posterior samples, :func:`map_draws` maps a
per-draw function over the ``(chain, draw)`` axes of a run's draws, in compiled batches so
that memory stays bounded and a second call on draws of the same shapes compiles nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import check_integer
from bnpjax.infer.programs import jit

__all__ = ["map_draws", "posterior_draws"]


def _tables(draws, group: str) -> list:
    runs = list(draws) if isinstance(draws, list | tuple) else [draws]
    if not runs:
        raise ValueError("draws is empty")
    tables = []
    for run in runs:
        if hasattr(run, "posterior"):
            table = getattr(run, group, None)
        elif isinstance(run, dict) and "posterior" in run:
            table = run.get(group)
        else:
            raise ValueError(
                "draws must be the InferenceData of bnpjax.sample or bnpjax.fit, a run's "
                "trace, or a list of them"
            )
        tables.append({} if table is None else table)
    return tables


def posterior_draws(
    draws, names, *, group: str = "posterior", optional=()
) -> dict[str, np.ndarray]:
    """Variables of a fit with their ``(chain, draw)`` axes, ready for :func:`map_draws`.

    Parameters
    ----------
    draws
        the InferenceData of :func:`bnpjax.sample` or :func:`bnpjax.fit`, the ``trace`` of
        :func:`bnpjax.infer.run`, or a list of them, pooled along the chain axis (runs whose
        feature buffers grew to different capacities are zero-padded to the largest, as the
        driver pads a grown buffer within a run: padded slots are inactive).
    names
        the variables every run must hold.
    group
        the group to read (``"posterior"`` or ``"sample_stats"``).
    optional
        variables read where present and left out where absent.

    Returns
    -------
    dict
        ``{name: numpy array (chain, draw, ...)}``.

    Raises
    ------
    ValueError
        naming a missing variable, or when ``draws`` is none of the above.
    """
    tables = _tables(draws, group)
    out = {}
    for name in (*names, *optional):
        present = [name in t for t in tables]
        if not all(present):
            if name in optional and not any(present):
                continue
            raise ValueError(f"draws: {group} lacks {name!r}")
        values = [np.asarray(t[name]) for t in tables]
        if len({v.ndim for v in values}) != 1:
            raise ValueError(f"draws: {name!r} has different ranks across runs")
        widest = np.max([v.shape for v in values], axis=0)
        if any(v.shape[1] != widest[1] for v in values):
            # runs of different lengths pool into one chain
            values = [v.reshape(1, -1, *v.shape[2:]) for v in values]
            widest = np.max([v.shape for v in values], axis=0)
        values = [
            np.pad(
                v,
                [(0, 0), (0, 0)]
                + [(0, w - s) for w, s in zip(widest[2:], v.shape[2:], strict=True)],
            )
            for v in values
        ]
        out[name] = np.concatenate(values, axis=0 if values[0].shape[1] == widest[1] else 1)
    return out


@jit
def _apply(fn, batch):
    return jax.vmap(fn)(batch)


def map_draws(
    fn: Callable[[dict], object], draws: Mapping[str, np.ndarray], *, batch_size: int = 64
):
    """Apply ``fn`` to every draw of ``draws``.

    Parameters
    ----------
    fn
        ``fn({name: array of one draw}) -> pytree of arrays``; a pure JAX function (a
        ``jax.tree_util.Partial`` binding data keeps it one compiled program across calls).
    draws
        ``{name: array (chain, draw, ...)}``, e.g. a posterior group as NumPy arrays.
    batch_size
        draws per compiled batch; the last batch is padded by repeating a draw (its results
        are dropped), so every batch has the same shape.

    Returns
    -------
    pytree of numpy.ndarray
        ``fn``'s outputs with leading ``(chain, draw)`` axes.
    """
    batch_size = check_integer(batch_size, "batch_size")
    arrays = {k: np.asarray(v) for k, v in draws.items()}
    if not arrays:
        raise ValueError("draws is empty")
    shapes = {v.shape[:2] for v in arrays.values()}
    if len(shapes) != 1 or any(v.ndim < 2 for v in arrays.values()):
        raise ValueError("every array of draws must lead with the same (chain, draw) axes")
    ((num_chains, num_draws),) = shapes
    total = num_chains * num_draws
    flat = {k: v.reshape(total, *v.shape[2:]) for k, v in arrays.items()}
    batch_size = min(batch_size, total)
    fn = fn if isinstance(fn, jax.tree_util.Partial) else jax.tree_util.Partial(fn)
    outputs = []
    for start in range(0, total, batch_size):
        index = np.minimum(np.arange(start, start + batch_size), total - 1)
        batch = {k: jnp.asarray(v[index]) for k, v in flat.items()}
        result = jax.device_get(_apply(fn, batch))
        keep = min(batch_size, total - start)
        outputs.append(jax.tree_util.tree_map(lambda x: np.asarray(x)[:keep], result))
    joined = jax.tree_util.tree_map(lambda *xs: np.concatenate(xs), *outputs)
    return jax.tree_util.tree_map(lambda x: x.reshape(num_chains, num_draws, *x.shape[1:]), joined)
