"""WMMSB CVB0 and stochastic CVB0: CVB0 against a per-pair NumPy reference, the dense and
listed zero paths agreeing, recovery of planted blocks (CVB0 for each likelihood, stochastic
CVB0 with its plateau stop), the InferenceData of a fit (a real posterior group), and the
argument checks."""

import importlib.util
from pathlib import Path

import jax
import numpy as np
import pytest
from _wmmsb_helpers import auc, held_pairs, planted

import bnpjax
from bnpjax.infer import VariationalAlgorithm, fit_run
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb


def _speed_module():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "wmmsb_speed.py"
    spec = importlib.util.spec_from_file_location("wmmsb_speed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("likelihood", ["nb", "bg", "bernoulli"])
def test_cvb0_matches_the_per_pair_reference(likelihood):
    Y, held = planted(0, N=12)
    if likelihood == "bernoulli":
        Y = (Y > 0).astype(int)
    data = wmmsb.make_data(Y, mask=~held, directed=True, likelihood=likelihood)
    hyper = wmmsb.make_hyper(3, likelihood=likelihood)
    # the reference is plain CVB0: the rows of one pass (the MMSB's default solves them)
    algorithm = wmmsb.cvb0(
        data, hyper, likelihood=likelihood, store_gamma=True, chunk=64, node_update="pass"
    )
    assert isinstance(algorithm, VariationalAlgorithm)
    state = algorithm.init(jax.random.key(0))
    new, info = jax.jit(algorithm.step)(jax.random.key(1), state)
    ref = _speed_module().reference_cvb0_step(data, hyper, state, likelihood)
    np.testing.assert_allclose(np.asarray(new.gamma), ref["gamma"], rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(new.zgamma), ref["zgamma"], rtol=2e-4, atol=1e-6)
    np.testing.assert_allclose(np.asarray(new.n_node), ref["n_node"], rtol=1e-4)
    np.testing.assert_allclose(np.asarray(new.n_phi), ref["n_phi"], rtol=1e-4)
    np.testing.assert_allclose(np.asarray(new.r), ref["r"], rtol=1e-4)
    np.testing.assert_allclose(np.asarray(new.p), ref["p"], rtol=1e-4)
    assert np.isfinite(float(info.loglik)) and float(info.loglik) < 0


def test_public_levels_take_the_same_steps_as_the_factory():
    Y, held = planted(0, N=10)
    data = wmmsb.make_data(Y, mask=~held, directed=True)
    hyper = wmmsb.make_hyper(3, likelihood="bg")
    cvb0 = importlib.import_module("bnpjax.models.wmmsb.cvb0")
    algorithm = wmmsb.cvb0(data, hyper, likelihood="bg", chunk=16, max_count=8)
    a = algorithm.init(jax.random.key(0))
    b = cvb0.init(jax.random.key(0), data, hyper, likelihood="bg")
    # compiled whole (op by op, every scan and small operation would compile alone)
    step = jax.jit(cvb0.build_step(likelihood="bg", chunk=16, max_count=8))
    factory_step = jax.jit(algorithm.step)
    for t in range(2):
        a, _ = factory_step(jax.random.key(t), a)
        b, _ = step(jax.random.key(t), b, data, hyper)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-12)


def test_dense_zeros_equal_listed_zeros():
    Y, held = planted(1, N=15, directed=False)
    hyper = wmmsb.make_hyper(3)
    out = []
    for zeros in ("list", "dense"):
        data = wmmsb.make_data(Y, mask=~held, directed=False, zeros=zeros)
        algorithm = wmmsb.cvb0(data, hyper, store_gamma=False)
        state = algorithm.init(jax.random.key(0))
        step = jax.jit(algorithm.step)
        for t in range(3):
            state, info = step(jax.random.key(t), state)
        out.append((state, info))
    (a, ia), (b, ib) = out
    np.testing.assert_allclose(np.asarray(a.n_node), np.asarray(b.n_node), rtol=1e-4)
    np.testing.assert_allclose(np.asarray(a.n_phi), np.asarray(b.n_phi), rtol=1e-4)
    np.testing.assert_allclose(float(ia.loglik), float(ib.loglik), rtol=1e-5)


