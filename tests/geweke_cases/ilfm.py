"""Geweke cases of the ILFM sampler: one per weight move, covering both likelihoods and the
covariate terms, with the data-informed birth weights (the default); broken twins with the
new-feature rate slip and with the birth weights' proposal densities left out of the ratio.

Each case covers one weight move and one likelihood: the HMC gradient is ``jax.grad`` of the
same log-likelihood the MH ratio uses, so the moves and the likelihoods do not interact beyond
that, and two cases cover both moves, both likelihoods and the covariate terms.
"""

import jax
import jax.numpy as jnp
import numpy as np
from tiers import long_only

from bnpjax.infer.base import bind
from bnpjax.models import ilfm
from bnpjax.models.ilfm.entity_scan import laplace_weights
from bnpjax.models.ilfm.gibbs import _step
from bnpjax.models.ilfm.joint import _logits, _offset, per_relation
from bnpjax.models.ilfm.mass import dense_hmc
from bnpjax.models.ilfm.merge_split import _nested_and_disjoint, merge_split_moves
from bnpjax.testing import GewekeCase

N, R, CAPACITY = 5, 2, 24
HYPER = ilfm.make_hyper(alpha_prior=(3.0, 3.0), sigma_w=1.0, sigma_s=1.0)
#: the same with the weights' scale sampled (inverse-Gamma prior of sigma_w^2, mean 1)
HYPER_SCALE = ilfm.make_hyper(alpha_prior=(3.0, 3.0), sigma_s=1.0, sigma_w_prior=(3.0, 2.0))
#: for the buffer of 16 of the Fisher-mass rows: K+ is negative binomial under the Gamma(a, a)
#: prior of alpha (mean alpha H_N, about 2.3), and with a = 3 it passes 16 in a relation about
#: once in 26,000 iterations, which a float32 run of that row met (7 iterations of one chain,
#: alpha near 4-5); with a = 8 about once in 1.9 million
HYPER_NARROW_ALPHA = ilfm.make_hyper(alpha_prior=(8.0, 8.0), sigma_w=1.0, sigma_s=1.0)


def statistics(state, data):
    m = state.F.sum(0)
    logits = _logits(state.F, state.W, _offset(state.bias, state.beta, data.X))
    return {
        "K+": jnp.sum(m > 0).astype(float),
        "sum F": jnp.sum(state.F),
        "sum W^2": jnp.sum(state.W**2),
        "sum W": jnp.sum(state.W),
        "bias0": state.bias[0],
        "alpha": state.alpha,
        "mean Y": jnp.sum(data.Y) / jnp.sum(data.mask),
        "<Y, logits>": jnp.sum(data.mask * data.Y * logits),
        **(
            {"beta[0, 0]": state.beta[0, 0], "sum beta^2": jnp.sum(state.beta**2)}
            if state.beta.shape[-1]
            else {}
        ),
    }


def nest_statistics(state, data):
    """:func:`statistics` and how the features nest: the sizes' spread and the nested and
    disjoint pairs, which the take-out-or-put-in move changes and no logit shows."""
    nested, disjoint = _nested_and_disjoint(state.F)
    scale = {}
    if state.sigma_w is not None:  # the weights' scale and the weights on it
        scale = {
            "sigma_w": state.sigma_w,
            "sum W^2 / sigma_w^2": jnp.sum(state.W**2) / state.sigma_w**2,
        }
    return {
        **statistics(state, data),
        "sum m^2": jnp.sum(state.F.sum(0) ** 2),
        "nested pairs": jnp.sum(nested).astype(float),
        "disjoint pairs": jnp.sum(disjoint).astype(float),
        **scale,
    }


def single_statistics(state, data):
    """:func:`statistics` of every relation's model (``mode="single"``), summed."""
    per_model = jax.vmap(statistics)(state, per_relation(data))
    return {name: jnp.sum(value) for name, value in per_model.items()}


def _data(covariates):
    rng = np.random.default_rng(0)
    extra = {}
    if covariates:  # one pair covariate and one entity covariate (sender and receiver terms)
        extra = dict(covariates=rng.normal(size=(N, N)), entity_covariates=rng.normal(size=N))
    return ilfm.make_data(np.zeros((R, N, N)), **extra)


def _rate_alpha(alpha, num_entities):
    """The slip in Miller et al.'s algorithm box: Poisson(alpha) new features per entity; the
    right rate is alpha / N (Griffiths and Ghahramani 2011, the Gibbs sampler)."""
    return alpha


def _broken(data, hyper, settings, **slip):
    """:func:`ilfm.gibbs` with its step built with ``slip`` (a private keyword of the step)."""
    algorithm = ilfm.gibbs(data, hyper, **settings)
    names = ("kappa", "num_leapfrog", "weights", "likelihood", "merge_split", "nest", "ridge")
    moves = {k: settings[k] for k in names if k in settings}
    mode = settings.get("mode", "global")
    broken_step = bind(_step, data, hyper, mode=mode, adapt=False, **slip, **moves)

    def step(key, state):
        # every slip below makes K+ (and alpha with it) run away past any fixed buffer;
        # births that do not fit are rejected, and reporting no overflow lets the harness
        # compare the statistics instead of stopping at the first overflow
        new, info = broken_step(key, state)
        return new, info._replace(capacity_exceeded=jnp.zeros_like(info.capacity_exceeded))

    return algorithm._replace(step=step)


def broken_gibbs(data, hyper, **settings):
    """:func:`ilfm.gibbs` with new features proposed at rate alpha instead of alpha / N."""
    return _broken(data, hyper, settings, new_feature_rate=_rate_alpha)


