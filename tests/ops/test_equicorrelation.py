"""Closed-form equicorrelation log-determinants and quadratic forms against dense linear algebra."""

import jax

jax.config.update("jax_enable_x64", True)

import functools  # noqa: E402

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bnpjax.ops import (  # noqa: E402
    equicorrelation_logdet,
    equicorrelation_quadratic_form,
    equicorrelation_terms,
)

RTOL = 1e-10


def assert_logdet_close(got, want, d, rtol):
    """|got - want| <= rtol * (|want| + k |log d| + 1): log det can cross 0, so the error is
    measured against the size of its terms k log d and log1p(k b / d), not of the sum."""
    got, want = np.asarray(got), np.asarray(want)
    scale = np.abs(want) + np.arange(want.shape[-1]) * np.abs(np.log(d)) + 1.0
    err = np.abs(got - want)
    assert np.all(err <= rtol * scale), f"max scaled error {np.max(err / scale):.3g} > {rtol}"


def dense_reference(a, b, kappa):
    """log det X_k and 1^T X_k^{-1} 1 by dense factorizations, k = 0..kappa."""
    logdets, quads = [0.0], [0.0]
    for k in range(1, kappa + 1):
        x = (a - b) * np.eye(k) + b * np.ones((k, k))
        sign, logdet = np.linalg.slogdet(x)
        assert sign > 0
        logdets.append(logdet)
        quads.append(np.ones(k) @ np.linalg.solve(x, np.ones(k)))
    return np.array(logdets), np.array(quads)


def assert_matches_dense(a, b, kappa):
    want_logdet, want_quad = dense_reference(a, b, kappa)
    logdet = np.asarray(equicorrelation_logdet(a, b, kappa))
    quad = np.asarray(equicorrelation_quadratic_form(a, b, kappa))
    assert logdet.shape == quad.shape == (kappa + 1,)
    assert_logdet_close(logdet, want_logdet, a - b, RTOL)
    np.testing.assert_allclose(quad, want_quad, rtol=RTOL, atol=0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (1.0, 0.0),
        (2.0, 0.5),
        (1.5, 1.4),
        (10.0, 3.0),
        (1e-3, 1e-4),
        (1e3, 999.0),
        (0.7, -0.01),
        (3.0, 7.0e-3),
        (1.0 + 1e-9, 1e-9),
    ],
)
def test_matches_dense_positive_and_small_b(a, b):
    assert_matches_dense(a, b, kappa=25)


@pytest.mark.parametrize("kappa", [1, 5, 20])
def test_matches_dense_negative_b_positive_definite(kappa):
    # Most negative b with X_kappa positive definite is -d/kappa; stay a little inside it.
    d = 1.3
    for frac in (0.1, 0.5, 0.9):
        b = -frac * d / kappa
        assert_matches_dense(d + b, b, kappa)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    log_d=st.floats(-6, 6),
    b_over_d=st.floats(-0.99 / 12, 50.0),
)
def test_matches_dense_random(log_d, b_over_d):
    d = float(np.exp(log_d))
    b = b_over_d * d
    assert_matches_dense(d + b, b, kappa=12)


def test_small_off_diagonal_keeps_relative_precision():
    # log det X_k = log1p(k b) for a - b = 1 is tiny; it must keep full relative precision
    # (log(1 + k b) would keep only ~3 digits). The (a, b) form cannot: 1 + b - b != 1 in floats.
    b = 1e-13
    logdet_d = np.asarray(equicorrelation_terms(1.0, b, 10)[0])
    np.testing.assert_allclose(logdet_d[1:], np.arange(1, 11) * b, rtol=1e-12)


