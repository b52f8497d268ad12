"""The optimisation baseline: fast maximum-margin matrix factorization (Rennie & Srebro 2005).

Minimizes :math:`\\sum_{ij} \\sum_r h(T^r_{ij}(\\theta_{ir} - U_i \\cdot V_j)) +
\\frac{\\mathrm{reg}}2 (\\|U\\|^2 + \\|V\\|^2)` with the smooth hinge ``h`` and per-user
thresholds by L-BFGS (``optax.lbfgs`` with its zoom line search), as a
:class:`bnpjax.infer.VariationalAlgorithm` run by :func:`bnpjax.fit`: the state is the
parameters and the optimiser's state, a step is one L-BFGS update, and the posterior of the
fit holds the point estimate as one draw.

References
----------
Rennie, J. D. M. and Srebro, N. (2005). Fast maximum margin matrix factorization for
collaborative prediction. ICML.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from bnpjax.infer.base import ArvizSpec, bind
from bnpjax.infer.checks import check_integer, check_positive, check_start_scale
from bnpjax.infer.variational import VariationalAlgorithm, fit
from bnpjax.models.m3f.conditionals import _scores
from bnpjax.models.m3f.data import M3FData, _sizes
from bnpjax.models.m3f.gibbs import _fixed_items

__all__ = ["MAPInfo", "MAPState", "build_step", "fit_map", "init", "map_estimate"]


class MAPState(NamedTuple):
    """The parameters (``V`` is the given one when the items are fixed) and L-BFGS's state."""

    U: jax.Array  # (num_users, rank)
    V: jax.Array  # (num_items, rank)
    theta: jax.Array  # (num_users, L-1)
    opt_state: Any


class MAPInfo(NamedTuple):
    """The objective before the update."""

    objective: jax.Array


def _smooth_hinge(z):
    """Rennie & Srebro's smooth hinge: 1/2 - z (z <= 0), (1 - z)^2 / 2 (0 < z < 1), 0."""
    return jnp.where(z <= 0, 0.5 - z, jnp.where(z < 1, 0.5 * (1 - z) ** 2, 0.0))


def _item_side(p, fixed_V):
    return p["V"] if fixed_V is None else fixed_V


def _params(state, fixed_V) -> dict:
    """The parameters L-BFGS moves (``V`` only when it is not fixed)."""
    params = {"U": state.U, "theta": state.theta}
    if fixed_V is None:
        params["V"] = state.V
    return params


def _objective(data, fixed_V, reg, p):
    V = _item_side(p, fixed_V)
    x = _scores(data, p["U"], V)
    z = data.signs * (p["theta"][data.users] - x[:, None])
    penalty = jnp.sum(p["U"] ** 2) + (jnp.sum(V**2) if fixed_V is None else 0.0)
    return jnp.sum(_smooth_hinge(z)) + 0.5 * reg * penalty


def _optimizer():
    import optax

    return optax.lbfgs()


def _init(data, fixed_V, key, *, rank, num_users, num_items, init_scale):
    key_u, key_v = jax.random.split(key)
    dtype = data.signs.dtype
    L1 = data.signs.shape[1]
    params = {
        "U": init_scale * jax.random.normal(key_u, (num_users, rank), dtype),
        "theta": jnp.broadcast_to(jnp.linspace(-1.5, 1.5, L1, dtype=dtype), (num_users, L1)),
    }
    if fixed_V is None:
        params["V"] = init_scale * jax.random.normal(key_v, (num_items, rank), dtype)
    return MAPState(
        params["U"], _item_side(params, fixed_V), params["theta"], _optimizer().init(params)
    )


def _step(data, fixed_V, reg, key, state):
    import optax

    del key  # L-BFGS is deterministic

    def objective(p):
        return _objective(data, fixed_V, reg, p)

    opt = _optimizer()
    params = _params(state, fixed_V)
    value, grad = optax.value_and_grad_from_state(objective)(params, state=state.opt_state)
    updates, s = opt.update(
        grad, state.opt_state, params, value=value, grad=grad, value_fn=objective
    )
    p = optax.apply_updates(params, updates)
    return MAPState(p["U"], _item_side(p, fixed_V), p["theta"], s), MAPInfo(value)


def _trace(state):
    return {"posterior": {"U": state.U, "V": state.V, "theta": state.theta}}


def init(
    key, data: M3FData, hyper=None, *, rank: int | None = None, init_scale=0.1, item_factors=None
) -> MAPState:
    """The starting parameters of the MAP baseline and L-BFGS's state.

    Parameters
    ----------
    key : jax.Array
    data : M3FData
    hyper : None
        Unused (the baseline's only hyperparameter is ``reg``, a setting of the step).
    rank, init_scale, item_factors
        As in :func:`map_estimate`.

    Returns
    -------
    MAPState
    """
    del hyper
    sizes = _sizes(data)
    dtype = data.signs.dtype
    rank, fixed = _fixed_items(item_factors, None, False, rank, sizes["num_items"], dtype)
    fixed_V = None if fixed is None else fixed[0]
    return _init(
        data,
        fixed_V,
        key,
        rank=rank,
        init_scale=check_start_scale(init_scale, "init_scale"),
        **sizes,
    )


