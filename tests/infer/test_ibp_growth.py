"""bnpjax.infer.run_with_growth: NumPyro's loop with the IBP capacity grown by restarts. The
kept run is the run at the final capacity, draw for draw; no step of it needed more room;
bad input is refused before anything is traced."""

import warnings

import jax
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer import MCMC, NUTS, Gibbs

from bnpjax.infer import GrowthReport, IBPGibbs, run_with_growth
from bnpjax.priors.ibp_distribution import IndianBuffetProcess

ROWS, DIMS = 8, 3


def model(X, capacity=2):
    # alpha = 1 on 8 rows: about 2.7 features a priori, the data hold 3: a buffer of 1 grows
    Z = numpyro.sample("Z", IndianBuffetProcess(1.0, ROWS, capacity=capacity))
    A = numpyro.sample("A", dist.Normal(0.0, 1.0).expand([capacity, DIMS]).to_event(2))
    with numpyro.plate("rows", ROWS):
        numpyro.sample("X", dist.Normal(Z @ A, 0.5).to_event(1), obs=X)


def _mcmc(num_warmup=10):
    # the start drawn from the model: init_features' 10 would fill any buffer of 10 or less;
    # no pair or anchored moves: the runner is under test, and they would double the compile
    kernel = Gibbs(
        [
            (
                IBPGibbs(
                    model, init_features=None, split_merge=0, anchored_splits=0, anchored_births=0
                ),
                ["Z", "A"],
            )
        ]
    )
    return MCMC(kernel, num_warmup=num_warmup, num_samples=10, num_chains=1, progress_bar=False)


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    Z = (rng.random((ROWS, 3)) < 0.5).astype(float)
    return Z @ rng.normal(size=(3, DIMS)) + 0.5 * rng.normal(size=(ROWS, DIMS))


def test_the_buffer_grows_and_the_kept_run_is_the_run_at_the_final_capacity(X):
    key = jax.random.key(2)
    mcmc = _mcmc()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = run_with_growth(mcmc, key, X, capacity=1)
    assert isinstance(report, GrowthReport)
    assert report.num_restarts >= 1 and report.capacity["capacity"] >= 2
    assert report.model_kwargs == {"capacity": report.capacity["capacity"]}
    # the overflows of the runs started again are handled, not reported as truncation
    # (and the too-small prior draw of the first start is only a start)
    leaked = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not [m for m in leaked if "feature columns" in m or "the buffer holds" in m], leaked
    assert int(mcmc.last_state.block_states[0].num_overflows) == 0
    samples = mcmc.get_samples()
    capacity = report.capacity["capacity"]
    assert samples["Z"].shape == (10, ROWS, capacity)
    assert int(np.max(np.asarray(samples["Z"]).any(1).sum(-1))) <= capacity
    # draw for draw the run that started at the final capacity
    direct = _mcmc()
    direct.run(key, X, capacity=capacity)
    np.testing.assert_array_equal(direct.get_samples()["Z"], samples["Z"])
    np.testing.assert_allclose(direct.get_samples()["A"], samples["A"], rtol=1e-12)


def test_a_run_with_enough_room_is_not_started_again(X):
    mcmc = MCMC(
        Gibbs([(IBPGibbs(model, split_merge=0, anchored_splits=0, anchored_births=0), ["Z", "A"])]),
        num_warmup=0,
        num_samples=3,
        progress_bar=False,
    )
    report = run_with_growth(mcmc, jax.random.key(0), X, capacity=16)
    assert report.num_restarts == 0 and report.capacity == {"capacity": 16}


def test_overflows_are_counted_through_composites_beside_other_samplers():
    """Gibbs([(IBPGibbs, ...), (NUTS, None)]): the NUTS block's state has no blocks of its own
    and holds no IBP site; nested composites are walked."""
    from types import SimpleNamespace

    from bnpjax.infer.ibp_growth import _num_overflows

    ibp = IBPGibbs(model)
    nuts = NUTS(model)
    state = SimpleNamespace(num_overflows=np.array([0, 2]))  # two chains
    hmc_state = SimpleNamespace(z={}, potential_energy=0.0)
    inner = SimpleNamespace(blocks=[(ibp, ["Z", "A"]), (nuts, None)])
    outer = SimpleNamespace(blocks=[(inner, ["Z", "A"]), (nuts, None)])
    inner_state = SimpleNamespace(block_states=(state, hmc_state))
    assert _num_overflows(outer, SimpleNamespace(block_states=(inner_state, hmc_state))) == 2
    assert _num_overflows(nuts, hmc_state) == 0


def test_growth_stops_at_max_capacity(X):
    with pytest.raises(RuntimeError, match="max_capacity=2"):
        run_with_growth(_mcmc(num_warmup=2), jax.random.key(0), X, capacity=1, max_capacity=2)


def _normal():
    numpyro.sample("a", dist.Normal())


def _normal():
    numpyro.sample("a", dist.Normal())


def _fixed(X, size=4):
    Z = numpyro.sample("Z", IndianBuffetProcess(1.0, ROWS, capacity=4))
    numpyro.sample("X", dist.Normal(Z.sum(-1, keepdims=True), 1.0).to_event(1), obs=X)


@pytest.mark.parametrize(
    ("build", "kwargs", "match"),
    [
        (lambda: "mcmc", {"capacity": 4}, "mcmc must be a numpyro.infer.MCMC"),
        (
            lambda: MCMC(NUTS(_normal), num_warmup=1, num_samples=1),
            {"capacity": 4},
            "no IBPGibbs block",
        ),
        (_mcmc, {}, "'capacity' is not among the model's keyword arguments"),
        (
            lambda: MCMC(_mcmc().sampler, num_warmup=1, num_samples=1, jit_model_args=True),
            {"capacity": 4},
            "jit_model_args=True",
        ),
        (_mcmc, {"capacity": 0}, "capacity must be a positive integer"),
        (_mcmc, {"capacity": 2.5}, "capacity must be a positive integer"),
        (_mcmc, {"capacity": 8, "max_capacity": 4}, "max_capacity"),
        (_mcmc, {"capacity": 8, "max_capacity": "big"}, "max_capacity must be an integer"),
        (
            lambda: MCMC(IBPGibbs(_fixed), num_warmup=1, num_samples=1),
            {"capacity": 4},
            "the model takes no keyword argument 'capacity'",
        ),
    ],
)
def test_bad_input_is_refused_before_tracing(X, build, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_with_growth(build(), jax.random.key(0), X, **kwargs)


def test_a_warmed_up_mcmc_is_refused(X):
    mcmc = _mcmc(num_warmup=1)
    mcmc.post_warmup_state = "something"  # as after mcmc.warmup(...)
    with pytest.raises(ValueError, match="post_warmup_state"):
        run_with_growth(mcmc, jax.random.key(0), X, capacity=2)
