"""The split-merge move of the linear-Gaussian IBP model leaves the exact posterior of an
enumerable buffer invariant (and a twin that forgets the proposal's probabilities does not);
a split that finds the buffer full asks the driver to grow it."""

from math import factorial
from statistics import NormalDist

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnpjax.models import ibp_lg
from bnpjax.models.ibp_lg.data import IBPLGState
from bnpjax.models.ibp_lg.split_merge import split_merge_moves

N, D, C = 4, 2, 3
ALPHA, SIGMA_X, SIGMA_A = 1.5, 0.6, 1.0
X_FIXED = np.array([[1.4, -0.6], [0.2, 1.1], [1.6, 0.5], [1.5, -0.4]])
NUM_STATES = 40_000
NUM_MOVES = 3
STATS = ("K+", "sum Z", "sum m^2", "shared 0-1", "mode")
THRESHOLD = NormalDist().inv_cdf(1 - 0.01 / (2 * len(STATS)))  # Bonferroni, level 0.01


def _exact_law():
    """Probability of every 4 x 3 buffer under p(Z | X, alpha, sigmas) with ``A`` integrated
    out: the IBP class law spread evenly over the arrangements of its columns in the buffer,
    times the Gaussian marginal likelihood (written here in NumPy, independently of the
    sampler's Cholesky form)."""
    Zs = np.array([[(c >> b) & 1 for b in range(N * C)] for c in range(2 ** (N * C))], float)
    Zs = Zs.reshape(-1, N, C)
    log_p = []
    for Z in Zs:
        m = Z.sum(0)
        k = int(np.sum(m > 0))
        term = k * np.log(ALPHA) + np.log(factorial(C - k))
        for x in m[m > 0].astype(int):
            term += np.log(factorial(N - x) * factorial(x - 1) / factorial(N))
        cov = SIGMA_X**2 * np.eye(N) + SIGMA_A**2 * Z @ Z.T
        _, logdet = np.linalg.slogdet(cov)
        quad = np.sum(X_FIXED * np.linalg.solve(cov, X_FIXED))
        log_p.append(term - 0.5 * D * logdet - 0.5 * quad)
    log_p = np.array(log_p)
    return Zs, np.exp(log_p - np.logaddexp.reduce(log_p))


def _statistics(Zs):
    m = Zs.sum(1)
    return {
        "K+": (m > 0).sum(-1),
        "sum Z": m.sum(-1),
        "sum m^2": (m**2).sum(-1),
        "shared 0-1": (Zs[:, 0] * Zs[:, 1]).sum(-1),
    }


def _classes(Zs):
    """Each buffer's columns as sorted owner-set codes: equal for one equivalence class."""
    return np.sort((Zs * (2 ** np.arange(N))[:, None]).sum(-2), -1)


def _law_after_moves(law, moves, seed):
    """z-scores of the statistics' means after ``moves(key, state) -> (Z, accepted, _)`` from
    NUM_STATES independent draws of the exact ``law``, their sd from the exact law."""
    Zs, probs = law
    rng = np.random.default_rng(0)
    codes = rng.choice(len(probs), size=NUM_STATES, p=probs)
    dtype = jnp.result_type(float)

    def one(key, Z):
        state = IBPLGState(
            Z,
            jnp.zeros((C, D), dtype),
            jnp.asarray(ALPHA, dtype),
            jnp.asarray(SIGMA_X, dtype),
            jnp.asarray(SIGMA_A, dtype),
            jnp.asarray(X_FIXED, dtype),
            jnp.zeros((D,), dtype),
        )
        Z, accepted, _ = moves(key, state)
        return Z, accepted

    keys = jax.random.split(jax.random.key(seed), NUM_STATES)
    # small batches: a vmap over all the states makes one huge batched Cholesky, whose
    # thread-pool split in jaxlib's CPU LAPACK kernels was seen to deadlock
    batched = jax.jit(lambda k, Z: jax.lax.map(lambda a: one(*a), (k, Z), batch_size=16))
    after, accepted = batched(keys, jnp.asarray(Zs[codes], dtype))
    after = np.asarray(after)
    assert np.mean(np.asarray(accepted)) > 0.1  # the moves do move
    truth = _statistics(Zs)
    got = _statistics(after)
    # the most probable class (columns as owner sets, in any slot order)
    mode = _classes(Zs)[np.argmax(probs)]
    truth["mode"] = (_classes(Zs) == mode).all(-1)
    got["mode"] = (_classes(after) == mode).all(-1)
    z = {}
    for name in STATS:
        expected = np.sum(truth[name] * probs)
        sd = np.sqrt(np.sum((truth[name] - expected) ** 2 * probs))
        z[name] = (got[name].mean() - expected) / (sd / np.sqrt(NUM_STATES))
    return z


@pytest.fixture(scope="module")
def law():
    return _exact_law()


@pytest.mark.parametrize("slip", ["", "proposal"], ids=["exact", "broken"])
def test_moves_keep_the_exact_law_of_a_small_buffer(law, slip):
    # independent draws from the exact law, a few moves each: the law after the moves must be
    # the same; a twin that treats the sequential allocation as a symmetric proposal is not
    z = _law_after_moves(
        law, lambda key, state: split_merge_moves(key, state, NUM_MOVES, _slip=slip), seed=3
    )
    worst = max(abs(v) for v in z.values())
    if not slip:
        assert worst < THRESHOLD, z
    else:
        assert worst > 2 * THRESHOLD, z


def test_a_split_with_a_full_buffer_asks_the_driver_for_room():
    # every row holds both features of a two-slot buffer: each split is refused and flagged,
    # and the step reports the capacity the driver must grow to
    X = np.random.default_rng(1).standard_normal((8, 2))
    data = ibp_lg.make_data(X)
    step = ibp_lg.split_merge.build_step(num_moves=4, kappa=2)
    state = ibp_lg.split_merge.init(jax.random.key(0), data, capacity=2, num_init_features=2)
    state = state._replace(Z=jnp.ones_like(state.Z))
    new, info = jax.jit(step)(jax.random.key(1), state, data, ibp_lg.make_hyper())
    assert bool(info.capacity_exceeded)
    assert int(info.capacity_needed) > 2
    assert set(np.unique(np.asarray(new.Z))) <= {0.0, 1.0}


def test_bad_num_moves_is_named():
    data = ibp_lg.make_data(np.zeros((4, 2)))
    with pytest.raises(ValueError, match="num_moves"):
        ibp_lg.split_merge(data, num_moves=0)
