"""On bars, the linear-Gaussian model written in NumPyro and sampled by
``Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model), None)])`` has the posterior that
``ibp_lg.collapsed_gibbs`` samples: the same law of K+ and the same held-out log predictive.

How agreement is tested: both samplers run 4 chains on the same data (bars, 10% of the
entries held out) under the same model (no offset, unstandardised data, alpha ~ Gamma(1, 1),
sigma_x^2 and sigma_a^2 ~ InvGamma(1, 1)). For each compared posterior expectation, the mean
K+, P(K+ = k) for the k the posterior puts mass on, and the expected held-out
log-likelihood per entry E[log p(x_test | Z, A, sigma_x)] / n_test, the difference of the two
estimates is divided by its Monte Carlo standard error (each side's sd over sqrt(ESS_bulk),
ESS from the 4 chains); all |z| must stay below the Bonferroni bound at 1%. Each side must
also have an ESS of at least 50 for every compared quantity, else the z-scores would pass
through large MCSEs alone (a chain stuck in a mode "agrees" with everything); that is a
failure, not a pass.

Measured (2026-11-26, 4 x (300 + 1000) sweeps each, one core, ~40 s per run), with the
default block (row-parallel births, 5 merge-or-split proposals and 5 pair reallocations per
sweep, the warmup restart of a chain with no feature), over the IBPGibbs keys 2 (this test's)
/ 3 / 4 / 5: E[K+] 4.818 / 4.948 / 4.870 / 4.978 against the collapsed sampler's 4.914, ESS of
K+ 652 / 395 / 592 / 241, held-out log-likelihood per entry -0.8340 / -0.8392 / -0.8366 /
-0.8392 against -0.8347, largest |z| 1.94 / 2.00 / 1.08 / 1.42 against the bound 3.14 (3.09
at key 4): agreement at all four (figures from the test's body run as a script; the test
itself under pytest, whose settings change the draws: E[K+] 4.9005 vs 4.9350, ESS 485 / 1003,
held-out -0.8337 vs -0.8324, z -0.60 / -0.61, passed, 182 s on a loaded core). Before those
moves (births alone), the ESS of K+ was 22 at
this key, and over keys 3, 4, 5 both birth schemes left a chain in a poor mode at least once
(key 5: K+ 15.1 with the row-parallel births, 7.9 row by row, and a chain at K+ = 0 for 1000
draws): a large prior scale of the parameters with a tangle of features whose huge
parameters cancel in ``Z @ A``, or no feature at all; with ``births="rows"`` this key agreed
(E[K+] 4.914 vs 4.910, ESS 1082 / 398, largest |z| 0.70). Long: ``BNPJAX_LONG_TESTS=1``.
"""

from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import MCMC, NUTS, Gibbs
from tiers import long_only

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer.ibp_gibbs import IBPGibbs
from bnpjax.infer.rhat_ess import ess_bulk
from bnpjax.models import ibp_lg
from bnpjax.priors.ibp_distribution import IndianBuffetProcess

pytestmark = long_only("4 x 1300 sweeps of each sampler")

NUM_OBS, CAPACITY, CHAINS, WARMUP, SAMPLES = 60, 24, 4, 300, 1000


def bars_split(seed=0):
    bars = synthetic.bars(seed, num_obs=NUM_OBS)
    held_out = np.random.default_rng(seed).random(bars["X"].shape) < 0.1
    held_out[held_out.all(axis=1), 0] = False  # every row keeps an observed entry
    return bars["X"], held_out


def numpyro_model(X, train):
    N, D = X.shape
    alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
    Z = numpyro.sample("Z", IndianBuffetProcess(alpha, N, capacity=CAPACITY))
    sigma_x = jnp.sqrt(numpyro.sample("sigma_x2", dist.InverseGamma(1.0, 1.0)))
    sigma_a = jnp.sqrt(numpyro.sample("sigma_a2", dist.InverseGamma(1.0, 1.0)))
    A = numpyro.sample("A", dist.Normal(0.0, sigma_a).expand([CAPACITY, D]).to_event(2))
    with numpyro.plate("rows", N, dim=-2), numpyro.plate("cols", D, dim=-1):
        numpyro.sample("X", dist.Normal(Z @ A, sigma_x).mask(train), obs=X)


