"""Latent IBP features in a NumPyro model: ``IBPGibbs`` + NUTS against bnpjax's own sampler
and NumPyro's discrete baseline.

Three samplers of the linear-Gaussian IBP posterior on the bars data (``--num-obs`` images of
36 pixels; alpha ~ Gamma(1, 1), sigma_x^2 and sigma_a^2 ~ InverseGamma(1, 1), as
``ibp_lg.make_hyper()``):

(i)   the model written in NumPyro (``IndianBuffetProcess`` site, ``A`` of ``--capacity``
      rows), ``Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model), None)])``: the IBP block
      moves each feature's weights with it (births drawn from a Laplace approximation), NUTS
      samples alpha and the two variances; ``--z-only`` gives the block ``["Z"]`` alone
      (the weights to NUTS, new features from their prior: the collapse of K+);
(ii)  ``ibp_lg.parallel_gibbs`` under ``bnpjax.sample``;
(iii) NumPyro's ``DiscreteHMCGibbs(NUTS)`` on the fixed-K beta-Bernoulli truncation of the
      same model (``pi_k ~ Beta(alpha / K, 1)``, ``K = --truncation``);
(iv)  ``ibp_lg.collapsed_gibbs`` under ``bnpjax.sample``, the reference posterior: the mean
      K+ and alpha of (i) and (ii) are compared with it, z = difference / sqrt(MCSE_a^2 +
      MCSE_b^2) (ArviZ MCSEs over chains).

Each runs ``--chains`` chains of ``--warmup`` + ``--samples`` steps (NumPyro sides with
``chain_method="sequential"``, bnpjax with its vmapped chains), and again with a quarter of
each, both after a compiling run. Printed: seconds per sweep of the sampling loop (the slope
between the two runs; the fixed seconds per run, which NumPyro's ``MCMC.run`` spends tracing
its loop again on every call, apart; for the NumPyro kernels (i) and (iii), whose fixed cost of
10-20 s varies by about a second from run to run and swamps their slope, ``s/sweep`` is
instead the kernel's ``sample`` timed in one compiled loop of 300 sweeps from the final state,
and the slope is printed beside it), the ESS of K+ and sigma_x (ArviZ, over chains) and ESS
per second of the sampling loop, and the ratios the issue asks for: (i) / (ii) seconds per
sweep (goal: at most 5) and (i) / (iii) ESS per second (goal: above 1). ``--continuous
hmc5`` gives (i) HMC with 5 leapfrog steps instead of NUTS, ``--newton-steps`` the Laplace
approximations' Newton steps, ``--init-features``, ``--births`` and ``--split-merge`` the
block's settings.

    python benchmarks/numpyro_composition.py [--num-obs 100 --samples 300] [--skip iii]
"""

from __future__ import annotations

import argparse
import platform
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.infer import HMC, MCMC, NUTS, DiscreteHMCGibbs, Gibbs

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer import IBPGibbs
from bnpjax.models import ibp_lg
from bnpjax.priors.ibp_distribution import IndianBuffetProcess


def ibp_model(capacity):
    def model(X):
        N, D = X.shape
        alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
        Z = numpyro.sample("Z", IndianBuffetProcess(alpha, N, capacity=capacity))
        sigma_x = jnp.sqrt(numpyro.sample("sigma_x2", dist.InverseGamma(1.0, 1.0)))
        sigma_a = jnp.sqrt(numpyro.sample("sigma_a2", dist.InverseGamma(1.0, 1.0)))
        A = numpyro.sample("A", dist.Normal(0.0, sigma_a).expand([capacity, D]).to_event(2))
        numpyro.sample("X", dist.Normal(Z @ A, sigma_x).to_event(2), obs=X)

    return model


def truncated_model(truncation):
    def model(X):
        N, D = X.shape
        alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
        with numpyro.plate("features", truncation):
            pi = numpyro.sample("pi", dist.Beta(alpha / truncation, 1.0))
        with numpyro.plate("rows", N, dim=-2), numpyro.plate("cols", truncation, dim=-1):
            Z = numpyro.sample("Z", dist.Bernoulli(pi))
        sigma_x = jnp.sqrt(numpyro.sample("sigma_x2", dist.InverseGamma(1.0, 1.0)))
        sigma_a = jnp.sqrt(numpyro.sample("sigma_a2", dist.InverseGamma(1.0, 1.0)))
        A = numpyro.sample("A", dist.Normal(0.0, sigma_a).expand([truncation, D]).to_event(2))
        numpyro.sample("X", dist.Normal(Z @ A, sigma_x).to_event(2), obs=X)

    return model


