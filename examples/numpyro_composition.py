"""bnpjax samplers as blocks of ``numpyro.infer.Gibbs`` inside the user's own NumPyro model.

1. ``ibp_lg.gibbs_block``: the linear-Gaussian IBP on the bars data, written in NumPyro with a
   half-Cauchy prior on the noise sd that bnpjax's own sampler does not offer. The collapsed
   Gibbs sampler updates ``Z``, ``A``, ``alpha`` and ``sigma_a`` (conditioned on NUTS's
   current ``sigma_x`` through ``refresh``), NUTS updates ``sigma_x``.
2. ``IBPGibbs``: the same features under a Student-t likelihood, which no bnpjax kernel has:
   the IBP block samples ``Z`` and the features' weights ``A`` from the model's own log
   density (a new feature is born with weights drawn from a Laplace approximation of their
   conditional), NUTS samples alpha and the noise scale.

Run from the repository root: ``python examples/numpyro_composition.py``.
"""

import arviz as az
import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs

from bnpjax.datasets import synthetic
from bnpjax.infer import IBPGibbs
from bnpjax.models import ibp_lg
from bnpjax.priors import IndianBuffetProcess

NUM_OBS, CAPACITY = 60, 16
X = jnp.asarray(synthetic.bars(0, num_obs=NUM_OBS)["X"])  # 4 planted bars, noise sd 0.5


def model(X):
    N, D = X.shape
    alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
    Z = numpyro.sample("Z", IndianBuffetProcess(alpha, N, capacity=CAPACITY))
    sigma_a2 = numpyro.sample("sigma_a2", dist.InverseGamma(1.0, 1.0))  # as ibp_lg.make_hyper()
    A = numpyro.sample("A", dist.Normal(0.0, jnp.sqrt(sigma_a2)).expand([CAPACITY, D]).to_event(2))
    sigma_x = numpyro.sample("sigma_x", dist.HalfCauchy(1.0))  # the user's own prior
    numpyro.sample("X", dist.Normal(Z @ A, sigma_x).to_event(2), obs=X)


# 1. bnpjax's collapsed Gibbs sampler as a block; "sigma_a2" is read off its state's sd
block = ibp_lg.gibbs_block(
    model,
    given={"sigma_x": "sigma_x"},
    sites={"Z": "Z", "A": "A", "alpha": "alpha", "sigma_a2": lambda s: s.sigma_a**2},
    capacity=CAPACITY,
)
mcmc = MCMC(
    Gibbs([(block, block.sites), (NUTS(model), None)]),
    num_warmup=150, num_samples=150, num_chains=2, chain_method="sequential",
    progress_bar=False,
)  # fmt: skip
mcmc.run(jax.random.key(0), X)
samples = mcmc.get_samples(group_by_chain=True)
k_plus = (samples["Z"].sum(-2) > 0).sum(-1)
idata = az.from_numpyro(mcmc)
print(az.summary(idata, var_names=["alpha", "sigma_x", "sigma_a2"], kind="all", round_to=3))
print(f"ibp_lg block + NUTS: K+ {float(k_plus.mean()):.2f} (4 planted), "
      f"sigma_x {float(samples['sigma_x'].mean()):.3f} (0.5 planted)")  # fmt: skip


# 2. any likelihood: IBPGibbs samples Z and A from the model's own density
def student_model(X):
    N, D = X.shape
    alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
    Z = numpyro.sample("Z", IndianBuffetProcess(alpha, N, capacity=CAPACITY))
    A = numpyro.sample("A", dist.Normal(0.0, 1.0).expand([CAPACITY, D]).to_event(2))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    with numpyro.plate("rows", N, dim=-2):
        numpyro.sample("X", dist.StudentT(4.0, Z @ A, sigma), obs=X)


mcmc = MCMC(
    Gibbs([(IBPGibbs(student_model), ["Z", "A"]), (NUTS(student_model), None)]),
    num_warmup=150, num_samples=150, num_chains=2, chain_method="sequential",
    progress_bar=False,
)  # fmt: skip
mcmc.run(jax.random.key(1), X)
samples = mcmc.get_samples()
k_plus = (samples["Z"].sum(-2) > 0).sum(-1)
print(f"IBPGibbs + NUTS, Student-t likelihood: K+ {float(k_plus.mean()):.2f}, "
      f"sigma {float(samples['sigma'].mean()):.3f}")  # fmt: skip
