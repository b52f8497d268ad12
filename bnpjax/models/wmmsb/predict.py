r"""Held-out predictions and pointwise log-likelihoods of the WMMSB from posterior draws.

Two kinds of draws are understood: those of :func:`~bnpjax.models.wmmsb.collapsed_gibbs`
(the counts ``n_node``, ``n_y``, ``n_phi``: the predictive of a pair is the collapsed
:math:`\sum_{kk'} \hat\theta_{ik} \hat\theta_{jk'} \mathrm{pred}(y \mid n^Y_{kk'},
n^\Phi_{kk'})`, :math:`\hat\theta_i \propto n_i + \alpha`) and those of a variational fit
(``theta``, ``phi``: :math:`\sum_{kk'} \theta_{ik} \theta_{jk'} p(y \mid \phi_{kk'})` with a
Poisson or Bernoulli :math:`p`). The ``expected_*`` helpers give the plug-in predictive of a
single CVB0 / SCVB0 state (its expected counts), without draws.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.predictive import map_draws, posterior_draws
from bnpjax.models.wmmsb.data import (
    WMMSBData,
    WMMSBHyper,
    _check_likelihood,
    _int_array,
    _observed_pairs,
)
from bnpjax.models.wmmsb.likelihood import (
    _log_lik_sampled,
    _log_mixture_pred,
    _log_pred_zero,
    _log_theta,
    _mean_log_pred,
)

__all__ = [
    "block_means",
    "expected_link_probability",
    "expected_log_predictive",
    "log_likelihood",
    "membership_means",
    "predict",
]

_COLLAPSED = ("n_node", "n_y", "n_phi")
_SAMPLED = ("theta", "phi")


def _posterior(draws) -> dict[str, np.ndarray]:
    """The posterior variables that define the predictive, with leading (chain, draw) axes
    (a list of runs is pooled into one chain; a :class:`bnpjax.infer.FitResult`'s draws are
    one chain)."""
    if hasattr(draws, "draws") and hasattr(draws, "history"):  # a FitResult
        draws = {g: {k: np.asarray(v)[None] for k, v in d.items()} for g, d in draws.draws.items()}
    for names in (_SAMPLED, _COLLAPSED):
        try:
            return posterior_draws(draws, names)
        except ValueError:
            continue
    raise ValueError(
        "draws must hold posterior draws of theta and phi (a variational fit) or n_node, n_y "
        "and n_phi (collapsed Gibbs)"
    )


def _pairs(test, num_nodes, need_y):
    """Host arrays (src, dst[, y]) of the test pairs."""
    try:
        parts = tuple(test)
    except TypeError:
        parts = ()
    if len(parts) not in (2, 3) or (need_y and len(parts) != 3):
        want = "(src, dst, y)" if need_y else "(src, dst) or (src, dst, y)"
        raise ValueError(f"test must be a tuple {want} of held-out pairs")
    src = _int_array("test src", parts[0])
    dst = _int_array("test dst", parts[1], src.shape[0])
    for name, ids in (("test src", src), ("test dst", dst)):
        if np.any(ids != np.round(ids)) or np.any(ids < 0) or np.any(ids >= num_nodes):
            raise ValueError(f"{name} holds node ids outside 0..{num_nodes - 1}")
    y = _int_array("test y", parts[2], src.shape[0]) if len(parts) == 3 else None
    return src.astype(np.int32), dst.astype(np.int32), y


def _batch(batch_size):
    return {} if batch_size is None else {"batch_size": batch_size}


def _draw_fn(kind, src, dst, y, hyper, likelihood):
    """fn(draw) -> per-pair values for one posterior draw."""
    src, dst = jnp.asarray(src), jnp.asarray(dst)
    y = None if y is None else jnp.asarray(y, hyper.alpha.dtype)

    def fn(draw):
        if "theta" in draw:
            theta, phi = draw["theta"], draw["phi"]
            ti, tj = theta[src], theta[dst]
            if kind == "mean":
                return jnp.einsum("pk,kl,pl->p", ti, phi, tj)
            if kind == "link":
                p0 = 1.0 - phi if likelihood == "bernoulli" else jnp.exp(-phi)
                return 1.0 - jnp.einsum("pk,kl,pl->p", ti, p0, tj)
            return _log_lik_sampled(theta, phi, src, dst, y, likelihood)
        n_node, n_y, n_phi = draw["n_node"], draw["n_y"], draw["n_phi"]
        state = {"n_node": n_node, "n_y": n_y, "n_phi": n_phi}
        if kind == "mean":
            th = jnp.exp(_log_theta(n_node, hyper.alpha))
            rates = block_means(n_y, n_phi, hyper.r, hyper.p, likelihood)
            return jnp.einsum("pk,kl,pl->p", th[src], rates, th[dst])
        if kind == "link":
            return expected_link_probability(state, hyper, src, dst, likelihood=likelihood)
        return expected_log_predictive(state, hyper, src, dst, y, likelihood=likelihood)

    return fn


def predict(
    draws,
    data: WMMSBData,
    test,
    *,
    hyper: WMMSBHyper,
    likelihood: str = "nb",
    kind: str = "link",
    batch_size: int | None = None,
) -> np.ndarray:
    """Predictions of held-out pairs from posterior draws.

    Parameters
    ----------
    draws : InferenceData, dict, FitResult or list
        The output of :func:`bnpjax.sample` (collapsed Gibbs) or :func:`bnpjax.fit` (CVB0,
        SCVB0), a run's ``trace``, a :class:`bnpjax.infer.FitResult`, or a list of them
        (pooled into one chain).
    data : WMMSBData
        The training data of the fit.
    test : tuple (src, dst) or (src, dst, y)
        The held-out pairs.
    hyper : WMMSBHyper
        The hyperparameters of the fit.
    likelihood : {"nb", "bg", "bernoulli"}
    kind : {"link", "mean"}
        ``P(y_ij > 0)`` (the score of link prediction) or ``E[y_ij]``.
    batch_size : int, optional
        Draws per compiled batch.

    Returns
    -------
    numpy.ndarray of shape (chain, draw, pair)
    """
    _check_likelihood(likelihood)
    if kind not in ("link", "mean"):
        raise ValueError(f"kind must be 'link' or 'mean', got {kind!r}")
    post = _posterior(draws)
    src, dst, _ = _pairs(test, data.degree.shape[0], need_y=False)
    fn = _draw_fn(kind, src, dst, None, hyper, likelihood)
    return np.asarray(map_draws(fn, post, **_batch(batch_size)))


def log_likelihood(
    draws,
    data: WMMSBData,
    test=None,
    *args: Any,
    hyper: WMMSBHyper | None = None,
    likelihood: str = "nb",
    batch_size: int | None = None,
    **kwargs: Any,
) -> np.ndarray:
    """Pointwise log predictive densities of observed or held-out pairs.

    Parameters
    ----------
    draws : InferenceData, dict or list
        As in :func:`predict`.
    data : WMMSBData
        The training data of the fit.
    test : tuple (src, dst, y), optional
        Held-out pairs; None: every observed training pair (the explicit pairs, then the
        observed zeros; held-out and missing pairs are never included).
    hyper : WMMSBHyper
    likelihood : {"nb", "bg", "bernoulli"}
    batch_size : int, optional

    Returns
    -------
    numpy.ndarray of shape (chain, draw, pair)
    """
    if isinstance(draws, WMMSBData):  # the 0.x signature (data, n_node, n_y, n_phi, r, p, ...)
        positional = (draws, data, test, *args)
        if hyper is not None:
            kwargs["hyper"] = hyper
        if len(positional) < 8:
            kwargs["likelihood"] = likelihood
        return _log_likelihood_v0(*positional, **kwargs)
    if hyper is None:
        raise ValueError("hyper is required (the WMMSBHyper of the fit)")
    _check_likelihood(likelihood)
    post = _posterior(draws)
    if test is None:
        src, dst, y = _observed_pairs(data)
    else:
        src, dst, y = _pairs(test, data.degree.shape[0], need_y=True)
    fn = _draw_fn("log", src, dst, y, hyper, likelihood)
    return np.asarray(map_draws(fn, post, **_batch(batch_size)))


def _log_likelihood_v0(data, n_node, n_y, n_phi, r=None, p=None, hyper=None, likelihood="nb"):
    import warnings

    warnings.warn(
        "log_likelihood(data, n_node, n_y, n_phi, r, p, hyper, likelihood) is deprecated: use "
        "expected_log_predictive(state, hyper, src, dst, y) or log_likelihood(draws, data)",
        FutureWarning,
        stacklevel=3,
    )
    state = {"n_node": n_node, "n_y": n_y, "n_phi": n_phi, "r": r, "p": p}
    return expected_log_predictive(state, hyper, data.src, data.dst, data.y, likelihood=likelihood)


def _field(state, name, default=None):
    value = state.get(name) if isinstance(state, dict) else getattr(state, name, None)
    return default if value is None else value


def membership_means(n_node, hyper: WMMSBHyper) -> jax.Array:
    r"""Posterior mean memberships given (expected) counts, :math:`E[\theta_i] = (N_i +
    \alpha) / \sum_k (N_{ik} + \alpha_k)`.

    Parameters
    ----------
    n_node : array of shape (N, rank)
    hyper : WMMSBHyper

    Returns
    -------
    jax.Array of shape (N, rank)
    """
    return jnp.exp(_log_theta(n_node, hyper.alpha))


def block_means(n_y, n_phi, r, p, likelihood: str = "nb") -> jax.Array:
    r"""Posterior mean block rates given (expected) counts.

    nb/bg: :math:`E[\phi_{kk'}] = (r + N^Y) \frac{s}{N^\Phi s + 1}`, :math:`s = p/(1-p)`
    (Gamma-Poisson; for bg pass :math:`E_q[r], E_q[p]`); bernoulli :math:`(N^Y + a)/(N^\Phi +
    a + b)` with ``a = r``, ``b = p`` (Beta-Bernoulli).

    Returns
    -------
    jax.Array of shape (rank, rank)
    """
    _check_likelihood(likelihood)
    if likelihood == "bernoulli":
        return (n_y + r) / (n_phi + r + p)
    scale = p / (1 - p)
    return (r + n_y) * scale / (n_phi * scale + 1)


def expected_link_probability(state, hyper: WMMSBHyper, src, dst, *, likelihood: str = "nb"):
    r"""Plug-in predictive :math:`P(y_{ij} > 0) = 1 - \sum_{kk'} \hat\theta_{ik}
    \hat\theta_{jk'} \mathrm{pred}(0 \mid N^Y_{kk'}, N^\Phi_{kk'})` of pairs given one state's
    (expected) counts.

    Parameters
    ----------
    state : CVB0State, SCVB0State, GibbsState or dict
        Fields ``n_node``, ``n_y``, ``n_phi`` and optionally ``r``, ``p`` (default: those of
        ``hyper``).
    hyper : WMMSBHyper
    src, dst : array of int
    likelihood : {"nb", "bg", "bernoulli"}

    Returns
    -------
    jax.Array of shape (pairs,)
    """
    _check_likelihood(likelihood)
    r, p = _field(state, "r", hyper.r), _field(state, "p", hyper.p)
    lt = _log_theta(_field(state, "n_node"), hyper.alpha)
    p0 = jnp.exp(_log_pred_zero(_field(state, "n_y"), _field(state, "n_phi"), r, p, likelihood))
    th = jnp.exp(lt)
    return 1.0 - jnp.einsum("pk,kl,pl->p", th[src], p0, th[dst])


def expected_log_predictive(state, hyper: WMMSBHyper, src, dst, y, *, likelihood: str = "nb"):
    r"""Plug-in log predictive :math:`\log \sum_{kk'} \hat\theta_{ik} \hat\theta_{jk'}
    \mathrm{pred}(y_{ij} \mid N^Y_{kk'}, N^\Phi_{kk'})` of pairs given one state's counts.

    Parameters
    ----------
    state, hyper, likelihood
        As in :func:`expected_link_probability`.
    src, dst : array of int
    y : array
        The pairs' counts.

    Returns
    -------
    jax.Array of shape (pairs,)
    """
    _check_likelihood(likelihood)
    r, p = _field(state, "r", hyper.r), _field(state, "p", hyper.p)
    lt = _log_theta(_field(state, "n_node"), hyper.alpha)
    n_y, n_phi = _field(state, "n_y"), _field(state, "n_phi")
    return _log_mixture_pred(lt, src, dst, y, n_y, n_phi, r, p, likelihood)


# ---- 0.x names (deprecated)


def _link_probability_v0(src, dst, n_node, n_y, n_phi, r, p, hyper, likelihood="nb"):
    state = {"n_node": n_node, "n_y": n_y, "n_phi": n_phi, "r": r, "p": p}
    return expected_link_probability(state, hyper, src, dst, likelihood=likelihood)


def _mean_log_predictive_v0(pairs, n_node, n_y, n_phi, r, p, hyper, likelihood):
    _check_likelihood(likelihood)
    return _mean_log_pred(pairs, n_node, n_y, n_phi, r, p, hyper, likelihood)
