r"""The count likelihood of the WMMSB shared by every algorithm: the predictive of one pair
given block counts, the membership factors, and the Beta-Gamma update.

With :math:`\phi_{kk'}` integrated out, the predictive of a count :math:`y` in block
:math:`(k, k')` given the block's summed counts :math:`N^Y` and number of pairs
:math:`N^\Phi` is :math:`\mathrm{NB}(y; N^Y + r, p / (p N^\Phi + 1))` (Gamma-Poisson, "nb"
and "bg") or :math:`\mathrm{Bernoulli}((N^Y + a) / (N^\Phi + a + b))` ("bernoulli").

References
----------
Dulac, A. (2020). *Contributions to stochastic blockmodels for weighted networks*, PhD
thesis, Université Grenoble Alpes, appendix "WMMSB inference derivations".
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from bnpjax.infer.base import ArvizSpec, bind
from bnpjax.models.wmmsb.data import _observed_pairs, _observed_spec

__all__: list[str] = []


def _node_update(node_update, likelihood):
    """``node_update`` checked, or its default when None: "solve" for the MMSB (bernoulli), whose
    plain pass leaves large sparse networks at their start (hep-th: AUC 0.50), "pass" for the
    weighted likelihoods."""
    if node_update is None:
        return "solve" if likelihood == "bernoulli" else "pass"
    if node_update not in ("pass", "solve"):
        raise ValueError(f"node_update must be 'pass' or 'solve', got {node_update!r}")
    return node_update


def _log_pred(y, NY, NP, hyp_r, hyp_p, likelihood):
    r"""Log predictive of count ``y`` given block counts (broadcasts).

    nb/bg: :math:`\log\mathrm{NB}(y; N^Y + r, q)`, :math:`q = p/(p N^\Phi + 1)`;
    bernoulli: :math:`\log` Bernoulli(:math:`(N^Y + a)/(N^\Phi + a + b)`).
    """
    if likelihood == "bernoulli":
        prob = (NY + hyp_r) / (NP + hyp_r + hyp_p)
        return jnp.where(y > 0, jnp.log(prob), jnp.log1p(-prob))
    a = NY + hyp_r
    q = hyp_p / (hyp_p * NP + 1.0)
    return gammaln(y + a) - gammaln(a) - gammaln(y + 1.0) + a * jnp.log1p(-q) + y * jnp.log(q)


def _log_pred_zero(NY, NP, hyp_r, hyp_p, likelihood):
    """:func:`_log_pred` at ``y = 0`` without the Gamma functions."""
    if likelihood == "bernoulli":
        return jnp.log1p(-(NY + hyp_r) / (NP + hyp_r + hyp_p))
    return (NY + hyp_r) * jnp.log1p(-hyp_p / (hyp_p * NP + 1.0))


def _log_theta(n_node, alpha):
    """Log of the posterior mean memberships :math:`(N_i + \\alpha) / \\sum_k (N_{ik} +
    \\alpha_k)`."""
    a = n_node + alpha
    return jnp.log(a) - jnp.log(a.sum(-1, keepdims=True))


def _log_mixture_pred(log_theta, i, j, y, n_y, n_phi, r, p, likelihood):
    r""":math:`\log \sum_{kk'} \hat\theta_{ik} \hat\theta_{jk'} \mathrm{pred}(y_{ij} \mid
    N^Y_{kk'}, N^\Phi_{kk'})` for pairs ``(i, j, y)``."""
    lpred = _log_pred(y[:, None, None], n_y, n_phi, r, p, likelihood)
    joint = log_theta[i][:, :, None] + log_theta[j][:, None, :] + lpred
    return jax.nn.logsumexp(joint, axis=(1, 2))


def _solve_rows(links, zero_factor, num_zeros, alpha, iters: int = 48):
    r"""Node rows at their fixed point given the links' roles and the zeros' factors.

    A CVB0 pass gives node ``i`` the row :math:`N_i = \hat\theta_i \circ c_i + L_i`, where
    :math:`L_i` sums node ``i``'s roles in its links and :math:`c_{ik} = \sum_j (E
    \hat\theta_j)_k / Z_{ij}` is the zeros' factor (:math:`E` the predictive of a zero per
    block, :math:`Z_{ij} = \hat\theta_i^\top E \hat\theta_j`). In a sparse network
    :math:`c_i` is nearly constant over ``k`` (every block predicts a zero with probability
    near 1), so the zeros return each node its own membership: a pass moves
    :math:`\hat\theta_i` by only :math:`\deg_i / (\deg_i + \#\text{zeros}_i)` of the way
    (0.05% per pass on hep-th), and CVB0 stays where it started. This update instead
    solves :math:`\theta_k (S' - c_k) = L_k + \alpha_k`, :math:`\sum_k \theta_k = 1` (one
    root :math:`S' > \max_k c_k`, by bisection) with :math:`c_i, L_i` held, and returns
    :math:`N_i = S_i \theta - \alpha`, :math:`S_i = \#\text{zeros}_i + \sum_k (L_{ik} +
    \alpha_k)`: the fixed point of repeated passes over node ``i`` alone. The fixed points
    of CVB0 are exactly those of this update (at one, :math:`S' = S_i`).

    Parameters
    ----------
    links : array (..., K)
        :math:`L_i`.
    zero_factor : array (..., K)
        :math:`c_i`.
    num_zeros : array (...)
        The node's number of zero pairs (:math:`\sum_k \hat\theta_{ik} c_{ik}`).
    alpha : array (K,)
    iters : int
        Bisection steps.

    Returns
    -------
    array (..., K)
        The new rows.
    """
    w = links + alpha
    D = w.sum(-1, keepdims=True)
    top = zero_factor.max(-1, keepdims=True)

    def body(_, bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        over = jnp.sum(w / jnp.maximum(mid - zero_factor, 1e-30), -1, keepdims=True) > 1
        return jnp.where(over, mid, lo), jnp.where(over, hi, mid)

    _, hi = jax.lax.fori_loop(0, iters, body, (top, top + D))
    theta = w / (hi - zero_factor)
    theta = theta / theta.sum(-1, keepdims=True)
    S = num_zeros[..., None] + D
    return jnp.maximum(S * theta - alpha, 0.0)


def _bg_update(n_y, n_phi, p_old, hyper):
    """The Beta-Gamma closed forms: :math:`E_q[r]` then the mean of :math:`q(p)`."""
    er = (hyper.r0 * hyper.c0 + n_y) / (hyper.c0 - n_phi * jnp.log1p(-p_old))
    a = hyper.c * hyper.eps + n_y
    b = hyper.c * (1 - hyper.eps) + n_phi * er
    return er, a / (a + b)


def _sample_posterior(key, n_node, n_y, n_phi, r, p, hyper, num_draws, likelihood):
    r"""Draws of the memberships and block parameters given expected counts:
    :math:`\theta_i \sim \mathrm{Dirichlet}(N_i + \alpha)` and, per block,
    :math:`\phi_{kk'} \sim \mathrm{Gamma}(r + N^Y_{kk'}, \text{scale } s / (N^\Phi_{kk'} s + 1))`,
    :math:`s = p/(1-p)` (nb, bg) or :math:`\mathrm{Beta}(a + N^Y, b + N^\Phi - N^Y)`
    (bernoulli), all independent."""
    k1, k2 = jax.random.split(key)
    N, K = n_node.shape
    theta = jax.random.dirichlet(k1, n_node + hyper.alpha, (num_draws, N))
    if likelihood == "bernoulli":
        a = n_y + hyper.r
        b = jnp.maximum(n_phi - n_y, 0.0) + hyper.p
        phi = jax.random.beta(k2, a, b, (num_draws, K, K))
    else:
        scale = p / (1 - p)
        shape = r + n_y
        phi = jax.random.gamma(k2, shape, (num_draws, K, K)) * scale / (n_phi * scale + 1)
    return {"theta": theta, "phi": phi}


def _mean_log_pred(pairs, n_node, n_y, n_phi, r, p, hyper, likelihood):
    """Weighted mean over ``pairs = (src, dst, y, w)`` of :func:`_log_mixture_pred` with
    :math:`\\hat\\theta_i \\propto N_i + \\alpha` (the validation log-likelihood)."""
    i, j, y, w = pairs
    lt = _log_theta(n_node, hyper.alpha)
    ll = _log_mixture_pred(lt, i, j, y, n_y, n_phi, r, p, likelihood)
    return jnp.sum(w * ll) / jnp.maximum(jnp.sum(w), 1.0)


def _log_lik_sampled(theta, phi, src, dst, y, likelihood):
    r"""Log density of pairs ``(src, dst, y)`` given one draw of the memberships and blocks:
    :math:`\log \sum_{kk'} \theta_{ik} \theta_{jk'} p(y_{ij} \mid \phi_{kk'})` with a
    Poisson (nb, bg) or Bernoulli (bernoulli) :math:`p`."""
    yy = y[:, None, None]
    if likelihood == "bernoulli":
        lp = jnp.where(yy > 0, jnp.log(phi), jnp.log1p(-phi))
    else:
        lp = yy * jnp.log(phi) - phi - gammaln(yy + 1.0)
    joint = jnp.log(theta[src])[:, :, None] + jnp.log(theta[dst])[:, None, :] + lp
    return jax.nn.logsumexp(joint, axis=(1, 2))


#: Variational fits store pointwise log-likelihoods by default up to this many observed pairs.
MAX_POINTWISE_PAIRS = 20_000


def _variational_trace(hyper, pairs, key, state, num_draws, *, likelihood):
    """``sample`` of CVB0 and SCVB0: draws of :func:`_sample_posterior` from the state's
    expected counts and, when ``pairs = (src, dst, y)`` of the observed pairs is given, their
    pointwise log-likelihood under every draw."""
    post = _sample_posterior(
        key, state.n_node, state.n_y, state.n_phi, state.r, state.p, hyper, num_draws, likelihood
    )
    out = {"posterior": post}
    if pairs is not None:
        src, dst, y = pairs

        def one(draw):
            return _log_lik_sampled(draw[0], draw[1], src, dst, y, likelihood)

        out["log_likelihood"] = {"y": jax.lax.map(one, (post["theta"], post["phi"]))}
    return out


def _variational_output(data, hyper, likelihood, log_likelihood, name, settings):
    """The ``sample`` function and ArvizSpec of a variational WMMSB fit; ``log_likelihood``
    None means on up to :data:`MAX_POINTWISE_PAIRS` observed pairs."""
    observed, coords, pairs = {}, {}, None
    src, dst, y = _observed_pairs(data)
    if log_likelihood is None:
        log_likelihood = src.shape[0] <= MAX_POINTWISE_PAIRS
    if log_likelihood:
        observed, coords = _observed_spec(data)
        pairs = (jnp.asarray(src), jnp.asarray(dst), jnp.asarray(y, data.y.dtype))
    sample = bind(_variational_trace, hyper, pairs, likelihood=likelihood)
    spec = ArvizSpec(
        name=name,
        dims={
            "theta": ["node", "community"],
            "phi": ["community", "community_to"],
            "y": ["obs"],
        },
        coords=coords,
        observed_data=observed,
        settings=settings,
    )
    return sample, spec
