r"""Conjugate Normal-Gamma linear regression: the driver's reference model.

``tau ~ Gamma(a, b)``, ``beta | tau ~ N(m0, (tau Lambda0)^-1)`` and
``y_i | beta, tau ~ N(x_i beta, 1 / tau)`` for the observed entries ``i``. The posterior is
known in closed form (:func:`posterior_moments`), which makes this the reference model of the
driver and of the Geweke harness. :func:`gibbs` alternates the two exact conditionals.

Usage: ``data = make_data(X, y, mask)``, ``bnpjax.sample(gibbs(data, make_hyper(p)), key,
num_samples)``; :func:`predict` and :func:`log_likelihood` score held-out responses.

References
----------
Bernardo, J. M. & Smith, A. F. M. (1994). *Bayesian Theory*, Wiley, sec. 5.2.
Gelfand, A. E. & Smith, A. F. M. (1990). Sampling-based approaches to calculating marginal
densities. *JASA* 85, 398-409.
"""

from bnpjax.models.linear_regression import geweke
from bnpjax.models.linear_regression._deprecated import data_sample as data_sample
from bnpjax.models.linear_regression._deprecated import prior_sample as prior_sample
from bnpjax.models.linear_regression.conditionals import (
    log_joint,
    pointwise_log_likelihood,
    posterior_moments,
)
from bnpjax.models.linear_regression.data import (
    LinearRegressionData,
    LinearRegressionHyper,
    LinearRegressionState,
    make_data,
    make_hyper,
)
from bnpjax.models.linear_regression.data import (
    NormalGammaPrior as NormalGammaPrior,
)
from bnpjax.models.linear_regression.data import (
    make_prior as make_prior,
)
from bnpjax.models.linear_regression.gibbs import GibbsInfo, gibbs
from bnpjax.models.linear_regression.predict import log_likelihood, predict

__all__ = [
    "GibbsInfo",
    "LinearRegressionData",
    "LinearRegressionHyper",
    "LinearRegressionState",
    "geweke",
    "gibbs",
    "log_joint",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "pointwise_log_likelihood",
    "posterior_moments",
    "predict",
]

# Deprecated names, importable for one release (not in __all__): NormalGammaPrior, make_prior,
# prior_sample, data_sample.
