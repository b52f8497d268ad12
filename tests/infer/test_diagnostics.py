"""Every run says when it has not converged: split R-hat and bulk/tail ESS of the quantities a
run reports, a ConvergenceWarning in plain words when R-hat > 1.01 or ESS < 100 per chain.

Synthetic draws (no sampler) for the report itself; one tiny kernel through ``bnpjax.sample``
for the hook, with its opt-out."""

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnpjax
from bnpjax.infer import ArvizSpec, SamplingAlgorithm, arviz_adapter, bind
from bnpjax.infer.diagnostics import (
    ConvergenceWarning,
    check_convergence,
    convergence_report,
)

RNG = np.random.default_rng(0)
CHAINS, DRAWS = 4, 500


def _mixed(shape=()):
    return RNG.normal(size=(CHAINS, DRAWS, *shape))


def _stuck(shape=()):
    """Chains that each sit in their own place."""
    offsets = np.arange(CHAINS).reshape(CHAINS, 1, *(1,) * len(shape))
    return _mixed(shape) + 3.0 * offsets


def _sticky():
    """An AR(1) chain with autocorrelation 0.99: R-hat fine-ish, ESS tiny."""
    x = np.zeros((CHAINS, DRAWS))
    noise = RNG.normal(size=(CHAINS, DRAWS))
    for t in range(1, DRAWS):
        x[:, t] = 0.99 * x[:, t - 1] + noise[:, t]
    return x


