"""The moves of pairs of features of bnpjax.infer.ibp_split_merge and the anchored moves of
bnpjax.infer.ibp_anchored, each on its own, by exact starts: many independent chains from
exact draws of a linear-Gaussian latent feature model (``Z`` from the IBP buffer law, ``A``
from its prior, ``X`` given both), the move applied repeatedly with ``X`` fixed, and the
statistics after the moves compared with those at the start
(:func:`bnpjax.testing.exact_start_test`). A move that leaves ``p(Z, A | X)`` invariant keeps
the joint law at every step, so the paired differences have mean zero, with a standard
error from independent chains. Each move has two broken twins that must fail by a wide margin.

The model is sized for the moves to matter: four rows, a likelihood sharp enough that rows
prefer some allocations to others (the allocation probabilities, the part of the ratio a slip
would drop, are far from uniform) and an IBP with about three features, so that most draws
have a pair to merge or reallocate and an empty column to split into."""

from functools import partial

import jax
import jax.numpy as jnp
import pytest

from bnpjax.infer.ibp_anchored import (
    anchored_birth_death_log_proposal_ratio,
    anchored_birth_death_pass,
    anchored_split_merge_log_proposal_ratio,
    anchored_split_merge_pass,
)
from bnpjax.infer.ibp_split_merge import (
    buffer_log_prior,
    reallocation_log_proposal_ratio,
    reallocation_pass,
    split_merge_log_proposal_ratio,
    split_merge_pass,
)
from bnpjax.priors.ibp import sample_buffet
from bnpjax.testing import exact_start_test

ROWS, DIMS, CAPACITY = 4, 2, 10
ALPHA, SIGMA_X, SIGMA_A = 1.5, 0.5, 1.0


def prior_sample(key):
    """``(Z, A)`` from the block's target without data: the IBP in a buffer, its columns in a
    uniformly random order (the buffer law spreads a class evenly over arrangements; the
    buffet process fills the first columns), and every row of ``A`` from its prior. A draw
    with more features than the buffer holds is kept truncated: the moves keep the number of
    active columns or flag the buffer full, and the statistics compare a state with its own
    start, so the rare truncated draw (P(K+ > 10) < 1e-4) is no error."""
    key_z, key_perm, key_a = jax.random.split(key, 3)
    Z = sample_buffet(key_z, ALPHA, ROWS, CAPACITY).Z.astype(float)
    Z = Z[:, jax.random.permutation(key_perm, CAPACITY)]
    A = SIGMA_A * jax.random.normal(key_a, (CAPACITY, DIMS))
    return Z, A


# degrees of freedom of the Student-t likelihood (None: Gaussian); the anchored split draws
# parameters from Laplace approximations, exact for a Gaussian conditional only, so it is
# also checked under a likelihood that is not log-concave
STUDENT_T = 4.0


def data_sample(key, state, dof=None):
    Z, A = state
    noise = (
        jax.random.normal(key, (ROWS, DIMS))
        if dof is None
        else jax.random.t(key, dof, (ROWS, DIMS))
    )
    return Z @ A + SIGMA_X * noise


def _targets(X, dof=None):
    """The block's two targets given ``X``: the model's log density but the IBP prior of
    ``Z``, and its ``(N,)`` terms of each row of ``Z`` (the rows are conditionally
    independent)."""

    def rows(Z, A):
        r = (X - Z @ A) / SIGMA_X
        if dof is not None:
            return jnp.sum(jax.scipy.stats.t.logpdf(r, dof), axis=1)
        return -0.5 * jnp.sum(r**2, axis=1)

    def target(Z, A):
        return jnp.sum(rows(Z, A)) - 0.5 * jnp.sum(A**2) / SIGMA_A**2

    return target, rows


def _kernel(move, dof=None):
    from bnpjax.infer import SamplingAlgorithm

    def kernel(X):
        target, rows = _targets(X, dof)

        def step(key, state):
            Z, A = state
            out = move(key, Z, A, ALPHA, target, rows, num_proposals=5)
            return (out[0], out[1]), None

        return SamplingAlgorithm(init=None, step=step)

    return kernel


def statistics(state, X):
    Z, A = state
    m = jnp.sum(Z, 0)
    active = m > 0
    return {
        "K+": jnp.sum(active).astype(float),
        "sum Z": jnp.sum(Z),
        "sum m^2": jnp.sum(m**2),
        "pairs held together": jnp.sum(Z.T @ Z) - jnp.sum(m),
        "<X, ZA>": jnp.sum(X * (Z @ A)),
        "sum A^2 (active)": jnp.sum(jnp.where(active[:, None], A**2, 0.0)),
        "log pi(Z)": buffer_log_prior(Z, ALPHA),
    }


def _run(move, seed=0, dof=None):
    return exact_start_test(
        jax.random.key(seed),
        prior_sample=prior_sample,
        data_sample=partial(data_sample, dof=dof),
        kernel=_kernel(move, dof),
        test_functions=statistics,
        num_chains=10_000,
        num_steps=10,
    )


