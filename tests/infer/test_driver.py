"""The driver: posterior correctness on the reference model, determinism, growth, compilation."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bnpjax
from bnpjax.infer import ArvizSpec, SamplingAlgorithm, bind, compile_count, driver, run
from bnpjax.models import linear_regression as lr
from bnpjax.testing.kernels import poisson_birth_death


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.7 * rng.normal(size=40)
    mask = np.ones(40, bool)
    mask[::7] = False  # unobserved entries must be ignored, not treated as zeros
    y[~mask] = np.nan
    data = lr.make_data(X, y, mask)
    prior = lr.make_hyper(3, mean=0.0, precision=0.5, a=2.0, b=1.0)
    return data, prior


def test_reference_posterior_matches_closed_form(regression):
    data, prior = regression
    idata = bnpjax.sample(
        lr.gibbs(data, hyper=prior),
        jax.random.key(0),
        2000,
        num_warmup=100,
        num_chains=4,
        progress_bar=False,
    )
    truth = lr.posterior_moments(data, prior)
    import arviz as az

    post = idata.posterior
    for name, index in [("beta", 0), ("beta", 1), ("beta", 2), ("tau", None), ("sigma", None)]:
        draws = post[name].values if index is None else post[name].values[..., index]
        mean_true = truth[f"{name}_mean"] if index is None else truth[f"{name}_mean"][index]
        var_true = truth[f"{name}_var"] if index is None else truth[f"{name}_var"][index]
        mcse = float(az.mcse(draws, method="mean"))
        # 4.5 sigma: 5 quantities, familywise false alarm < 1e-4
        assert abs(draws.mean() - mean_true) < 4.5 * mcse, (name, index)
        # the variance estimate: MC error of E[x^2] approximated through the ESS of x
        ess = float(az.ess(draws, method="mean"))
        var_se = var_true * np.sqrt(2.0 / ess) * 1.5
        assert abs(draws.var() - var_true) < 4.5 * var_se, (name, index)


def test_draws_do_not_depend_on_chunking_progress_or_thinning(regression):
    data, prior = regression
    alg = lr.gibbs(data, hyper=prior)
    key = jax.random.key(42)
    base = run(alg, key, 30, num_warmup=7, num_chains=2, progress_bar=False, chunk_size=1000)
    other = run(alg, key, 30, num_warmup=7, num_chains=2, progress_bar=True, chunk_size=4)
    np.testing.assert_array_equal(base.trace["posterior"]["beta"], other.trace["posterior"]["beta"])
    thinned = run(
        alg, key, 15, num_warmup=7, num_chains=2, thin=2, progress_bar=False, chunk_size=5
    )
    np.testing.assert_array_equal(
        thinned.trace["posterior"]["beta"], base.trace["posterior"]["beta"][:, 1::2]
    )
    assert base.trace["posterior"]["beta"].shape == (2, 30, 3)
    # chains differ from each other
    assert not np.array_equal(base.trace["posterior"]["tau"][0], base.trace["posterior"]["tau"][1])


def test_while_running_is_called_once_while_the_first_chunk_runs(regression, monkeypatch):
    """run() calls while_running once, after the first chunk is dispatched (the chunk's
    results are not yet read: on_chunk, which reads them, comes after); sample() passes the
    import of the ArviZ backend, and the draws do not change."""
    data, prior = regression
    alg = lr.gibbs(data, hyper=prior)
    key = jax.random.key(3)
    calls = []
    monkeypatch.setattr(driver, "_progress_postfix", lambda *a: calls.append("chunk read"))
    kwargs = dict(num_warmup=6, num_chains=2, chunk_size=4)
    with_hook = run(alg, key, 12, **kwargs, while_running=lambda: calls.append("idle"))
    assert calls[0] == "idle" and calls.count("idle") == 1
    plain = run(alg, key, 12, **kwargs, progress_bar=False)
    np.testing.assert_array_equal(
        with_hook.trace["posterior"]["beta"], plain.trace["posterior"]["beta"]
    )
    prepared = []
    monkeypatch.setattr(driver, "prepare_backend", lambda: prepared.append(True))
    bnpjax.sample(alg, key, 5, num_chains=2, progress_bar=False, check_convergence=False)
    assert prepared == [True]
    with pytest.raises(ValueError, match="while_running"):
        run(alg, key, 2, while_running=3, progress_bar=False)


def test_thinned_warmup_runs_the_sampling_program():
    # rows no other test uses, so nothing is cached: the init program and one chunk program
    # for warmup (two draws of 3 steps) and sampling alike, the kernel's step traced once
    rng = np.random.default_rng(5)
    alg = lr.gibbs(lr.make_data(rng.normal(size=(37, 3)), rng.normal(size=37)))
    before = compile_count()
    run(alg, jax.random.key(5), 4, num_warmup=6, thin=3, progress_bar=False)
    assert compile_count() - before == 2


def _adaptive_init(key):
    return {"x": jnp.zeros(()), "log_scale": jnp.zeros(()), "adapting": jnp.zeros((), bool)}


def _adaptive_step(key, state):
    """A random walk whose log scale grows by 0.1 at every step taken while adapting."""
    x = state["x"] + jnp.exp(state["log_scale"]) * jax.random.normal(key)
    log_scale = jnp.where(state["adapting"], state["log_scale"] + 0.1, state["log_scale"])
    return {**state, "x": x, "log_scale": log_scale}, {"adapted": state["adapting"]}


def _switch(state, on):
    return {**state, "adapting": jnp.asarray(on)}


@pytest.mark.parametrize(
    ("num_warmup", "thin", "num_chains", "programs"), [(7, 1, 3, 2), (7, 3, 4, 3), (0, 2, 5, 2)]
)
def test_adaptation_switched_in_the_state_is_on_for_every_warmup_step_only(
    num_warmup, thin, num_chains, programs
):
    # every warmup step adapts (7 steps: log scale 0.7, also when 7 = 2 draws of 3 + 1 single
    # step), no kept step does, and warmup runs the sampling program: init + one chunk program
    # (+ one of single steps for the remainder of a thinned warmup); chains
    # (3, 4, 5) for the three cases, shapes no other test uses, so nothing is cached
    alg = SamplingAlgorithm(
        init=_adaptive_init, step=_adaptive_step, set_adaptation=_switch, spec=ArvizSpec("toy")
    )
    before = compile_count()
    result = run(alg, jax.random.key(0), 5, num_warmup=num_warmup, thin=thin,
                 num_chains=num_chains, progress_bar=False)  # fmt: skip
    assert compile_count() - before == programs
    np.testing.assert_allclose(result.trace["posterior"]["log_scale"], 0.1 * num_warmup, 1e-6)
    assert not np.any(result.trace["sample_stats"]["adapted"])
    assert not np.any(np.asarray(result.final_state["adapting"]))
    assert np.ptp(result.trace["posterior"]["x"]) > 0  # the chains move


def test_continuing_a_run_equals_one_long_run(regression):
    data, prior = regression
    alg = lr.gibbs(data, hyper=prior)
    key = jax.random.key(3)
    whole = run(alg, key, 20, num_chains=2, progress_bar=False)
    first = run(alg, key, 12, num_chains=2, progress_bar=False)
    second = run(
        alg,
        key,
        8,
        num_chains=2,
        progress_bar=False,
        initial_state=first.final_state,
        start_step=first.num_steps,
    )
    joined = np.concatenate(
        [first.trace["posterior"]["tau"], second.trace["posterior"]["tau"]], axis=1
    )
    np.testing.assert_array_equal(joined, whole.trace["posterior"]["tau"])


def test_second_fit_with_same_shapes_does_not_recompile(regression):
    data, prior = regression
    key = jax.random.key(0)
    bnpjax.sample(lr.gibbs(data, hyper=prior), key, 50, num_warmup=10, progress_bar=False)
    before = compile_count()
    other = data._replace(y=data.y + 1.0)
    idata = bnpjax.sample(lr.gibbs(other, hyper=prior), key, 50, num_warmup=10, progress_bar=False)
    assert compile_count() == before
    assert idata.attrs.get("compile_s", 0.0) == 0.0


def test_capacity_growth_reproduces_an_unbounded_buffer():
    key = jax.random.key(7)
    small = run(
        poisson_birth_death(4.0, capacity=1),
        key,
        400,
        num_warmup=50,
        num_chains=3,
        progress_bar=False,
        chunk_size=37,
    )
    large = run(
        poisson_birth_death(4.0, capacity=64),
        key,
        400,
        num_warmup=50,
        num_chains=3,
        progress_bar=False,
        chunk_size=37,
    )
    assert small.settings["num_resizes"] >= 2
    assert small.algorithm.capacity >= 8
    k_small = small.trace["sample_stats"]["num_features"]
    np.testing.assert_array_equal(k_small, large.trace["sample_stats"]["num_features"])
    cap = small.algorithm.capacity
    np.testing.assert_array_equal(
        small.trace["posterior"]["values"], large.trace["posterior"]["values"][..., :cap]
    )
    # kept draws from before the growth are padded, and their padding is inactive
    assert small.trace["posterior"]["active"].shape[-1] == cap
    np.testing.assert_array_equal(small.trace["posterior"]["active"].sum(-1), k_small)
    assert k_small.max() > 1


def test_birth_death_targets_poisson():
    import arviz as az

    idata = bnpjax.sample(
        poisson_birth_death(3.0, capacity=2),
        jax.random.key(1),
        4000,
        num_warmup=200,
        num_chains=4,
        progress_bar=False,
    )
    k = idata.sample_stats["num_features"].values.astype(float)
    mcse = float(az.mcse(k, method="mean"))
    assert abs(k.mean() - 3.0) < 4 * mcse
    assert idata.attrs["capacity"] >= 8


def test_warmup_step_is_used_only_during_warmup():
    def _init(key):
        return jnp.zeros(())

    def _count(increment, key, state):
        return state + increment, {"lp": state}

    alg = SamplingAlgorithm(
        init=_init,
        step=bind(_count, jnp.asarray(1.0)),
        warmup_step=bind(_count, jnp.asarray(100.0)),
    )
    result = run(alg, jax.random.key(0), 5, num_warmup=3, progress_bar=False)
    np.testing.assert_array_equal(result.trace["posterior"]["value"][0], 300 + np.arange(1, 6))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": 10, "thin": 0}, "thin"),
        ({"num_samples": 10, "num_chains": 1.5}, "num_chains"),
        ({"num_samples": 10, "num_warmup": -1}, "num_warmup"),
    ],
)
def test_bad_driver_arguments(regression, kwargs, message):
    data, prior = regression
    with pytest.raises(ValueError, match=message):
        run(lr.gibbs(data, hyper=prior), jax.random.key(0), progress_bar=False, **kwargs)


def test_bad_algorithm_and_key(regression):
    data, prior = regression
    with pytest.raises(ValueError, match="SamplingAlgorithm"):
        run((lambda k: 0, lambda k, s: (s, s)), jax.random.key(0), 5)
    with pytest.raises(ValueError, match="key"):
        run(lr.gibbs(data, hyper=prior), jnp.zeros(3, jnp.uint32), 5, progress_bar=False)
    bad_keys = (
        jnp.zeros(2),  # float, shape (2,): not a PRNGKey
        np.array([0, 1]),  # signed integers
        jax.random.split(jax.random.key(0), 2),  # a batch of typed keys
        "seed",
        None,
    )
    for bad in bad_keys:
        with pytest.raises(ValueError, match="key"):
            run(lr.gibbs(data, hyper=prior), bad, 5, progress_bar=False)


def test_flags_must_be_bools(regression):
    """A truthy string for a flag of sample/run (or check_convergence's warn) is refused
    naming it, before anything compiles; NumPy bools are bools."""
    data, prior = regression
    algorithm = lr.gibbs(data, hyper=prior)
    before = compile_count()
    for name in ("progress_bar", "check_convergence"):
        with pytest.raises(ValueError, match=name):
            bnpjax.sample(algorithm, jax.random.key(0), 5, **{name: "no"})
    with pytest.raises(ValueError, match="progress_bar"):
        run(algorithm, jax.random.key(0), 5, progress_bar="no")
    assert compile_count() == before
    result = run(algorithm, jax.random.key(0), 5, progress_bar=np.False_)
    with pytest.raises(ValueError, match="warn"):
        bnpjax.infer.diagnostics.check_convergence(result, warn="no")


def test_initial_state_needs_a_chain_axis(regression):
    data, prior = regression
    state = lr.LinearRegressionState(jnp.zeros(3), jnp.ones(()))
    with pytest.raises(ValueError, match="initial_state"):
        run(
            lr.gibbs(data, hyper=prior),
            jax.random.key(0),
            5,
            num_chains=2,
            initial_state=state,
            progress_bar=False,
        )


def test_single_chain_runs_unbatched_with_the_same_draws(regression):
    """One chain skips vmap (a speed path); its draws must equal the vmapped kernel's."""
    from bnpjax.infer.driver import _over_chains

    data, prior = regression
    algorithm = lr.gibbs(data, hyper=prior)
    keys = jax.random.split(jax.random.key(3), 1)
    states = jax.vmap(algorithm.init)(keys)
    direct = _over_chains(algorithm.step)(keys, states)
    batched = jax.vmap(algorithm.step)(keys, states)
    for a, b in zip(jax.tree.leaves(direct), jax.tree.leaves(batched), strict=True):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-6)
    two = jax.random.split(jax.random.key(3), 2)
    pair = _over_chains(algorithm.step)(two, jax.vmap(algorithm.init)(two))
    assert jax.tree.leaves(pair)[0].shape[0] == 2


def test_compiled_programs_are_bounded(monkeypatch):
    # an unbounded cache kept every executable (and its memory mappings) of a long session
    from bnpjax.infer import programs
    from bnpjax.models import linear_regression as lr

    monkeypatch.setattr(programs, "MAX_COMPILED_PROGRAMS", 2)
    programs.clear_compile_cache()
    for n in (10, 11, 12):
        X = np.random.default_rng(n).normal(size=(n, 2))
        kernel = lr.gibbs(lr.make_data(X, X @ np.ones(2)))
        bnpjax.sample(kernel, jax.random.key(0), 2, progress_bar=False)
        assert len(programs._COMPILED) <= 2
    before = bnpjax.infer.compile_count()
    bnpjax.sample(kernel, jax.random.key(1), 2, progress_bar=False)  # the newest is kept
    assert bnpjax.infer.compile_count() == before
