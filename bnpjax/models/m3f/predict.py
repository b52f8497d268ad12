"""Held-out predictions and pointwise log-likelihoods of Gibbs M3F and Gibbs iPM3F fits.

:func:`predict` gives rating levels for held-out pairs: the authors' rating-level rule
:math:`\\hat y = 1 + \\#\\{r : \\bar\\theta_{ir} < \\bar x_{ij}\\}` on posterior means
(by default with the Rao-Blackwellized score the kernels trace for their ``test`` pairs), or
the median of the predictive distribution of the level. :func:`log_likelihood` gives, per
draw, the log probability of each rating under the hinge pseudo-likelihood normalized over
the L levels.

References
----------
Xu, M., Zhu, J. and Zhang, B. (2013). Fast max-margin matrix factorization with data
augmentation. ICML.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from bnpjax.infer.arviz_adapter import pooled_draws
from bnpjax.infer.base import bind
from bnpjax.infer.checks import check_integer_array
from bnpjax.infer.predictive import map_draws, posterior_draws
from bnpjax.models.m3f.conditionals import _pointwise_log_likelihood, levels_from_scores
from bnpjax.models.m3f.data import M3FData, _check_common

__all__ = [
    "levels_from_scores",
    "log_likelihood",
    "predict",
    "predict_levels",
    "predictive_distribution",
]


def predictive_distribution(levels, num_levels: int) -> np.ndarray:
    """Share of draws at each level ``1..L`` per test pair.

    Parameters
    ----------
    levels : array_like
        ``level_test`` draws, ``(..., n_test)`` (leading axes: draws).
    num_levels : int

    Returns
    -------
    numpy.ndarray
        ``(n_test, L)``: the pseudo-posterior predictive distribution of the level.
    """
    levels = np.asarray(levels).reshape(-1, np.shape(levels)[-1])
    return np.stack([(levels == k).mean(0) for k in range(1, num_levels + 1)], axis=1)


def predict(draws, data: M3FData | None, test, *, rule: str = "score", score="score_test_rb"):
    """Predicted rating levels of held-out pairs.

    A kernel built with ``test=(users, items)`` traces the test scores (and their
    Rao-Blackwellized form) at every draw; for other pairs the scores are computed from the
    factor draws (``keep_factors=True``, the default).

    Parameters
    ----------
    draws
        The InferenceData of :func:`bnpjax.sample`, a run's ``trace``, or a list of them
        (pooled: several runs or chains).
    data : M3FData or None
        The training data (unused: the draws hold what is needed).
    test : tuple
        ``(users, items)`` (or ``(users, items, ratings)``): the pairs the kernel was built
        with, or any pairs when the draws hold the factors.
    rule : {"score", "median"}
        ``"score"``: the rating-level rule on the posterior means of ``score`` and of the
        thresholds; ``"median"``: the median of the predictive distribution of the level
        (:func:`predictive_distribution`), which minimizes the expected absolute error.
    score : {"score_test_rb", "score_test"}
        The Rao-Blackwellized score (less Monte Carlo noise) or the drawn one.

    Returns
    -------
    numpy.ndarray
        Integer levels ``(n_test,)``.
    """
    del data
    if rule not in ("score", "median"):
        raise ValueError(f"rule must be 'score' or 'median', got {rule!r}")
    if score not in ("score_test_rb", "score_test"):
        raise ValueError(f"score must be 'score_test_rb' or 'score_test', got {score!r}")
    test_users = check_integer_array(test[0], "test_users")
    if test[1] is not None and score not in _stat_names(draws):
        return _predict_from_factors(draws, test, rule)
    if rule == "median":
        levels = pooled_draws(draws, "sample_stats", "level_test")
        if levels.shape[-1] != test_users.size:
            raise ValueError(
                f"test_users has {test_users.size} pairs, the draws {levels.shape[-1]}"
            )
        theta = pooled_draws(draws, "posterior", "theta")
        proba = predictive_distribution(levels, theta.shape[-1] + 1)
        return 1 + np.argmax(np.cumsum(proba, axis=1) >= 0.5, axis=1)
    mean_score = pooled_draws(draws, "sample_stats", score).mean(0)
    if mean_score.shape != test_users.shape:
        raise ValueError(f"test_users has {test_users.size} pairs, the draws {mean_score.size}")
    if not np.all(np.isfinite(mean_score)):
        raise FloatingPointError("non-finite test scores (a float32 breakdown?)")
    theta = pooled_draws(draws, "posterior", "theta").mean(0)
    if test_users.size and (test_users.min() < 0 or test_users.max() >= theta.shape[0]):
        raise ValueError(f"test_users must lie in 0..{theta.shape[0] - 1}")
    return np.asarray(levels_from_scores(jnp.asarray(mean_score), jnp.asarray(theta[test_users])))


def _stat_names(draws) -> set:
    first = draws[0] if isinstance(draws, list | tuple) and draws else draws
    table = first.get("sample_stats") if isinstance(first, dict) else None
    if table is None and not isinstance(first, dict):
        table = getattr(first, "sample_stats", None)
    return set(table or ())


def _predict_from_factors(draws, test, rule):
    """Levels of any pairs from the factor draws: the level rule on each draw's score."""
    if test[1] is None:
        raise ValueError("test must give (users, items) when the fit traced no test scores")
    post = posterior_draws(draws, ("V", "theta"), optional=("U", "Z", "bias"))
    if "U" not in post and "Z" not in post:
        raise ValueError(
            "draws hold neither test scores nor factors: build the kernel with test=(users, "
            "items) or keep_factors=True"
        )
    F = post["U"] if "U" in post else post["Z"]
    users = check_integer_array(test[0], "test users", minimum=0, maximum=F.shape[2] - 1)
    items = check_integer_array(
        test[1], "test items", minimum=0, maximum=post["V"].shape[2] - 1, size=users.size
    )
    scores = np.einsum("cdnk,cdnk->cdn", F[:, :, users], post["V"][:, :, items])
    if "bias" in post:
        scores = scores + post["bias"][:, :, items]
    theta = post["theta"][:, :, users]
    if rule == "score":
        return np.asarray(
            levels_from_scores(jnp.asarray(scores.mean((0, 1))), jnp.asarray(theta.mean((0, 1))))
        )
    levels = np.asarray(levels_from_scores(jnp.asarray(scores), jnp.asarray(theta)))
    proba = predictive_distribution(levels, theta.shape[-1] + 1)
    return 1 + np.argmax(np.cumsum(proba, axis=1) >= 0.5, axis=1)


