"""Latent binary features in the user's own NumPyro model, inferred by ``IBPGibbs``, and
compared by PSIS-LOO with NumPyro's own fixed-K truncation of the same model.

Two models a user writes in plain NumPyro, neither of which any bnpjax sampler implements:

1. Robust latent features: the bars images with 3% of the pixels hit by large outliers, a
   Student-t likelihood (4 degrees of freedom) so that the outliers do not create features.
2. A non-conjugate model: binary images whose log-odds are the bars' sum (4 per bar, -2 where
   no bar is), under a Bernoulli-logit likelihood with per-pixel biases.

Each is run twice: with an ``IndianBuffetProcess`` site sampled by ``IBPGibbs`` (exact flips of
every entry, births and deaths of features with their weights) and NUTS for the continuous
sites, and as the fixed-K beta-Bernoulli truncation (``pi_k ~ Beta(alpha / K, 1)``) sampled by
``DiscreteHMCGibbs(NUTS)``. ArviZ gives the summaries with R-hat and ESS, the trace plots and
PSIS-LOO of the two. The IBP fits run through ``bnpjax.infer.run_with_growth``: the models take
their capacity as a keyword argument, and a run in which a chain needed more feature columns
than the buffer had starts again with twice the room.

Run from the repository root: ``python examples/numpyro_latent_features.py``
(``--quick`` for short chains).
"""

import sys
import warnings

import arviz as az
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, DiscreteHMCGibbs, Gibbs

from bnpjax.datasets import synthetic
from bnpjax.infer import IBPGibbs, run_with_growth
from bnpjax.priors import IndianBuffetProcess

matplotlib.use("Agg")

QUICK = "--quick" in sys.argv
NUM_OBS, CAPACITY = 60, 16
NUM_WARMUP, NUM_SAMPLES, NUM_CHAINS = (50, 50, 2) if QUICK else (300, 500, 2)
numpyro.set_host_device_count(NUM_CHAINS)

bars = synthetic.bars(0, num_obs=NUM_OBS)
rng = np.random.default_rng(0)
outliers = rng.random(bars["X"].shape) < 0.03
X_robust = bars["X"] + outliers * rng.choice([-4.0, 4.0], size=bars["X"].shape)
logits = 4.0 * (bars["Z"] @ bars["A"]) - 2.0
X_binary = (rng.random(logits.shape) < 1.0 / (1.0 + np.exp(-logits))).astype(np.float32)


def features(name, alpha, num_rows, truncated, capacity):
    """The binary feature matrix: an IBP site with a buffer of ``capacity`` columns, or the
    beta-Bernoulli truncation with ``capacity`` columns (which tends to the IBP as the
    truncation grows)."""
    if not truncated:
        return numpyro.sample(name, IndianBuffetProcess(alpha, num_rows, capacity=capacity))
    with numpyro.plate("features", capacity):
        pi = numpyro.sample("pi", dist.Beta(alpha / capacity, 1.0))
    with numpyro.plate("rows", num_rows, dim=-2), numpyro.plate("cols", capacity, dim=-1):
        return numpyro.sample(name, dist.Bernoulli(pi))


def robust_model(X, truncated=False, capacity=CAPACITY):
    N, D = X.shape
    alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
    Z = features("Z", alpha, N, truncated, capacity)
    A = numpyro.sample("A", dist.Normal(0.0, 1.0).expand([capacity, D]).to_event(2))
    sigma = numpyro.sample("sigma", dist.HalfNormal(1.0))
    # plates over the entries: the pointwise log-likelihood ArviZ needs for LOO, and what
    # tells IBPGibbs that rows are conditionally independent given A and sigma
    with numpyro.plate("data_rows", N, dim=-2), numpyro.plate("data_cols", D, dim=-1):
        numpyro.sample("X", dist.StudentT(4.0, Z @ A, sigma), obs=X)


def binary_model(X, truncated=False, capacity=CAPACITY):
    N, D = X.shape
    alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
    Z = features("Z", alpha, N, truncated, capacity)
    A = numpyro.sample("A", dist.Normal(0.0, 3.0).expand([capacity, D]).to_event(2))
    bias = numpyro.sample("bias", dist.Normal(0.0, 3.0).expand([D]).to_event(1))
    with numpyro.plate("data_rows", N, dim=-2), numpyro.plate("data_cols", D, dim=-1):
        numpyro.sample("X", dist.Bernoulli(logits=Z @ A + bias), obs=X)


def fit(model, X, truncated, seed):
    """Runs the chains; returns the InferenceData (with the pointwise log-likelihood) and the
    draws of K+, the number of features held by at least one row."""
    if truncated:
        kernel = DiscreteHMCGibbs(NUTS(model), modified=True)
    else:
        kernel = Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model), None)])
    mcmc = MCMC(
        kernel,
        num_warmup=NUM_WARMUP,
        num_samples=NUM_SAMPLES,
        num_chains=NUM_CHAINS,
        chain_method="parallel",
        progress_bar=False,
    )
    if truncated:
        mcmc.run(jax.random.key(seed), jnp.asarray(X), truncated=True, capacity=CAPACITY)
    else:
        grown = run_with_growth(mcmc, jax.random.key(seed), jnp.asarray(X), capacity=CAPACITY)
        if grown.num_restarts:
            print(f"   the buffer grew to {grown.capacity['capacity']} columns")
    k_plus = (mcmc.get_samples(group_by_chain=True)["Z"].sum(-2) > 0).sum(-1)
    idata = az.from_numpyro(mcmc)
    idata.posterior["K+"] = (("chain", "draw"), np.asarray(k_plus))
    return idata


for title, model, X, continuous in [
    ("Student-t likelihood, 3% outliers", robust_model, X_robust, ["alpha", "sigma"]),
    ("Bernoulli-logit likelihood", binary_model, X_binary, ["alpha"]),
]:
    print(f"\n== {title} (4 bars planted, {NUM_OBS} images of 6 x 6)")
    fits = {
        "IBP (IBPGibbs + NUTS)": fit(model, X, False, 1),
        f"truncated K = {CAPACITY} (DiscreteHMCGibbs)": fit(model, X, True, 1),
    }
    for name, idata in fits.items():
        print(f"-- {name}")
        print(az.summary(idata, var_names=["K+", *continuous], round_to=3))
        r_hat = az.rhat(idata, var_names=["K+", *continuous])
        worst = max(float(r_hat[v].max()) for v in r_hat.data_vars)
        if worst > 1.01:
            print(f"   not converged: the largest R-hat is {worst:.3f} (above 1.01); run longer")
    axes = az.plot_trace(fits["IBP (IBPGibbs + NUTS)"], var_names=["K+", *continuous])
    figure = np.asarray(axes).ravel()[0].figure
    figure.savefig(f"numpyro_latent_features_{model.__name__}_trace.png")
    with warnings.catch_warnings():  # the Pareto k values are printed below instead
        warnings.simplefilter("ignore", UserWarning)
        loo = {name: az.loo(idata, pointwise=True) for name, idata in fits.items()}
        table = az.compare(fits, ic="loo")
    print(table[["rank", "elpd_loo", "p_loo", "elpd_diff", "dse"]].to_string())
    for name, result in loo.items():
        bad = int((np.asarray(result.pareto_k) > 0.7).sum())
        print(f"   {name}: {bad} of {result.pareto_k.size} pixels with Pareto k > 0.7")