def _reverse_forgotten(log_q_reverse, log_q_forward):
    return reallocation_log_proposal_ratio(0.0, log_q_forward)


def _both_forgotten(log_q_reverse, log_q_forward):
    return 0.0


def _allocation_forgotten(merge, num_active, num_empty, log_q_alloc):
    return split_merge_log_proposal_ratio(merge, num_active, num_empty, 0.0)


def _counts_off_by_one(merge, num_active, num_empty, log_q_alloc):
    # the split's choice of an empty column counted among E + 1 instead of E
    return split_merge_log_proposal_ratio(merge, num_active, num_empty + 1, log_q_alloc)


def _anchors_forgotten(num_active, num_empty, num_holders, num_k_only, num_j_only):
    # the merge's and the split's choices of anchors left out of the ratio
    return jnp.log(num_empty.astype(float)) - jnp.log(num_active + 1.0)


def _anchored_counts_off_by_one(num_active, num_empty, num_holders, num_k_only, num_j_only):
    return anchored_split_merge_log_proposal_ratio(
        num_active, num_empty + 1, num_holders, num_k_only, num_j_only
    )


def _holders_miscounted(num_active, num_empty, num_rows, num_holders):
    # the death's choice of an anchor among the holders counted among all rows
    return anchored_birth_death_log_proposal_ratio(num_active, num_empty, num_rows, num_rows)


def _birth_anchor_forgotten(num_active, num_empty, num_rows, num_holders):
    return anchored_birth_death_log_proposal_ratio(num_active, num_empty, 1, num_holders)


anchored = partial(anchored_split_merge_pass, newton_steps=2, diagonal=True)
anchored_birth = partial(anchored_birth_death_pass, newton_steps=2, diagonal=True)

MOVES = {
    "reallocation": (
        reallocation_pass,
        {
            "reverse probability forgotten": _reverse_forgotten,
            "both probabilities forgotten": _both_forgotten,
        },
    ),
    "split-merge": (
        split_merge_pass,
        {
            "allocation probability forgotten": _allocation_forgotten,
            "empty columns miscounted": _counts_off_by_one,
        },
    ),
    "anchored split-merge": (
        anchored,
        {
            "anchor choices forgotten": _anchors_forgotten,
            "empty columns miscounted": _anchored_counts_off_by_one,
        },
    ),
    "anchored birth-death": (
        anchored_birth,
        {
            "holders miscounted": _holders_miscounted,
            "birth's anchor forgotten": _birth_anchor_forgotten,
        },
    ),
}


def _fraction_moved(move, dof=None, num_draws=2000):
    """The share of exact joint draws whose ``Z`` one pass of the move changes. An exact
    start test checks invariance only, which a move that never accepts (a NaN in its ratio
    rejects every proposal) keeps too; these moves change 38-82 % of the draws, so a floor
    of 20 % (about 17 Monte Carlo sds below the lowest) catches one that stopped moving."""

    def one(key):
        key_prior, key_data, key_move = jax.random.split(key, 3)
        Z, A = prior_sample(key_prior)
        target, rows = _targets(data_sample(key_data, (Z, A), dof=dof), dof)
        return jnp.any(move(key_move, Z, A, ALPHA, target, rows, num_proposals=5)[0] != Z)

    keys = jax.random.split(jax.random.key(1), num_draws)
    return float(jnp.mean(jax.vmap(one)(keys)))


@pytest.mark.parametrize("name", list(MOVES))
def test_move_keeps_the_posterior(name):
    move, _ = MOVES[name]
    result = _run(move)
    assert result.passed, f"{name}\n{result}"
    assert _fraction_moved(move) > 0.2, name


@pytest.mark.parametrize("name", ["anchored split-merge", "anchored birth-death"])
def test_anchored_move_keeps_the_posterior_under_a_student_t_likelihood(name):
    move, _ = MOVES[name]
    result = _run(move, dof=STUDENT_T)
    assert result.passed, f"{name}, Student-t\n{result}"
    assert _fraction_moved(move, STUDENT_T) > 0.2, f"{name}, Student-t"


def test_a_move_that_never_accepts_is_caught():
    """The floor above fails a move whose ratio is NaN (every proposal rejected), which the
    exact start test alone passes."""

    def nan_ratio(*args):
        return jnp.nan

    move = partial(anchored, log_proposal_ratio=nan_ratio)
    assert _run(move, dof=STUDENT_T).passed  # invariance alone cannot see it
    assert _fraction_moved(move, STUDENT_T) == 0.0


@pytest.mark.parametrize(
    ("name", "twin"), [(name, twin) for name, (_, twins) in MOVES.items() for twin in twins]
)
def test_broken_twin_fails(name, twin):
    move, twins = MOVES[name]
    result = _run(partial(move, log_proposal_ratio=twins[twin]))
    assert not result.passed, f"{name}, {twin}\n{result}"
    assert result.max_abs_z > 2 * result.threshold, f"{name}, {twin}\n{result}"