def predict_levels(draws, test_users, *, rule: str = "score", score: str = "score_test_rb"):
    """:func:`predict` with the test pairs' users only (the previous signature)."""
    return predict(draws, None, (test_users, None), rule=rule, score=score)


def _draw_log_likelihood(users, items, ratings, margin, C, draw):
    F = draw["U"] if "U" in draw else draw["Z"]
    x = jnp.sum(F[users] * draw["V"][items], axis=1)
    if "bias" in draw:
        x = x + draw["bias"][items]
    return _pointwise_log_likelihood(x, draw["theta"][users], ratings, margin, C)


def log_likelihood(draws, data: M3FData, test=None, *, hyper=None, item_factors=None):
    """Pointwise log-likelihood of the training ratings, or of held-out ratings.

    Each rating's log probability under the hinge pseudo-likelihood normalized over the L
    levels, :math:`p(y_{ij} = l) \\propto \\exp(-C \\sum_r \\max(0, \\ell - T^r(l)
    (\\theta_{ir} - x_{ij})))`, at every draw. Needs the factors in the draws
    (``keep_factors=True``).

    Parameters
    ----------
    draws
        InferenceData, a run's trace, or a list of them (pooled as one chain).
    data : M3FData
        The training data.
    test : tuple, optional
        ``(users, items, ratings)`` of held-out pairs; None for the training ratings.
    hyper : M3FHyper, optional
        The fit's hyperparameters (for ``C``; default ``make_hyper(L)``).
    item_factors : array_like, optional
        The fixed ``V`` of a strong-generalization fit (not in its draws).

    Returns
    -------
    numpy.ndarray
        ``(chain, draw, entry)``.
    """
    hyper = _check_common(data, hyper)
    post = posterior_draws(draws, (), optional=("U", "Z", "V", "bias", "theta"))
    if item_factors is not None:
        V = np.asarray(item_factors, float)
        post["V"] = np.broadcast_to(V, next(iter(post.values())).shape[:2] + V.shape)
    missing = [n for n in ("V", "theta") if n not in post] + (
        [] if "U" in post or "Z" in post else ["U or Z"]
    )
    if missing:
        raise ValueError(f"draws lack {missing} (fit with keep_factors=True)")
    margin = data.margin
    if test is None:
        users, items, ratings = data.users, data.items, data.ratings
    else:
        if len(test) != 3:
            raise ValueError("test must be (users, items, ratings)")
        users = jnp.asarray(check_integer_array(test[0], "test users"), jnp.int32)
        items = jnp.asarray(check_integer_array(test[1], "test items"), jnp.int32)
        num_levels = data.signs.shape[1] + 1
        ratings = check_integer_array(test[2], "test ratings", minimum=1, maximum=num_levels)
        ratings = jnp.asarray(ratings, jnp.int32)
        margin = margin if margin.ndim == 0 else jnp.mean(margin)
    fn = bind(_draw_log_likelihood, users, items, ratings, margin, hyper.C)
    return np.asarray(map_draws(fn, post))
