"""Gibbs iPM3F: the new-feature conditional against brute-force enumeration, the
fixed-items variant's input checks and trace."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import bnpjax
from bnpjax.models import m3f

L = 3


def _pairs():
    """4 users x 3 items, 9 of 12 pairs observed, every rating level present."""
    users = np.array([0, 0, 1, 1, 2, 2, 3, 3, 3])
    items = np.array([0, 1, 1, 2, 0, 2, 0, 1, 2])
    ratings = np.array([1, 2, 3, 1, 2, 3, 3, 2, 1])
    return users, items, ratings


# strong generalization: three fixed features held by 3, 1 and 5 of 6 reference users
REFERENCE = dict(
    item_factors=np.array([[0.9, -0.6, 0.3], [-0.4, 1.0, 0.8], [1.1, 0.5, -0.7]]),
    feature_counts=[3, 1, 5],
    num_reference_users=6,
)


def test_ipm3f_fixed_items_input_and_trace():
    data = m3f.make_data(*_pairs(), 4, 3, L)
    with pytest.raises(ValueError, match="go together"):
        m3f.ipm3f_gibbs(data, item_factors=REFERENCE["item_factors"])
    bad = [
        (dict(item_factors=np.ones((2, 3))), "item_factors must be"),
        (dict(item_factors=np.full((3, 3), np.nan)), "NaN"),
        (dict(feature_counts=[3, 1]), "one count per column"),
        (dict(feature_counts=[3, 0, 5]), "1..num_reference_users"),
        (dict(feature_counts=[3, 7, 5]), "1..num_reference_users"),
        (dict(feature_counts=[3, 1.5, 5]), "integers"),
        (dict(num_reference_users=0), "num_reference_users"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=message):
            m3f.ipm3f_gibbs(data, **{**REFERENCE, **change})
    with pytest.raises(ValueError, match="no part"):
        m3f.ipm3f_gibbs(data, alpha_prior=(1.0, 1.0), **REFERENCE)
    idata = bnpjax.sample(
        m3f.ipm3f_gibbs(data, test=([0, 1], [2, 0]), **REFERENCE),
        jax.random.key(0),
        5,
        progress_bar=False,
    )
    assert "V" not in idata.posterior and "alpha" not in idata.posterior
    assert idata.posterior["Z"].shape == (1, 5, 4, 3)
    assert idata.sample_stats["score_test"].shape == (1, 5, 2)
    # with the items fixed there is nothing to average over: the Rao-Blackwellized score is
    # the draw's own score (it was the previous draw's, from the features before the sweep)
    Z, V = idata.posterior["Z"].values[0], REFERENCE["item_factors"]
    own = np.einsum("dik,ik->di", Z[:, [0, 1]], V[[2, 0]])
    np.testing.assert_allclose(idata.sample_stats["score_test"].values[0], own, rtol=1e-5)
    np.testing.assert_allclose(idata.sample_stats["score_test_rb"].values[0], own, rtol=1e-5)


def test_new_feature_conditional_matches_brute_force():
    """log p(k_i = k | rest), k = 0..kappa, from the O(kappa) closed forms against explicit
    k x k precision matrices: determinant by slogdet, quadratic form by a solve, and the
    Gaussian integral over the new weights done in full."""
    rng = np.random.default_rng(0)
    w, kappa, sigma, alpha, N = 6, 7, 0.8, 2.5, 5
    b = rng.gamma(2.0, 1.0, w)
    xi = rng.normal(size=w) * 2
    valid = np.array([True] * 5 + [False])
    got = m3f.new_feature_log_weights(
        jnp.asarray(b), jnp.asarray(xi), jnp.asarray(valid), sigma, alpha, N, kappa
    )
    got = np.asarray(got - jax.nn.logsumexp(got))
    want = []
    for k in range(kappa + 1):
        total = scipy.stats.poisson.logpmf(k, alpha / N)
        for j in np.nonzero(valid)[0]:
            if k == 0:
                continue
            P = np.eye(k) / sigma**2 + b[j] * np.ones((k, k))
            _, logdet = np.linalg.slogdet(P)
            quad = xi[j] ** 2 * np.ones(k) @ np.linalg.solve(P, np.ones(k))
            # int N(v; 0, sigma^2 I) exp(-v'(b 11')v/2 + xi 1'v) dv
            total += -k * np.log(sigma) - 0.5 * logdet + 0.5 * quad
        want.append(total)
    want = np.array(want)
    want -= scipy.special.logsumexp(want)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
