"""Bayesian factorization machines: Gibbs sampling of Rendle's factorization machine with
Gaussian, probit and ordered-probit likelihoods, feature groups and relation blocks.

A row ``x`` of the design predicts ``hat y(x) = b + sum_i w_i x_i + sum_{i<j} <v_i, v_j>
x_i x_j`` (rank ``K`` factors ``v_i``), with hierarchical Gaussian priors per feature group.
:func:`make_data` lays a sparse design out as colour blocks of conditionally independent
features (:mod:`~bnpjax.models.fm.layout`), :func:`gibbs` is the sampler,
:func:`predict` and :func:`log_likelihood` read held-out predictions from its draws, and
:mod:`~bnpjax.models.fm.estimators` (also ``bnpjax.fm``) offers myFM's estimators.

References
----------
Rendle, S. (2010). Factorization machines. ICDM, 995-1000.

Freudenthaler, C., Schmidt-Thieme, L. and Rendle, S. (2011). Bayesian factorization
machines. NIPS Workshop on Sparse Representation and Low-rank Approximation.

Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57.

Rendle, S. (2013). Scaling factorization machines to relational data. PVLDB 6(5), 337-348.

Albert, J. H. and Chib, S. (1993). Bayesian analysis of binary and polychotomous response
data. JASA 88(422), 669-679.
"""

from bnpjax.models.fm.data import (
    LIKELIHOODS,
    FMData,
    FMHyper,
    FMInfo,
    FMState,
    check_targets,
    make_data,
    make_hyper,
)
from bnpjax.models.fm.estimators import FMClassifier, FMOrdinal, FMRegressor
from bnpjax.models.fm.geweke import data_sample, prior_sample, refresh
from bnpjax.models.fm.gibbs import build_step, gibbs, init
from bnpjax.models.fm.gibbs_block import gibbs_block
from bnpjax.models.fm.layout import (
    FMBlock,
    FMChunks,
    FMRelation,
    RelationBlock,
    colour_blocks,
    colour_features,
    relation_design,
    relation_widths,
    to_coo,
)
from bnpjax.models.fm.predict import log_likelihood, predict

__all__ = [
    "LIKELIHOODS",
    "FMBlock",
    "FMChunks",
    "FMClassifier",
    "FMData",
    "FMHyper",
    "FMInfo",
    "FMOrdinal",
    "FMRegressor",
    "FMRelation",
    "FMState",
    "RelationBlock",
    "build_step",
    "check_targets",
    "colour_blocks",
    "colour_features",
    "data_sample",
    "gibbs",
    "gibbs_block",
    "init",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "predict",
    "prior_sample",
    "refresh",
    "relation_design",
    "relation_widths",
    "to_coo",
]
