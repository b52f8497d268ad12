"""bnpjax.ops.apply_if: the branch's values, and the branch not run under vmap when no batch
member needs it, nor moved out of its loop by XLA."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from bnpjax.ops import apply_if


def _solve(a, b):
    return jnp.linalg.solve(a, b)


def test_values_are_those_of_the_branch_or_the_default():
    a = jnp.eye(3) * 2.0
    b = jnp.arange(3.0)
    default = jnp.full(3, -1.0)
    f = jax.jit(lambda p: apply_if(p, _solve, default, a, b))
    np.testing.assert_allclose(f(True), b / 2)
    np.testing.assert_allclose(f(False), default)


def test_under_vmap_each_member_gets_its_own_branch():
    a = jnp.broadcast_to(jnp.eye(2), (4, 2, 2)) * jnp.arange(1.0, 5.0)[:, None, None]
    b = jnp.ones((4, 2))
    default = jnp.zeros((4, 2))
    take = jnp.array([True, False, True, False])
    out = jax.jit(jax.vmap(lambda p, d, a, b: apply_if(p, _solve, d, a, b)))(take, default, a, b)
    want = np.where(np.asarray(take)[:, None], 1.0 / np.arange(1.0, 5.0)[:, None], 0.0)
    np.testing.assert_allclose(out, want * np.ones((4, 2)))


@pytest.mark.parametrize("take, calls", [([False, False, False], 0), ([False, True, False], 1)])
def test_under_vmap_the_branch_runs_only_when_some_member_needs_it(take, calls):
    """lax.cond would run the branch for every member at every call (a select)."""
    seen = []

    def branch(x):
        jax.debug.callback(lambda: seen.append(1))
        return x + 1.0

    f = jax.jit(jax.vmap(lambda p, x: apply_if(p, branch, x, x)))
    jax.block_until_ready(f(jnp.array(take), jnp.zeros(3)))
    jax.effects_barrier()
    assert (len(seen) > 0) == bool(calls)


def _loop_nesting(hlo: str, op: str) -> list[int]:
    """For each fused computation holding ``op``, how many while bodies enclose its use."""
    computations = {}
    for text in hlo.split("\n\n"):
        match = re.match(r"(?:ENTRY )?%?([\w.\-]+)", text.strip().split("\n", 1)[0])
        if match:
            computations[match.group(1)] = text
    parent = {}
    for name, text in computations.items():
        for body in re.findall(r"body=%([\w.\-]+)", text):
            parent[body] = name
    depths = []
    for name, text in computations.items():
        if f" {op}(" not in text:
            continue
        for user, user_text in computations.items():
            if f"calls=%{name}" in user_text:
                depth, where = 0, user
                while where in parent:
                    depth, where = depth + 1, parent[where]
                depths.append(depth)
    return depths


def test_the_branch_is_not_hoisted_out_of_its_loop():
    """Under vmap, XLA moves a branch whose inputs the loop does not change out of the loop
    (loop-invariant code motion), where it runs at every call: a plain while loop loses its
    inner loop to the enclosing program; through apply_if's barrier it stays in the body."""

    def newton_like(a, x):
        return lax.fori_loop(0, 5, lambda i, v: jnp.tanh(a @ v), x)

    def plain(p, a, x):
        def body(carry):
            return jnp.zeros((), bool), newton_like(a, x)

        return lax.while_loop(lambda c: c[0], body, (p, jnp.zeros_like(x)))[1]

    def guarded(p, a, x):
        return apply_if(p, newton_like, jnp.zeros_like(x), a, x)

    args = (jnp.array([True, False]), jnp.eye(8), jnp.ones((2, 8, 3)))

    def depths(f):
        return _loop_nesting(
            jax.jit(jax.vmap(f, (0, None, 0))).lower(*args).compile().as_text(), "tanh"
        )

    assert depths(plain) and max(depths(plain)) == 1  # the premise: hoisted out of the while
    assert depths(guarded) and min(depths(guarded)) == 2  # inner loop inside apply_if's body