def held_out_log_likelihood(Z, A, sigma_x, X, held_out):
    """Per draw: the mean log density of the held-out entries, (chains, draws)."""
    mean = np.einsum("cdnk,cdkj->cdnj", Z, A)
    log_density = -0.5 * ((X - mean) / sigma_x[..., None, None]) ** 2 - np.log(
        sigma_x[..., None, None] * np.sqrt(2 * np.pi)
    )
    return (log_density * held_out).sum((-2, -1)) / held_out.sum()


def summaries(k_plus, lppd, support):
    out = {"E[K+]": k_plus.astype(float), "E[log p(x_test)] per entry": lppd}
    out.update({f"P(K+ = {k})": (k_plus == k).astype(float) for k in support})
    return out


def run_numpyro(X, held_out, seed):
    model = numpyro_model
    mcmc = MCMC(
        Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model), None)]),
        num_warmup=WARMUP,
        num_samples=SAMPLES,
        num_chains=CHAINS,
        chain_method=jax.vmap,
        progress_bar=False,
    )
    mcmc.run(jax.random.key(seed), jnp.asarray(X), jnp.asarray(~held_out))
    s = jax.device_get(mcmc.get_samples(group_by_chain=True))
    k_plus = (s["Z"].sum(-2) > 0).sum(-1)
    lppd = held_out_log_likelihood(s["Z"], s["A"], np.sqrt(s["sigma_x2"]), X, held_out)
    return k_plus, lppd


def run_collapsed(X, held_out, seed):
    data = ibp_lg.make_data(X, ~held_out, standardize=False)
    algorithm = ibp_lg.collapsed_gibbs(data, capacity=CAPACITY, sample_offset=False)
    idata = bnpjax.sample(
        algorithm,
        jax.random.key(seed),
        SAMPLES,
        num_warmup=WARMUP,
        num_chains=CHAINS,
        progress_bar=False,
        check_convergence=False,
    )
    post = idata.posterior
    Z, A = np.asarray(post["Z"]), np.asarray(post["A"])
    k_plus = (Z.sum(-2) > 0).sum(-1)
    lppd = held_out_log_likelihood(Z, A, np.asarray(post["sigma_x"]), X, held_out)
    return k_plus, lppd


def test_numpyro_model_under_ibp_gibbs_agrees_with_collapsed_gibbs_on_bars():
    X, held_out = bars_split()
    reference = run_collapsed(X, held_out, 1)
    under_test = run_numpyro(X, held_out, 2)
    pooled = np.concatenate([reference[0].ravel(), under_test[0].ravel()])
    values, counts = np.unique(pooled, return_counts=True)
    support = values[counts >= 0.05 * pooled.size]  # the K+ values with mass to compare
    a = summaries(*reference, support)
    b = summaries(*under_test, support)
    bound = NormalDist().inv_cdf(1 - 0.01 / (2 * len(a)))
    lines, failures = [], []
    for name in a:
        ess = [float(ess_bulk(side[name][..., None])[0]) for side in (a, b)]
        means = [float(side[name].mean()) for side in (a, b)]
        mcse = [float(side[name].std()) / np.sqrt(e) for side, e in zip((a, b), ess, strict=True)]
        se = np.hypot(*mcse)
        z = (means[1] - means[0]) / se if se > 0 else 0.0
        lines.append(
            f"{name}: collapsed {means[0]:.4f} (ESS {ess[0]:.0f}), "
            f"IBPGibbs {means[1]:.4f} (ESS {ess[1]:.0f}), z {z:+.2f}"
        )
        if min(ess) < 50 or abs(z) > bound:
            failures.append(lines[-1])
    print("\n".join(lines), f"\nbound |z| < {bound:.2f}")
    assert not failures, "disagree or not mixed:\n" + "\n".join(failures)
