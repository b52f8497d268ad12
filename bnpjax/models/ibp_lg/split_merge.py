r"""Split-merge moves for the features of the linear-Gaussian IBP model, run before each
collapsed Gibbs sweep.

Single-entry Gibbs updates change one ``z_nk`` at a time. Two planted features that the
chain holds as one (or one feature it holds as two) can only be separated (or joined) by a
path of many unlikely single flips: the chain is stuck. A split-merge move proposes the whole
change at once and accepts it by Metropolis-Hastings.

The move (a sequentially allocated split-merge, in the style of Dahl (2003) and Jain & Neal
(2004), for feature allocations as in Meeds et al. (2007)):

1. Pick an ordered pair of distinct rows ``(i, j)`` uniformly, and a feature ``k`` uniformly
   among the features of row ``i``.
2. If row ``j`` also holds ``k``: propose a **split** of ``k`` into ``a`` (row ``i``) and a
   new feature ``b`` (row ``j``). The other holders of ``k`` are visited in a uniformly random
   order; each joins ``a`` only, ``b`` only, or both, drawn from its conditional given the
   rows placed so far (the collapsed predictive of the row, ``A`` integrated out, times the
   IBP's ``m / (N - m)`` odds of the partial counts), with the holders not yet visited
   holding neither.
3. Otherwise: pick ``k'`` uniformly among the features of row ``j`` that row ``i`` does not
   hold, and propose the **merge** of ``k`` and ``k'`` into one feature held by the union of
   their holders.

Why the posterior is left invariant. The target is :math:`p(Z \mid X, \alpha, \sigma_x,
\sigma_a)` with ``A`` integrated out. The pair ``(i, j)`` and the visiting order are drawn
independently of the state, so the kernel is a mixture of kernels, one per ``(i, j, order)``,
and it suffices that each is reversible. For fixed ``(i, j, order)`` split and merge are each
other's reverse: a split of ``k`` into ``(a, b)`` is undone by the merge that picks ``a`` from
row ``i``'s features and ``b`` from row ``j``'s features outside row ``i``, and the merge of
``(k, k')`` is undone by the split whose sequential allocation reproduces the two holder sets
(every holder's option is read off the two columns). The acceptance probability is
:math:`\min(1, r)` with, for a split (a merge uses :math:`1 / r` with the roles swapped),

.. math::

    r = \alpha\,\frac{f(m_a) f(m_b)}{f(m_k)}
        \frac{p(X \mid Z')}{p(X \mid Z)}
        \frac{1 / (|F_i|\,|G'_j|)}{q_{\mathrm{alloc}} / |F_i|},
    \qquad f(m) = \frac{(N - m)!\,(m - 1)!}{N!},

where :math:`F_i` is the set of row ``i``'s features (the same size before and after),
:math:`G'_j` the features of row ``j`` outside row ``i`` after the split, and
:math:`q_{\mathrm{alloc}}` the probability of the allocations drawn in step 2. The prior
ratio is the IBP probability of the equivalence class :math:`[Z]` (Griffiths & Ghahramani
2011, eq. 14) without its :math:`1 / \prod_h K_h!`: a proposal that picks columns uniformly
picks a class of identical columns with probability proportional to its multiplicity
:math:`K_h`, and these multiplicities cancel the change of :math:`\prod_h K_h!` exactly. The
marginal likelihood :math:`p(X \mid Z)` (``A`` integrated out) is computed from a Cholesky
factor of :math:`Z'Z + (\sigma_x^2 / \sigma_a^2) I` of the current and of the proposed
matrix, not from the running rank-one updates that make the allocation cheap, so round-off in
those updates changes the proposal only, never the acceptance rule. A split when the buffer is
full is refused (and the driver is told to grow it), which keeps the chain exact for the IBP
truncated to the buffer.

``A`` is stale after a move; the collapsed sweep that follows never reads it and ends by
drawing ``A | Z, X``, so the step is a partially collapsed Gibbs sampler (van Dyk & Park
2008) whose ``Z``-part is the composition of two kernels that each leave
:math:`p(Z \mid X, \alpha, \sigma_x, \sigma_a)` invariant.

References
----------
Jain, S. & Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
Dirichlet process mixture model. *J. Comput. Graph. Stat.* 13, 158-182.
Dahl, D. B. (2003). An improved merge-split sampler for conjugate Dirichlet process mixture
models. Technical report 1086, University of Wisconsin.
Meeds, E., Ghahramani, Z., Neal, R. M. & Roweis, S. T. (2007). Modeling dyadic data with
binary latent factors. *NIPS* 19.
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. *JMLR* 12, 1185-1224.
van Dyk, D. A. & Park, T. (2008). Partially collapsed Gibbs samplers. *JASA* 103, 790-796.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve
from jax.scipy.special import gammaln, logsumexp

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.infer.checks import check_integer
from bnpjax.models.ibp_lg._kernel import (
    FROM_HYPER,
    NUM_INIT_FEATURES,
    build_algorithm,
    init,
    resolve,
    sweep_step,
)
from bnpjax.models.ibp_lg.collapsed_gibbs import _sweep_Z
from bnpjax.models.ibp_lg.conditionals import finish_sweep, posterior_A
from bnpjax.models.ibp_lg.data import IBPLGData, IBPLGHyper, IBPLGState

__all__ = ["build_step", "init", "split_merge", "split_merge_moves"]


def _log_marginal(Z, X, sigma_x2, ratio):
    """``log p(X | Z)`` with ``A`` integrated out, up to a constant that does not depend on
    ``Z`` (the buffer's empty columns contribute nothing)."""
    chol, mean = posterior_A(Z, X, ratio)
    logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(chol)))
    quad = jnp.sum((Z.T @ X) * mean)
    return -0.5 * X.shape[1] * logdet + 0.5 * quad / sigma_x2