def timed(fn, sweeps):
    """``fn(seed, short)`` runs the chains (a quarter of the warmup and of the draws when
    ``short``); returns the draws of the full run, the seconds per sweep of the sampling loop
    alone (the slope between the full run and the short one, each timed after its compiling
    run; ``sweeps[short]`` sweeps each) and the fixed seconds per run. NumPyro's ``MCMC.run``
    traces and lowers its whole loop again on every call (the body of its ``fori_collect`` is
    keyed on a fresh ``transform`` partial), which costs seconds per run whatever the number
    of sweeps: the slope leaves that fixed cost out, for every sampler alike, and it is
    printed apart."""
    seconds = {}
    for short in (True, False):
        fn(0, short)  # compiles
        start = time.perf_counter()
        out = fn(1, short)
        seconds[short] = time.perf_counter() - start
    per_sweep = (seconds[False] - seconds[True]) / (sweeps[False] - sweeps[True])
    return out, per_sweep, seconds[False] - per_sweep * sweeps[False]


def loop_per_sweep(kernel, state, model_args, num_sweeps=300):
    """Seconds per sweep of ``kernel.sample`` in one compiled loop of ``num_sweeps`` sweeps from
    ``state`` (one chain's state after sampling), timed after its compiling run: what a sweep of
    ``MCMC``'s sampling loop costs, measured without the seconds of tracing that ``MCMC.run``
    spends on every call (whose run-to-run variation, about a second, swamps the slope of
    :func:`timed` at these lengths)."""

    def body(i, state):
        return kernel.sample(state, model_args, {})

    loop = jax.jit(lambda state: jax.lax.fori_loop(0, num_sweeps, body, state))
    jax.block_until_ready(loop(state))
    start = time.perf_counter()
    jax.block_until_ready(loop(state))
    return (time.perf_counter() - start) / num_sweeps


