"""WMMSB data: the network loaders, make_data / make_network / make_hyper on bad input, and
the deprecated 0.x names (they still work and warn)."""

import warnings

import jax
import numpy as np
import pytest
from _wmmsb_helpers import planted

from bnpjax.datasets import DataNotFoundError, Network, load_network, read_edge_list
from bnpjax.models import wmmsb


def test_network_loaders():
    try:
        fb = load_network("fb_uc")
        hep = load_network("hep-th")
    except DataNotFoundError as err:
        pytest.skip(f"network data not available here: {err}")
    assert (fb.num_nodes, fb.src.shape[0], fb.directed, int(fb.weight.max())) == (
        1899,
        20296,
        True,
        98,
    )
    assert (hep.num_nodes, hep.src.shape[0], hep.directed, int(hep.weight.max())) == (
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
    assert net.num_nodes == 3 and list(net.weight) == [3, 1]
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\t-1\n")
    with pytest.raises(ValueError, match="weights"):
        read_edge_list(bad, directed=False)
    bad.write_text("a\ta\t2\n")
    with pytest.raises(ValueError, match="self-loops"):
        read_edge_list(bad, directed=False)
    bad.write_text("0 1 2\n1 2 x\n")
    with pytest.raises(ValueError, match=r"bad\.tsv:2: the weight 'x' is not a number"):
        read_edge_list(bad, directed=False)


def test_read_edge_list_header(tmp_path):
    """A header row was read as an edge between nodes 'source' and 'target' (a 4-node ring
    came out with 6 nodes)."""
    path = tmp_path / "e.csv"
    path.write_text("source,target\n0,1\n1,2\n2,3\n3,0\n")
    net = read_edge_list(path, directed=True)
    assert net.num_nodes == 4 and len(net.src) == 4
    assert read_edge_list(path, directed=True, header=False).num_nodes == 6  # when asked
    path.write_text("src,dst,count\n0,1,1\n1,2,2\n")
    assert read_edge_list(path, directed=True).num_nodes == 3
    with pytest.raises(ValueError, match=r"e\.csv:1: the weight 'count' is not a number"):
        read_edge_list(path, directed=True, header=False)
    # named nodes throughout: the first row is an edge unless said otherwise
    path.write_text("alice bob\nbob carol\n")
    assert read_edge_list(path, directed=True).num_nodes == 3
    assert read_edge_list(path, directed=True, header=True).num_nodes == 2
    with pytest.raises(ValueError, match="header must be True or False"):
        read_edge_list(path, directed=True, header="yes")


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
    with pytest.raises(ValueError, match="num_nodes"):
        wmmsb.make_network(1, [0], [1], directed=True)
    with pytest.raises(ValueError, match="rank"):
        wmmsb.make_hyper(0)
    for alpha in (np.ones(3), np.ones((2, 2)), "x"):  # NumPy's broadcast error named nothing
        with pytest.raises(ValueError, match=r"alpha must be a number or an array of shape"):
            wmmsb.make_hyper(2, alpha=alpha)
    with pytest.raises(ValueError, match="likelihood"):
        wmmsb.make_network(3, [0], [1], [2], directed=True, likelihood="bernouli")
    with pytest.raises(ValueError, match="likelihood"):
        wmmsb.make_data(np.array([[0, 2], [2, 0]]), likelihood="bernouli")
    for pad_to in (0, -2, 1.5, True):
        with pytest.raises(ValueError, match="pad_to"):
            wmmsb.make_network(3, [0], [1], directed=True, pad_to=pad_to)
    for hash_seed in (-1, 2**32, 0.5):
        with pytest.raises(ValueError, match="hash_seed"):
            wmmsb.make_network(3, [0], [1], directed=True, hash_seed=hash_seed)


def test_old_names_still_work_and_warn():
    with pytest.warns(FutureWarning, match="rank"):
        hyper = wmmsb.make_hyper(K=2)
    assert hyper.alpha.shape == (2,)
    with pytest.warns(FutureWarning, match="num_nodes"):
        a = wmmsb.make_network(n_nodes=4, src=[0], dst=[1], directed=True)
    with pytest.warns(FutureWarning, match="hash_seed"):
        b = wmmsb.make_network(4, [0], [1], directed=True, seed=3, keep=0.5)
    assert int(b.hash_seed) == 3 and a.degree.shape == (4,)
    with pytest.warns(FutureWarning, match="num_nodes"):
        wmmsb.pair_keys(np.array([0]), np.array([1]), n_nodes=4, directed=True)
    with pytest.warns(FutureWarning, match="num_nodes"):
        assert Network("two", 2, [0], [1], [1], False, ["a", "b"]).n_nodes == 2

    Y, held = planted(0, N=8)
    data = wmmsb.make_data(Y, mask=~held, directed=True)
    hyper = wmmsb.make_hyper(2)
    state = wmmsb.cvb0(data, hyper).init(jax.random.key(0))
    stats = (state.n_node, state.n_y, state.n_phi, state.r, state.p)
    ii, jj = np.nonzero(held)
    with pytest.warns(FutureWarning, match="link_probability"):
        old = wmmsb.link_probability(ii, jj, *stats, hyper, "nb")
    new = wmmsb.expected_link_probability(state, hyper, ii, jj)
    np.testing.assert_array_equal(np.asarray(old), np.asarray(new))
    with pytest.warns(FutureWarning, match="memberships"):
        wmmsb.memberships(state.n_node, hyper)
    with pytest.warns(FutureWarning, match="mean_log_predictive"):
        pairs = (data.src, data.dst, data.y, data.w)
        wmmsb.mean_log_predictive(pairs, *stats, hyper, "nb")
    with pytest.warns(FutureWarning, match="log_likelihood"):
        ll = wmmsb.log_likelihood(data, *stats, hyper, "nb")
    assert ll.shape == data.y.shape
    with pytest.warns(FutureWarning, match="prior_sample"):
        gibbs = wmmsb.prior_sample(jax.random.key(0), data, hyper)
    with pytest.warns(FutureWarning, match="data_sample"):
        redrawn = wmmsb.data_sample(jax.random.key(1), gibbs, data, hyper, "nb")
    with pytest.warns(FutureWarning, match="gibbs_refresh"):
        wmmsb.gibbs_refresh(redrawn, gibbs, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wmmsb.geweke.refresh(redrawn, gibbs, likelihood="nb", rank=2)
