"""The infinite latent feature relational model: capacity growth, link prediction on a planted
structure, the pointwise log-likelihood, loaders, input validation and the deprecated names.
(Its Geweke cases are in tests/geweke_cases/ilfm.py.)"""

import warnings

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tiers import long_only

from bnpjax.datasets import DataNotFoundError, kinship, nations, umls
from bnpjax.infer import predictive, run, to_inference_data
from bnpjax.metrics import roc_auc
from bnpjax.models import ilfm
from bnpjax.models.ilfm.joint import probabilities, single_probabilities


def _planted(seed, num_entities=30, num_relations=3):
    """Two latent communities with relation-specific block weights."""
    rng = np.random.default_rng(seed)
    F = np.zeros((num_entities, 2))
    F[: num_entities // 2, 0] = 1
    F[num_entities // 2 :, 1] = 1
    W = rng.normal(0, 3, size=(num_relations, 2, 2))
    logits = np.einsum("ik,rkl,jl->rij", F, W, F) - 1.0
    return (rng.random(logits.shape) < 1 / (1 + np.exp(-logits))).astype(float)


def test_link_prediction_on_a_planted_structure_and_capacity_growth():
    Y = _planted(0)
    rng = np.random.default_rng(1)
    held = rng.random(Y.shape) < 0.2
    data = ilfm.make_data(Y, mask=~held)
    # capacity 2 forces the driver to grow the feature buffer
    algorithm = ilfm.gibbs(data, capacity=2, num_init_features=2)
    # 200 warmup sweeps: the step size adapts to the weights of the features the chain has
    # by then; after 100, births still under way left the kept draws' step too large for
    # some keys (mean acceptance over keys 0-7: 0.39-0.88 after 100, 0.63-0.87 after 200;
    # 2026-11-30, after the Gamma sampler changed the chains' draws)
    result = run(algorithm, jax.random.key(0), 150, num_warmup=200, progress_bar=False)
    assert result.algorithm.capacity > 2
    post = result.trace["posterior"]
    probs = jax.vmap(jax.vmap(probabilities))(
        ilfm.ILFMState(
            post["F"],
            post["W"],
            post["bias"],
            post["alpha"],
            jnp.zeros(post["alpha"].shape),
            jnp.zeros((*post["bias"].shape, 0)),
        )
    ).mean(axis=(0, 1))
    # the public posterior mean: the same average, in batches of draws
    np.testing.assert_allclose(ilfm.predict(result.trace, data, batch_size=40), probs, rtol=1e-5)
    # 150 draws in batches of 40: the last batch is padded, so one program serves every call
    programs = predictive._apply._cache_size()
    ilfm.predict(result.trace, data, batch_size=40)
    assert predictive._apply._cache_size() == programs
    off = ~np.eye(Y.shape[1], dtype=bool)[None]
    test = held & off
    # the held-out entries only: the same numbers, in the order of np.nonzero
    np.testing.assert_allclose(
        ilfm.predict(result.trace, data, test, batch_size=40), probs[test], rtol=1e-5
    )
    auc = roc_auc(np.asarray(Y[test]), np.asarray(probs)[test])
    assert auc > 0.85, auc
    acceptance = np.asarray(result.trace["sample_stats"]["acceptance_rate"])
    assert np.all((acceptance >= 0) & (acceptance <= 1))  # probabilities, no NaN
    # warmup adapts the HMC step towards acceptance 0.8 (0.63-0.87 over keys 0-7): a step
    # that collapsed (acceptance near 0) or stopped adapting and shrank (near 1) fails here
    assert 0.5 < float(acceptance.mean()) < 0.95, acceptance.mean()


def test_cluster_start_finds_the_planted_communities():
    """k-means on the link profiles recovers the two planted communities exactly (up to the
    order of the clusters), unobserved entries and all; the start uses them as features."""
    Y = _planted(3, num_entities=30, num_relations=3)
    held = np.random.default_rng(4).random(Y.shape) < 0.2
    data = ilfm.make_data(Y, mask=~held)
    F = np.asarray(ilfm.cluster_features(jax.random.key(0), data, 2))
    labels = F.argmax(1)
    assert np.all(F.sum(1) == 1)
    assert len(set(labels[:15])) == 1 and len(set(labels[15:])) == 1 and labels[0] != labels[15]
    algorithm = ilfm.gibbs(data, capacity=4, num_init_features=2, init_strategy="cluster")
    state = algorithm.init(jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(state.F)[:, :2], F)
    assert np.all(np.asarray(state.F)[:, 2:] == 0)
    with pytest.raises(ValueError, match="init_strategy"):
        ilfm.gibbs(data, init_strategy="irm")
    with pytest.raises(ValueError, match="num_init_features"):
        ilfm.gibbs(data, num_init_features=0, init_strategy="cluster")
    with pytest.raises(ValueError, match="num_init_features 5 > capacity 3"):
        ilfm.gibbs(data, capacity=3, num_init_features=5)  # was quietly cut to 3
    with pytest.raises(ValueError, match="num_clusters"):
        ilfm.cluster_features(jax.random.key(0), data, 0)


def test_loaders_shapes_and_masks():
    try:
        kin = kinship()
    except DataNotFoundError as err:
        pytest.skip(f"relational data not available here: {err}")
    assert kin.Y.shape == (26, 104, 104) and int(kin.Y.sum()) == 10_686
    assert not kin.mask[:, np.arange(104), np.arange(104)].any()
    nat = nations()
    assert nat.Y.shape == (56, 14, 14) and int(nat.mask.sum()) == 56 * 14 * 13 - 435
    uml = umls()
    assert uml.Y.shape == (49, 135, 135) and int(uml.Y.sum()) == 6_529
    ilfm.make_data(nat.Y, nat.mask)  # loads straight into the model


def test_bad_input_is_rejected_naming_the_argument():
    with pytest.raises(ValueError, match="binary"):
        ilfm.make_data(np.full((3, 3), 2.0))
    with pytest.raises(ValueError, match="Y must be"):
        ilfm.make_data(np.zeros((3, 4)))
    with pytest.raises(ValueError, match="mask must have"):
        ilfm.make_data(np.zeros((3, 3)), mask=np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="no observed"):
        ilfm.make_data(np.zeros((3, 3)), mask=np.zeros((3, 3), bool))
    with pytest.raises(ValueError, match="capacity"):
        ilfm.gibbs(ilfm.make_data(np.zeros((3, 3))), capacity=0)
    for name in ("merge_split", "nest"):
        for bad in (-1, 1.5):
            with pytest.raises(ValueError, match=name):
                ilfm.gibbs(ilfm.make_data(np.zeros((3, 3))), **{name: bad})
            with pytest.raises(ValueError, match=name):
                ilfm.gibbs.build_step(**{name: bad})
    with pytest.raises(ValueError, match="sigma_w"):
        ilfm.make_hyper(sigma_w=-1.0)
    for bad in ((1.0,), 1.0, (1.0, 2.0, 3.0)):
        with pytest.raises(ValueError, match="alpha_prior must be"):
            ilfm.make_hyper(alpha_prior=bad)
    for flag in ("observe_diagonal", "standardize"):  # "no" was read as True
        with pytest.raises(ValueError, match=f"{flag} must be True or False"):
            ilfm.make_data(np.zeros((3, 3)), **{flag: "no"})
    with pytest.raises(ValueError, match="covariates must be"):
        ilfm.make_data(np.zeros((3, 3)), covariates=np.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="entity_covariates contains NaN"):
        ilfm.make_data(np.zeros((3, 3)), entity_covariates=np.array([1.0, np.nan, 0.0]))
    with pytest.raises(ValueError, match="weights='hmc'"):
        ilfm.gibbs(ilfm.make_data(np.zeros((3, 3)), covariates=np.eye(3)), weights="random_walk")
    for bad in (np.inf, -np.inf):  # only NaN means unobserved
        Y = np.zeros((3, 3))
        Y[0, 1] = bad
        with pytest.raises(ValueError, match="Y must not contain"):
            ilfm.make_data(Y)
    data = ilfm.make_data(np.zeros((3, 3)))
    for bad in (np.nan, 0.0, -1.0, np.inf, True, "1"):
        with pytest.raises(ValueError, match="alpha"):
            ilfm.gibbs(data, alpha=bad)
    with pytest.raises(ValueError, match="step_size"):
        ilfm.gibbs(data, step_size=0.0)
    with pytest.raises(ValueError, match="hyper must come from"):
        ilfm.gibbs(data, hyper=(1.0, 1.0, 1.0, 3.0, 1.0))
    # NaN marks an unobserved entry, not an error
    Y = np.zeros((3, 3))
    Y[0, 1] = np.nan
    assert float(ilfm.make_data(Y).mask[0, 0, 1]) == 0.0


def test_single_mode_runs_one_model_per_relation():
    Y = _planted(2, num_entities=16, num_relations=2)
    data = ilfm.make_data(Y)
    algorithm = ilfm.gibbs(data, mode="single", capacity=8)
    result = run(algorithm, jax.random.key(1), 20, num_warmup=20, progress_bar=False)
    post = result.trace["posterior"]
    assert post["F"].shape == (1, 20, 2, 16, result.algorithm.capacity)
    assert post["alpha"].shape == (1, 20, 2)
    probs = single_probabilities(jax.tree.map(lambda x: x[0], result.final_state))
    assert probs.shape == (2, 16, 16)
    # the posterior mean over the 20 draws, from the InferenceData, in batches of 7
    mean = ilfm.predict(to_inference_data(result), data, batch_size=7)
    per_draw = [
        single_probabilities(
            ilfm.ILFMState(  # the trace drops the state's per-model relation axis
                post["F"][0, d],
                post["W"][0, d][:, None],
                post["bias"][0, d][:, None],
                post["alpha"][0, d],
                np.zeros(2),
                np.zeros((2, 1, 0)),
            )
        )
        for d in range(20)
    ]
    np.testing.assert_allclose(mean, np.mean(per_draw, axis=0), rtol=1e-5)
    with pytest.raises(ValueError, match="draws must be"):
        ilfm.predict(post, data)
    with pytest.raises(ValueError, match="mode"):
        ilfm.gibbs(data, mode="both")


@pytest.mark.parametrize(
    "mode",
    # the trace is the same code for both modes; "single" compiles a sampler of its own
    # (about 22 s on the 2-core CI machine) and has its own test below
    ["global", pytest.param("single", marks=long_only("the same trace code, ~22 s"))],
)
def test_trace_keeps_the_pointwise_log_likelihood_of_the_observed_entries_only(mode):
    """The log_likelihood group holds one value per observed (not held-out, not missing, not
    diagonal) entry, equal to ilfm.log_likelihood of the draws; az.loo reads it."""
    Y = _planted(5, num_entities=8, num_relations=2)
    held = np.random.default_rng(6).random(Y.shape) < 0.2
    Y[0, 0, 1] = np.nan  # a missing entry
    data = ilfm.make_data(Y, mask=~held)
    test = ilfm.make_data(Y, mask=held)
    observed = int(np.asarray(data.mask).sum())
    algorithm = ilfm.gibbs(data, capacity=4, num_leapfrog=3, mode=mode)
    result = run(algorithm, jax.random.key(2), 6, num_warmup=2, num_chains=2, progress_bar=False)
    pointwise = result.trace["log_likelihood"]["Y"]
    assert pointwise.shape == (2, 6, observed)
    assert np.all(pointwise < 0)
    np.testing.assert_allclose(ilfm.log_likelihood(result.trace, data), pointwise, rtol=1e-9)
    heldout = ilfm.log_likelihood(result.trace, data, test)
    assert heldout.shape == (2, 6, int(np.asarray(test.mask).sum()))
    # the held-out log density and the predicted probabilities agree
    p = ilfm.predict(result.trace, data, test)
    y = np.asarray(test.Y)[np.asarray(test.mask) > 0]
    expected = np.log(np.where(y > 0, p, 1 - p))
    lppd = np.log(np.mean(np.exp(heldout), axis=(0, 1)))
    np.testing.assert_allclose(lppd, expected, rtol=1e-6)
    idata = to_inference_data(result)
    assert idata.observed_data["Y"].shape == (observed,)
    with warnings.catch_warnings():  # 12 draws: ArviZ may warn about its Pareto k estimates
        warnings.simplefilter("ignore")
        loo = az.loo(idata, pointwise=True)
    assert loo.loo_i.shape == (observed,)


def test_old_names_still_work_and_warn():
    Y = _planted(7, num_entities=6, num_relations=1)
    with pytest.warns(FutureWarning, match="alpha_prior"):
        hyper = ilfm.make_hyper(alpha=(2.0, 1.0))
    assert float(hyper.alpha_shape) == 2.0
    data = ilfm.make_data(Y)
    with pytest.warns(FutureWarning, match="likelihood"):
        algorithm = ilfm.gibbs(data, hyper, capacity=4, num_leapfrog=2, link="probit")
    assert algorithm.spec.settings["likelihood"] == "probit"
    result = run(algorithm, jax.random.key(0), 3, progress_bar=False)
    with pytest.warns(FutureWarning, match="predict"):
        old = ilfm.posterior_link_probabilities(result.trace, data, link="probit", chunk=2)
    np.testing.assert_allclose(old, ilfm.predict(result.trace, data, likelihood="probit"))
    state = jax.tree.map(lambda x: x[0], result.final_state)
    with pytest.warns(FutureWarning, match="predict"):
        p = ilfm.link_probabilities(state, "probit")
    np.testing.assert_allclose(p, probabilities(state, "probit"))
    with pytest.warns(FutureWarning, match="geweke"):
        prior = ilfm.prior_sample(jax.random.key(1), 6, 1, hyper, capacity=4)
    assert prior.F.shape == (6, 4)
    with pytest.warns(FutureWarning, match="geweke"):
        ilfm.data_sample(jax.random.key(2), prior, data)
    assert ilfm.LINKS == ilfm.LIKELIHOODS


def test_levels_match_the_factory():
    """init and build_step are the factory's kernel, one level down (BlackJAX's shape)."""
    Y = _planted(8, num_entities=6, num_relations=2)
    data, hyper = ilfm.make_data(Y), ilfm.make_hyper()
    algorithm = ilfm.gibbs(data, hyper, capacity=4, num_leapfrog=2)
    state = ilfm.init(jax.random.key(0), data, hyper, capacity=4)
    jax.tree.map(np.testing.assert_array_equal, state, algorithm.init(jax.random.key(0)))
    # compiled whole (op by op, every scan and small operation would compile alone)
    step = jax.jit(ilfm.build_step(num_leapfrog=2))
    new, info = step(jax.random.key(1), state, data, hyper)
    expected, expected_info = jax.jit(algorithm.step)(jax.random.key(1), state)
    jax.tree.map(np.testing.assert_allclose, (new, info), (expected, expected_info))


def test_merge_split_keeps_every_logit_and_only_merges_identical_features():
    """The merge-split move changes no logit (identical features enter the links only through
    their summed weights), leaves no weight outside the active block, and changes K+ by one
    when accepted. Its Geweke row is ilfm.gibbs.merge_split."""
    from bnpjax.models.ilfm.joint import _logits
    from bnpjax.models.ilfm.merge_split import merge_split

    rng = np.random.default_rng(0)
    N, C, R = 6, 5, 2
    F = np.zeros((N, C))
    F[:, 0] = rng.random(N) < 0.5
    F[:, 0][:2] = 1.0
    F[:, 1] = F[:, 0]  # a copy of feature 0
    F[:, 2] = rng.random(N) < 0.5
    F[0, 2] = 1.0
    active = F.sum(0) > 0
    W = jnp.asarray(rng.normal(size=(R, C, C)) * (active[:, None] & active[None, :]))
    F = jnp.asarray(F)
    before = _logits(F, W, jnp.zeros((R, 1, 1)))
    changes = set()
    for t in range(100):
        F2, W2, take, full = merge_split(jax.random.key(t), F, W, 5.0, 1.0)
        assert not bool(full)
        np.testing.assert_allclose(_logits(F2, W2, jnp.zeros((R, 1, 1))), before, atol=1e-12)
        active2 = np.asarray(F2.sum(0) > 0)
        assert np.all(np.asarray(W2)[:, ~active2, :] == 0) and np.all(
            np.asarray(W2)[:, :, ~active2] == 0
        )
        changes.add(int(active2.sum()) - int(active.sum()) if take else 0)
    assert changes <= {-1, 0, 1} and changes & {-1, 1}, changes


def test_nest_move_keeps_every_logit_and_undoes_itself():
    """Taking a nested feature out of the one holding it, or putting a disjoint one in,
    changes no logit and keeps K+ and the active block; the move back restores the state with
    the reciprocal MH ratio. Its own broken twin: the prior-invariance test below; with the
    other moves: the Geweke row ilfm.gibbs.merge_split."""
    from bnpjax.models.ilfm.joint import _logits
    from bnpjax.models.ilfm.merge_split import _nest, nest_move

    rng = np.random.default_rng(1)
    N, C, R = 8, 6, 2
    F = np.zeros((N, C))
    F[:5, 0] = 1.0  # 0 holds 1 (its entities 0-1): a nested pair
    F[:2, 1] = 1.0
    F[5:, 2] = 1.0  # 2 is disjoint from 0 and 1
    F[[1, 6], 3] = 1.0  # 3 overlaps 0, 1 and 2 partly
    active = F.sum(0) > 0
    W = jnp.asarray(rng.normal(size=(R, C, C)) * (active[:, None] & active[None, :]))
    F = jnp.asarray(F)
    offset = jnp.zeros((R, 1, 1))
    before = _logits(F, W, offset)
    move = jax.jit(nest_move)
    sizes = set()
    for t in range(60):
        F2, W2, take = move(jax.random.key(t), F, W, 2.0)
        np.testing.assert_allclose(_logits(F2, W2, offset), before, atol=1e-12)
        active2 = np.asarray(F2.sum(0) > 0)
        assert np.array_equal(active2, active)
        assert np.all(np.asarray(W2)[:, ~active2, :] == 0)
        assert np.all(np.asarray(W2)[:, :, ~active2] == 0)
        assert set(np.unique(np.asarray(F2))) <= {0.0, 1.0}
        sizes.add(tuple(np.asarray(F2.sum(0)).astype(int)) if take else None)
    assert len(sizes - {None}) >= 2, sizes  # both kinds of move were accepted
    # (0, 1): take out then put back; (2, 1): put in then take out
    for k, l, first in [(0, 1, True), (2, 1, False)]:
        F2, W2, forward = _nest(F, W, k, l, first, 2.0)
        F3, W3, back = _nest(F2, W2, k, l, not first, 2.0)
        np.testing.assert_array_equal(F3, F)
        np.testing.assert_allclose(W3, W, atol=1e-12)
        np.testing.assert_allclose(back, -forward, atol=1e-12)
        assert np.isfinite(forward)


def _nest_shifts(correct, num_chains=20_000, num_moves=100):
    """Paired z-scores of the take-out-or-put-in move from prior draws (N = 5 entities, two
    relations, at most 8 features: the prior given K+ <= 8, which the move keeps since it keeps
    K+): for each of ``num_chains`` draws, statistics before and after ``num_moves`` moves; a
    move that leaves the prior invariant shifts no mean (the differences are independent
    across chains, so their standard error is their sd / sqrt(chains))."""
    from scipy.stats import norm

    from bnpjax.models.ilfm.merge_split import _nested_and_disjoint, nest_move

    data = ilfm.make_data(np.zeros((2, 5, 5)))
    hyper = ilfm.make_hyper(alpha_prior=(3.0, 3.0))
    keys = jax.random.split(jax.random.key(11), num_chains)
    start = jax.vmap(lambda k: ilfm.geweke.prior_sample(k, data, hyper, capacity=8))(keys)

    def statistics(F, W):
        nested, disjoint = _nested_and_disjoint(F)
        sizes = jnp.sum(F.sum(0) ** 2)
        return jnp.stack([F.sum(), sizes, jnp.sum(W**2), nested.sum(), disjoint.sum()])

    def chain(key, F, W):
        def one(t, carry):
            return nest_move(jax.random.fold_in(key, t), *carry, 1.0, correct)[:2]

        return statistics(*jax.lax.fori_loop(0, num_moves, one, (F, W)))

    keys = jax.random.split(jax.random.key(12), num_chains)
    after = np.asarray(jax.jit(jax.vmap(chain))(keys, start.F, start.W))
    before = np.asarray(jax.vmap(statistics)(start.F, start.W))
    difference = after - before
    z = difference.mean(0) / (difference.std(0, ddof=1) / np.sqrt(num_chains))
    threshold = norm.isf(0.001 / (2 * z.size))  # two-sided, Bonferroni over the statistics
    return np.abs(z), threshold


def test_nest_move_leaves_the_prior_invariant_and_its_broken_twin_does_not():
    """The move changes no logit, so it leaves every posterior invariant exactly when it
    leaves the prior invariant: a joint-distribution test of the move alone (Geweke's
    marginal-conditional check with the likelihood factored out). The twin without the IBP
    prior's factor in its ratio must fail by a wide margin. The whole sampler with the move:
    the Geweke row ilfm.gibbs.merge_split."""
    z, threshold = _nest_shifts(correct=True)
    assert np.all(z < threshold), (z, threshold)
    z_broken, _ = _nest_shifts(correct=False)
    assert z_broken.max() > 2 * threshold, (z_broken, threshold)


def test_replica_exchange_keeps_the_cold_rung_and_grows_every_rung():
    """With ``temperatures`` the kept chain is the rung at temperature one: its ``lp`` is the
    log joint of its kept state; the buffer of every rung is grown. (That the cold rung samples
    the posterior where its own kernel does not cross between modes:
    tests/infer/test_tempering.py.)"""
    Y = _planted(3, num_entities=12, num_relations=2)
    data, hyper = ilfm.make_data(Y), ilfm.make_hyper()
    ladder = (1.0, 0.95)  # close rungs: swaps are accepted often
    algorithm = ilfm.gibbs(data, capacity=16, num_init_features=2, num_leapfrog=3,
                           temperatures=ladder)  # fmt: skip
    result = run(algorithm, jax.random.key(0), 40, num_warmup=10, progress_bar=False)
    final = jax.tree.map(lambda leaf: leaf[0], result.final_state)
    capacity = result.algorithm.capacity
    assert final.replicas.F.shape == (2, 12, capacity)
    # the driver grows a chain's buffer with the growth it was given: here, every rung's
    grown = result.algorithm.growth.grow_state(final, capacity + 3)
    assert grown.replicas.F.shape == (2, 12, capacity + 3)
    assert grown.replicas.W.shape == (2, 2, capacity + 3, capacity + 3)
    np.testing.assert_array_equal(grown.replicas.F[..., :capacity], final.replicas.F)
    stats, post = result.trace["sample_stats"], result.trace["posterior"]
    swaps = np.asarray(stats["swap_acceptance"])
    assert swaps.shape == (1, 40, 1) and np.all((swaps >= 0) & (swaps <= 1))
    assert swaps.mean() > 0.3  # the cold rung often holds what its neighbour held
    # every draw's lp and K+ are its own state's, swapped in or not (checked at each draw: a
    # check of the last draw alone passed while the others carried the swapped-out state's)
    kept = ilfm.ILFMState(
        post["F"][0], post["W"][0], post["bias"][0], post["alpha"][0],
        jnp.zeros((40,)), jnp.zeros((40, 2, 0)),
    )  # fmt: skip
    each = jax.vmap(lambda state: ilfm.log_joint(data, hyper, state))(kept)
    np.testing.assert_allclose(stats["lp"][0], each, rtol=1e-5)
    active = (np.asarray(post["F"][0]).sum(1) > 0).sum(-1)
    np.testing.assert_array_equal(post["num_features"][0], active)

    for bad in ((0.5, 0.2), (1.0, 1.0), (1.0,)):
        with pytest.raises(ValueError, match="temperatures"):
            ilfm.gibbs(data, temperatures=bad)