def _no_warning(draws, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        return check_convergence(draws, **kwargs)


def test_well_mixed_chains_pass_quietly():
    draws = {
        "posterior": {"sigma": _mixed(), "beta": _mixed((3,))},
        "sample_stats": {"lp": _mixed(), "num_features": RNG.poisson(3.0, (CHAINS, DRAWS))},
    }
    report = _no_warning(draws)
    assert report.converged
    assert {v.name for v in report.variables} == {"sigma", "beta", "lp", "num_features"}
    assert all(v.r_hat < 1.01 and v.ess_bulk > 400 for v in report.variables)
    assert report.lines()[0].endswith("OK (R-hat <= 1.01, ESS >= 100 per chain)")


def test_stuck_chains_warn_naming_the_variables_and_what_to_do():
    beta = _mixed((3,))
    beta[:, :, 1] = _stuck()
    draws = {"posterior": {"sigma": _stuck(), "beta": beta}, "sample_stats": {"lp": _mixed()}}
    with pytest.warns(ConvergenceWarning) as caught:
        report = check_convergence(draws)
    text = str(caught[0].message)
    assert "NOT CONVERGED" in text and "sigma" in text and "beta[1]" in text
    assert "(1 of 3 values)" in text and "num_warmup" in text
    assert "lp" not in text.split("NOT CONVERGED")[1].split(":")[0]
    assert not report.converged
    assert {v.name for v in report.flagged} == {"sigma", "beta"}
    assert caught[0].filename == __file__  # points at the caller


def test_low_ess_warns_with_more_draws_advice():
    with pytest.warns(ConvergenceWarning, match=r"TOO FEW EFFECTIVE DRAWS.*x \d+.*num_samples"):
        report = check_convergence({"posterior": {"x": _sticky()}})
    (x,) = report.variables
    assert x.ess_bulk < 100 * CHAINS


def test_one_chain_reports_ess_and_says_r_hat_needs_two_chains():
    report = _no_warning({"posterior": {"x": RNG.normal(size=(1, 400))}})
    assert np.isnan(report.variables[0].r_hat) and report.converged
    assert "R-hat needs at least 2 chains" in report.lines()[0]
    with pytest.warns(ConvergenceWarning, match="R-hat needs at least 2 chains: run num_chains"):
        check_convergence({"posterior": {"x": _sticky()[:1]}})


def test_what_is_left_out():
    draws = {
        "posterior": {
            "alpha": _mixed(),
            "constant": np.ones((CHAINS, DRAWS)),
            "A": _stuck((2, 3)),  # per-feature values: label switching, not checked
            "many": _stuck((40,)),  # more values than MAX_ELEMENTS
        },
        "sample_stats": {"acceptance_rate": _stuck()},  # bookkeeping
    }
    idata = arviz_adapter.groups_to_inference_data(draws, dims={"A": ["feature", "dim"]})
    report = _no_warning(idata)
    assert [v.name for v in report.variables] == ["alpha"]
    assert set(report.skipped) == {"constant", "A", "many"}
    # named variables are checked whatever their dims
    with pytest.warns(ConvergenceWarning, match=r"A\[\d, \d\] .* \(6 of 6 values\)"):
        check_convergence(idata, var_names=["A"])
    with pytest.raises(ValueError, match=r"var_names.*'nope'"):
        convergence_report(idata, var_names=["nope"])


def test_too_short_runs_are_not_diagnosed():
    report = _no_warning({"posterior": {"x": RNG.normal(size=(2, 3))}})
    assert report.lines() == ["convergence: not checked (3 draws per chain)"]


def test_both_arviz_lines():
    draws = {"posterior": {"x": _stuck()}, "sample_stats": {"lp": _mixed()}}
    for line in ("0", "1"):
        if line == "1":
            pytest.importorskip("arviz_base")
        previous = arviz_adapter.set_backend(line)
        try:
            data = arviz_adapter.groups_to_inference_data(draws)
        finally:
            arviz_adapter.set_backend(previous)
        report = check_convergence(data, warn=False)
        assert [v.name for v in report.flagged] == ["x"]


# --------------------------------------------------------------------------------------------
# through bnpjax.sample


class _State(NamedTuple):
    x: jax.Array


class _Info(NamedTuple):
    lp: jax.Array


def _init(spread, key):
    return _State(spread * jax.random.normal(key))


def _step(spread, step_size, key, state):
    # an exact Gaussian autoregression leaving N(0, spread^2) invariant: step_size 1 draws
    # independently, a tiny step_size leaves each chain near its start
    rho = jnp.sqrt(1.0 - step_size**2)
    x = rho * state.x + step_size * spread * jax.random.normal(key)
    return _State(x), _Info(-0.5 * (x / spread) ** 2)


def _autoregression(step_size):
    return SamplingAlgorithm(
        init=bind(_init, jnp.asarray(5.0)),
        step=bind(_step, jnp.asarray(5.0), jnp.asarray(step_size)),
        spec=ArvizSpec(name="test.autoregression"),
    )


def test_sample_warns_unless_told_not_to():
    key = jax.random.key(0)
    run = dict(num_chains=4, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        bnpjax.sample(_autoregression(1.0), key, 1000, **run)
    with pytest.warns(ConvergenceWarning, match="NOT CONVERGED.*x") as caught:
        bnpjax.sample(_autoregression(1e-3), key, 50, **run)
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        bnpjax.sample(_autoregression(1e-3), key, 50, check_convergence=False, **run)


def test_command_line_summary_prints_the_diagnostics_under_the_table():
    from bnpjax.cli.output import summary

    draws = {"posterior": {"b": _stuck(), "sigma": _mixed()}, "sample_stats": {"lp": _mixed()}}
    table = summary(arviz_adapter.groups_to_inference_data(draws), ["b", "sigma"])
    text = table.to_string().splitlines()
    assert text[0].split() == ["mean", "sd", "hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat"]
    assert text[3].startswith("convergence (4 chains x 500 draws, 2 quantities)")
    assert text[4].startswith("NOT CONVERGED: R-hat above 1.01 for b ")
    table["extra"] = 1.0  # callers add columns; the lines stay under the table
    assert table.to_string().splitlines()[3:] == text[3:]


def test_move_counters_are_bookkeeping_not_posterior_quantities():
    # a sampler's counts of accepted births, deaths, merges and splits describe the sampler:
    # chains that differ in them have not failed to converge
    rng = np.random.default_rng(0)
    trace = {
        "posterior": {"x": rng.normal(size=(4, 400))},
        "sample_stats": {
            name: np.arange(4)[:, None] + np.zeros((4, 400))
            for name in ("birth_acceptance", "births_deaths", "merges_splits")
        },
    }
    report = convergence_report(trace)
    assert [v.name for v in report.variables] == ["x"]


def _same_report(a, b) -> bool:
    """Equal reports, their floats up to rounding: an estimate's FFT runs vectorized over a
    block of columns, so a column's last bits depend on the columns estimated with it."""
    fa, fb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
        return False
    return all(
        np.isclose(x, y, rtol=1e-12, atol=0, equal_nan=True) if isinstance(x, float) else x == y
        for x, y in zip(fa, fb, strict=True)
    )


def test_checking_the_same_draws_again_reuses_their_estimates(monkeypatch):
    """A run is often checked twice (by sample, then by a summary): the second check of the
    same draws estimates nothing again, a variable whose draws changed is estimated anew, and
    the reports are the same as from scratch (up to rounding: :func:`_same_report`)."""
    from bnpjax.infer import diagnostics

    draws = {"posterior": {"a": _stuck(), "b": _mixed((3,))}}
    first = convergence_report(draws)
    counted = []
    real = diagnostics.summary_estimates
    monkeypatch.setattr(
        diagnostics, "summary_estimates", lambda v: counted.append(v.shape[2]) or real(v)
    )
    assert convergence_report(draws) == first and counted == []
    changed = {"posterior": {"a": _mixed(), "b": draws["posterior"]["b"]}}
    again = convergence_report(changed)
    assert counted == [1]  # only "a"
    monkeypatch.setattr(diagnostics, "_RECENT", type(diagnostics._RECENT)())
    assert _same_report(convergence_report(changed), again)
    assert first.variables[0].r_hat > 1.5 > again.variables[0].r_hat
