"""Scale moves of Gibbs M3F: factors rescaled with the thresholds they are compared with, by
Metropolis-Hastings on the pseudo-posterior with the augmentation integrated out.

The Gibbs sweep draws the augmentation :math:`\\omega` given the scores, then the factors and
thresholds given :math:`\\omega`: every pair near its margin gets a large :math:`\\omega` that
pins its score to where it was, so the sweep crawls (data augmentation for the hinge mixes
slowly; on the demo's data the thresholds and the test scores had R-hat 1.14-1.19 after
4 x (200 + 500) sweeps). Group moves (Liu and Sabatti 2000) of the pseudo-posterior itself,
where the hinge is :math:`-C\\max(0, \\zeta)` and nothing pins a score, take larger steps:

- per user, :math:`(U_i, \\theta_i) \\to a_i (U_i, \\theta_i)` (the user's scale against the
  thresholds; the item biases held);
- per item, :math:`V_j \\to a_j V_j` (with the item bias held);
- for all at once, :math:`(V, c, \\theta) \\to a (V, c, \\theta)` (every score scales).

Each changes every affected :math:`\\zeta = \\alpha - a\\beta` linearly in :math:`a`; with
the Gaussian priors and the Jacobian :math:`a^D` of the :math:`D` rescaled coordinates, the
target of :math:`t = \\log a` is :math:`D t - A e^{2t}/2 + B e^t + \\sum \\log f(u)`,
:math:`u = C\\zeta/2`, evaluated in one pass over the pairs. A few random-walk steps on
:math:`t` per group (``SCALE_STEPS``) are each exact. Last, every threshold moves by random
walk on its conditional given the scores, :math:`\\theta_{ir} \\mid x` with the augmentation
integrated out (``THRESHOLD_STEPS``). The moves run before the sweep draws
:math:`\\omega`, which then comes from its conditional given the moved state, so that the
pair (a move of the marginal of the factors, then :math:`\\omega` given them) leaves the
augmented posterior invariant.

With the Geweke construction's proper prior :math:`\\lambda \\sim \\mathrm{Exponential}(c/2)`
(:mod:`bnpjax.models.m3f.geweke`) the marginal factor is :math:`\\log f(u) = -u -
\\sqrt{1 + c}\\,|u|`; the model's :math:`c = 0` gives :math:`-2\\max(0, u)`.

References
----------
Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo for
Bayesian computation. Biometrika 87(2), 353-369.
Polson, N. G. and Scott, S. L. (2011). Data augmentation for support vector machines.
Bayesian Analysis 6(1).
van Dyk, D. A. and Park, T. (2008). Partially collapsed Gibbs samplers: theory and methods.
JASA 103(482), 790-796.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = []

#: random-walk sds on the log scale of a user's or an item's factors (acceptance about 0.75
#: and 0.4 on the demo's data at C = 1 and at C = 0.1); each step is exact on its own
SCALE_STEPS = (0.1, 0.3)
#: the same for the one factor of all scores, whose conditional is far narrower (thousands of
#: coordinates rescale together; acceptance about 0.6 and 0.3)
GLOBAL_SCALE_STEPS = (0.01, 0.03)


def _log_hinge(zeta, C, lambda_rate):
    """Per (pair, threshold): the hinge factor with the augmentation integrated out."""
    u = 0.5 * C * zeta
    return -u - jnp.sqrt(1.0 + lambda_rate) * jnp.abs(u)


def _rw_log_scales(key, log_target, shape, dtype, steps=None):
    """Random-walk MH steps (sds ``steps``, default ``SCALE_STEPS``) on ``t = log a`` of every
    group at once (``shape``), from ``t = 0``; ``log_target(t)`` is vectorized over the
    groups."""
    steps = jnp.asarray(SCALE_STEPS if steps is None else steps, dtype)
    key_n, key_u = jax.random.split(key)
    normals = jax.random.normal(key_n, (steps.shape[0], *shape), dtype)
    log_u = jnp.log(jax.random.uniform(key_u, (steps.shape[0], *shape), dtype))

    def one(carry, xs):
        t, current = carry
        step, normal, log_uniform = xs
        proposal = t + step * normal
        value = log_target(proposal)
        take = log_uniform < value - current
        return (jnp.where(take, proposal, t), jnp.where(take, value, current)), take

    t0 = jnp.zeros(shape, dtype)
    (t, _), taken = jax.lax.scan(one, (t0, log_target(t0)), (steps, normals, log_u))
    return t, jnp.mean(taken)


def _thresholds_first(values):
    """(nnz, L-1) pair values as (L-1, nnz); a scalar as it is."""
    return jnp.swapaxes(values, -1, -2) if jnp.ndim(values) == 2 else values


def _group_target(data, hyper, alpha, beta, group, num_groups, A, B, D, lambda_rate, jacobian):
    """``log_target(t)`` of groups whose pairs' ``zeta = alpha - a[group] beta`` ((nnz, L-1)
    each; ``group`` (nnz,) or None for one group) and whose prior is ``-A a^2/2 + B a``.

    The move's few evaluations read the pairs thresholds first, (L-1, nnz): XLA's CPU loops
    vectorize the last axis, and summed over a last axis of L-1 = 4 thresholds an evaluation
    took a third longer (the users' move for 2 chains on 4756 pairs: 0.67 -> 0.53 ms)."""
    alpha, beta = _thresholds_first(alpha), _thresholds_first(beta)

    def log_target(t):
        a = jnp.exp(t)
        a_pair = a if group is None else a[group]
        hinge = jnp.sum(_log_hinge(alpha - a_pair * beta, hyper.C, lambda_rate), axis=0)
        hinge = jnp.sum(hinge) if group is None else jax.ops.segment_sum(hinge, group, num_groups)
        return (D * t if jacobian else 0.0) - 0.5 * A * a**2 + B * a + hinge

    return log_target


def _pair_values(data, U, V, theta, scores, theta_pairs):
    """Every pair's score ``U_i V_j`` (no bias) and its user's thresholds, unless given (the
    sweep passes them, rescaled from move to move, instead of gathering them again)."""
    x = jnp.sum(U[data.users] * V[data.items], axis=1) if scores is None else scores
    return x, theta[data.users] if theta_pairs is None else theta_pairs


def _users_target(data, hyper, U, V, theta, bias, *, lambda_rate=0.0, jacobian=True,
                  scores=None, theta_pairs=None):  # fmt: skip
    """``log_target(t)`` (``t`` (num_users,)) of ``(U_i, theta_i) -> e^{t_i} (U_i, theta_i)``."""
    T = data.signs
    x, theta_u = _pair_values(data, U, V, theta, scores, theta_pairs)
    alpha = data.margin + T * bias[data.items][:, None]
    beta = T * (theta_u - x[:, None])
    var = hyper.varsigma**2
    A = jnp.sum(U**2, axis=1) / hyper.sigma_u**2 + jnp.sum(theta**2, axis=1) / var
    B = jnp.sum(theta * hyper.rho, axis=1) / var
    D = U.shape[1] + theta.shape[1]
    return _group_target(
        data, hyper, alpha, beta, data.users, U.shape[0], A, B, D, lambda_rate, jacobian
    )


def _items_target(data, hyper, U, V, theta, bias, *, lambda_rate=0.0, jacobian=True,
                  scores=None, theta_pairs=None):  # fmt: skip
    """``log_target(t)`` (``t`` (num_items,)) of ``V_j -> e^{t_j} V_j``."""
    T = data.signs
    x, theta_u = _pair_values(data, U, V, theta, scores, theta_pairs)
    alpha = data.margin - T * (theta_u - bias[data.items][:, None])
    beta = -T * x[:, None]
    A = jnp.sum(V**2, axis=1) / hyper.sigma_v**2
    return _group_target(
        data, hyper, alpha, beta, data.items, V.shape[0], A, 0.0, V.shape[1], lambda_rate,
        jacobian,
    )  # fmt: skip


def _all_target(data, hyper, U, V, theta, bias, *, item_bias, lambda_rate=0.0, jacobian=True,
                scores=None, theta_pairs=None):  # fmt: skip
    """``log_target(t)`` (``t`` a scalar) of ``(V, c, theta) -> e^t (V, c, theta)``."""
    T = data.signs
    x, theta_u = _pair_values(data, U, V, theta, scores, theta_pairs)
    x = x + bias[data.items]
    beta = T * (theta_u - x[:, None])
    var = hyper.varsigma**2
    A = jnp.sum(V**2) / hyper.sigma_v**2 + jnp.sum(theta**2) / var
    B = jnp.sum(theta * hyper.rho) / var
    D = V.size + theta.size
    if item_bias:
        A = A + jnp.sum(bias**2) / hyper.sigma_b**2
        D = D + bias.size
    return _group_target(data, hyper, data.margin, beta, None, 1, A, B, D, lambda_rate, jacobian)


def _scale_users(key, data, hyper, U, V, theta, bias, *, lambda_rate=0.0, jacobian=True,
                 scores=None, theta_pairs=None):  # fmt: skip
    """``(U_i, theta_i) -> a_i (U_i, theta_i)`` for every user at once; returns ``U, theta``,
    the acceptance rate and ``a`` (num_users,). ``jacobian=False`` leaves the ``a^D`` out (the
    broken twin of the Geweke test); ``scores`` and ``theta_pairs``: the pairs' ``U_i V_j``
    and thresholds when the caller has them."""
    log_target = _users_target(
        data, hyper, U, V, theta, bias, lambda_rate=lambda_rate, jacobian=jacobian,
        scores=scores, theta_pairs=theta_pairs,
    )  # fmt: skip
    t, rate = _rw_log_scales(key, log_target, (U.shape[0],), U.dtype)
    a = jnp.exp(t)
    return a[:, None] * U, a[:, None] * theta, rate, a


def _scale_items(key, data, hyper, U, V, theta, bias, *, lambda_rate=0.0, jacobian=True,
                 scores=None, theta_pairs=None):  # fmt: skip
    """``V_j -> a_j V_j`` for every item at once; returns ``V``, the acceptance rate and
    ``a`` (num_items,)."""
    log_target = _items_target(
        data, hyper, U, V, theta, bias, lambda_rate=lambda_rate, jacobian=jacobian,
        scores=scores, theta_pairs=theta_pairs,
    )  # fmt: skip
    t, rate = _rw_log_scales(key, log_target, (V.shape[0],), V.dtype)
    a = jnp.exp(t)
    return a[:, None] * V, rate, a


def _scale_all(key, data, hyper, U, V, theta, bias, *, item_bias, lambda_rate=0.0, jacobian=True,
               scores=None, theta_pairs=None):  # fmt: skip
    """``(V, c, theta) -> a (V, c, theta)``, one factor for all; returns ``V, theta, bias``,
    the acceptance rate and ``a``."""
    log_target = _all_target(
        data, hyper, U, V, theta, bias, item_bias=item_bias, lambda_rate=lambda_rate,
        jacobian=jacobian, scores=scores, theta_pairs=theta_pairs,
    )  # fmt: skip
    t, rate = _rw_log_scales(key, log_target, (), V.dtype, GLOBAL_SCALE_STEPS)
    a = jnp.exp(t)
    return a * V, a * theta, a * bias, rate, a


#: random-walk sds of the thresholds' moves, in units of their prior sd varsigma (by default
#: 1.5 margins; acceptance about 0.7 and 0.35 on the demo's data)
THRESHOLD_STEPS = (0.33, 1.0)


def _thresholds_target(data, hyper, theta, x, *, lambda_rate=0.0, theta_pairs=None):
    """``log_target(d)`` (``d`` like ``theta``) of ``theta -> theta + d`` given the scores
    ``x``: per threshold, its prior plus the hinge of its pairs with the augmentation
    integrated out (a concave log density)."""
    num_thresholds = theta.shape[1]
    ids = data.users[:, None] * num_thresholds + jnp.arange(num_thresholds)  # (nnz, L-1)
    theta_u = theta[data.users] if theta_pairs is None else theta_pairs
    zeta0 = data.margin - data.signs * (theta_u - x[:, None])
    var = hyper.varsigma**2

    def log_target(d):
        zeta = zeta0 - data.signs * d.reshape(-1)[ids]
        hinge = jax.ops.segment_sum(
            _log_hinge(zeta, hyper.C, lambda_rate).reshape(-1), ids.reshape(-1), theta.size
        )
        return hinge.reshape(theta.shape) - 0.5 * (theta + d - hyper.rho) ** 2 / var

    return log_target


def _shift_thresholds(key, data, hyper, theta, x, *, lambda_rate=0.0, theta_pairs=None):
    """Every threshold by random-walk MH on its conditional given the scores with the
    augmentation integrated out; returns ``theta`` and the acceptance rate."""
    log_target = _thresholds_target(
        data, hyper, theta, x, lambda_rate=lambda_rate, theta_pairs=theta_pairs
    )
    steps = tuple(hyper.varsigma * s for s in THRESHOLD_STEPS)
    d, rate = _rw_log_scales(key, log_target, theta.shape, theta.dtype, steps)
    return theta + d, rate
