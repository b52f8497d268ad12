"""WMMSB / MMSB: Geweke tests of the collapsed Gibbs sampler (and a broken kernel that must
fail), CVB0 against a per-pair NumPy reference, the dense and listed zero paths agreeing,
recovery of planted blocks (CVB0, Beta-Gamma, MMSB, stochastic CVB0), loaders and bad input."""

import importlib.util
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnpjax.datasets import DataNotFoundError, load_network, read_edge_list
from bnpjax.infer import run
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb
from bnpjax.testing import geweke_test

N_GEWEKE, K_GEWEKE = 4, 2


def _geweke_statistics(state, data):
    same = (state.s == state.r).astype(float)
    return {
        "mean y": jnp.mean(data.y),
        "mean y^2": jnp.mean(data.y**2),
        "frac y=0": jnp.mean(data.y == 0),
        "mean y [s=r]": jnp.mean(data.y * same),
        "mean [s=r]": jnp.mean(same),
        "n_phi[0,0]": state.n_phi[0, 0],
        "sum n_node^2": jnp.sum(state.n_node**2),
        "y_1 y_2": jnp.mean(data.y[:-1] * data.y[1:]),
    }


def _geweke(likelihood="nb", broken=False, seed=1):
    hyper = wmmsb.make_hyper(
        K_GEWEKE, likelihood=likelihood, alpha=0.7, r=1.0, p=0.6 if likelihood == "nb" else 1.0
    )
    # directed, every ordered pair explicit: 12 pairs whose y the harness redraws
    base = wmmsb.make_data(
        np.zeros((N_GEWEKE, N_GEWEKE)), directed=True, explicit=True, likelihood=likelihood
    )
    return geweke_test(
        jax.random.key(seed),
        prior_sample=lambda key: wmmsb.prior_sample(key, base, hyper),
        data_sample=lambda key, state: wmmsb.data_sample(key, state, base, hyper, likelihood),
        kernel=lambda data: wmmsb.collapsed_gibbs(
            data, hyper, likelihood=likelihood, _broken=broken
        ),
        test_functions=_geweke_statistics,
        refresh=lambda data, state: wmmsb.gibbs_refresh(data, state, K_GEWEKE),
        num_marginal=20_000,
        num_successive=3_000,
    )


@pytest.mark.slow
@pytest.mark.parametrize("likelihood", ["nb", "bernoulli"])
def test_geweke_collapsed_gibbs(likelihood):
    result = _geweke(likelihood)
    assert result.passed, str(result)


@pytest.mark.slow
def test_geweke_catches_a_pair_left_in_its_own_block_counts():
    """The classic collapsed-Gibbs slip: not removing the pair from n^Y, n^Phi first."""
    result = _geweke("nb", broken=True)
    assert not result.passed, str(result)


# --------------------------------------------------------------------------------------------
# CVB0 against the per-pair NumPy reference of the benchmark


def _speed_module():
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "wmmsb_speed.py"
    spec = importlib.util.spec_from_file_location("wmmsb_speed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _planted(seed, N=40, K=3, directed=True, within=3.0, between=0.05):
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, N)
    rates = np.full((K, K), between)
    np.fill_diagonal(rates, within)
    Y = rng.poisson(rates[z][:, z])
    np.fill_diagonal(Y, 0)
    held = rng.random((N, N)) < 0.2
    np.fill_diagonal(held, False)
    if not directed:
        Y = np.triu(Y, 1)
        Y = Y + Y.T
        held = np.triu(held, 1)
        held = held | held.T
    return Y, held


@pytest.mark.parametrize("likelihood", ["nb", "bg", "bernoulli"])
def test_cvb0_matches_the_per_pair_reference(likelihood):
    Y, held = _planted(0, N=12)
    if likelihood == "bernoulli":
        Y = (Y > 0).astype(int)
    data = wmmsb.make_data(Y, mask=~held, directed=True, likelihood=likelihood)
    hyper = wmmsb.make_hyper(3, likelihood=likelihood)
    algorithm = wmmsb.cvb0(data, hyper, likelihood=likelihood, store_gamma=True, chunk=64)
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


def test_dense_zeros_equal_listed_zeros():
    Y, held = _planted(1, N=15, directed=False)
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


# --------------------------------------------------------------------------------------------
# recovery of planted blocks


