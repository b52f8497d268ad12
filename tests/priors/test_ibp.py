"""The IBP prior: log-probability by exhaustive enumeration, the buffet and stick-breaking
samplers against it, the buffet-form formula (Griffiths & Ghahramani 2011), and a Gibbs
sampler of the prior alone (a test kernel, defined here)."""

import itertools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bnpjax.infer import ArvizSpec, SamplingAlgorithm, bind
from bnpjax.infer.capacity import growable, pad_fields
from bnpjax.ops import sample_truncated_poisson
from bnpjax.priors import ibp
from bnpjax.testing import geweke_test

N, ALPHA, KMAX = 3, 1.3, 7


# --------------------------------------------------------------------------------------------
# the prior-only Gibbs sampler (Geweke test of the IBP machinery), built from the prior's
# pieces; a test kernel, so it lives here and not in bnpjax.priors


class IBPState(NamedTuple):
    """State of :func:`prior_gibbs`: ``Z`` (N, capacity) in {0, 1} and the mass ``alpha``."""

    Z: jax.Array  # (N, capacity)
    alpha: jax.Array


class IBPGibbsInfo(NamedTuple):
    """Per-sweep diagnostics of :func:`prior_gibbs`: ``lp`` (:func:`log_prob` of ``Z``), the
    number of active features, and whether (and to what size) the buffer must grow."""

    lp: jax.Array
    num_features: jax.Array
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array


def _prior_row(carry, i, key, alpha, kappa):
    Z, exceeded, needed = carry
    N = Z.shape[0]
    key_old, key_new = jax.random.split(jax.random.fold_in(key, i))
    z = Z[i]
    m_minus = Z.sum(0) - z
    # Singletons of row i are redrawn as its new features. Dropping them before the other
    # entries are resampled is exact here only because the prior makes them independent;
    # with a likelihood they must stay until the row's flips are done (see models.ibp_lg).
    keep = m_minus > 0
    z_old = (jax.random.uniform(key_old, z.shape, z.dtype) < m_minus / N) & keep
    k_new = sample_truncated_poisson(key_new, alpha / N, kappa)
    owned, shortfall = ibp.place_new_features(~keep, k_new[None])
    row = (z_old | owned[0]).astype(Z.dtype)
    return (Z.at[i].set(row), exceeded | (shortfall > 0), jnp.maximum(needed, shortfall)), None


