"""Large sparse networks: the O(E + N K) layout, bad networks, the unbiased minibatch of
stochastic CVB0 and its fixed point (issue 25)."""

import functools
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse as sp
from _wmmsb_helpers import planted

from bnpjax.datasets import load_network
from bnpjax.infer import fit_run
from bnpjax.models import wmmsb

# the package re-exports each factory under its module's name: reach the modules themselves
cvb0_module = importlib.import_module("bnpjax.models.wmmsb.cvb0")
scvb0_module = importlib.import_module("bnpjax.models.wmmsb.scvb0")


def _random_edges(rng, N, E):
    src = rng.integers(0, N, 2 * E)
    dst = rng.integers(0, N, 2 * E)
    keep = src < dst
    keys = np.unique(src[keep] * N + dst[keep])[:E]
    return keys // N, keys % N


def test_layout_of_a_large_sparse_network_is_linear():
    """10^5 nodes, 3 10^5 links from a scipy.sparse matrix: every array of the data and of
    the stochastic CVB0 state is O(E + N K) (shapes only: the state is never built)."""
    rng = np.random.default_rng(0)
    N, K = 100_000, 8
    src, dst = _random_edges(rng, N, 300_000)
    E = src.shape[0]
    counts = rng.integers(1, 5, E)
    matrix = sp.coo_matrix((counts, (src, dst)), shape=(N, N))
    held = np.stack([src[:1000], dst[:1000]], 1)
    data = wmmsb.make_network(matrix, directed=False, unobserved=held, likelihood="bg")
    assert not bool(data.directed) and data.zmask.shape == (0, 0)
    sizes = {f: int(np.size(getattr(data, f))) for f in data._fields}
    assert max(sizes.values()) <= 2 * E + 1, sizes
    assert sum(sizes.values()) <= 10 * E + 3 * N, sizes
    net = load_network(matrix, directed=False)
    assert (net.num_nodes, net.src.shape[0], net.directed) == (N, E, False)
    algorithm = wmmsb.scvb0(data, rank=K, batch=64, draws=16, pointwise_log_likelihood=False)
    shapes = jax.eval_shape(algorithm.init, jax.random.key(0))
    assert sum(int(np.prod(s.shape)) for s in shapes) <= N * K + N + 4 * K * K + 16


@pytest.mark.parametrize(
    ("edges", "kwargs", "match", "load_match"),
    [
        (([0, 1], [1, 1], [1, 2]), {}, "self-loops", "self-loops"),
        (([0, 1], [1, 2], [1, -2]), {}, "weight must be non-negative", r"weight\) must be pos"),
        (([0, 1], [1, 2], [1, 2.5]), {}, "weight must be integer", r"weight\) must be int"),
        (([0, 5], [1, 2], [1, 2]), {}, "src holds node ids", r"src\) holds node ids"),
        (([0, 1], [1, -1], [1, 2]), {}, "dst holds node ids", r"dst\) holds node ids"),
        (([0, 1], [1, 0], [1, 2]), {}, "duplicate", "duplicate"),
        (([0, 1], [1, 2], [1, 2]), {"directed": None}, "directed", "directed"),
    ],
)
def test_bad_networks_are_refused(edges, kwargs, match, load_match):
    kw = {"directed": False, **kwargs}
    with pytest.raises(ValueError, match=match):
        wmmsb.make_network(3, *edges, **kw)
    with pytest.raises(ValueError, match=load_match):
        load_network(edges, num_nodes=3, **kw)


def test_bad_held_out_pairs_are_refused():
    """The held-out (unobserved) pairs are node ids too: out of range, negative, not whole
    numbers, or not an (M, 2) array of pairs."""
    bad = [
        ([[0, 3]], "unobserved holds node ids"),
        ([[-1, 2]], "unobserved holds node ids"),
        ([[0.5, 2]], "unobserved holds node ids"),
        ([0, 2], r"unobserved must be an \(M, 2\)"),
        ([[0, 1, 2]], r"unobserved must be an \(M, 2\)"),
    ]
    for unobserved, match in bad:
        with pytest.raises(ValueError, match=match):
            wmmsb.make_network(3, [0, 1], [1, 2], directed=False, unobserved=unobserved)


