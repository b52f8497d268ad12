"""Glue shared by the Geweke tests of Gibbs compositions (a bnpjax block, then HMC/NUTS on the
other sites): the harness's refresh and kernel, written once."""

from collections import namedtuple

import jax
from numpyro.infer.gibbs import with_conditioning

from bnpjax.infer import SamplingAlgorithm

Info = namedtuple("Info", ["capacity_exceeded"])


def refresh_blocks(gibbs, values, state, X):
    """Every block's ``refresh`` given the other blocks' current ``values`` (what
    ``numpyro.infer.Gibbs`` does between blocks), after the data changed to ``X``."""
    blocks = []
    for kernel, sites, block_state in zip(
        gibbs._kernels, gibbs._sites, state.block_states, strict=True
    ):
        siblings = {k: v for k, v in values.items() if k not in sites}
        blocks.append(kernel.refresh(block_state, (X,), with_conditioning({}, siblings)))
    return state._replace(block_states=tuple(blocks))


def two_block_kernel(gibbs, needed_more_room):
    """The composition as a harness kernel of ``X``: one ``gibbs.sample`` per step with
    per-block keys from the step's key; ``needed_more_room(block_state)`` is the first
    block's capacity flag."""

    def kernel(X):
        def step(key, state):
            k_own, k_other = jax.random.split(key)
            blocks = (
                state.block_states[0]._replace(rng_key=k_own),
                state.block_states[1]._replace(rng_key=k_other),
            )
            state = gibbs.sample(state._replace(block_states=blocks), (X,), {})
            return state, Info(needed_more_room(state.block_states[0]))

        return SamplingAlgorithm(init=None, step=step)

    return kernel