def test_fit_writes_a_posterior_group():
    Y, held = planted(6, N=10, directed=False)
    data = wmmsb.make_data(Y, mask=~held, directed=False, zeros="dense")
    hyper = wmmsb.make_hyper(2, likelihood="bg")
    idata = bnpjax.fit(
        wmmsb.cvb0(data, hyper, likelihood="bg"),
        jax.random.key(0),
        10,
        num_draws=50,
        progress_bar=False,
    )
    theta = idata.posterior["theta"]
    assert theta.dims == ("chain", "draw", "node", "community")
    assert theta.shape == (1, 50, 10, 2)
    np.testing.assert_allclose(theta.values.sum(-1), 1.0, rtol=1e-10)
    assert np.all(idata.posterior["phi"].values > 0)
    observed = int(np.triu(~held, 1).sum())  # the dense zeros and links of the upper triangle
    assert idata.observed_data["y"].shape == (observed,)
    assert idata.log_likelihood["y"].shape == (1, 50, observed)
    # the mean of the draws' memberships is the CVB0 plug-in
    result = fit_run(
        wmmsb.cvb0(data, hyper, likelihood="bg"),
        jax.random.key(0),
        10,
        num_draws=2000,
        progress_bar=False,
    )
    mean = wmmsb.membership_means(result.state.n_node, hyper)
    np.testing.assert_allclose(result.draws["posterior"]["theta"].mean(0), mean, atol=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("likelihood", ["nb", "bg", "bernoulli"])
def test_cvb0_recovers_planted_blocks(likelihood):
    Y, held = planted(2, N=60, directed=False)
    if likelihood == "bernoulli":
        Y = (Y > 0).astype(int)
    data = wmmsb.make_data(Y, mask=~held, directed=False, likelihood=likelihood, zeros="dense")
    hyper = wmmsb.make_hyper(3, likelihood=likelihood)
    result = fit_run(
        wmmsb.cvb0(data, hyper, likelihood=likelihood),
        jax.random.key(0),
        150,
        num_draws=200,
        progress_bar=False,
    )
    loglik = result.history["loglik"]
    assert loglik[-1] > loglik[0]
    assert auc(Y, held, result.state, hyper, likelihood, directed=False) > 0.85
    # the same from the variational draws through predict
    ii, jj = held_pairs(held, directed=False)
    p_link = wmmsb.predict(result, data, (ii, jj), hyper=hyper, likelihood=likelihood)
    assert roc_auc(Y[ii, jj] > 0, p_link.mean((0, 1))) > 0.85


@pytest.mark.slow
def test_scvb0_recovers_planted_blocks_and_stops_on_a_plateau():
    Y, held = planted(4, N=120, directed=True, within=2.0, between=0.02)
    data = wmmsb.make_data(Y, mask=~held, directed=True, zeros="none")
    hyper = wmmsb.make_hyper(3, likelihood="bg")
    vi, vj = np.nonzero(held)
    algorithm = wmmsb.scvb0(
        data,
        hyper,
        valid=(vi, vj, Y[vi, vj]),
        batch=16,
        draws=32,
        tau=64.0,
        eval_every=25,
        patience=3,
        kappa_node=0.0,
    )
    result = fit_run(algorithm, jax.random.key(0), 3000, num_draws=10, progress_bar=False)
    assert result.history["done"][-1], "the validation log-likelihood never reached a plateau"
    assert auc(Y, held, result.state, hyper, "bg") > 0.85


def test_cvb0_checks_its_arguments():
    data = wmmsb.make_data(np.array([[0, 2], [2, 0]]))
    with pytest.raises(ValueError, match="bernoulli"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2, likelihood="bernoulli"), likelihood="bernoulli")
    with pytest.raises(ValueError, match="zeros"):
        wmmsb.cvb0(
            wmmsb.make_network(4, [0], [1], directed=True, zeros="none"), wmmsb.make_hyper(2)
        )
    with pytest.raises(ValueError, match="init"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2), init="kmeans")
    with pytest.raises(ValueError, match="chunk"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2), chunk=0)
    # a table of the predictive below the largest count was dropped for a default one
    with pytest.raises(ValueError, match=r"max_count \(1\) is below the largest observed count"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2), max_count=1)
    for bad in (-1, 2.5):
        with pytest.raises(ValueError, match="max_count"):
            wmmsb.cvb0(data, wmmsb.make_hyper(2), max_count=bad)
    with pytest.raises(ValueError, match="store_gamma must be True or False"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2), store_gamma="no")
    with pytest.raises(ValueError, match="rank"):
        wmmsb.cvb0(data)
    with pytest.raises(ValueError, match="batch"):
        wmmsb.scvb0(data, wmmsb.make_hyper(2, likelihood="bg"), batch=5)


def test_scvb0_checks_its_arguments():
    data = wmmsb.make_network(6, [0, 1, 2], [1, 2, 3], [1, 2, 1], directed=True, zeros="none")
    hyper = wmmsb.make_hyper(2, likelihood="bg")
    ok = ([0, 4], [5, 0], [0, 1])
    wmmsb.scvb0(data, hyper, valid=ok, batch=2, kappa_node=0.0, tau=1.0, kappa=1.0, tol=0.0)
    bad_valid = [
        (([0, 4], [5]), "valid"),  # not (src, dst, y)
        (([0, 4], [5], [0, 1]), "valid dst"),  # lengths differ
        (([0, 4], [5, 0], [0]), "valid y"),
        (([0, 6], [5, 0], [0, 1]), "valid src"),  # node id out of range
        (([0, 4], [-1, 0], [0, 1]), "valid dst"),
        (([0.5, 4], [5, 0], [0, 1]), "valid src"),  # not an integer id
        (([0, 4], [0, 1], [0, 1]), "self-loops"),
        (([0, 4], [5, 0], [np.nan, 1]), "valid y"),
        (([0, 4], [5, 0], [-1, 1]), "valid y"),
        (([0, 4], [5, 0], [0.5, 1]), "valid y"),
        (([], [], []), "valid"),
    ]
    for valid, match in bad_valid:
        with pytest.raises(ValueError, match=match):
            wmmsb.scvb0(data, hyper, valid=valid, batch=2)
    links = wmmsb.make_network(6, [0, 1], [1, 2], directed=True, zeros="none")
    with pytest.raises(ValueError, match="valid y"):  # 0/1 for the bernoulli likelihood
        wmmsb.scvb0(
            links,
            wmmsb.make_hyper(2, likelihood="bernoulli"),
            likelihood="bernoulli",
            valid=([0, 4], [5, 0], [2, 1]),
            batch=2,
        )
    bad_settings = [
        ("tau", -1.0),  # a negative tau made NaN step sizes
        ("tau", 0.5),
        ("tau", np.inf),
        ("kappa", 0.4),
        ("kappa", 1.5),
        ("kappa", np.nan),
        ("kappa_node", -0.5),
        ("kappa_node", 2.0),
        ("tol", -1e-3),
        ("tol", np.nan),
        ("tol", "0.1"),
        ("schedule", 0.01),
        ("links_per_node", 0),
    ]
    for name, value in bad_settings:
        with pytest.raises(ValueError, match=name):
            wmmsb.scvb0(data, hyper, batch=2, **{name: value})