def test_flags_must_be_bools():
    """make_data and make_network refuse a truthy string for a flag, naming it (it would read
    as True); NumPy bools are bools."""
    Y = np.array([[0, 1, 0], [1, 0, 2], [0, 2, 0]])
    for name in ("explicit", "directed"):
        with pytest.raises(ValueError, match=name):
            wmmsb.make_data(Y, **{name: "no"})
    with pytest.raises(ValueError, match="directed"):
        wmmsb.make_network(3, [0, 1], [1, 2], directed="no")
    with pytest.raises(ValueError, match="directed"):
        wmmsb.make_network(sp.csr_matrix(Y), directed="no")
    data = wmmsb.make_data(Y, explicit=np.True_, directed=np.False_)
    assert not bool(data.directed)


def test_bad_sparse_matrices_are_refused():
    bad = [
        (sp.coo_matrix(([1, 1], ([0, 1], [1, 1])), shape=(3, 3)), "self-loops"),
        (sp.coo_matrix(([1, -1], ([0, 1], [1, 2])), shape=(3, 3)), "non-negative"),
        (sp.coo_matrix(([1, 0.5], ([0, 1], [1, 2])), shape=(3, 3)), "integer"),
        (sp.coo_matrix(([1, 1], ([0, 0], [1, 1])), shape=(3, 3)), "duplicate"),
        (sp.coo_matrix(([1, 2], ([0, 1], [1, 0])), shape=(3, 3)), "duplicate"),
        (sp.coo_matrix(([1], ([0], [1])), shape=(3, 4)), "square"),
    ]
    for matrix, match in bad:
        directed = None if match != "duplicate" else False
        with pytest.raises(ValueError, match=match):
            wmmsb.make_network(matrix, directed=directed)
        with pytest.raises(ValueError, match=match):
            load_network(matrix, directed=directed)
    # a symmetric matrix is an undirected network read from its upper triangle
    sym = sp.csr_matrix(np.array([[0, 2, 0], [2, 0, 1], [0, 1, 0]]))
    data = wmmsb.make_network(sym)
    assert not bool(data.directed) and np.asarray(data.y).tolist() == [2.0, 1.0]


def _small_network(keep, likelihood="nb"):
    """12 nodes, directed counts (0/1 for bernoulli), 3 held-out pairs; the same pairs as
    listed zeros (full pass) and as implicit zeros (minibatches)."""
    Y, held = planted(3, N=12, directed=True, within=1.5, between=0.2)
    if likelihood == "bernoulli":
        Y = (Y > 0).astype(int)
    ii, jj = np.nonzero((Y > 0) & ~held)
    ui, uj = np.nonzero(held)
    kw = dict(directed=True, unobserved=np.stack([ui, uj], 1), keep=keep, hash_seed=5)
    kw["likelihood"] = likelihood
    listed = wmmsb.make_network(12, ii, jj, Y[ii, jj], zeros="list", **kw)
    implicit = wmmsb.make_network(12, ii, jj, Y[ii, jj], zeros="none", **kw)
    return listed, implicit


@functools.lru_cache
def _minibatches(batch, draws, num, likelihood="nb"):
    listed, implicit = _small_network(keep=0.7, likelihood=likelihood)
    hyper = wmmsb.make_hyper(2, likelihood=likelihood)
    algorithm = wmmsb.scvb0(implicit, hyper, likelihood=likelihood, batch=batch)
    state = algorithm.init(jax.random.key(1))
    settings = dict(likelihood=likelihood, draws=draws, max_degree=4, search_steps=5)

    def one(key):
        # a uniform subset of the nodes, as each step's slice of an epoch's permutation is
        k_nodes, key = jax.random.split(key)
        nodes = jax.random.choice(k_nodes, 12, (batch,), replace=False)
        n_y, n_phi, links, zeros = scvb0_module._minibatch(
            implicit, hyper, state, key, nodes, **settings
        )
        rows = jnp.zeros_like(state.n_node).at[nodes].add(links + zeros) * (12 / batch)
        return n_y, n_phi, rows

    keys = jax.random.split(jax.random.key(2), num)
    est = jax.jit(jax.vmap(one))(keys)
    full = cvb0_module._step(
        listed,
        hyper,
        None,
        cvb0_module.CVB0State(None, None, state.n_node, state.n_y, state.n_phi, state.r, state.p),
        likelihood=likelihood,
        chunk=64,
        store=False,
    )[0]
    return [np.asarray(e) for e in est], [
        np.asarray(full.n_y),
        np.asarray(full.n_phi),
        np.asarray(full.n_node),
    ]


def _max_z(estimates, full):
    z = []
    for est, want in zip(estimates, full, strict=True):
        se = est.std(0) / np.sqrt(est.shape[0])
        z.append(np.abs(est.mean(0) - want)[se > 0] / se[se > 0])
    return float(np.max(np.concatenate([a.ravel() for a in z])))


