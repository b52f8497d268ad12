"""Draws from many small Gaussians given their precisions (bnpjax.ops.gaussian): the
batch-last loops against numpy's Cholesky and solves, the two routes against each other for
the same noise, and a matrix that is not positive definite."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from bnpjax.ops import gaussian, gaussian_from_precision  # noqa: E402


def _problem(rng, batch, d, dtype=np.float64):
    A = rng.normal(size=(*batch, d + 3, d))
    P = np.einsum("...nk,...nl->...kl", A, A) + 0.5 * np.eye(d)
    return (
        P.astype(dtype),
        rng.normal(size=(*batch, d)).astype(dtype),
        rng.normal(size=(*batch, d)).astype(dtype),
    )


def _numpy_draws(P, m, z):
    """P^-1 m + L^-T z with numpy's Cholesky factor, matrix by matrix."""
    d = P.shape[-1]
    flat = zip(P.reshape(-1, d, d), m.reshape(-1, d), z.reshape(-1, d), strict=True)
    out = [np.linalg.solve(p, mi) + np.linalg.solve(np.linalg.cholesky(p).T, zi)
           for p, mi, zi in flat]  # fmt: skip
    return np.stack(out).reshape(m.shape)


def _route(monkeypatch, loops: bool):
    monkeypatch.setattr(gaussian, "LOOP_MIN_BATCH", 1 if loops else 10**9)


@pytest.mark.parametrize("d", [1, 2, 5, 11, 16])
@pytest.mark.parametrize("loops", [True, False])
def test_draws_match_numpy_on_either_route(monkeypatch, d, loops):
    _route(monkeypatch, loops)
    P, m, z = _problem(np.random.default_rng(d), (3, 70), d)
    # a fresh function: jit's cache is keyed on the function, not on the route's settings
    got = jax.jit(lambda *a: gaussian_from_precision(*a))(P, m, z)
    np.testing.assert_allclose(got, _numpy_draws(P, m, z), rtol=1e-9, atol=1e-9)


def test_the_routes_agree_in_float32_and_the_dispatch_follows_the_settings(monkeypatch):
    P, m, z = _problem(np.random.default_rng(0), (200,), 11, np.float32)
    want = _numpy_draws(P.astype(np.float64), m.astype(np.float64), z.astype(np.float64))
    draws = {}
    for loops in (True, False):
        _route(monkeypatch, loops)
        # a fresh function each time: jit's cache would otherwise keep the first route
        draws[loops] = jax.jit(lambda *a: gaussian_from_precision(*a))(P, m, z)
        lowered = jax.jit(lambda *a: gaussian_from_precision(*a)).lower(P, m, z).as_text()
        assert ("lapack" in lowered.lower() or "cholesky" in lowered.lower()) != loops
        assert draws[loops].dtype == jnp.float32
    np.testing.assert_allclose(draws[True], draws[False], rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(draws[True], want, rtol=1e-3, atol=1e-3)
    # above LOOP_MAX_DIM the loops are not used whatever the batch
    monkeypatch.setattr(gaussian, "LOOP_MIN_BATCH", 1)
    monkeypatch.setattr(gaussian, "LOOP_MAX_DIM", 4)
    lowered = jax.jit(lambda *a: gaussian_from_precision(*a)).lower(P, m, z).as_text().lower()
    assert "lapack" in lowered or "cholesky" in lowered


def test_draws_have_the_conditional_moments():
    """Many draws from one precision: mean and covariance within Monte Carlo error."""
    rng = np.random.default_rng(3)
    P, m, _ = _problem(rng, (), 6)
    n = 40_000
    z = rng.normal(size=(n, 6))
    draws = np.asarray(gaussian_from_precision(np.broadcast_to(P, (n, 6, 6)),
                                               np.broadcast_to(m, (n, 6)), z))  # fmt: skip
    cov = np.linalg.inv(P)
    se = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(draws.mean(0) - cov @ m) < 4.5 * se)
    # the sample covariance's entries have standard errors sqrt((s_kk s_ll + s_kl^2) / n)
    se_cov = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n)
    assert np.all(np.abs(np.cov(draws.T) - cov) < 4.5 * se_cov)


def test_a_matrix_that_is_not_positive_definite_gives_nan(monkeypatch):
    _route(monkeypatch, True)
    P, m, z = _problem(np.random.default_rng(1), (80,), 4)
    P[7] = -np.eye(4)
    got = np.asarray(gaussian_from_precision(P, m, z))
    assert np.all(np.isnan(got[7]))
    assert np.all(np.isfinite(np.delete(got, 7, axis=0)))


def test_vmap_over_chains_gives_the_per_chain_draws(monkeypatch):
    _route(monkeypatch, True)
    P, m, z = _problem(np.random.default_rng(2), (2, 90), 8)
    batched = jax.vmap(gaussian_from_precision)(P, m, z)
    np.testing.assert_allclose(batched, _numpy_draws(P, m, z), rtol=1e-9, atol=1e-9)
