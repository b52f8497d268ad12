"""The feature moves of the linear-Gaussian IBP model (birth, death, split and merge with
independent proposals, ``A`` integrated out) leave the exact posterior of an enumerable buffer
invariant, and twins that forget the uniform choice among the columns or the split's proposal
density do not; a birth
that finds the buffer full asks the driver to grow it; the row-parallel sampler's warm start
and moves are switched off by zero."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_ibp_lg_split_merge import THRESHOLD, _exact_law, _law_after_moves

from bnpjax.models import ibp_lg
from bnpjax.models.ibp_lg.feature_moves import feature_moves

NUM_MOVES = 4


@pytest.fixture(scope="module")
def law():
    return _exact_law()


@pytest.mark.parametrize("slip", ["", "pick", "proposal"], ids=["exact", "no-pick", "no-q"])
def test_moves_keep_the_exact_law_of_a_small_buffer(law, slip):
    # independent draws from the exact law, a few moves each: the law after the moves must be
    # the same (z-scores of the statistics' means, their sd from the exact law); twins that
    # leave the uniform pick among the K+ columns, or the split's proposal density, out of
    # the ratios are not
    z = _law_after_moves(
        law, lambda key, state: feature_moves(key, state, NUM_MOVES, _slip=slip), seed=4
    )
    worst = max(abs(v) for v in z.values())
    if not slip:
        assert worst < THRESHOLD, z
    else:
        assert worst > 2 * THRESHOLD, z


def test_a_birth_with_a_full_buffer_asks_the_driver_for_room():
    # every slot of a two-slot buffer is held: a birth or split is refused (Z unchanged) and
    # flagged, so the driver grows the buffer and re-runs the step
    X = np.random.default_rng(1).standard_normal((8, 2))
    data = ibp_lg.make_data(X)
    state = ibp_lg.parallel_gibbs.init(jax.random.key(0), data, capacity=2, num_init_features=2)
    state = state._replace(Z=jnp.ones_like(state.Z))
    keys = jax.random.split(jax.random.key(1), 64)
    Z, _, no_room = jax.jit(jax.vmap(lambda k: feature_moves(k, state, 1)))(keys)
    no_room = np.asarray(no_room)
    assert no_room.any()
    assert (np.asarray(Z)[no_room] == 1).all()


def test_zero_moves_and_zero_warm_sweeps_are_the_plain_sampler():
    # num_moves=0 and init_sweeps=0: the random start and the sweep of Zhang et al. alone,
    # draw for draw (the moves and the warm start use keys of their own)
    data = ibp_lg.make_data(np.random.default_rng(2).standard_normal((10, 3)))
    plain = ibp_lg.parallel_gibbs(data, num_moves=0, init_sweeps=0, capacity=8)
    start = ibp_lg.parallel_gibbs.init(jax.random.key(0), data, capacity=8)
    assert np.array_equal(np.asarray(plain.init(jax.random.key(0)).Z), np.asarray(start.Z))
    with pytest.raises(ValueError, match="num_moves"):
        ibp_lg.parallel_gibbs(data, num_moves=-1)
    with pytest.raises(ValueError, match="init_rows"):
        ibp_lg.parallel_gibbs(data, init_rows=0)
