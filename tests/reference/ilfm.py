"""Same draws before and after: the ILFM sampler (both modes, both weight moves and
likelihoods, covariates, warmup adaptation and capacity growth) on tiny data sets. The draws
were recorded with new features' weights drawn from the prior (``birth="prior"``)."""

import jax
import numpy as np

from bnpjax.models import ilfm

RUN = dict(key=jax.random.key(7), num_samples=4, num_warmup=2, num_chains=3, progress_bar=False)
RENAMED = {}


def _tiny(seed, N=6, R=2):
    rng = np.random.default_rng(seed)
    Y = (rng.random((R, N, N)) < 0.4).astype(float)
    Y[rng.random((R, N, N)) < 0.15] = np.nan  # unobserved entries
    return Y, rng


def _global():
    Y, rng = _tiny(0)
    data = ilfm.make_data(  # as recorded: covariates in their own units
        Y,
        covariates=rng.normal(size=(6, 6)),
        entity_covariates=rng.normal(size=6),
        standardize=False,
    )
    hyper = ilfm.make_hyper(alpha_prior=(2.0, 1.0), sigma_w=1.0, sigma_s=2.0)
    algorithm = ilfm.gibbs(
        data, hyper, capacity=6, num_leapfrog=3, num_init_features=3, birth="prior"
    )
    return algorithm, RUN


def _random_walk():  # capacity 2 grows to 8 during the run
    Y, _ = _tiny(1)
    algorithm = ilfm.gibbs(
        ilfm.make_data(Y),
        ilfm.make_hyper(alpha_prior=(4.0, 1.0)),
        capacity=2,
        num_init_features=2,
        weights="random_walk",
        likelihood="probit",
        step_size=0.3,
        birth="prior",
    )
    return algorithm, RUN


def _single():  # capacity 5 grows to 10
    Y, _ = _tiny(2)
    algorithm = ilfm.gibbs(
        ilfm.make_data(Y),
        capacity=5,
        num_leapfrog=3,
        mode="single",
        init_strategy="cluster",
        num_init_features=2,
        birth="prior",
    )
    return algorithm, RUN


CASES = {
    "ilfm.gibbs": _global,
    "ilfm.gibbs_random_walk": _random_walk,
    "ilfm.gibbs_single": _single,
}