def summarise(name, k_plus, sigma_x, alpha, per_sweep, fixed, sweeps, loop=None):
    """``loop``: :func:`loop_per_sweep` (NumPyro kernels); the ESS per second then uses it, else
    the slope ``per_sweep``."""
    draws = {"K+": k_plus, "sigma_x": sigma_x, "alpha": alpha}
    ess = {k: float(az.ess(np.asarray(v, float))) for k, v in draws.items()}
    # the sampling loop of the long run, without the fixed cost
    seconds = (per_sweep if loop is None else loop) * sweeps
    row = {
        "s/sweep": per_sweep if loop is None else loop,
        "slope s/sweep": per_sweep,
        "fixed s": fixed,
        "ess K+": ess["K+"],
        "ess sigma_x": ess["sigma_x"],
        "ess/s K+": ess["K+"] / seconds,
        "ess/s sigma_x": ess["sigma_x"] / seconds,
        "mean K+": float(np.mean(k_plus)),
        "mean sigma_x": float(np.mean(sigma_x)),
        "mean alpha": float(np.mean(alpha)),
        # Monte Carlo standard errors of the means (ArviZ, over chains)
        "mcse K+": float(az.mcse(np.asarray(k_plus, float))),
        "mcse alpha": float(az.mcse(np.asarray(alpha, float))),
    }
    print(f"{name:<32}" + "  ".join(f"{k} {v:9.4g}" for k, v in row.items()), flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-obs", type=int, default=100)
    parser.add_argument("--capacity", type=int, default=24)
    parser.add_argument("--truncation", type=int, default=12)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--z-only", action="store_true", help="(i) without the weights")
    parser.add_argument(
        "--continuous",
        default="nuts",
        help="(i)'s kernel for alpha and the variances: nuts, or hmcN (HMC, N leapfrog steps)",
    )
    parser.add_argument("--newton-steps", type=int, default=2, help="IBPGibbs(newton_steps=)")
    parser.add_argument(
        "--init-features", type=int, default=10, help="IBPGibbs(init_features=); -1: None"
    )
    parser.add_argument("--births", default="auto", help="IBPGibbs(births=): auto or rows")
    parser.add_argument(
        "--split-merge", type=int, default=5, help="IBPGibbs(split_merge=): proposals per sweep"
    )
    for kind, default in (("splits", 2), ("births", 0)):
        parser.add_argument(
            f"--anchored-{kind}",
            type=int,
            default=default,
            help=f"IBPGibbs(anchored_{kind}=): proposals per sweep",
        )
    parser.add_argument("--skip", nargs="*", default=[], choices=["i", "ii", "iii", "iv"])
    args = parser.parse_args()

    print(f"date: {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"machine: {platform.platform()}, jax devices {jax.devices()}")
    print(f"bnpjax {bnpjax.__version__}, jax {jax.__version__}, numpyro {numpyro.__version__}")
    print(f"settings: {vars(args)}")
    X = jnp.asarray(synthetic.bars(0, num_obs=args.num_obs)["X"])

    def lengths(short):
        return (args.warmup // 4, args.samples // 4) if short else (args.warmup, args.samples)

    sweeps = {short: args.chains * sum(lengths(short)) for short in (True, False)}

    last = {}  # the MCMC object of the latest run, for loop_per_sweep

    def numpyro_run(kernel, k_plus_of):
        def run(seed, short):
            warmup, samples = lengths(short)
            mcmc = MCMC(
                kernel,
                num_warmup=warmup,
                num_samples=samples,
                num_chains=args.chains,
                chain_method="sequential",
                progress_bar=False,
            )
            mcmc.run(jax.random.key(seed), X)
            last["mcmc"] = mcmc
            draws = mcmc.get_samples(group_by_chain=True)
            sigma_x = np.sqrt(np.asarray(draws["sigma_x2"]))
            return k_plus_of(draws["Z"]), sigma_x, np.asarray(draws["alpha"])

        return run

    def loop_of(kernel):
        state = last["mcmc"].last_state
        if args.chains > 1:  # the first chain's state
            state = jax.tree.map(lambda x: x[0], state)
        return loop_per_sweep(kernel, state, (X,))

    def k_plus(Z):
        return np.sum(np.asarray(Z).sum(-2) > 0, -1)

    rows = {}
    if "i" not in args.skip:
        model = ibp_model(args.capacity)
        sites = ["Z"] if args.z_only else ["Z", "A"]
        if args.continuous == "nuts":
            continuous = NUTS(model)
        else:
            steps = int(args.continuous.removeprefix("hmc"))
            continuous = HMC(model, num_steps=steps, trajectory_length=None)
        block = IBPGibbs(
            model,
            newton_steps=args.newton_steps,
            init_features=None if args.init_features < 0 else args.init_features,
            births=args.births,
            split_merge=args.split_merge,
            anchored_splits=args.anchored_splits,
            anchored_births=args.anchored_births,
        )
        kernel = Gibbs([(block, sites), (continuous, None)])
        out, per_sweep, fixed = timed(numpyro_run(kernel, k_plus), sweeps)
        name = f"(i) IBPGibbs + {args.continuous.upper()}"
        rows["i"] = summarise(name, *out, per_sweep, fixed, sweeps[False], loop_of(kernel))

    # the NumPyro model sees X as it is: so must the reference samplers (no standardisation)
    data = ibp_lg.make_data(np.asarray(X), standardize=False)
    for row, name in (("ii", "parallel_gibbs"), ("iv", "collapsed_gibbs")):
        if row in args.skip:
            continue
        algorithm = getattr(ibp_lg, name)(data, capacity=args.capacity)

        def run_bnpjax(seed, short, algorithm=algorithm):
            warmup, samples = lengths(short)
            idata = bnpjax.sample(
                algorithm,
                jax.random.key(seed),
                samples,
                num_warmup=warmup,
                num_chains=args.chains,
                progress_bar=False,
                check_convergence=False,
            )
            post = idata.posterior
            return (
                idata.sample_stats["num_features"].values,
                post["sigma_x"].values,
                post["alpha"].values,
            )

        out, per_sweep, fixed = timed(run_bnpjax, sweeps)
        rows[row] = summarise(f"({row}) ibp_lg.{name}", *out, per_sweep, fixed, sweeps[False])

    if "iii" not in args.skip:
        truncated = truncated_model(args.truncation)
        kernel = DiscreteHMCGibbs(NUTS(truncated), modified=True)
        out, per_sweep, fixed = timed(numpyro_run(kernel, k_plus), sweeps)
        name = "(iii) DiscreteHMCGibbs truncated"
        rows["iii"] = summarise(name, *out, per_sweep, fixed, sweeps[False], loop_of(kernel))

    if "i" in rows and "ii" in rows:
        per_sweep = rows["i"]["s/sweep"] / rows["ii"]["s/sweep"]
        print(f"ratio s/sweep (i) / (ii): {per_sweep:.2f} (goal <= 5)")
        slope = rows["i"]["slope s/sweep"] / rows["ii"]["s/sweep"]
        print(f"ratio s/sweep (i) / (ii), (i) by its slope: {slope:.2f}")
    if "i" in rows and "iii" in rows:
        for stat in ("K+", "sigma_x"):
            ratio = rows["i"][f"ess/s {stat}"] / rows["iii"][f"ess/s {stat}"]
            print(f"ratio ESS/s of {stat} (i) / (iii): {ratio:.2f} (goal > 1)")
    # posterior agreement with the collapsed sampler: z of the difference of the means, with
    # the two MCSEs; |z| < 3.29 (two-sided 0.001 level) counts as agreement
    for row in ("i", "ii"):
        if row in rows and "iv" in rows:
            for stat in ("K+", "alpha"):
                a, b = rows[row], rows["iv"]
                z = (a[f"mean {stat}"] - b[f"mean {stat}"]) / np.hypot(
                    a[f"mcse {stat}"], b[f"mcse {stat}"]
                )
                verdict = "agree" if abs(z) < 3.29 else "DISAGREE"
                print(
                    f"agreement ({row}) vs (iv) collapsed_gibbs, mean {stat}: "
                    f"{a[f'mean {stat}']:.3f} vs {b[f'mean {stat}']:.3f}, z {z:.2f}: {verdict}"
                )


if __name__ == "__main__":
    main()