def _uncorrected_laplace(*args, **kwargs):
    """The data-informed birth weights with the MH ratio left at the likelihood ratio, as if
    the proposal were the prior: its q/p factors dropped."""
    return laplace_weights(*args, **kwargs, correct=False)


def broken_birth_gibbs(data, hyper, **settings):
    """:func:`ilfm.gibbs` whose new-feature weights come from Laplace fits but whose MH ratio
    omits the proposal's densities."""
    return _broken(data, hyper, settings, birth=_uncorrected_laplace)


def _merge_split_without_ibp(key, F, W, alpha, sigma_w, num_moves):
    """The merge-split move with the copy's IBP prior factor left out of its ratio, as if a
    copy were free because the likelihood does not change."""
    return merge_split_moves(key, F, W, alpha, sigma_w, num_moves, correct=False)


def broken_merge_split_gibbs(data, hyper, **settings):
    """:func:`ilfm.gibbs` whose merge-split move omits the copy's IBP prior factor."""
    return _broken(data, hyper, settings, merge_split_move=_merge_split_without_ibp)


def _kinetic_at_unit_mass(*args, **kwargs):
    """The dense-mass HMC move with the kinetic energy of a unit mass in its ratio."""
    return dense_hmc(*args, **kwargs, correct=False)


def broken_mass_gibbs(data, hyper, **settings):
    """:func:`ilfm.gibbs` whose dense-mass HMC move uses the wrong kinetic energy."""
    return _broken(data, hyper, settings, dense_move=_kinetic_at_unit_mass)


def _settings(weights, likelihood):
    # step_size: the log step size prior_sample puts in the state (the weight moves' scale)
    return dict(
        capacity=CAPACITY, kappa=6, num_leapfrog=5, weights=weights, likelihood=likelihood,
        step_size=0.3,
    )  # fmt: skip


CASES = [
    GewekeCase(
        # with the weights' scale sampled, the ridge move (the bias moves with beta' x) and
        # the merge-split and take-out-or-put-in moves, whose ratios read the scale
        name="ilfm.gibbs.hmc_logit_covariates",
        module=ilfm.geweke,
        factory=ilfm.gibbs,
        data=_data(covariates=True),
        hyper=HYPER_SCALE,
        settings={**_settings("hmc", "logit"), "ridge": True, "merge_split": 3, "nest": 6},
        statistics=nest_statistics,
        broken_factory=broken_gibbs,  # a new-feature rate N times too large
        num_marginal=20_000,
        num_successive=4_000,
        broken_num_successive=1_000,  # the runaway K+ fills the buffer within ~100 steps
        seed=3,
    ),
    GewekeCase(
        name="ilfm.gibbs.random_walk_probit",
        module=ilfm.geweke,
        factory=ilfm.gibbs,
        data=_data(covariates=False),
        hyper=HYPER,
        settings=_settings("random_walk", "probit"),
        statistics=statistics,
        broken_factory=broken_gibbs,
        num_marginal=20_000,
        num_successive=4_000,
        broken_num_successive=1_000,  # the runaway K+ fills the buffer within ~100 steps
        seed=3,
    ),
    GewekeCase(  # one model per relation: the same step vmap-ed over relations
        name="ilfm.gibbs.single",
        module=ilfm.geweke,
        factory=ilfm.gibbs,
        data=_data(covariates=False),
        hyper=HYPER_NARROW_ALPHA,
        # with the Fisher mass (pair weights (R, 1, N, N)), in a buffer of 16 for its cost
        settings={
            **_settings("hmc", "logit"),
            "mode": "single",
            "mass": "fisher",
            "capacity": 16,
        },
        statistics=single_statistics,
        # the two rows above break the rate; this one the birth weights' MH correction
        broken_factory=broken_birth_gibbs,
        num_marginal=20_000,
        num_successive=4_000,
        broken_num_successive=1_000,
        seed=4,
    ),
    GewekeCase(  # the merge-split move of identical features and the take-out-or-put-in move
        # (its own broken twin: tests/models/test_ilfm.py), on top of every other move; the
        # ridge move's and the weights' scale's twins: tests/models/test_ilfm_weight_moves.py
        name="ilfm.gibbs.merge_split",
        module=ilfm.geweke,
        factory=ilfm.gibbs,
        data=_data(covariates=False),
        hyper=HYPER,
        settings={**_settings("hmc", "logit"), "merge_split": 3, "nest": 6},
        statistics=nest_statistics,
        broken_factory=broken_merge_split_gibbs,
        num_marginal=20_000,
        num_successive=4_000,
        broken_num_successive=1_000,
        seed=5,
    ),
    GewekeCase(  # the HMC move with the Fisher information as its mass, probit and covariates
        name="ilfm.gibbs.fisher_mass",
        module=ilfm.geweke,
        factory=ilfm.gibbs,
        data=_data(covariates=True),
        hyper=HYPER_NARROW_ALPHA,
        # a buffer of 16: the mass's Cholesky factor is (1 + C^2 + 3)-square per relation
        settings={**_settings("hmc", "probit"), "mass": "fisher", "capacity": 16},
        statistics=statistics,
        broken_factory=broken_mass_gibbs,
        num_marginal=20_000,
        num_successive=4_000,
        seed=6,
    ),
]

# each ILFM row costs about 110 s per simulator with an empty compilation cache on the 2-core
# CI machine; the random-walk probit row (whose twin repeats the first row's rate slip) runs
# with BNPJAX_LONG_TESTS=1, the three others in every run; the random-walk move alone, with
# a twin of its own, runs in every run by exact starts (tests/models/test_ilfm_weight_moves.py)
MARKS = {"ilfm.gibbs.random_walk_probit": (long_only("about 110 s per simulator"),)}
