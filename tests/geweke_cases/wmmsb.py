"""Geweke cases of the WMMSB / MMSB collapsed Gibbs sampler (each likelihood) on a 4-node
directed network with every ordered pair explicit (12 pairs whose counts the harness
redraws), and their broken twins: the classic collapsed-Gibbs slip of computing a pair's
conditional without first removing the pair from its own block counts ``n^Y``, ``n^Phi``."""

import importlib

import jax.numpy as jnp
import numpy as np

from bnpjax.infer import bind
from bnpjax.models import wmmsb
from bnpjax.models.wmmsb import geweke
from bnpjax.testing import GewekeCase

# the algorithm module (the package's attribute of the same name is the factory)
_gibbs = importlib.import_module("bnpjax.models.wmmsb.collapsed_gibbs")

NUM_NODES, RANK = 4, 2


def statistics(state, data):
    same = (state.s == state.r).astype(float)
    return {
        "mean y": jnp.mean(data.y),
        "mean y^2": jnp.mean(data.y**2),
        "frac y=0": jnp.mean(data.y == 0),
        "mean y [s=r]": jnp.mean(data.y * same),
        "mean [s=r]": jnp.mean(same),
        "n_phi[0,0]": state.n_phi[0, 0],
        "sum n_node^2": jnp.sum(state.n_node**2),
        "y_1 y_2": jnp.mean(data.y[:-1] * data.y[1:]),
    }


def _broken(data, hyper=None, *, likelihood):
    """The sampler with the pair left in its own block counts while its conditional is
    computed (built from the private step; no public switch)."""
    algorithm = wmmsb.collapsed_gibbs(data, hyper, likelihood=likelihood)
    step = bind(_gibbs._step, data, hyper, likelihood=likelihood, exclude_own=False)
    return algorithm._replace(step=step)


def _case(likelihood):
    hyper = wmmsb.make_hyper(
        RANK, likelihood=likelihood, alpha=0.7, r=1.0, p=0.6 if likelihood == "nb" else 1.0
    )
    base = wmmsb.make_data(
        np.zeros((NUM_NODES, NUM_NODES)), directed=True, explicit=True, likelihood=likelihood
    )
    return GewekeCase(
        name=f"wmmsb.collapsed_gibbs.{likelihood}",
        module=geweke,
        factory=wmmsb.collapsed_gibbs,
        data=base,
        hyper=hyper,
        settings={"likelihood": likelihood},
        statistics=statistics,
        broken_factory=_broken,
        num_marginal=20_000,
        num_successive=3_000,
        seed=1,
    )


CASES = [_case("nb"), _case("bernoulli")]