def _log_f(m, N):
    """``log((N - m)! (m - 1)! / N!)``: one column's factor of the IBP probability."""
    return gammaln(N - m + 1) + gammaln(m) - gammaln(N + 1)


class _Alloc(NamedTuple):
    Minv: jax.Array
    mu: jax.Array
    m_a: jax.Array
    m_b: jax.Array
    choices: jax.Array
    log_q: jax.Array


def _allocate(Z0, X, order, num, known, gumbels, a, b, *, draw, sigma_x2, ratio, normalise=True):
    """Visit rows ``order[:num]`` of the partial matrix ``Z0`` (columns ``a`` and ``b`` held
    by rows ``i`` and ``j`` only) and give each option 0 (``a``), 1 (``b``) or 2 (both):
    drawn (``draw``) or read from ``known``. Returns the filled matrix and the log probability
    of the options under the sequential conditionals.

    The loop carries only ``M^-1``, the posterior mean and the counts (the rows' other
    features are those of ``Z0``): its steps are the cost of the move."""
    N, D = X.shape
    C = Z0.shape[1]
    chol, mu = posterior_A(Z0, X, ratio)
    Minv = cho_solve((chol, True), jnp.eye(C, dtype=Z0.dtype))
    e_a = jnp.zeros(C, Z0.dtype).at[a].set(1)
    e_b = jnp.zeros(C, Z0.dtype).at[b].set(1)
    options = jnp.stack([e_a, e_b, e_a + e_b])  # (3, C)
    uses_a = jnp.array([1.0, 0.0, 1.0], Z0.dtype)
    uses_b = jnp.array([0.0, 1.0, 1.0], Z0.dtype)

    def visit(t, c):
        n = order[t]
        z, x = Z0[n], X[n]
        # remove row n (it holds neither a nor b yet)
        v = c.Minv @ z
        s = z @ v
        Minv = c.Minv + jnp.outer(v, v) / (1 - s)
        mu = c.mu + jnp.outer(v, z @ c.mu - x) / (1 - s)
        # the three options differ from z in columns a and b only
        w = Minv @ z
        q0 = z @ w
        resid0 = x - z @ mu
        pa, pb = options[:, a], options[:, b]
        q = q0 + 2 * (pa * w[a] + pb * w[b]) + pa * Minv[a, a] + pb * Minv[b, b]
        q = q + 2 * pa * pb * Minv[a, b]
        resid = resid0[None, :] - pa[:, None] * mu[a] - pb[:, None] * mu[b]
        var = sigma_x2 * (1 + q)
        log_pred = -0.5 * D * jnp.log(var) - 0.5 * jnp.sum(resid**2, 1) / var
        log_odds_a = jnp.log(c.m_a) - jnp.log(N - c.m_a)
        log_odds_b = jnp.log(c.m_b) - jnp.log(N - c.m_b)
        logits = log_pred + uses_a * log_odds_a + uses_b * log_odds_b
        logits = jnp.where(jnp.isfinite(logits), logits, -jnp.inf)
        choice = jnp.where(draw, jnp.argmax(logits + gumbels[t]), known[n])
        log_p = logits[choice] - (logsumexp(logits) if normalise else 0.0)
        z_new = z + options[choice]
        v = Minv @ z_new
        s = z_new @ v
        Minv = Minv - jnp.outer(v, v) / (1 + s)
        mu = mu + jnp.outer(v, x - z_new @ mu) / (1 + s)
        return _Alloc(
            Minv,
            mu,
            c.m_a + uses_a[choice],
            c.m_b + uses_b[choice],
            c.choices.at[t].set(choice.astype(jnp.int32)),
            c.log_q + log_p,
        )

    one = jnp.ones((), Z0.dtype)
    choices = jnp.zeros(N, jnp.int32)
    start = _Alloc(Minv, mu, one, one, choices, jnp.zeros((), Z0.dtype))
    out = jax.lax.fori_loop(0, num, visit, start)
    # rows order[t], t < num, get their options; the others keep Z0's row
    chosen = (
        jnp.zeros((N, 3), Z0.dtype).at[order].set(jax.nn.one_hot(out.choices, 3, dtype=Z0.dtype))
    )
    chosen = chosen * (jnp.zeros(N, bool).at[order].set(jnp.arange(N) < num))[:, None]
    return Z0 + chosen @ options, out.log_q


