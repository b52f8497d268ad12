"""bnpjax with NumPyro: the IBP linear-Gaussian sampler run by ``numpyro.infer.MCMC``, then the
IBP as a distribution inside a NumPyro model.

1. ``NumPyroKernel`` hands bnpjax's collapsed Gibbs sampler for the linear-Gaussian latent
   feature model to NumPyro's MCMC (two chains, vectorized) on the bars data; the chains are
   the ones ``bnpjax.sample`` draws for the same key (checked here).
2. ``IndianBuffetProcess`` in a NumPyro model: NUTS infers the IBP concentration alpha from the
   features of the last draw, and is compared with alpha's conjugate posterior
   ``Gamma(a + K+, b + H_N)`` (seed 002, last equation).

Run from the repository root: ``python examples/numpyro_ibp.py``.
"""

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer import NumPyroKernel, mcmc_to_inference_data
from bnpjax.models import ibp_lg
from bnpjax.priors import IndianBuffetProcess, ibp

bars = synthetic.bars(0, num_obs=100)
kernel_algorithm = ibp_lg.collapsed_gibbs(ibp_lg.make_data(bars["X"]), capacity=32)
kernel = NumPyroKernel(kernel_algorithm)
mcmc = numpyro.infer.MCMC(
    kernel, num_warmup=100, num_samples=200, num_chains=2, chain_method="vectorized",
    progress_bar=False,
)  # fmt: skip
mcmc.run(jax.random.key(0))
idata = mcmc_to_inference_data(mcmc)
k_plus = idata.sample_stats["num_features"].values
print(f"K+ posterior mean {k_plus.mean():.2f} (4 planted bars)")
print(f"sigma_x posterior mean {float(idata.posterior['sigma_x'].mean()):.3f} (0.5 planted)")

same = bnpjax.sample(
    kernel_algorithm, jax.random.key(0), 200, num_warmup=100, num_chains=2, progress_bar=False
)
print("same chains as bnpjax.sample:", np.array_equal(same.posterior["Z"].values,
                                                      idata.posterior["Z"].values))  # fmt: skip

Z = idata.posterior["Z"].values[0, -1]
prior_shape, prior_rate = 1.0, 1.0


def alpha_given_features(Z):
    alpha = numpyro.sample("alpha", dist.Gamma(prior_shape, prior_rate))
    numpyro.sample("Z", IndianBuffetProcess(alpha, *Z.shape), obs=Z)


nuts = numpyro.infer.MCMC(numpyro.infer.NUTS(alpha_given_features), num_warmup=500,
                          num_samples=2000, progress_bar=False)  # fmt: skip
nuts.run(jax.random.key(1), Z)
alpha = np.asarray(nuts.get_samples()["alpha"])
shape, rate = ibp.alpha_posterior(int((Z.sum(0) > 0).sum()), Z.shape[0], prior_shape, prior_rate)
print(
    f"alpha | Z: NUTS mean {alpha.mean():.3f} sd {alpha.std():.3f}; "
    f"conjugate Gamma mean {shape / rate:.3f} sd {np.sqrt(shape) / rate:.3f}"
)