@pytest.mark.parametrize("likelihood", ["nb", "bernoulli"])
def test_the_minibatch_estimates_are_unbiased(likelihood):
    """The mean over 20000 minibatches (4 of 12 nodes, 6 partner draws each; links sampled
    beyond 4 per node, zeros hashed at keep = 0.7, 3 held-out pairs) equals the full CVB0
    pass over every observed pair: block statistics and node rows (32 z-scores of Monte
    Carlo error, max |z| < 4.5: a 1% false-alarm rate). The same test catches a 10% bias
    in the link weight (its broken twin). nb forms each link's gammas; bernoulli (and the
    zeros of both) goes through the factorised sums of ``_pair_roles``."""
    est, full = _minibatches(4, 6, 20_000, likelihood)
    assert _max_z(est, full) < 4.5
    broken = [est[0] * 1.1, est[1], est[2]]
    assert _max_z(broken, full) > 8


def test_each_epoch_visits_every_node_once():
    """A step's nodes are the next slice of the epoch's pseudo-random permutation: the
    ``N // batch`` steps of an epoch visit distinct nodes in range (70001 nodes in a Feistel
    domain of ``4**9 = 262144``: most positions cycle-walk back into ``[0, N)``), and the
    next epoch takes another order."""
    order_of = jax.jit(scvb0_module._epoch_nodes, static_argnums=(2, 3))
    for N, batch in [(10, 3), (1000, 512), (70_001, 4096)]:
        steps = N // batch
        epoch = [order_of(jnp.uint32(7), jnp.int32(t), N, batch) for t in range(2 * steps)]
        first = np.concatenate([np.asarray(e) for e in epoch[:steps]])
        second = np.concatenate([np.asarray(e) for e in epoch[steps:]])
        for order in (first, second):
            assert np.unique(order).shape[0] == steps * batch
            assert order.min() >= 0 and order.max() < N
        assert not np.array_equal(first, second)


def test_pair_uniform_keys_do_not_wrap():
    """Up to 46340 nodes ``pair_uniform`` is the historic ``hash_uniform(i * N + j)`` (the
    same subsamples); beyond, two pairs whose key ``i * N + j`` is equal modulo ``2**32``
    (which shared one decision) get independent uniforms."""
    i, j = np.array([3, 70]), np.array([9, 41])
    assert np.array_equal(wmmsb.pair_uniform(i, j, 1000, 5), wmmsb.hash_uniform(i * 1000 + j, 5))
    N = 100_000
    key = 12_345 * N + 678
    i2, j2 = divmod(key + 2**32, N)  # the same key modulo 2**32
    assert (i2 * N + j2) % 2**32 == key % 2**32 and (i2, j2) != (12_345, 678)
    u = np.asarray(wmmsb.pair_uniform(np.array([12_345, i2]), np.array([678, j2]), N, 5))
    assert u[0] != u[1]
    # host and device agree
    ud = wmmsb.pair_uniform(jnp.asarray([12_345, i2]), jnp.asarray([678, j2]), N, 5)
    assert np.array_equal(u, np.asarray(ud))


@pytest.mark.slow
def test_scvb0_reaches_the_cvb0_fixed_point():
    """On a small planted network the stochastic fit (the default schedule tau = 64,
    kappa = 0.5; 20 of 60 nodes and 118 zero draws per node and step) ends next to a fixed
    point of full-batch CVB0: 50 CVB0 passes started from it (to the nearest fixed point)
    move the memberships and the held-out link probabilities by less than 0.03, against
    more than 0.2 from the random start (the check has teeth)."""
    Y, held = planted(7, N=60, directed=True, within=2.0, between=0.05)
    data = wmmsb.make_data(Y, mask=~held, directed=True, zeros="list", likelihood="bg")
    hyper = wmmsb.make_hyper(3, likelihood="bg")
    algorithm = wmmsb.scvb0(data, hyper, batch=20, draws=118)
    fit = fit_run(algorithm, jax.random.key(0), 3000, num_draws=1, progress_bar=False)
    start = algorithm.init(jax.random.key(0))
    full = wmmsb.cvb0(data, hyper, likelihood="bg", store_gamma=False)
    ii, jj = np.nonzero(held)

    def distance(state):
        initial = full.init(jax.random.key(1))._replace(
            n_node=state.n_node, n_y=state.n_y, n_phi=state.n_phi, r=state.r, p=state.p
        )
        fixed = fit_run(
            full,
            jax.random.key(1),
            50,
            num_draws=1,
            progress_bar=False,
            initial_state=initial,
        ).state
        theta = np.asarray(wmmsb.membership_means(state.n_node, hyper))
        theta_fixed = np.asarray(wmmsb.membership_means(fixed.n_node, hyper))
        p = wmmsb.expected_link_probability(state, hyper, ii, jj, likelihood="bg")
        p_fixed = wmmsb.expected_link_probability(fixed, hyper, ii, jj, likelihood="bg")
        return np.max(np.abs(theta - theta_fixed)), float(jnp.max(jnp.abs(p - p_fixed)))

    assert max(distance(fit.state)) < 0.03, distance(fit.state)
    assert min(distance(start)) > 0.2