#: the broken twins' slips (tests only): "proposal", the sequential allocation treated as a
#: symmetric proposal; "unnormalised", the allocation's probabilities left unnormalised in
#: ``q_alloc`` (the ``logsumexp`` forgotten)
_SLIPS = ("", "proposal", "unnormalised")


def _one_move(key, Z, X, alpha, sigma_x2, sigma_a2, *, slip=""):
    """One split-merge proposal and its MH decision: the new ``Z``, whether it was accepted,
    whether it was a split, and whether a split was refused for want of a free slot
    (``slip``: one of ``_SLIPS``, a broken twin for the tests)."""
    N, C = Z.shape
    ratio = sigma_x2 / sigma_a2
    key_i, key_j, key_k, key_l, key_order, key_alloc, key_u = jax.random.split(key, 7)
    i = jax.random.randint(key_i, (), 0, N)
    j = jax.random.randint(key_j, (), 0, N - 1)
    j = j + (j >= i)
    z_i, z_j = Z[i], Z[j]
    k = jnp.argmax(jnp.where(z_i > 0, jax.random.gumbel(key_k, (C,), Z.dtype), -jnp.inf))
    is_split = z_j[k] > 0
    others_of_j = (z_j > 0) & (z_i < 1)  # G_j: features of row j outside row i
    l_merge = jnp.argmax(jnp.where(others_of_j, jax.random.gumbel(key_l, (C,), Z.dtype), -jnp.inf))
    free = Z.sum(0) < 0.5
    b = jnp.where(is_split, jnp.argmax(free), l_merge)
    no_room = is_split & ~jnp.any(free) & (z_i.sum() > 0)
    valid = (z_i.sum() > 0) & jnp.where(is_split, jnp.any(free), jnp.any(others_of_j)) & (b != k)

    col_a = Z[:, k]
    col_b = jnp.where(is_split, jnp.zeros_like(col_a), Z[:, b])
    union = jnp.maximum(col_a, col_b)
    rows = jnp.arange(N)
    todo = (union > 0) & (rows != i) & (rows != j)
    order = jnp.argsort(jnp.where(todo, jax.random.uniform(key_order, (N,)), 2.0))
    num = jnp.sum(todo)
    known = jnp.where((col_a > 0) & (col_b > 0), 2, jnp.where(col_a > 0, 0, 1))
    Z0 = Z.at[:, k].set(0).at[:, b].set(0).at[i, k].set(1).at[j, b].set(1)
    gumbels = jax.random.gumbel(key_alloc, (N, 3), Z.dtype)
    Z_split, log_alloc = _allocate(
        Z0,
        X,
        order,
        num,
        known,
        gumbels,
        k,
        b,
        draw=is_split,
        sigma_x2=sigma_x2,
        ratio=ratio,
        normalise=slip != "unnormalised",
    )
    Z_merged = Z.at[:, k].set(union).at[:, b].set(0)
    split_state = jnp.where(is_split, Z_split, Z)
    merged_state = jnp.where(is_split, Z, Z_merged)

    m_a, m_b, m_k = split_state[:, k].sum(), split_state[:, b].sum(), union.sum()
    log_prior = jnp.log(alpha) + _log_f(m_a, N) + _log_f(m_b, N) - _log_f(m_k, N)
    log_lik = _log_marginal(split_state, X, sigma_x2, ratio) - _log_marginal(
        merged_state, X, sigma_x2, ratio
    )
    # |G_j| in the split state: a split adds b to row j's features outside row i
    num_others = jnp.sum(others_of_j) + is_split
    log_proposal = -jnp.log(num_others.astype(Z.dtype)) - log_alloc
    log_r = log_prior + log_lik + (0.0 if slip == "proposal" else log_proposal)
    log_r = jnp.where(is_split, log_r, -log_r)
    log_r = jnp.where(jnp.isfinite(log_r), log_r, -jnp.inf)
    accept = valid & (jnp.log(jax.random.uniform(key_u, (), Z.dtype)) < log_r)
    proposal = jnp.where(is_split, Z_split, Z_merged)
    return jnp.where(accept, proposal, Z), accept, is_split, no_room


