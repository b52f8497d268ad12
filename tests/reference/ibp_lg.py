"""Same-draws reference of the linear-Gaussian IBP kernels: the draws in
``draws/ibp_lg.<kernel>.npz`` were recorded with the code before issue 21 (d831a64) on this
data and these settings. Both start from a buffer of 2 features, so the driver grows it during
the run (to 40 and 20 features).

The old kernels kept the pointwise log-likelihood only on request, as an (N, D) array with 0.0
at the missing entries; the recording was made with it on and keeps the observed entries,
flattened in row-major order: the layout of the new ``log_likelihood`` group (``obs`` dim).
"""

import functools

import jax
import numpy as np

from bnpjax.models import ibp_lg


def _data():
    rng = np.random.default_rng(1)
    Z = (rng.uniform(size=(7, 3)) < 0.5).astype(float)
    A = 2.0 * rng.normal(size=(3, 4))
    X = Z @ A + 0.3 * rng.normal(size=(7, 4))
    mask = rng.uniform(size=X.shape) > 0.15
    mask[:, 0] = True
    X[~mask] = np.nan
    return ibp_lg.make_data(X, mask, standardize=False)  # as recorded: the data's own units


def _case(factory):
    def build():
        hyper = ibp_lg.make_hyper(
            alpha_prior=(2.0, 1.0), sigma_x_prior=(3.0, 2.0), sigma_a_prior=(3.0, 2.0)
        )
        # the model as recorded: no offset (sample_offset=False holds it at the data's zero)
        algorithm = factory(
            _data(), hyper, capacity=2, num_init_features=2, kappa=4, sample_offset=False
        )
        run_kwargs = dict(
            key=jax.random.key(3),
            num_samples=4,
            num_warmup=2,
            num_chains=3,
            progress_bar=False,
            chunk_size=2,
        )
        return algorithm, run_kwargs

    return build


CASES = {
    "ibp_lg.collapsed_gibbs": _case(ibp_lg.collapsed_gibbs),
    # as recorded: no feature moves, the random start (issue 23 made both the default)
    "ibp_lg.parallel_gibbs": _case(
        functools.partial(ibp_lg.parallel_gibbs, num_moves=0, init_sweeps=0)
    ),
}
RENAMED = {}