def _auc(Y, held, stats, hyper, likelihood, directed=True):
    upper = np.triu(np.ones_like(held), 1).astype(bool)
    ii, jj = np.nonzero(held & (True if directed else upper))
    score = wmmsb.link_probability(ii, jj, *stats, hyper, likelihood)
    return roc_auc(Y[ii, jj] > 0, np.asarray(score))


@pytest.mark.slow
@pytest.mark.parametrize("likelihood", ["nb", "bg", "bernoulli"])
def test_cvb0_recovers_planted_blocks(likelihood):
    Y, held = _planted(2, N=60, directed=False)
    if likelihood == "bernoulli":
        Y = (Y > 0).astype(int)
    data = wmmsb.make_data(Y, mask=~held, directed=False, likelihood=likelihood, zeros="dense")
    hyper = wmmsb.make_hyper(3, likelihood=likelihood)
    result = run(
        wmmsb.cvb0(data, hyper, likelihood=likelihood), jax.random.key(0), 150, progress_bar=False
    )
    state = jax.tree_util.tree_map(lambda x: x[0], result.final_state)
    loglik = result.trace["sample_stats"]["loglik"][0]
    assert loglik[-1] > loglik[0]
    stats = (state.n_node, state.n_y, state.n_phi, state.r, state.p)
    assert _auc(Y, held, stats, hyper, likelihood, directed=False) > 0.85


@pytest.mark.slow
def test_collapsed_gibbs_recovers_planted_blocks():
    Y, held = _planted(3, N=24)
    data = wmmsb.make_data(Y, mask=~held, directed=True)
    hyper = wmmsb.make_hyper(3)
    result = run(
        wmmsb.collapsed_gibbs(data, hyper),
        jax.random.key(0),
        60,
        num_warmup=60,
        progress_bar=False,
    )
    post = result.trace["posterior"]
    scores = [
        _auc(
            Y,
            held,
            (post["n_node"][0, t], post["n_y"][0, t], post["n_phi"][0, t], hyper.r, hyper.p),
            hyper,
            "nb",
        )
        for t in (-1, -20)
    ]
    assert min(scores) > 0.85, scores


@pytest.mark.slow
def test_scvb0_recovers_planted_blocks_and_stops_on_a_plateau():
    Y, held = _planted(4, N=120, directed=True, within=2.0, between=0.02)
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
    result = run(algorithm, jax.random.key(0), 3000, progress_bar=False)
    state = jax.tree_util.tree_map(lambda x: x[0], result.final_state)
    done = result.trace["sample_stats"]["done"][0]
    assert done[-1], "the validation log-likelihood never reached a plateau"
    stats = (state.n_node, state.n_y, state.n_phi, state.r, state.p)
    assert _auc(Y, held, stats, hyper, "bg") > 0.85


# --------------------------------------------------------------------------------------------
# loaders and validation


def test_network_loaders():
    try:
        fb = load_network("fb_uc")
        hep = load_network("hep-th")
    except DataNotFoundError as err:
        pytest.skip(f"network data not available here: {err}")
    assert (fb.n_nodes, fb.src.shape[0], fb.directed, int(fb.weight.max())) == (
        1899,
        20296,
        True,
        98,
    )
    assert (hep.n_nodes, hep.src.shape[0], hep.directed, int(hep.weight.max())) == (
        8361,
        15751,
        False,
        1226,
    )
    assert abs(hep.weight.mean() - 5.24) < 0.01  # round((w+1)^2), the thesis corpus table


def test_read_edge_list_and_bad_files(tmp_path):
    good = tmp_path / "edges.tsv"
    good.write_text("# a b w\na\tb\t3\nb\tc\t1\n")
    net = read_edge_list(good, directed=False)
    assert net.n_nodes == 3 and list(net.weight) == [3, 1]
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t-1\n")
    with pytest.raises(ValueError, match="weights"):
        read_edge_list(bad, directed=False)
    bad.write_text("a\ta\t2\n")
    with pytest.raises(ValueError, match="self-loops"):
        read_edge_list(bad, directed=False)


