r"""The weighted mixed-membership stochastic blockmodel (WMMSB) and the MMSB.

Each node :math:`i` has memberships :math:`\theta_i \sim \mathrm{Dirichlet}(\alpha)` over
``rank`` communities; an observed pair :math:`(i, j)` draws a sender community
:math:`s_{ij} \sim \theta_i` and a receiver community :math:`r_{ij} \sim \theta_j`, and its
count :math:`y_{ij} \sim \mathrm{Poisson}(\phi_{s_{ij} r_{ij}})` with Gamma block rates
(``likelihood="nb"``, Beta-Gamma priors on the NB parameters for ``"bg"``), or
:math:`y_{ij} \sim \mathrm{Bernoulli}(\phi_{s_{ij} r_{ij}})` with Beta blocks (``"bernoulli"``,
the MMSB). Held-out and missing pairs are never counted as zeros.

Inference: :func:`collapsed_gibbs` (an exact sampler, run by :func:`bnpjax.sample`),
:func:`cvb0` and :func:`scvb0` (collapsed variational Bayes and its stochastic version for
large networks, run by :func:`bnpjax.fit`), :func:`sgrld` (stochastic-gradient Riemannian
Langevin dynamics, an approximate sampler for large networks, run by :func:`bnpjax.sample`).
:func:`predict` and :func:`log_likelihood` read
the draws of either. :func:`make_network` takes edge lists and ``scipy.sparse`` matrices; with
``zeros="none"`` the data are ``O(N + E)`` and stochastic CVB0 draws the zeros, so networks
of 10^6 nodes fit in memory.

References
----------
Airoldi, E. M., Blei, D. M., Fienberg, S. E. and Xing, E. P. (2008). Mixed membership
stochastic blockmodels. *JMLR* 9, 1981-2014.

Asuncion, A., Welling, M., Smyth, P. and Teh, Y. W. (2009). On smoothing and inference for
topic models. *UAI*.

Foulds, J., Boyles, L., DuBois, C., Smyth, P. and Welling, M. (2013). Stochastic collapsed
variational Bayesian inference for latent Dirichlet allocation. *KDD*.

Patterson, S. and Teh, Y. W. (2013). Stochastic gradient Riemannian Langevin dynamics on the
probability simplex. *NeurIPS*.

Li, W., Ahn, S. and Welling, M. (2016). Scalable MCMC for mixed membership stochastic
blockmodels. *AISTATS*.

Dulac, A. (2020). *Contributions to stochastic blockmodels for weighted networks*, PhD
thesis, Université Grenoble Alpes.
"""

from bnpjax.infer.checks import deprecated_alias
from bnpjax.models.wmmsb import geweke
from bnpjax.models.wmmsb.collapsed_gibbs import GibbsInfo, GibbsState, collapsed_gibbs
from bnpjax.models.wmmsb.cvb0 import CVB0Info, CVB0State, cvb0
from bnpjax.models.wmmsb.data import (
    LIKELIHOODS,
    WMMSBData,
    WMMSBHyper,
    hash_uniform,
    make_data,
    make_hyper,
    make_network,
    pair_keys,
    pair_uniform,
)
from bnpjax.models.wmmsb.predict import (
    _link_probability_v0,
    _mean_log_predictive_v0,
    block_means,
    expected_link_probability,
    expected_log_predictive,
    log_likelihood,
    membership_means,
    predict,
)
from bnpjax.models.wmmsb.scvb0 import SCVB0Info, SCVB0State, scvb0
from bnpjax.models.wmmsb.sgrld import SGRLDInfo, SGRLDState, sgrld

__all__ = [
    "LIKELIHOODS",
    "CVB0Info",
    "CVB0State",
    "GibbsInfo",
    "GibbsState",
    "SCVB0Info",
    "SCVB0State",
    "SGRLDInfo",
    "SGRLDState",
    "WMMSBData",
    "WMMSBHyper",
    "block_means",
    "collapsed_gibbs",
    "cvb0",
    "expected_link_probability",
    "expected_log_predictive",
    "geweke",
    "hash_uniform",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "make_network",
    "membership_means",
    "pair_keys",
    "pair_uniform",
    "predict",
    "scvb0",
    "sgrld",
]

# 0.x names, deprecated (they warn FutureWarning and will be removed in the next release)
memberships = deprecated_alias(membership_means, "memberships")
link_probability = deprecated_alias(_link_probability_v0, "link_probability")
mean_log_predictive = deprecated_alias(_mean_log_predictive_v0, "mean_log_predictive")
prior_sample = deprecated_alias(geweke.prior_sample, "prior_sample")


def _data_sample_v0(key, state, data, hyper, likelihood="nb"):
    return geweke.data_sample(key, state, data, hyper, likelihood=likelihood)


data_sample = deprecated_alias(_data_sample_v0, "data_sample")


def _gibbs_refresh(data, state, K=None):
    return geweke.refresh(data, state)


gibbs_refresh = deprecated_alias(_gibbs_refresh, "gibbs_refresh")
