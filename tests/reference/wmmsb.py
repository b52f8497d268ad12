"""Same draws before and after the WMMSB restructuring: collapsed Gibbs (each likelihood) on a
tiny directed network with held-out pairs and listed zeros, and the variational state of CVB0
(listed and dense zeros, each likelihood) and stochastic CVB0 after a few steps."""

import jax
import numpy as np

from bnpjax.models import wmmsb

#: The data field ``seed`` (the pair hash's seed) is now ``hash_seed``; no traced variable or
#: state field was renamed.
RENAMED: dict[str, str] = {}

RUN = dict(num_samples=4, num_warmup=2, num_chains=3, progress_bar=False)


def network(likelihood):
    """6 nodes, Poisson(1) counts, 3 held-out pairs."""
    rng = np.random.default_rng(7)
    N = 6
    Y = rng.poisson(1.0, (N, N))
    np.fill_diagonal(Y, 0)
    if likelihood == "bernoulli":
        Y = (Y > 0).astype(int)
    held = np.zeros((N, N), bool)
    held[0, 3] = held[4, 1] = held[2, 5] = True
    return Y, held


def _gibbs(likelihood):
    def build():
        Y, held = network(likelihood)
        data = wmmsb.make_data(Y, mask=~held, directed=True, likelihood=likelihood)
        algorithm = wmmsb.collapsed_gibbs(data, rank=2, likelihood=likelihood)
        return algorithm, dict(key=jax.random.key(3), **RUN)

    return build


def _cvb0(likelihood, zeros):
    def build():
        Y, held = network(likelihood)
        data = wmmsb.make_data(Y, mask=~held, directed=True, likelihood=likelihood, zeros=zeros)
        algorithm = wmmsb.cvb0(
            data,
            rank=2,
            likelihood=likelihood,
            store_gamma=zeros == "list",
            chunk=8,
            # the update recorded (the MMSB's default became "solve" for issue 25, session 16)
            node_update="pass",
        )
        return algorithm, dict(key=jax.random.key(4), num_steps=4, progress_bar=False)

    return build


def _scvb0(likelihood):
    # re-recorded for issue 25 (session 14): a step's nodes are now the next slice of an
    # epoch's permutation (was jax.random.choice, an O(N) sort a step), so the draws changed
    def build():
        Y, held = network(likelihood)
        data = wmmsb.make_data(Y, mask=~held, directed=True, likelihood=likelihood, zeros="none")
        vi, vj = np.nonzero(held)
        algorithm = wmmsb.scvb0(
            data,
            rank=2,
            likelihood=likelihood,
            valid=(vi, vj, Y[vi, vj]),
            batch=3,
            draws=4,
            tau=2.0,
            eval_every=2,
            patience=2,
            node_update="pass",  # the update and the start recorded
            init="random",
        )
        return algorithm, dict(key=jax.random.key(5), num_steps=6, progress_bar=False)

    return build


CASES = {
    "wmmsb.collapsed_gibbs.nb": _gibbs("nb"),
    "wmmsb.collapsed_gibbs.bernoulli": _gibbs("bernoulli"),
    **{
        f"wmmsb.cvb0.{lik}.{zeros}": _cvb0(lik, zeros)
        for lik in ("nb", "bg", "bernoulli")
        for zeros in ("list", "dense")
    },
    "wmmsb.scvb0.bg": _scvb0("bg"),
    "wmmsb.scvb0.nb": _scvb0("nb"),
}