def split_merge_moves(key, state: IBPLGState, num_moves: int, *, _slip: str = ""):
    """``num_moves`` split-merge proposals in sequence, each accepted by Metropolis-Hastings
    (``A`` integrated out; ``state.A`` is not read).

    Parameters
    ----------
    key : jax.Array
    state : IBPLGState
    num_moves : int
        Number of proposals.

    Returns
    -------
    Z : jax.Array
        The new feature matrix.
    num_accepted : jax.Array
        Accepted proposals.
    no_room : jax.Array
        Whether a split was refused because the buffer had no free slot.
    """
    sigma_x2, sigma_a2 = state.sigma_x**2, state.sigma_a**2
    move = functools.partial(
        _one_move,
        X=state.X,
        alpha=state.alpha,
        sigma_x2=sigma_x2,
        sigma_a2=sigma_a2,
        slip=_slip,
    )

    def body(carry, key):
        Z, accepted, no_room = carry
        Z, acc, _, short = move(key, Z)
        return (Z, accepted + acc, no_room | short), None

    start = (state.Z, jnp.zeros((), jnp.int32), jnp.zeros((), bool))
    (Z, accepted, no_room), _ = jax.lax.scan(body, start, jax.random.split(key, num_moves))
    return Z, accepted, no_room


def _step(data, hyper, key, state, *, kappa, flags, num_moves, slip=""):
    key_moves, key_rows, key_A, key_rest = jax.random.split(key, 4)
    Z, _, no_room = split_merge_moves(key_moves, state, num_moves, _slip=slip)
    Z, exceeded, shortfall = _sweep_Z(key_rows, state._replace(Z=Z), kappa=kappa)
    shortfall = jnp.maximum(shortfall, no_room.astype(shortfall.dtype))
    return finish_sweep(
        (key_A, key_rest), data, hyper, state, Z, exceeded | no_room, shortfall, flags
    )


class _Step(NamedTuple):
    """The step with its number of moves (hashable: part of the compiled program's key)."""

    num_moves: int
    slip: str = ""

    def __call__(self, data, hyper, key, state, *, kappa, flags):
        return _step(
            data,
            hyper,
            key,
            state,
            kappa=kappa,
            flags=flags,
            num_moves=self.num_moves,
            slip=self.slip,
        )