def test_node_update_and_init_are_checked():
    data = wmmsb.make_network(6, [0, 1, 2], [1, 2, 3], [1, 2, 1], directed=True, zeros="list")
    hyper = wmmsb.make_hyper(2, likelihood="bg")
    with pytest.raises(ValueError, match="node_update"):
        wmmsb.cvb0(data, hyper, likelihood="bg", node_update="exact")
    with pytest.raises(ValueError, match="node_update"):
        wmmsb.scvb0(data, hyper, batch=2, node_update="exact")
    with pytest.raises(ValueError, match="init"):
        wmmsb.scvb0(data, hyper, batch=2, init="kmeans")


@pytest.mark.parametrize("how", ["factory", "default", "public init"])
def test_the_even_start_has_cvb0s_assortative_block_statistics(how):
    """init="even" (the default, through the factory and the public ``init``): every block
    the same share of the pairs, the within-community ones 10 times the links' share of the
    others (cvb0's assortative start in expectation)."""
    data = wmmsb.make_network(6, [0, 1, 2], [1, 2, 3], [1, 2, 1], directed=True, zeros="none")
    hyper = wmmsb.make_hyper(3, likelihood="bg")
    key = jax.random.key(0)
    if how == "factory":
        state = wmmsb.scvb0(data, hyper, batch=2, init="even").init(key)
    elif how == "default":
        state = wmmsb.scvb0(data, hyper, batch=2).init(key)
    else:
        state = wmmsb.scvb0.init(key, data, hyper, likelihood="bg")
    n_phi, rate = np.asarray(state.n_phi), np.asarray(state.n_y / state.n_phi)
    np.testing.assert_allclose(n_phi, n_phi[0, 0], rtol=1e-6)
    np.testing.assert_allclose(rate / rate[0, 1], 1 + 9 * np.eye(3), rtol=1e-6)
    assert float(n_phi.sum()) == pytest.approx(float(data.w.sum() + data.num_zeros), rel=1e-6)


def test_the_mmsb_default_node_update_finds_structure_where_a_pass_does_not():
    """The MMSB's default node update ("solve") on a sparse planted network (800 nodes, 4
    blocks, mean degree 10, 80% of the links within a block, 60 CVB0 passes): held-out AUC
    above 0.7, where plain passes (a pass moves a row by about degree / zeros, 10 / 800)
    stay at chance (below 0.6), as the MMSB on hep-th did (0.50 at every proportion)."""
    from bnpjax.metrics import roc_auc

    rng = np.random.default_rng(0)
    N, K, degree = 800, 4, 10.0
    z = rng.integers(0, K, N)
    P = np.where(z[:, None] == z[None, :], 0.8 * degree / (N / K), 0.2 * degree / N)
    Y = np.triu(rng.random((N, N)) < P, 1).astype(int)
    Y = Y + Y.T
    held = np.triu(rng.random((N, N)) < 0.05, 1)
    held = held | held.T
    data = wmmsb.make_data(Y, mask=~held, directed=False, likelihood="bernoulli", zeros="dense")
    hyper = wmmsb.make_hyper(K, likelihood="bernoulli")
    ii, jj = np.nonzero(np.triu(held, 1))
    auc = {}
    for update in (None, "pass"):
        algorithm = wmmsb.cvb0(data, hyper, likelihood="bernoulli", node_update=update)
        state = fit_run(algorithm, jax.random.key(0), 60, num_draws=1, progress_bar=False).state
        p = wmmsb.expected_link_probability(state, hyper, ii, jj, likelihood="bernoulli")
        auc[update] = roc_auc(Y[ii, jj] > 0, np.asarray(p))
    assert auc[None] > 0.7 and auc["pass"] < 0.6, auc