def test_broadcasting_shapes_and_values():
    a = np.array([[2.0], [3.0], [5.0]])
    b = np.array([0.1, -0.05, 0.7, 1.2])
    kappa = 7
    logdet = np.asarray(equicorrelation_logdet(a, b, kappa))
    quad = np.asarray(equicorrelation_quadratic_form(a, b, kappa))
    assert logdet.shape == quad.shape == (3, 4, kappa + 1)
    for i in range(3):
        for j in range(4):
            want_logdet, want_quad = dense_reference(a[i, 0], b[j], kappa)
            assert_logdet_close(logdet[i, j], want_logdet, a[i, 0] - b[j], RTOL)
            np.testing.assert_allclose(quad[i, j], want_quad, rtol=RTOL)


def test_terms_by_difference_matches_a_b_form():
    d, b = np.array([0.5, 2.0, 7.0]), np.array([0.3, -0.01, 4.0])
    logdet, quad = equicorrelation_terms(d, b, 9)
    np.testing.assert_allclose(logdet, equicorrelation_logdet(d + b, b, 9), rtol=1e-13)
    np.testing.assert_allclose(quad, equicorrelation_quadratic_form(d + b, b, 9), rtol=1e-13)


def test_outside_domain_gives_nan_or_minus_inf():
    kappa = 4
    # a < b: not positive definite for any k >= 1.
    logdet = np.asarray(equicorrelation_logdet(1.0, 2.0, kappa))
    quad = np.asarray(equicorrelation_quadratic_form(1.0, 2.0, kappa))
    assert logdet[0] == 0 and quad[0] == 0
    assert np.all(np.isnan(logdet[1:])) and np.all(np.isnan(quad[1:]))
    # d = 1, b = -1/2: X_1, X_2 fine (quadratic form k / (1 - k/2)), X_2 singular, X_3+ indefinite.
    logdet, quad = (np.asarray(t) for t in equicorrelation_terms(1.0, -0.5, kappa))
    np.testing.assert_allclose(logdet[:2], [0.0, np.log(0.5)], atol=1e-15)
    np.testing.assert_allclose(quad[:2], [0.0, 2.0])
    assert logdet[2] == -np.inf
    assert np.all(np.isnan(logdet[3:])) and np.all(np.isnan(quad[2:]))
    # a == b: d = 0, nothing defined beyond the empty matrix.
    logdet, quad = (np.asarray(t) for t in equicorrelation_terms(0.0, 1.0, kappa))
    assert logdet[0] == 0 and quad[0] == 0
    assert np.all(np.isnan(logdet[1:])) and np.all(np.isnan(quad[1:]))


def test_large_kappa_float32_finite_and_accurate():
    kappa = 200
    cases = [(1.0, 0.5), (1e-2, 1e-3), (50.0, 49.0), (1.0, -0.9 / kappa + 1e-9)]
    for d, b in cases:
        logdet32, quad32 = equicorrelation_terms(np.float32(d), np.float32(b), kappa)
        assert logdet32.dtype == quad32.dtype == jnp.float32
        assert np.all(np.isfinite(logdet32)) and np.all(np.isfinite(quad32))
        logdet64, quad64 = equicorrelation_terms(d, b, kappa)
        assert_logdet_close(logdet32, logdet64, d, 1e-5)
        np.testing.assert_allclose(quad32, quad64, rtol=1e-5)
    # dense check of the float64 path at large kappa
    assert_matches_dense(1.5, 0.5, kappa)


def test_dtype_follows_inputs():
    assert equicorrelation_logdet(np.float32(2.0), 0.5, 3).dtype == jnp.float32
    assert equicorrelation_logdet(2.0, 0.5, 3).dtype == jnp.float64
    assert equicorrelation_quadratic_form(np.float32(2.0), np.float32(0.5), 3).dtype == (
        jnp.float32
    )


def test_jit_and_vmap():
    a = jnp.array([2.0, 3.0, 4.0])
    b = jnp.array([0.5, -0.1, 1.0])
    jitted = jax.jit(functools.partial(equicorrelation_terms, kappa=6))
    vmapped = jax.vmap(lambda a_, b_: equicorrelation_terms(a_ - b_, b_, 6))
    want = equicorrelation_terms(a - b, b, 6)
    for got in (jitted(a - b, b), vmapped(a, b)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-14)
