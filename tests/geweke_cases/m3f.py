"""Geweke cases of Gibbs M3F and Gibbs iPM3F, each with a broken twin that must fail.

The M3F pseudo-likelihood is no density of the ratings, so the joint is the "margin-data"
model of :mod:`bnpjax.models.m3f.geweke`: the augmentation ``lambda`` gets a proper
Exponential(c/2) prior (``lambda_rate = c = 1`` here) and the margins are the data. The
kernels are built by the factories' private builders with the same ``lambda_rate`` (under
which ``1/lambda ~ IG(sqrt(1+c)/|u|, 1+c)``); at ``c = 0`` that is the model's step, checked
against SciPy in tests/models/test_m3f_gibbs.py.

Broken twins are copies of the kernel modules' functions with one piece replaced
(:func:`_patched`), never a switch of the package.
"""

import functools
import importlib
import types

import jax.numpy as jnp
import numpy as np

from bnpjax.models import m3f
from bnpjax.models.m3f import features, linalg, scale
from bnpjax.models.m3f.conditionals import _scores
from bnpjax.priors import ibp
from bnpjax.testing import GewekeCase

# the algorithm modules (the package's attributes of these names are the factories)
gibbs = importlib.import_module("bnpjax.models.m3f.gibbs")
ipm3f = importlib.import_module("bnpjax.models.m3f.ipm3f_gibbs")

L = 3


def _pairs():
    """4 users x 3 items, 9 of 12 pairs observed, every rating level present."""
    users = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3])
    items = np.array([0, 1, 1, 2, 0, 2, 0, 1, 2])
    ratings = np.array([1, 2, 3, 1, 2, 3, 3, 2, 1])
    return users, items, ratings


BASE = m3f.make_data(*_pairs(), 4, 3, L, margin=1.0)
HYPER = m3f.make_hyper(
    L, C=1.5, sigma_u=1.0, sigma_v=1.0, rho=[-1.0, 1.0], varsigma=1.0, sigma_b=1.0
)
LAMBDA_RATE = 1.0


def _stats(state, data, fixed_alpha=False, fixed_sigma=True, item_bias=False, fixed_v=False):
    """Test functions; a quantity held fixed is left out (a constant statistic would only
    widen the Bonferroni bound)."""
    m3f_state = isinstance(state, m3f.M3FState)
    F = state.U if m3f_state else state.Z
    x = _scores(data, F, state.V)
    if m3f_state:
        x = x + state.bias[data.items]
    lam = 1.0 / state.omega
    out = {
        "sum V^2": jnp.sum(state.V**2),
        "mean theta": jnp.mean(state.theta),
        "theta gap": jnp.mean(state.theta[:, 1] - state.theta[:, 0]),
        "sum x": jnp.sum(x),
        "sum x^2": jnp.sum(x**2),
        "mean log lambda": jnp.mean(jnp.log(lam)),
        "mean margin": jnp.mean(data.margin),
        "mean margin^2": jnp.mean(data.margin**2),
        "<T margin, x>": jnp.mean(data.signs * data.margin * x[:, None]),
    }
    if fixed_v:
        del out["sum V^2"]
    if m3f_state:
        out["sum U^2"] = jnp.sum(state.U**2)
        if item_bias:
            out["sum c"] = jnp.sum(state.bias)
            out["sum c^2"] = jnp.sum(state.bias**2)
    else:
        out["K+"] = jnp.sum(state.Z.sum(0) > 0).astype(x.dtype)
        out["sum Z"] = jnp.sum(state.Z)
        if not fixed_alpha:
            out["alpha"] = state.alpha
        if not fixed_sigma:
            out["sigma_v"] = state.sigma_v
    return out


def _patched(module, **replacements):
    """The functions of ``module`` copied with ``replacements`` in their globals (a copied
    function calls the other copies), as a namespace."""
    namespace = {**vars(module), **replacements}
    for name, value in vars(module).items():
        if (
            isinstance(value, types.FunctionType)
            and value.__module__ == module.__name__
            and name not in replacements
        ):
            copy = types.FunctionType(
                value.__code__, namespace, value.__name__, value.__defaults__, value.__closure__
            )
            copy.__kwdefaults__ = value.__kwdefaults__
            namespace[name] = copy
    return types.SimpleNamespace(**namespace)


# --------------------------------------------------------------------------------------------
# Gibbs M3F


def _gibbs_factory(module):
    def factory(data, hyper, *, lambda_rate, **settings):
        return module._gibbs(data, hyper, lambda_rate=lambda_rate, **settings)

    return factory


def _doubled_precision():
    """b_ij with C^2/2 instead of C^2/4: the scores' conditional precision is doubled."""
    original = gibbs._pair_terms

    def doubled(*args):
        b, xi = original(*args)
        return 2.0 * b, xi

    return _gibbs_factory(_patched(gibbs, _pair_terms=doubled))


