r"""Numerical building blocks shared by the samplers: pure JAX, ``jit``/``vmap`` safe.

This layer imports only ``jax`` and ``numpy`` (scipy is touched only inside the host-side
:func:`from_scipy`). Random functions take the key first; floating results follow the dtype
of their inputs (float32 or float64); densities are computed in log space.

* :mod:`~bnpjax.ops.equicorrelation`: :math:`\log\det` and :math:`1^\top X_k^{-1} 1` of
  :math:`X_k = (a-b)I_k + b 1 1^\top` for all :math:`k \le \kappa` in :math:`O(\kappa)`.
* :mod:`~bnpjax.ops.gamma`: Gamma draws, vectorized rejection (cheap to compile).
* :mod:`~bnpjax.ops.gaussian`: draws from many small Gaussians given their precisions.
* :mod:`~bnpjax.ops.poisson`: truncated Poisson log pmf and exact sampler.
* :mod:`~bnpjax.ops.inverse_gamma`: inverse-Gamma sampler (conjugate variance updates).
* :mod:`~bnpjax.ops.inverse_gaussian`: inverse Gaussian log pdf and sampler.
* :mod:`~bnpjax.ops.truncated_normal`: truncated standard normal, exact deep in the tails.
* :mod:`~bnpjax.ops.categorical`: Gumbel-max categorical sampling, log normalization.
* :mod:`~bnpjax.ops.logistic`: a softplus that is cheap on a CPU, for logistic likelihoods.
* :mod:`~bnpjax.ops.rank_one`: Sherman-Morrison updates of inverses and log-determinants.
* :mod:`~bnpjax.ops.segment`: sparse COO matrices and segment reductions.
* :mod:`~bnpjax.ops.control`: :func:`apply_if`, a branch that ``vmap`` over chains does not
  turn into work for every chain.
"""

from bnpjax.ops.categorical import log_normalize, sample_categorical
from bnpjax.ops.control import apply_if
from bnpjax.ops.equicorrelation import (
    equicorrelation_logdet,
    equicorrelation_quadratic_form,
    equicorrelation_terms,
)
from bnpjax.ops.gamma import sample_gamma
from bnpjax.ops.gaussian import gaussian_from_precision
from bnpjax.ops.inverse_gamma import sample_inverse_gamma
from bnpjax.ops.inverse_gaussian import inverse_gaussian_log_pdf, sample_inverse_gaussian
from bnpjax.ops.logistic import softplus
from bnpjax.ops.poisson import sample_truncated_poisson, truncated_poisson_log_pmf
from bnpjax.ops.rank_one import rank_one_update, sherman_morrison
from bnpjax.ops.segment import (
    SparseCOO,
    col_sums,
    csr_row_ids,
    from_dense,
    from_scipy,
    matmat,
    matvec,
    rmatmat,
    rmatvec,
    row_sums,
    segment_logsumexp,
    segment_sum,
    to_dense,
    transpose,
)
from bnpjax.ops.truncated_normal import sample_truncated_normal, truncated_normal_from_uniform

__all__ = [
    "SparseCOO",
    "apply_if",
    "col_sums",
    "csr_row_ids",
    "equicorrelation_logdet",
    "equicorrelation_quadratic_form",
    "equicorrelation_terms",
    "from_dense",
    "from_scipy",
    "gaussian_from_precision",
    "inverse_gaussian_log_pdf",
    "log_normalize",
    "matmat",
    "matvec",
    "rank_one_update",
    "rmatmat",
    "rmatvec",
    "row_sums",
    "sample_categorical",
    "sample_gamma",
    "sample_inverse_gamma",
    "sample_inverse_gaussian",
    "sample_truncated_normal",
    "sample_truncated_poisson",
    "segment_logsumexp",
    "segment_sum",
    "sherman_morrison",
    "softplus",
    "to_dense",
    "transpose",
    "truncated_normal_from_uniform",
    "truncated_poisson_log_pmf",
]
