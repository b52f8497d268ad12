"""Truncated Poisson, inverse Gaussian and categorical: densities against scipy, samplers by
goodness-of-fit tests at fixed seeds (level 1e-3), each shown able to reject a wrong law."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from scipy import special, stats  # noqa: E402

from bnpjax.ops import (  # noqa: E402
    inverse_gaussian_log_pdf,
    log_normalize,
    sample_categorical,
    sample_inverse_gaussian,
    sample_truncated_poisson,
    truncated_poisson_log_pmf,
)

ALPHA = 1e-3
N_DRAWS = 20_000


def chisquare_pvalue(samples, probs, min_expected=5.0):
    """Pearson chi-square p-value of integer ``samples`` against ``probs`` over 0..len(probs)-1.

    Bins with expected count below ``min_expected`` are pooled (so the chi-square approximation
    holds); a draw in a zero-probability bin gives p = 0.
    """
    probs = np.asarray(probs, dtype=np.float64)
    samples = np.asarray(samples)
    if np.any((samples < 0) | (samples >= probs.size)):
        return 0.0
    counts = np.bincount(samples, minlength=probs.size).astype(np.float64)
    if np.any(counts[probs == 0] > 0):
        return 0.0
    expected = samples.size * probs
    order = np.argsort(expected)
    obs, exp = [], []
    pool_obs = pool_exp = 0.0
    for i in order:
        if expected[i] == 0:
            continue
        pool_obs += counts[i]
        pool_exp += expected[i]
        if pool_exp >= min_expected:
            obs.append(pool_obs)
            exp.append(pool_exp)
            pool_obs = pool_exp = 0.0
    if pool_exp > 0:  # leftover small bins go into the last (largest) bin
        obs[-1] += pool_obs
        exp[-1] += pool_exp
    obs, exp = np.array(obs), np.array(exp)
    if obs.size < 2:
        return 1.0
    stat = np.sum((obs - exp) ** 2 / exp)
    return stats.chi2.sf(stat, obs.size - 1)


# ----------------------------------------------------------------------------- truncated Poisson


def scipy_truncated_log_pmf(k, rate, upper, lower):
    support = np.arange(lower, upper + 1)
    log_norm = special.logsumexp(stats.poisson.logpmf(support, rate))
    out = stats.poisson.logpmf(k, rate) - log_norm
    return np.where((k >= lower) & (k <= upper), out, -np.inf)


@pytest.mark.parametrize("rate", [0.05, 1.0, 3.7, 40.0, 1e3])
@pytest.mark.parametrize(("lower", "upper"), [(0, 8), (1, 8), (3, 60), (0, 0)])
def test_truncated_poisson_log_pmf_matches_scipy(rate, lower, upper):
    k = np.arange(-2, upper + 3)
    got = np.asarray(truncated_poisson_log_pmf(k, rate, upper, lower))
    want = scipy_truncated_log_pmf(k, rate, upper, lower)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(np.isfinite(got), finite)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-11, atol=1e-11)
    np.testing.assert_allclose(special.logsumexp(got[finite]), 0.0, atol=1e-12)


def test_truncated_poisson_log_pmf_batched_and_traced_lower():
    rate = np.array([0.5, 2.0, 9.0])
    lower = np.array([0, 1, 2])
    k = np.arange(12)[:, None]
    got = np.asarray(
        jax.jit(truncated_poisson_log_pmf, static_argnums=2)(k, rate, 10, jnp.asarray(lower))
    )
    assert got.shape == (12, 3)
    for j in range(3):
        np.testing.assert_allclose(
            got[:, j], scipy_truncated_log_pmf(k[:, 0], rate[j], 10, lower[j]), rtol=1e-12
        )


def test_truncated_poisson_rate_zero_and_empty_support():
    # The rate -> 0 limit puts all mass on `lower`.
    np.testing.assert_array_equal(
        truncated_poisson_log_pmf(np.arange(5), 0.0, 4, 1), [-np.inf, 0, -np.inf, -np.inf, -np.inf]
    )
    np.testing.assert_array_equal(
        truncated_poisson_log_pmf(np.arange(3), 0.0, 2), [0, -np.inf, -np.inf]
    )
    assert np.all(np.isneginf(truncated_poisson_log_pmf(np.arange(6), 2.0, 3, 4)))
    draws = sample_truncated_poisson(jax.random.key(0), 0.0, 5, lower=2, shape=(100,))
    assert np.all(np.asarray(draws) == 2)


def test_truncated_poisson_float32():
    rate32 = np.float32(3.3)
    got = truncated_poisson_log_pmf(np.arange(30), rate32, 25, 1)
    assert got.dtype == jnp.float32
    want = truncated_poisson_log_pmf(np.arange(30), 3.3, 25, 1)
    finite = np.isfinite(np.asarray(want))
    np.testing.assert_allclose(np.asarray(got)[finite], np.asarray(want)[finite], rtol=2e-5)
    draws = sample_truncated_poisson(jax.random.key(1), rate32, 25, 1, shape=(1000,))
    assert np.all((np.asarray(draws) >= 1) & (np.asarray(draws) <= 25))


# (rate, lower); all share upper = 20, which truncates the rate-25 case heavily.
POISSON_CASES = [(3.0, 0), (0.4, 1), (25.0, 0), (7.5, 3)]
POISSON_UPPER = 20


@pytest.fixture(scope="module")
def poisson_draws():
    # One batched call (array rate and lower) serves every case: compiling samplers dominates the
    # run time, not drawing.
    rate = np.array([c[0] for c in POISSON_CASES])
    lower = np.array([c[1] for c in POISSON_CASES])
    shape = (N_DRAWS, len(POISSON_CASES))
    return np.asarray(
        sample_truncated_poisson(jax.random.key(7), rate, POISSON_UPPER, lower, shape)
    )


@pytest.mark.parametrize("case", range(len(POISSON_CASES)))
def test_truncated_poisson_sampler_chisquare(poisson_draws, case):
    rate, lower = POISSON_CASES[case]
    support = np.arange(POISSON_UPPER + 1)
    draws = poisson_draws[:, case]
    probs = np.exp(scipy_truncated_log_pmf(support, rate, POISSON_UPPER, lower))
    assert chisquare_pvalue(draws, probs) > ALPHA
    # The test has power: a 20% larger rate is rejected on the same draws.
    wrong = np.exp(scipy_truncated_log_pmf(support, 1.2 * rate, POISSON_UPPER, lower))
    assert chisquare_pvalue(draws, wrong) < ALPHA


def test_truncated_poisson_sampler_scalar_and_vmap_jit():
    draws = sample_truncated_poisson(jax.random.key(20240), 2.5, 6, shape=(N_DRAWS,))
    probs = np.exp(scipy_truncated_log_pmf(np.arange(7), 2.5, 6, 0))
    assert chisquare_pvalue(np.asarray(draws), probs) > ALPHA
    # vmap over a traced `lower` (the key is shared, to keep compilation cheap).
    sample = jax.jit(
        jax.vmap(lambda lo: sample_truncated_poisson(jax.random.key(3), 1.5, 8, lo, shape=(50,)))
    )
    draws = np.asarray(sample(jnp.arange(6)))
    assert draws.shape == (6, 50)
    assert np.all(draws >= np.arange(6)[:, None]) and np.all(draws <= 8)


# ----------------------------------------------------------------------------- inverse Gaussian

IG_CASES = [(1.0, 1.0), (3.0, 0.5), (0.2, 5.0), (1e3, 1e-2), (1e-3, 1.0), (1e-3, 1e-6), (5.0, 1e4)]


def scipy_invgauss(mean, shape_param):
    return stats.invgauss(mu=mean / shape_param, scale=shape_param)


@pytest.mark.parametrize(("mean", "lam"), IG_CASES)
def test_inverse_gaussian_log_pdf_matches_scipy(mean, lam):
    x = np.concatenate([mean * np.logspace(-4, 3, 40), [0.0, -1.0]])
    got = np.asarray(inverse_gaussian_log_pdf(x, mean, lam))
    want = scipy_invgauss(mean, lam).logpdf(x)
    np.testing.assert_array_equal(got[-2:], [-np.inf, -np.inf])
    np.testing.assert_allclose(got[:-2], want[:-2], rtol=1e-12, atol=1e-12)


@pytest.fixture(scope="module")
def ig_draws():
    mean = np.array([c[0] for c in IG_CASES])
    lam = np.array([c[1] for c in IG_CASES])
    draws64 = sample_inverse_gaussian(jax.random.key(11), mean, lam, shape=(N_DRAWS, len(mean)))
    draws32 = sample_inverse_gaussian(
        jax.random.key(12), mean.astype(np.float32), lam.astype(np.float32), (N_DRAWS, len(mean))
    )
    assert draws64.dtype == jnp.float64 and draws32.dtype == jnp.float32
    return np.asarray(draws64), np.asarray(draws32)


@pytest.mark.parametrize("case", range(len(IG_CASES)))
def test_inverse_gaussian_sampler_ks(ig_draws, case):
    mean, lam = IG_CASES[case]
    cdf = scipy_invgauss(mean, lam).cdf
    for draws in ig_draws:
        x = draws[:, case]
        assert np.all(np.isfinite(x)) and np.all(x > 0)
        assert stats.kstest(x.astype(np.float64), cdf).pvalue > ALPHA
    # The test has power: 15% larger mean and shape are rejected on the same draws (the mean
    # alone barely moves the law when mean / shape is large: its mass sits near shape / 3).
    wrong = scipy_invgauss(1.15 * mean, 1.15 * lam).cdf
    assert stats.kstest(ig_draws[0][:, case], wrong).pvalue < ALPHA


@pytest.mark.parametrize("case", [0, 2, 4, 6])
def test_inverse_gaussian_moments(ig_draws, case):
    # Only moderate cases: the z-scores need a finite, well estimated fourth moment.
    mean, lam = IG_CASES[case]
    x = ig_draws[0][:, case]
    n = x.size
    var = mean**3 / lam
    z_mean = (x.mean() - mean) / np.sqrt(var / n)
    # Var[s^2] ~ (mu_4 - sigma^4)/n with excess kurtosis 15 mean / lam.
    mu4 = var**2 * (3 + 15 * mean / lam)
    z_var = (x.var(ddof=1) - var) / np.sqrt((mu4 - var**2) / n)
    assert abs(z_mean) < 4 and abs(z_var) < 4


def test_inverse_gaussian_float32_extremes_and_jit_vmap():
    for mean, lam in [(1e3, 1e-2), (1e-3, 1.0), (1e-3, 1e-6), (1e6, 1e-4)]:
        x = sample_inverse_gaussian(jax.random.key(5), np.float32(mean), np.float32(lam), (2000,))
        assert x.dtype == jnp.float32
        assert np.all(np.isfinite(np.asarray(x))) and np.all(np.asarray(x) > 0)
        logp = inverse_gaussian_log_pdf(x, np.float32(mean), np.float32(lam))
        assert logp.dtype == jnp.float32 and np.all(np.isfinite(np.asarray(logp)))
    keys = jax.random.split(jax.random.key(6), 3)
    means = jnp.array([1.0, 2.0, 3.0])
    x = jax.jit(jax.vmap(lambda k, m: sample_inverse_gaussian(k, m, 2.0, (4,))))(keys, means)
    assert x.shape == (3, 4)
    np.testing.assert_allclose(x[1], sample_inverse_gaussian(keys[1], 2.0, 2.0, (4,)), rtol=1e-12)


# ----------------------------------------------------------------------------- categorical


def test_log_normalize_matches_scipy_and_masks():
    rng = np.random.default_rng(0)
    logw = rng.normal(size=(3, 6)) * 5
    logw[0, 2] = -np.inf
    np.testing.assert_allclose(log_normalize(logw), special.log_softmax(logw, axis=-1), rtol=1e-13)
    np.testing.assert_allclose(
        log_normalize(logw, axis=0), special.log_softmax(logw, axis=0), rtol=1e-13
    )
    assert np.asarray(log_normalize(logw))[0, 2] == -np.inf
    huge = np.float32(1e4) + np.log(np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    for offset in (np.float32(0), np.float32(-2e4)):
        got = log_normalize(huge + offset)
        assert got.dtype == jnp.float32
        np.testing.assert_allclose(np.exp(got), [0.1, 0.2, 0.3, 0.4], rtol=1e-3)


def test_categorical_frequencies_and_masking():
    logw = np.array([0.3, -1.0, -np.inf, 2.0, 0.0, -np.inf, 1.1])
    draws = np.asarray(sample_categorical(jax.random.key(0), logw, shape=(N_DRAWS,)))
    assert draws.shape == (N_DRAWS,)
    probs = special.softmax(logw)
    assert not np.any((draws == 2) | (draws == 5))
    assert chisquare_pvalue(draws, probs) > ALPHA
    # The test has power: moving 2% of the mass between two categories is rejected.
    wrong = probs.copy()
    wrong[[0, 3]] += [0.02, -0.02]
    assert chisquare_pvalue(draws, wrong) < ALPHA


def test_categorical_batched_and_axis():
    rng = np.random.default_rng(1)
    logw = rng.normal(size=(4, 5))
    logw[2, 1] = -np.inf
    key = jax.random.key(2)
    draws = np.asarray(sample_categorical(key, logw, shape=(N_DRAWS, 4)))
    assert draws.shape == (N_DRAWS, 4)
    for b in range(4):
        assert chisquare_pvalue(draws[:, b], special.softmax(logw[b])) > ALPHA
    draws_axis0 = np.asarray(sample_categorical(key, logw.T, axis=0, shape=(N_DRAWS, 4)))
    np.testing.assert_array_equal(draws_axis0, draws)
    assert sample_categorical(key, logw).shape == (4,)
    # vmap over the weights (a batch of 2 problems of 4 x 5 weights)
    vm = jax.jit(jax.vmap(lambda w: sample_categorical(key, w, shape=(N_DRAWS, 4))))
    both = np.asarray(vm(np.stack([logw, logw])))
    np.testing.assert_array_equal(both[0], draws)
    np.testing.assert_array_equal(both[1], draws)


def test_categorical_huge_log_weights_float32():
    probs = np.array([1.0, 2.0, 3.0]) / 6
    for offset in (1e4, -1e4, 3e38):
        logw = (np.float32(offset) + np.log(probs).astype(np.float32)).astype(np.float32)
        # At 3e38 the differences are below float32 resolution: only finiteness is testable.
        draws = np.asarray(sample_categorical(jax.random.key(4), logw, shape=(N_DRAWS,)))
        assert np.all((draws >= 0) & (draws < 3))
        if abs(offset) < 1e5:
            assert chisquare_pvalue(draws, probs) > ALPHA
    all_masked = np.full(4, -np.inf)
    assert int(sample_categorical(jax.random.key(0), all_masked)) == 0


@pytest.mark.parametrize(
    ("lower", "upper"), [(-1.0, 2.0), (6.0, np.inf), (8.0, 9.0), (-np.inf, -30.0)]
)
def test_truncated_normal_is_exact_in_the_tails_in_float32(lower, upper):
    """jax.random.truncated_normal returns 3.4e38 for [6, inf) in float32; this one must match
    SciPy's truncated normal (Kolmogorov-Smirnov) wherever the interval lies."""
    from scipy.stats import kstest, truncnorm

    from bnpjax.ops import sample_truncated_normal

    z = sample_truncated_normal(
        jax.random.key(0), np.float32(lower), np.float32(upper), (20_000,), jnp.float32
    )
    z = np.asarray(z, np.float64)
    assert z.dtype == np.float64 and np.all((z >= lower) & (z <= upper))
    assert kstest(z, truncnorm(lower, upper).cdf).pvalue > 1e-3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_truncated_normal_survives_extreme_uniforms(dtype):
    """The inverse CDF at uniforms near 0 and 1 stays finite, inside the interval and equal to
    SciPy's, with an infinite end on either side. Computed as log(1 - (1 - u)(1 - r)) it gave
    NaN on [-inf, b] whenever 1 - u rounded to 1 (u < 6e-8 in float32, drawn about once per
    sweep of an ordinal FM on MovieLens, whose chain then turned NaN)."""
    from scipy.stats import truncnorm

    from bnpjax.ops import truncated_normal_from_uniform

    tiny = np.finfo(dtype).tiny
    u = np.array([0.0, tiny, 1e-30, 1e-12, 3e-8, 0.5, 1 - 1e-7], dtype)
    for lower, upper in [(-np.inf, 0.3), (-np.inf, -5.0), (0.2, np.inf), (7.0, np.inf), (-1, 2)]:
        z = np.asarray(
            truncated_normal_from_uniform(
                jnp.asarray(u), jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)
            ),
            np.float64,
        )
        assert np.all(np.isfinite(z)) and np.all((z >= lower) & (z <= upper)), (lower, z)
        # SciPy's inverse CDF at the same u (u = 0 read as tiny), where float64 resolves it;
        # an interval right of the mode is drawn reflected, so u maps to -F^-1(u) of [-b, -a]
        u64 = np.maximum(u.astype(np.float64), tiny)
        if lower > 0:
            expected = -truncnorm(-upper, -lower).ppf(u64)
        else:
            expected = truncnorm(lower, upper).ppf(u64)
        ok = np.isfinite(expected)
        tol = 1e-4 if dtype == np.float32 else 1e-8
        np.testing.assert_allclose(z[ok], expected[ok], rtol=tol, atol=tol)
