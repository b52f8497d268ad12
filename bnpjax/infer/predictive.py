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

__all__ = ["map_draws"]


@jax.jit
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
