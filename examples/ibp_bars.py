"""The linear-Gaussian IBP on Griffiths & Ghahramani's bars, with missing pixels imputed.

Prints the posterior of the number of features K+ (4 planted), alpha and the noise sd
(0.5 planted), and the posterior predictive log density of the held-out pixels."""

import arviz as az
import jax

import bnpjax
from bnpjax.datasets import bars
from bnpjax.metrics import log_mean_exp
from bnpjax.models import ibp_lg


def main():
    sim = bars(seed=0, missing_fraction=0.1)  # X has NaN where mask is False
    data = ibp_lg.make_data(sim["X"], mask=sim["mask"])
    idata = bnpjax.sample(
        ibp_lg.parallel_gibbs(data), jax.random.key(0), 300, num_warmup=300, num_chains=2
    )
    print(az.summary(idata, var_names=["num_features", "alpha", "sigma_x"]))
    truth = bars(seed=0)["X"]  # the same images with nothing missing
    # log densities of the held-out pixels, (chain, draw, entry), pooled over the draws
    pointwise = ibp_lg.log_likelihood(idata, data, test=(truth, ~sim["mask"]))
    held = log_mean_exp(pointwise.reshape(-1, pointwise.shape[-1]), axis=0)
    print(f"held-out pixels: mean posterior predictive log density {held.mean():.3f}")


if __name__ == "__main__":
    main()
