"""Same draws before and after the FM restructuring: the Gibbs kernel on tiny designs, one
case per likelihood and one with a relation block (recorded in ``draws/fm.*.npz``). Recorded
again by ``_record_fm.py`` when the sweep began to draw ``b`` jointly with ``mu_w`` (a
change of the chain on purpose: the intercept used to crawl along its ridge with ``mu_w``)."""

import jax
import numpy as np
import scipy.sparse as sp

from bnpjax.models import fm

RENAMED: dict[str, str] = {}


def hyper_values():
    return dict(alpha_0=20.0, beta_0=18.0, gamma_0=2.0, mu_0=0.0, reg_0=1.0, cutpoint_scale=1.0)


def small_design(seed=0):
    """12 rows: 4 one-hot 'users', 3 one-hot 'items', 2 real-valued features."""
    rng = np.random.default_rng(seed)
    n = 12
    users = np.arange(n) % 4
    items = rng.integers(0, 3, n)
    X = np.zeros((n, 9))
    X[np.arange(n), users] = 1.0
    X[np.arange(n), 4 + items] = 1.0
    X[:, 7] = np.where(rng.random(n) < 0.6, rng.normal(size=n), 0.0)
    X[:, 8] = np.where(rng.random(n) < 0.5, rng.uniform(0.5, 1.5, n), 0.0)
    return sp.csr_matrix(X)


def targets(likelihood, n=12, seed=1):
    rng = np.random.default_rng(seed)
    if likelihood == "gaussian":
        return rng.normal(size=n)
    if likelihood == "probit":
        return (np.arange(n) % 2).astype(float)
    return (np.arange(n) % 3).astype(float)


def relation_design(seed=0):
    """12 rows: the item one-hot in X; a user block (one-hot and 3 implicit features)."""
    rng = np.random.default_rng(seed)
    n, users = 12, np.arange(12) % 4
    items = rng.integers(0, 3, n)
    X = sp.csr_matrix((np.ones(n), (np.arange(n), items)), shape=(n, 3))
    implicit = np.where(rng.random((4, 3)) < 0.6, rng.uniform(0.3, 1.0, (4, 3)), 0.0)
    implicit[0] = [0.5, 0.7, 0.9]
    block = sp.csr_matrix(np.hstack([np.eye(4), implicit]))
    return X, users, block


RUN = dict(num_samples=4, num_warmup=2, num_chains=3, progress_bar=False)


def _case(likelihood, rank):
    def build():
        data = fm.make_data(  # as recorded: targets in their own units
            small_design(),
            targets(likelihood),
            likelihood=likelihood,
            group_shapes=[4, 5],
            standardize=False,
            bucket_shapes=False,  # as recorded: the degree-bucket layout
        )
        algorithm = fm.gibbs(
            data, fm.make_hyper(**hyper_values()), rank=rank, likelihood=likelihood
        )
        return algorithm, dict(key=jax.random.key(3), **RUN)

    return build


def _relation_case():
    X, users, block = relation_design()
    data = fm.make_data(
        X,
        targets("gaussian"),
        group_shapes=[3, 7],
        X_rel=[fm.RelationBlock(users, block)],
        standardize=False,
        bucket_shapes=False,
    )
    algorithm = fm.gibbs(data, fm.make_hyper(**hyper_values()), rank=2)
    return algorithm, dict(key=jax.random.key(3), **RUN)


CASES = {
    "fm.gibbs.gaussian": _case("gaussian", 2),
    "fm.gibbs.probit": _case("probit", 2),
    "fm.gibbs.ordinal": _case("ordinal", 1),
    "fm.gibbs.relation": _relation_case,
}