def _prior_step(alpha_prior, key, state, *, kappa, sample_hyper):
    key_rows, key_alpha = jax.random.split(key)
    N = state.Z.shape[0]
    init = (state.Z, jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    row = lambda c, i: _prior_row(c, i, key_rows, state.alpha, kappa)  # noqa: E731
    (Z, exceeded, shortfall), _ = jax.lax.scan(row, init, jnp.arange(N))
    k_plus = jnp.sum(Z.sum(0) > 0)
    alpha = state.alpha
    if sample_hyper:
        alpha = ibp.sample_alpha(key_alpha, k_plus, N, alpha_prior[0], alpha_prior[1])
    info = IBPGibbsInfo(
        lp=ibp.log_prob(Z, alpha),
        num_features=k_plus,
        capacity_exceeded=exceeded,
        capacity_needed=(jnp.sum(Z.sum(0) > 0) + shortfall).astype(jnp.int32),
    )
    return IBPState(Z, alpha), info


def _prior_init(alpha_prior, key, *, num_rows, capacity, alpha):
    del key
    dtype = jnp.result_type(float)
    return IBPState(jnp.zeros((num_rows, capacity), dtype), jnp.asarray(alpha, dtype))


def _prior_trace(state, info):
    m = state.Z.sum(0)
    return {
        "posterior": {"alpha": state.alpha, "column_sums": m},
        "sample_stats": {"lp": info.lp, "num_features": info.num_features},
    }


def prior_gibbs(
    num_rows: int,
    *,
    alpha: float = 1.0,
    alpha_prior: tuple[float, float] | None = None,
    capacity: int = 16,
    kappa: int = 10,
) -> SamplingAlgorithm:
    """Gibbs sampler of the IBP prior alone (no data), rows in sequence: ``P(z_ik = 1 |
    z_-i,k) = m_{-i,k} / N`` (the exchangeable form), ``Poisson(alpha / N)`` new columns per
    row truncated at ``kappa``, and with ``alpha_prior=(a, b)`` alpha from its Gamma(a + K+,
    rate b + H_N) conditional (Griffiths & Ghahramani 2011, "Gibbs Sampler for Indian Buffet
    Process"). The buffer grows through the driver."""
    if not isinstance(num_rows, int) or num_rows < 1:
        raise ValueError(f"num_rows must be a positive integer, got {num_rows!r}")
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be positive, got {alpha}")
    dtype = jnp.result_type(float)
    alpha = float(alpha)
    hyper = jnp.asarray(alpha_prior if alpha_prior is not None else (1.0, 1.0), dtype)
    sample_hyper = alpha_prior is not None

    def build(capacity):
        return SamplingAlgorithm(
            init=bind(_prior_init, hyper, num_rows=num_rows, capacity=capacity, alpha=alpha),
            step=bind(_prior_step, hyper, kappa=kappa, sample_hyper=sample_hyper),
            trace=_prior_trace,
            spec=ArvizSpec(
                name="ibp.prior_gibbs",
                dims={"column_sums": ["feature"]},
                settings={"num_rows": num_rows, "kappa": kappa, "alpha": float(alpha)},
            ),
        )

    return growable(build, capacity, pad_fields({"Z": 1}))


def _classes():
    """Every left-ordered-form class of N-row matrices with at most KMAX columns."""
    histories = [h for h in itertools.product([0, 1], repeat=N) if any(h)]
    out = []

    def rec(i, remaining, counts):
        if i == len(histories):
            out.append(tuple(counts))
            return
        for c in range(remaining + 1):
            rec(i + 1, remaining - c, [*counts, c])

    rec(0, KMAX, [])
    Z = np.zeros((len(out), N, KMAX))
    for c, counts in enumerate(out):
        columns = [h for h, n in zip(histories, counts, strict=True) for _ in range(n)]
        for k, h in enumerate(columns):
            Z[c, :, k] = h
    return histories, out, Z


HISTORIES, COUNTS, ZS = _classes()


def test_lof_probabilities_sum_to_the_poisson_mass_of_k_plus():
    log_p = np.asarray(jax.vmap(lambda Z: ibp.log_prob(Z, ALPHA))(jnp.asarray(ZS)))
    harmonic = sum(1 / i for i in range(1, N + 1))
    # classes with K+ <= KMAX carry exactly P(K+ <= KMAX), K+ ~ Poisson(alpha H_N)
    assert np.exp(log_p).sum() == pytest.approx(stats.poisson.cdf(KMAX, ALPHA * harmonic), 1e-12)
    k_plus = ZS.any(1).sum(1)
    for k in range(4):
        mass = np.exp(log_p[k_plus == k]).sum()
        assert mass == pytest.approx(stats.poisson.pmf(k, ALPHA * harmonic), rel=1e-10)


def _class_counts(draws):
    """Per draw ``(D, N, K)``, how many columns hold each history of HISTORIES (its class)."""
    codes = np.einsum("dnk,n->dk", draws.astype(np.int64), 2 ** np.arange(N))
    history_codes = np.array([sum(v << n for n, v in enumerate(h)) for h in HISTORIES])
    return (codes[:, :, None] == history_codes).sum(1)


@pytest.mark.parametrize("sampler", ["buffet", "stick_breaking"])
def test_samplers_match_lof_probabilities(sampler):
    keys = jax.random.split(jax.random.key(11), 20_000)
    if sampler == "buffet":
        draws = jax.vmap(lambda k: ibp.sample_buffet(k, ALPHA, N, 16).Z)(keys)
    else:
        draws = jax.vmap(lambda k: ibp.sample_stick_breaking(k, ALPHA, N, 80).Z)(keys)
    draws = np.asarray(draws)
    log_p = np.asarray(jax.vmap(lambda Z: ibp.log_prob(Z, ALPHA))(jnp.asarray(ZS)))
    index = {c: i for i, c in enumerate(COUNTS)}
    observed = np.zeros(len(COUNTS) + 1)
    for counts in _class_counts(draws):
        observed[index.get(tuple(counts.tolist()), len(COUNTS))] += 1
    expected = np.append(np.exp(log_p), 1 - np.exp(log_p).sum()) * len(draws)
    # chi-square over classes with enough expected counts, the rest lumped together
    big = expected >= 10
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    p_value = stats.chisquare(obs, exp).pvalue
    assert p_value > 1e-3, p_value
    # the test has power: a 15% larger alpha is rejected on the same draws
    log_q = np.asarray(jax.vmap(lambda Z: ibp.log_prob(Z, ALPHA * 1.15))(jnp.asarray(ZS)))
    wrong = np.append(np.exp(log_q), 1 - np.exp(log_q).sum()) * len(draws)
    wrong = np.append(wrong[big], wrong[~big].sum())
    assert stats.chisquare(obs, wrong * obs.sum() / wrong.sum()).pvalue < 1e-3


def test_buffet_form_is_the_probability_of_the_generating_sequence():
    """Seed 002's P(Z) (with prod_i K_1^(i)!) equals the product of the buffet's own steps."""
    draws = jax.vmap(lambda k: ibp.sample_buffet(k, ALPHA, 5, 24))(
        jax.random.split(jax.random.key(5), 20)
    )
    formula = np.asarray(jax.vmap(lambda Z: ibp.log_prob(Z, ALPHA, form="buffet"))(draws.Z))
    for Z_full, active, expected in zip(
        np.asarray(draws.Z), np.asarray(draws.active), formula, strict=True
    ):
        Z = Z_full[:, active]
        log_seq = 0.0
        counts = np.zeros(Z.shape[1])
        seen = 0
        for i in range(5):
            old = counts > 0
            p = counts[old] / (i + 1)
            log_seq += np.sum(np.where(Z[i, old] > 0, np.log(p), np.log1p(-p)))
            new = int(Z[i, seen:].sum())
            log_seq += stats.poisson.logpmf(new, ALPHA / (i + 1))
            counts += Z[i]
            seen += new
        assert expected == pytest.approx(log_seq, abs=1e-9)


def test_alpha_conditional_and_harmonic_number():
    assert float(ibp.harmonic_number(4)) == pytest.approx(1 + 1 / 2 + 1 / 3 + 1 / 4)
    shape, rate = ibp.alpha_posterior(5, 4, 2.0, 3.0)
    assert float(shape) == 7.0 and float(rate) == pytest.approx(3 + 25 / 12)
    draws = jax.vmap(lambda k: ibp.sample_alpha(k, 5, 4, 2.0, 3.0))(
        jax.random.split(jax.random.key(0), 20_000)
    )
    mean = 7.0 / (3 + 25 / 12)
    assert abs(float(draws.mean()) - mean) < 4 * math.sqrt(7.0) / (3 + 25 / 12) / math.sqrt(2e4)
    with pytest.raises(ValueError, match="form"):
        ibp.log_prob(np.ones((2, 2)), 1.0, form="nope")


def test_prior_gibbs_matches_direct_draws():
    """Geweke without data: K+, column-sum statistics and alpha against buffet draws."""
    rows, capacity = 6, 40

    def statistics(state, data):
        m = state.Z.sum(0)
        return {
            "K+": jnp.sum(m > 0).astype(float),
            "sum m": jnp.sum(m),
            "sum m^2": jnp.sum(m**2),
            "#features with m=1": jnp.sum(m == 1).astype(float),
            "#features with m=N": jnp.sum(m == rows).astype(float),
            "alpha": state.alpha,
        }

    def prior_sample(key):
        key_alpha, key_z = jax.random.split(key)
        alpha = jax.random.gamma(key_alpha, 4.0) / 4.0
        return IBPState(ibp.sample_buffet(key_z, alpha, rows, capacity).Z, alpha)

    result = geweke_test(
        jax.random.key(0),
        prior_sample=prior_sample,
        data_sample=lambda key, state: jnp.zeros(()),
        kernel=lambda data: prior_gibbs(
            rows, alpha=1.0, alpha_prior=(4.0, 4.0), capacity=capacity, kappa=10
        ),
        test_functions=statistics,
        num_successive=6000,
    )
    assert result.passed, str(result)


def test_prior_gibbs_grows_its_buffer():
    import bnpjax

    idata = bnpjax.sample(
        prior_gibbs(20, alpha=4.0, capacity=2),
        jax.random.key(0),
        200,
        num_warmup=20,
        progress_bar=False,
    )
    assert idata.attrs["num_resizes"] >= 1
    k = idata.sample_stats["num_features"].values.astype(float)
    assert k.max() > 2 and idata.attrs["capacity"] >= k.max()
    import arviz as az

    harmonic = sum(1 / i for i in range(1, 21))
    assert abs(k.mean() - 4.0 * harmonic) < 4.5 * float(az.mcse(k, method="mean"))


def test_nonempty_column_draw_matches_the_restricted_bernoulli_law():
    """N = 3 rows: the 7 non-empty patterns against prod q^z (1 - q)^(1 - z), renormalized,
    within 5 Monte Carlo standard errors; and no draw is empty."""
    log_odds = jnp.array([-1.5, 0.3, 2.0])
    n = 100_000
    draws = jax.vmap(lambda k: ibp.sample_nonempty_column(k, log_odds))(
        jax.random.split(jax.random.key(0), n)
    )
    draws = np.asarray(draws).astype(int)
    assert draws.sum(1).min() == 1
    q = 1.0 / (1.0 + np.exp(-np.asarray(log_odds)))
    codes = draws @ np.array([4, 2, 1])
    for code in range(1, 8):
        z = np.array([(code >> 2) & 1, (code >> 1) & 1, code & 1])
        p = np.prod(np.where(z == 1, q, 1 - q)) / (1 - np.prod(1 - q))
        freq = np.mean(codes == code)
        assert abs(freq - p) < 5 * np.sqrt(p * (1 - p) / n), (z, freq, p)


def test_feature_log_odds_is_the_logit_of_a_beta_draw():
    """sigmoid(feature_log_odds) ~ Beta(m, N - m + 1): Kolmogorov-Smirnov against SciPy, and
    a Beta with the counts swapped is rejected by the same test."""
    z_k = jnp.array([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0])  # m = 3 of N = 7
    draws = jax.vmap(lambda k: ibp.feature_log_odds(k, z_k))(
        jax.random.split(jax.random.key(1), 20_000)
    )
    pi = 1.0 / (1.0 + np.exp(-np.asarray(draws, dtype=np.float64)))
    assert stats.kstest(pi, stats.beta(3, 5).cdf).pvalue > 1e-3
    assert stats.kstest(pi, stats.beta(5, 3).cdf).pvalue < 1e-6