def _biases_on_a_wrong_scale():
    """The biases' column in the (V_j, c_j) block at 2 instead of 1: c_j's conditional is
    then that of c_j / 2."""

    def doubled_column(U, V, bias):
        twos = jnp.full((U.shape[0], 1), 2.0, U.dtype)
        return jnp.concatenate([U, twos], 1), jnp.concatenate([V, bias[:, None]], 1)

    return _gibbs_factory(_patched(gibbs, _with_bias=doubled_column))


def _scale_without_jacobian():
    """The scale moves of the factors (users', items', all scores') without the Jacobian
    ``a^D`` of the rescaled coordinates."""
    fake_scale = types.SimpleNamespace(
        **{
            **vars(scale),
            **{
                name: functools.partial(getattr(scale, name), jacobian=False)
                for name in ("_scale_users", "_scale_items", "_scale_all")
            },
        }
    )
    return _gibbs_factory(_patched(gibbs, scale=fake_scale))


def _thresholds_with_flipped_signs():
    """The thresholds' random walk with the signs T of their pairs flipped (the hinge of the
    levels on the other side of each threshold), the steps as they were."""

    def flipped(data, *args, **kwargs):
        return scale._thresholds_target(data._replace(signs=-data.signs), *args, **kwargs)

    fake_scale = _patched(scale, _thresholds_target=flipped)
    return _gibbs_factory(_patched(gibbs, scale=fake_scale))


FIXED_V = np.array([[0.8, -0.5], [-0.3, 1.1], [1.2, 0.4]])
FIXED_C = np.array([0.5, -0.7, 0.2])


def _twice_shifted_user_step():
    """The U step given the fixed biases, with the shift xi - b c applied twice: the users'
    conditional is then that of scores offset by -c. (With the items fixed, the U step is the
    only factor draw.)"""
    original = linalg._gaussian_rows

    def twice_shifted(key, other, other_ids, b, xi, buckets, sigma, out):
        xi = xi - b * jnp.asarray(FIXED_C)[other_ids]
        return original(key, other, other_ids, b, xi, buckets, sigma, out)

    fake_linalg = types.SimpleNamespace(_gaussian_rows=twice_shifted)
    return _gibbs_factory(_patched(gibbs, linalg=fake_linalg))


# --------------------------------------------------------------------------------------------
# Gibbs iPM3F

ALPHA, CAPACITY, KAPPA = 1.0, 12, 4


def _ipm3f_factory(module):
    def factory(data, hyper, *, lambda_rate, **settings):
        return module._ipm3f_gibbs(data, hyper, lambda_rate=lambda_rate, **settings)

    return factory


def _seed_slip():
    """The appendix of Xu, Zhu & Zhang (2013) writes omega' Sigma^{-1} omega = xi^2 1' Sigma
    1; with 1' P_k 1 in place of 1' P_k^{-1} 1 the new-feature conditional is wrong. K+ runs
    away with it and the chains overflow any buffer (a RuntimeError naming capacity), so the
    table's twin is :func:`_half_rate_new_features`; this one stays for a direct check."""
    original = features.equicorrelation_terms

    def slip(d, b, kappa):
        logdet, _ = original(d, b, kappa)
        k = jnp.arange(kappa + 1, dtype=logdet.dtype)
        return logdet, k * (d + k * jnp.asarray(b)[..., None])

    patched = _patched(features, equicorrelation_terms=slip)
    return _ipm3f_factory(
        _patched(
            ipm3f,
            _sequential_features=patched._sequential_features,
            _parallel_features=patched._parallel_features,
        )
    )


def _half_rate_new_features():
    """The user's new features proposed from Poisson(alpha / 2N) instead of Poisson(alpha / N)
    in the sequential step's block (number of singletons, weights integrated out)."""
    original = features.new_feature_log_weights

    def half_rate(b, xi_res, valid, sigma, alpha, num_users, kappa):
        return original(b, xi_res, valid, sigma, 0.5 * alpha, num_users, kappa)

    patched = _patched(features, new_feature_log_weights=half_rate)
    return _ipm3f_factory(_patched(ipm3f, _sequential_features=patched._sequential_features))


def _wrong_weight_count():
    """The precision's conditional with two weights too many, Gamma(a + (M K+ + 2)/2, .)."""
    original = ipm3f._sample_weight_sd

    def more(key, V, num_weights, prior):
        return original(key, V, num_weights + 2, prior)

    return _ipm3f_factory(_patched(ipm3f, _sample_weight_sd=more))


# strong generalization: three fixed features held by 3, 1 and 5 of 6 reference users
REFERENCE = dict(
    item_factors=np.array([[0.9, -0.6, 0.3], [-0.4, 1.0, 0.8], [1.1, 0.5, -0.7]]),
    feature_counts=[3, 1, 5],
    num_reference_users=6,
)


