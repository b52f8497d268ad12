"""The infinite latent feature relational model (ILFM) for link prediction.

``N`` entities and ``R`` binary relations :math:`y^r_{ij}`. Each entity holds a set of
latent binary features, ``F ~ IBP(alpha)`` with ``alpha ~ Gamma(a, rate b)``, and a link is
Bernoulli with logit (or probit) :math:`f_i W_r f_j^\\top + s_r + \\beta_r^\\top x_{ij}`:
feature-pair weights ``W_r``, a bias per relation and optional pair / entity covariates.
``mode="global"`` shares one feature matrix between relations, ``mode="single"`` fits an
independent model per relation. Held-out, missing and diagonal entries are masked out of the
likelihood, never read as zeros.

:func:`make_data` and :func:`make_hyper` build the inputs, :func:`gibbs` the sampler
(:func:`init` / :func:`build_step` its levels), :func:`predict` and :func:`log_likelihood`
read the draws, :mod:`~bnpjax.models.ilfm.geweke` holds the Geweke protocol.

References
----------
Miller, K. T., Griffiths, T. L. and Jordan, M. I. (2009). Nonparametric latent feature models
for link prediction. NeurIPS 22.
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224.
"""

from bnpjax.models.ilfm import geweke
from bnpjax.models.ilfm._deprecated import (  # noqa: F401 (deprecated names, kept for one release)
    data_sample,
    link_probabilities,
    posterior_link_probabilities,
    prior_sample,
    single_link_probabilities,
)
from bnpjax.models.ilfm.data import ILFMData, ILFMHyper, ILFMInfo, ILFMState, make_data, make_hyper
from bnpjax.models.ilfm.gibbs import MODES, WEIGHT_MOVES, build_step, gibbs, init
from bnpjax.models.ilfm.joint import LIKELIHOODS, log_joint
from bnpjax.models.ilfm.predict import log_likelihood, predict
from bnpjax.models.ilfm.start import INIT_STRATEGIES, cluster_features

#: deprecated spelling of :data:`LIKELIHOODS`
LINKS = LIKELIHOODS

__all__ = [
    "INIT_STRATEGIES",
    "LIKELIHOODS",
    "MODES",
    "WEIGHT_MOVES",
    "ILFMData",
    "ILFMHyper",
    "ILFMInfo",
    "ILFMState",
    "build_step",
    "cluster_features",
    "geweke",
    "gibbs",
    "init",
    "log_joint",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "predict",
]