def build_step(
    *,
    num_moves: int = 10,
    kappa: int = 10,
    sample_alpha=True,
    sample_sigma_x=True,
    sample_sigma_a=True,
    sample_offset=True,
):
    """One step as ``step(key, state, data, hyper) -> (state, info)``: ``num_moves``
    split-merge proposals, then a collapsed Gibbs sweep, ``A | Z, X`` and the hyperparameters.

    Parameters
    ----------
    num_moves : int
        Split-merge proposals per step (an integer >= 1).
    kappa : int
        Truncation of the number of new features per row in the sweep.
    sample_alpha, sample_sigma_x, sample_sigma_a : bool
        Which hyperparameters the step resamples.
    sample_offset : bool
        Whether the per-column offset is resampled, with the complement moves.

    Returns
    -------
    callable
    """
    return sweep_step(
        _Step(check_integer(num_moves, "num_moves", 1)),
        kappa=kappa,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        sample_offset=sample_offset,
    )


def split_merge(
    data: IBPLGData,
    hyper: IBPLGHyper | None = None,
    *,
    num_moves: int = 10,
    alpha: float = 1.0,
    sigma_x: float = 1.0,
    sigma_a: float = 1.0,
    alpha_prior=FROM_HYPER,
    sample_alpha: bool = True,
    sample_sigma_x: bool = True,
    sample_sigma_a: bool = True,
    sample_offset: bool = True,
    kappa: int = 10,
    capacity: int = 16,
    num_init_features: int = NUM_INIT_FEATURES,
    trace_features: bool = True,
    pointwise_log_likelihood: bool = True,
) -> SamplingAlgorithm:
    """Collapsed Gibbs sampler with split-merge moves: each step makes ``num_moves``
    split-merge proposals (module docstring), then one collapsed Gibbs sweep.

    Parameters
    ----------
    data : IBPLGData
        From :func:`make_data`.
    hyper : IBPLGHyper, optional
        The hyperpriors (:func:`make_hyper`; default: its defaults).
    num_moves : int
        Split-merge proposals per step (an integer >= 1).
    alpha, sigma_x, sigma_a : float
        Starting values (fixed values where the matching ``sample_*`` switch is off).
    alpha_prior : (float, float) or None, optional
        ``(a, b)``: alpha ~ Gamma(a, rate b), sampled; None: alpha fixed at ``alpha``.
        Default: the prior in ``hyper``, sampled.
    sample_alpha, sample_sigma_x, sample_sigma_a : bool
        Which hyperparameters are sampled.
    sample_offset : bool
        Sample each column's offset (flat prior; the default): the fit is then exactly the
        same whatever the data's origin (see :func:`make_data`), and each sweep ends with
        the complement moves (:func:`~bnpjax.models.ibp_lg.conditionals.complement_moves`)
        that keep a feature and its complement from being held as a second background.
        False holds it at the data's background level (``make_data(..., center=)``,
        default 0): Griffiths and Ghahramani's model.
    kappa : int
        Truncation of the number of new features per row.
    capacity : int
        Initial size of the feature buffer (the driver grows it).
    num_init_features : int
        Number of random starting features.
    trace_features : bool
        Keep ``Z``, ``A`` and ``active`` per draw.
    pointwise_log_likelihood : bool
        Keep the log density of every observed entry (``log_likelihood`` group).

    Returns
    -------
    SamplingAlgorithm

    References
    ----------
    Jain, S. & Neal, R. M. (2004). A split-merge Markov chain Monte Carlo procedure for the
    Dirichlet process mixture model. *J. Comput. Graph. Stat.* 13, 158-182.
    Meeds, E., Ghahramani, Z., Neal, R. M. & Roweis, S. T. (2007). Modeling dyadic data with
    binary latent factors. *NIPS* 19.
    """
    num_moves = check_integer(num_moves, "num_moves", 1)
    s = resolve(
        data,
        hyper,
        alpha=alpha,
        sigma_x=sigma_x,
        sigma_a=sigma_a,
        alpha_prior=alpha_prior,
        sample_alpha=sample_alpha,
        sample_sigma_x=sample_sigma_x,
        sample_sigma_a=sample_sigma_a,
        sample_offset=sample_offset,
        kappa=kappa,
        capacity=capacity,
        num_init_features=num_init_features,
        trace_features=trace_features,
        pointwise_log_likelihood=pointwise_log_likelihood,
    )
    return build_algorithm(_Step(num_moves), "split_merge", data, s)


split_merge.init = init
split_merge.build_step = build_step