def build_step(*, reg: float = 1.0, item_factors=None):
    """One L-BFGS update as ``step(key, state, data, hyper) -> (state, info)``.

    Parameters
    ----------
    reg : float
        As in :func:`map_estimate`.
    item_factors : array_like, optional
        The fixed ``V`` (strong generalization).

    Returns
    -------
    callable
    """
    reg = check_positive(reg, "reg")

    def step(key, state, data, hyper=None):
        del hyper
        fixed_V = None if item_factors is None else jnp.asarray(item_factors, data.signs.dtype)
        return _step(data, fixed_V, jnp.asarray(reg, data.signs.dtype), key, state)

    return step


def map_estimate(
    data: M3FData,
    hyper=None,
    *,
    rank: int | None = None,
    reg: float = 1.0,
    init_scale: float = 0.1,
    item_factors=None,
) -> VariationalAlgorithm:
    """The M3F optimisation baseline as a :class:`~bnpjax.infer.VariationalAlgorithm`.

    Parameters
    ----------
    data : M3FData
    hyper : None
        Unused: the baseline's only hyperparameter is ``reg``.
    rank : int, optional
        Number of factors (default 10; the width of ``item_factors`` when given).
    reg : float
        Weight of the squared Frobenius norms.
    init_scale : float
        Sd of the random start of the factors.
    item_factors : array_like, optional
        Hold ``V`` fixed and minimize over ``U`` and the thresholds only (strong
        generalization).

    Returns
    -------
    VariationalAlgorithm
        Run it with :func:`bnpjax.fit`; ``step`` is one L-BFGS update.

    References
    ----------
    Rennie & Srebro (2005).
    """
    del hyper
    reg = check_positive(reg, "reg")
    sizes = _sizes(data)
    dtype = data.signs.dtype
    rank, fixed = _fixed_items(item_factors, None, False, rank, sizes["num_items"], dtype)
    fixed_V = None if fixed is None else fixed[0]
    return VariationalAlgorithm(
        init=bind(
            _init,
            data,
            fixed_V,
            rank=rank,
            init_scale=check_start_scale(init_scale, "init_scale"),
            **sizes,
        ),
        step=bind(_step, data, fixed_V, jnp.asarray(reg, dtype)),
        trace=_trace,
        spec=ArvizSpec(
            name="m3f.map_estimate",
            dims={"U": ["user", "factor"], "V": ["item", "factor"], "theta": ["user", "threshold"]},
            settings={"rank": rank, "reg": reg, "fixed_items": fixed is not None},
        ),
    )


def fit_map(
    data: M3FData,
    *,
    rank: int | None = None,
    reg: float = 1.0,
    max_iter: int = 500,
    key=None,
    seed: int | None = None,
    init_scale: float = 0.1,
    item_factors=None,
):
    """Fit the optimisation baseline (:func:`map_estimate`) with :func:`bnpjax.fit`.

    Parameters
    ----------
    data : M3FData
    rank, reg, init_scale, item_factors
        As in :func:`map_estimate`.
    max_iter : int
        Number of L-BFGS updates.
    key : jax.Array, optional
        A ``jax.random.key``, split as :func:`bnpjax.fit` splits it.
    seed : int, optional
        Deprecated (use ``key``): the start is drawn from ``jax.random.key(seed)`` itself, as
        before this release; so is it with neither ``key`` nor ``seed`` (seed 0).

    Returns
    -------
    tuple
        ``(U, V, theta, objective)``; predict with :func:`levels_from_scores`.

    References
    ----------
    Rennie & Srebro (2005).
    """
    max_iter = check_integer(max_iter, "max_iter")
    algorithm = map_estimate(
        data, rank=rank, reg=reg, init_scale=init_scale, item_factors=item_factors
    )
    if seed is not None:
        if key is not None:
            raise TypeError("fit_map() got both seed (deprecated) and key")
        warnings.warn(
            "fit_map(seed=...) is deprecated; use key=jax.random.key(seed)",
            FutureWarning,
            stacklevel=2,
        )
    initial_state = None
    if key is None:
        # an integer seed (or none): the start is drawn from key(seed) itself, as before
        key = jax.random.key(0 if seed is None else check_integer(seed, "seed", 0))
        initial_state = jax.jit(algorithm.init)(key)
    idata = fit(algorithm, key, max_iter, progress_bar=False, initial_state=initial_state)
    U, V, theta = (jnp.asarray(idata.posterior[name].values[0, 0]) for name in ("U", "V", "theta"))
    params = {"U": U, "theta": theta}
    fixed_V = None if item_factors is None else V
    if fixed_V is None:
        params["V"] = V
    reg = jnp.asarray(reg, data.signs.dtype)
    return U, V, theta, jax.jit(_objective)(data, fixed_V, reg, params)


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `map_estimate.init` and `.build_step`.
map_estimate.init = init
map_estimate.build_step = build_step
