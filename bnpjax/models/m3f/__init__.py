"""Gibbs max-margin matrix factorization: Gibbs M3F and Gibbs iPM3F.

Ordinal ratings :math:`Y_{ij} \\in \\{1..L\\}` are explained by scores :math:`x_{ij} = U_i
\\cdot V_j` and per-user thresholds :math:`\\theta_i` through the hinge loss of max-margin
matrix factorization; Gibbs M3F samples the pseudo-posterior :math:`q(U, V, \\theta) \\propto
\\text{prior} \\times \\exp(-C \\sum_{ij, r} \\max(0, \\ell - T^r_{ij}(\\theta_{ir} -
x_{ij})))` exactly, by augmenting every hinge term with a Gaussian scale mixture (Polson &
Scott 2011) so that all factor rows are drawn at once. Gibbs iPM3F replaces :math:`U` by
binary features :math:`Z \\sim \\mathrm{IBP}(\\alpha)` whose number the data choose.

Algorithms: :func:`gibbs` (Gibbs M3F, optionally with item biases or a fixed item side),
:func:`ipm3f_gibbs` (Gibbs iPM3F, sequential or row-parallel feature steps, or a fixed item
side), and :func:`map_estimate` / :func:`fit_map` (the optimisation baseline, run by
:func:`bnpjax.fit`). Predictions: :func:`predict` and :func:`log_likelihood`.

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML.
Rennie, J. D. M. and Srebro, N. (2005). Fast maximum margin matrix factorization for
collaborative prediction. ICML.
Polson, N. G. and Scott, S. L. (2011). Data augmentation for support vector machines.
Bayesian Analysis 6(1).
Griffiths, T. L. and Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12.
"""

from bnpjax.models.m3f import geweke
from bnpjax.models.m3f.conditionals import levels_from_scores, pseudo_log_posterior
from bnpjax.models.m3f.data import (
    IPM3FState,
    M3FData,
    M3FHyper,
    M3FInfo,
    M3FState,
    make_data,
    make_hyper,
)
from bnpjax.models.m3f.features import new_feature_log_weights
from bnpjax.models.m3f.geweke import data_sample, ipm3f_prior_sample, prior_sample, refresh
from bnpjax.models.m3f.gibbs import gibbs
from bnpjax.models.m3f.ipm3f_gibbs import ipm3f_gibbs
from bnpjax.models.m3f.linalg import column_normals
from bnpjax.models.m3f.map_estimate import MAPInfo, MAPState, fit_map, map_estimate
from bnpjax.models.m3f.predict import (
    log_likelihood,
    predict,
    predict_levels,
    predictive_distribution,
)

__all__ = [
    "IPM3FState",
    "M3FData",
    "M3FHyper",
    "M3FInfo",
    "M3FState",
    "MAPInfo",
    "MAPState",
    "column_normals",
    "data_sample",
    "fit_map",
    "geweke",
    "gibbs",
    "ipm3f_gibbs",
    "ipm3f_prior_sample",
    "levels_from_scores",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "map_estimate",
    "new_feature_log_weights",
    "predict",
    "predict_levels",
    "predictive_distribution",
    "prior_sample",
    "pseudo_log_posterior",
    "refresh",
]