@pytest.mark.parametrize(
    ("Y", "kwargs", "match"),
    [
        (np.ones((3, 4)), {}, "square"),
        (np.array([[0, -1], [1, 0]]), {}, "non-negative"),
        (np.array([[0, 1.5], [1, 0]]), {}, "integer"),
        (np.array([[0, np.nan], [1, 0]]), {}, "finite"),
        (np.array([[1, 1], [1, 0]]), {}, "self-loops"),
        (np.array([[0, 2], [1, 0]]), {"directed": False}, "symmetric"),
        (np.array([[0, 2], [2, 0]]), {"likelihood": "bernoulli"}, "0/1"),
        (np.zeros((3, 3)), {"mask": np.ones((2, 2), bool)}, "mask"),
    ],
)
def test_make_data_rejects_bad_input(Y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        wmmsb.make_data(Y, **kwargs)


def test_make_network_rejects_bad_input():
    with pytest.raises(ValueError, match="node ids"):
        wmmsb.make_network(3, [0, 3], [1, 2], directed=True)
    with pytest.raises(ValueError, match="self-loops"):
        wmmsb.make_network(3, [0, 1], [1, 1], directed=True)
    with pytest.raises(ValueError, match="duplicate"):
        wmmsb.make_network(3, [0, 1], [1, 0], directed=False)
    with pytest.raises(ValueError, match="length"):
        wmmsb.make_network(3, [0, 1], [1, 2], [1], directed=True)
    with pytest.raises(ValueError, match="keep"):
        wmmsb.make_network(3, [0], [1], directed=True, keep=0.0)
    with pytest.raises(ValueError, match="K"):
        wmmsb.make_hyper(0)
    data = wmmsb.make_data(np.array([[0, 2], [2, 0]]))
    with pytest.raises(ValueError, match="bernoulli"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2, likelihood="bernoulli"), likelihood="bernoulli")
    with pytest.raises(ValueError, match="listed"):
        wmmsb.collapsed_gibbs(
            wmmsb.make_data(np.ones((3, 3)) - np.eye(3), zeros="dense"),
            wmmsb.make_hyper(2),
        )
    with pytest.raises(ValueError, match="zeros"):
        wmmsb.cvb0(
            wmmsb.make_network(4, [0], [1], directed=True, zeros="none"), wmmsb.make_hyper(2)
        )
    with pytest.raises(ValueError, match="init"):
        wmmsb.cvb0(data, wmmsb.make_hyper(2), init="kmeans")
    with pytest.raises(ValueError, match="batch"):
        wmmsb.scvb0(data, wmmsb.make_hyper(2, likelihood="bg"), batch=5)

    # make_network / make_data: likelihood, pad_to, seed
    with pytest.raises(ValueError, match="likelihood"):
        wmmsb.make_network(3, [0], [1], [2], directed=True, likelihood="bernouli")
    with pytest.raises(ValueError, match="likelihood"):
        wmmsb.make_data(np.array([[0, 2], [2, 0]]), likelihood="bernouli")
    for pad_to in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="pad_to"):
            wmmsb.make_network(3, [0], [1], directed=True, pad_to=pad_to)
    for seed in (-1, 2**32, 0.5):
        with pytest.raises(ValueError, match="seed"):
            wmmsb.make_network(3, [0], [1], directed=True, seed=seed)


def test_collapsed_gibbs_checks_its_arguments():
    listed = wmmsb.make_data(np.array([[0, 2, 0], [2, 0, 1], [0, 1, 0]]))
    hyper = wmmsb.make_hyper(2)
    with pytest.raises(ValueError, match="data"):
        wmmsb.collapsed_gibbs(listed._asdict(), hyper)
    with pytest.raises(ValueError, match="hyper"):
        wmmsb.collapsed_gibbs(listed, tuple(hyper))
    with pytest.raises(ValueError, match="likelihood"):
        wmmsb.collapsed_gibbs(listed, hyper, likelihood="bg")
    with pytest.raises(ValueError, match="bernoulli"):
        wmmsb.collapsed_gibbs(
            listed, wmmsb.make_hyper(2, likelihood="bernoulli"), likelihood="bernoulli"
        )
    binary = wmmsb.make_data(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]]), likelihood="bernoulli")
    wmmsb.collapsed_gibbs(
        binary, wmmsb.make_hyper(2, likelihood="bernoulli"), likelihood="bernoulli"
    )


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
    ]
    for name, value in bad_settings:
        with pytest.raises(ValueError, match=name):
            wmmsb.scvb0(data, hyper, batch=2, **{name: value})
