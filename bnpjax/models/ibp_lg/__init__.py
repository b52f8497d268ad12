r"""The linear-Gaussian latent feature model with an Indian buffet process prior.

``alpha ~ Gamma(a, rate b)``, ``Z | alpha ~ IBP(alpha)`` (N x K+),
``sigma_a^2, sigma_x^2 ~ InvGamma``, ``A_kd ~ N(0, sigma_a^2)`` and
``X = Z A + E`` with ``E_nd ~ N(0, sigma_x^2)``. Entries of ``X`` may be missing at random
(``mask`` False): they are imputed as part of the state, which keeps every conditional exact.
Two exact samplers share the state :class:`IBPLGState`, kept in a feature buffer that the
driver grows: :func:`collapsed_gibbs` (rows in sequence, ``A`` integrated out, rank-one
updates), :func:`split_merge` (the collapsed sweep after split-merge moves that split or join
whole features) and :func:`parallel_gibbs` (every row at once given instantiated feature
probabilities and weights, after births, deaths, splits and merges of whole features,
:mod:`~bnpjax.models.ibp_lg.feature_moves`, from a start fitted on a subsample).

Usage: ``data = make_data(X, mask)``, ``bnpjax.sample(collapsed_gibbs(data,
alpha_prior=(1.0, 1.0)), key, num_samples)``; :func:`predict`, :func:`log_likelihood` and
:func:`feature_means` read the draws.

References
----------
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224.
Doshi-Velez, F. & Ghahramani, Z. (2009). Accelerated sampling for the Indian buffet process.
*ICML*.
Meeds, E., Ghahramani, Z., Neal, R. M. & Roweis, S. T. (2007). Modeling dyadic data with
binary latent factors. *NIPS* 19.
Zhang, M. M., Dubey, A. & Williamson, S. A. (2017). Parallel Markov chain Monte Carlo for the
Indian buffet process. arXiv:1703.03457.
"""

from bnpjax.models.ibp_lg import geweke
from bnpjax.models.ibp_lg._deprecated import data_sample as data_sample
from bnpjax.models.ibp_lg._deprecated import heldout_log_likelihood as heldout_log_likelihood
from bnpjax.models.ibp_lg._deprecated import posterior_mean_features as posterior_mean_features
from bnpjax.models.ibp_lg._deprecated import prior_sample as prior_sample
from bnpjax.models.ibp_lg._deprecated import refresh as refresh
from bnpjax.models.ibp_lg.collapsed_gibbs import collapsed_gibbs
from bnpjax.models.ibp_lg.conditionals import log_joint
from bnpjax.models.ibp_lg.data import (
    IBPLGData,
    IBPLGHyper,
    IBPLGInfo,
    IBPLGState,
    make_data,
    make_hyper,
)
from bnpjax.models.ibp_lg.gibbs_block import gibbs_block
from bnpjax.models.ibp_lg.parallel_gibbs import parallel_gibbs
from bnpjax.models.ibp_lg.predict import feature_means, log_likelihood, predict
from bnpjax.models.ibp_lg.split_merge import split_merge

__all__ = [
    "IBPLGData",
    "IBPLGHyper",
    "IBPLGInfo",
    "IBPLGState",
    "collapsed_gibbs",
    "feature_means",
    "geweke",
    "gibbs_block",
    "log_joint",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "parallel_gibbs",
    "predict",
    "split_merge",
]

# Deprecated names, importable for one release (not in __all__): prior_sample, data_sample,
# refresh, posterior_mean_features, heldout_log_likelihood.