def _reference_users_left_out():
    """pi_k's Beta counting the new users alone, as if the reference users were not there."""
    original = ibp.feature_log_odds
    fake_ibp = types.SimpleNamespace(
        **{**vars(ibp), "feature_log_odds": lambda key, z_k, *reference: original(key, z_k)}
    )
    patched = _patched(features, ibp=fake_ibp)
    return _ipm3f_factory(_patched(ipm3f, _redraw_columns=patched._redraw_columns))


def _reference_stats(state, data):
    out = _stats(state, data, fixed_alpha=True, fixed_v=True)
    out["<Z, counts>"] = jnp.sum(state.Z @ jnp.asarray(REFERENCE["feature_counts"], float))
    return out


MARKS: dict = {}  # every row is slow; the table marks them

_COMMON = dict(module=m3f.geweke, data=BASE, hyper=HYPER, num_marginal=20_000)

CASES = [
    GewekeCase(
        name="m3f.gibbs",
        factory=_gibbs_factory(gibbs),
        settings={"rank": 2, "lambda_rate": LAMBDA_RATE},
        statistics=_stats,
        broken_factory=_doubled_precision(),
        num_successive=4_000,
        seed=5,
        **_COMMON,
    ),
    GewekeCase(
        name="m3f.gibbs_item_bias",
        factory=_gibbs_factory(gibbs),
        settings={"rank": 2, "item_bias": True, "lambda_rate": LAMBDA_RATE},
        statistics=functools.partial(_stats, item_bias=True),
        broken_factory=_biases_on_a_wrong_scale(),
        num_successive=4_000,
        seed=5,
        **_COMMON,
    ),
    GewekeCase(
        # V and the item biases held at given values: the joint is p(U, theta, lambda, Y | V, c)
        name="m3f.gibbs_fixed_items",
        factory=_gibbs_factory(gibbs),
        settings={"item_factors": FIXED_V, "item_biases": FIXED_C, "lambda_rate": LAMBDA_RATE},
        statistics=functools.partial(_stats, fixed_v=True),
        broken_factory=_twice_shifted_user_step(),
        num_successive=3_000,
        seed=6,
        **_COMMON,
    ),
    GewekeCase(
        # the scale moves with every coordinate they rescale (item biases included); the
        # threshold move's twin, its signs flipped, is checked in tests/models/test_m3f_gibbs.py
        name="m3f.gibbs_moves",
        factory=_gibbs_factory(gibbs),
        settings={"rank": 2, "item_bias": True, "lambda_rate": LAMBDA_RATE},
        statistics=functools.partial(_stats, item_bias=True),
        broken_factory=_scale_without_jacobian(),
        num_successive=3_000,
        seed=9,
        **_COMMON,
    ),
    GewekeCase(
        # the whole sweep: lambda, V, theta, flips of shared features, the new-feature block
        name="m3f.ipm3f_sequential",
        factory=_ipm3f_factory(ipm3f),
        settings={
            "alpha": ALPHA,
            "kappa": KAPPA,
            "capacity": CAPACITY,
            "lambda_rate": LAMBDA_RATE,
        },
        statistics=functools.partial(_stats, fixed_alpha=True),
        broken_factory=_half_rate_new_features(),
        num_successive=4_000,
        seed=7,
        **_COMMON,
    ),
    GewekeCase(
        # the row-parallel feature step with alpha ~ Gamma(6, rate 6) (mean 1, as the fixed
        # alpha) and 1/sigma^2 ~ Gamma(4, rate 4), both redrawn each sweep; room for the
        # larger K+ of a large alpha
        name="m3f.ipm3f_parallel",
        factory=_ipm3f_factory(ipm3f),
        settings={
            "alpha": ALPHA,
            "kappa": KAPPA,
            "capacity": 24,
            "feature_step": "parallel",
            "alpha_prior": (6.0, 6.0),
            "weight_precision_prior": (4.0, 4.0),
            "lambda_rate": LAMBDA_RATE,
        },
        statistics=functools.partial(_stats, fixed_sigma=False),
        broken_factory=_wrong_weight_count(),
        num_successive=4_000,
        seed=7,
        **_COMMON,
    ),
    GewekeCase(
        # the item side fixed: p(Z, theta, lambda, margins | V, Z_ref), Z from the reference
        # users' buffet restricted to their features
        name="m3f.ipm3f_fixed_items",
        factory=_ipm3f_factory(ipm3f),
        settings={**REFERENCE, "alpha": ALPHA, "lambda_rate": LAMBDA_RATE},
        statistics=_reference_stats,
        broken_factory=_reference_users_left_out(),
        num_successive=3_000,
        seed=8,
        **_COMMON,
    ),
]
