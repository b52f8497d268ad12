"""Gamma draws by vectorized Marsaglia-Tsang rejection (bnpjax.ops.gamma): moments within
Monte Carlo error and Kolmogorov-Smirnov against scipy over shapes from 0.1 to 10^6 in both
precisions, a copy whose boost reuses the acceptance test's uniform failing the same checks,
and the result's shape and dtype."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from bnpjax.ops import sample_gamma, sample_inverse_gamma  # noqa: E402

N = 200_000
#: |z| above this fails; 14 z-scores per precision, two-sided: a chance failure about 1e-4
Z_MAX = 4.5
KS_P_MIN = 1e-4


def _checks(draws, a):
    """z-scores of the sample mean and variance (Gamma(a, 1): mean a, variance a, fourth
    central moment 3a^2 + 6a) and the KS p-value."""
    x = np.asarray(draws, np.float64)
    z_mean = (x.mean() - a) / np.sqrt(a / N)
    z_var = (x.var() - a) / np.sqrt((2 * a**2 + 6 * a) / N)
    return z_mean, z_var, stats.kstest(x, stats.gamma(a).cdf).pvalue


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("a", [0.1, 0.5, 0.999, 1.0, 2.5, 40_000.0, 1e6])
def test_draws_are_gamma(dtype, a):
    draws = jax.jit(lambda k: sample_gamma(k, jnp.full((N,), a), dtype))(jax.random.key(7))
    assert draws.dtype == dtype and draws.shape == (N,)
    z_mean, z_var, p = _checks(draws, a)
    assert abs(z_mean) < Z_MAX and abs(z_var) < Z_MAX, (z_mean, z_var)
    assert p > KS_P_MIN


def _broken_gamma(key, a):
    """The sampler with its boost drawn from the acceptance test's uniform, which the
    decision has conditioned: not Gamma for a < 1."""
    a = jnp.asarray(a)
    a_up = a + 1
    d = a_up - 1 / 3
    c = 1 / jnp.sqrt(9 * d)

    def propose(state):
        round_, done, value = state
        u = jax.random.uniform(jax.random.fold_in(key, round_), (2, *a.shape), minval=1e-300)
        x = jnp.sqrt(2.0) * jax.lax.erf_inv(2 * u[0] - 1)
        t = c * x * (3 + c * x * (3 + c * x))
        ok = (t > -1) & (jnp.log(u[1]) < 0.5 * x**2 + d * (jnp.log1p(jnp.maximum(t, -0.5)) - t))
        draw = d * (1 + t) * u[1] ** (1 / a)
        return round_ + 1, done | ok, jnp.where(ok & ~done, draw, value)

    start = (jnp.zeros((), jnp.uint32), jnp.zeros(a.shape, bool), jnp.zeros(a.shape))
    return jax.lax.while_loop(lambda s: ~jnp.all(s[1]), propose, start)[2]


def test_a_broken_copy_fails_the_same_checks():
    draws = jax.jit(lambda k: _broken_gamma(k, jnp.full((N,), 0.5)))(jax.random.key(7))
    z_mean, z_var, p = _checks(draws, 0.5)
    assert max(abs(z_mean), abs(z_var)) > Z_MAX or p < KS_P_MIN


def test_mixed_shapes_in_one_array_each_follow_their_law():
    """One call over an array mixing shapes on both sides of 1 (the boost and not, and
    acceptance rates that differ, so that the rounds run on for some elements after others
    have accepted): each group follows its own shape's law."""
    shapes = np.array([0.3, 1.7, 9.0, 250.0])
    a = jnp.asarray(np.tile(shapes, N // 4))
    draws = np.asarray(sample_gamma(jax.random.key(11), a)).reshape(-1, 4)
    for column, shape in enumerate(shapes):
        assert stats.kstest(draws[:, column], stats.gamma(shape).cdf).pvalue > KS_P_MIN


def test_a_shape_that_is_not_positive_and_finite_gives_nan_and_ends():
    draws = sample_gamma(jax.random.key(0), jnp.array([2.0, jnp.nan, -1.0, 0.0, jnp.inf]))
    assert np.isfinite(draws[0])
    assert np.all(np.isnan(draws[1:]))


def test_inverse_gamma_uses_them_and_vmap_draws_as_without():
    a = jnp.array([[0.3, 2.0], [5.0, 1e3]])
    draws = sample_gamma(jax.random.key(0), a)
    assert draws.shape == (2, 2) and bool(jnp.all(draws > 0))
    inverse = sample_inverse_gamma(jax.random.key(0), a, 2.0)
    np.testing.assert_allclose(inverse, 2.0 / draws, rtol=1e-12)
    # under vmap over chains each chain's elements are drawn as without it (to rounding: the
    # batched loop is compiled, the single draws run op by op)
    keys = jax.random.split(jax.random.key(1), 3)
    batched = jax.vmap(lambda k: sample_gamma(k, a))(keys)
    for i in range(3):
        np.testing.assert_allclose(batched[i], sample_gamma(keys[i], a), rtol=1e-12)
