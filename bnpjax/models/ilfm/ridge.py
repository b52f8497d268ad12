r"""A move of the biases and weights along the directions no logit sees.

Given the features, a relation's logits :math:`\eta_{ij} = s + f_i W f_j^\top` are linear in
:math:`\theta = (s, \mathrm{vec}\, W)` (the active weights): :math:`\eta_{ij} = a_{ij}^\top
\theta` with :math:`a_{ij} = (1, f_i \otimes f_j)`. Directions in the null space of the observed
:math:`a_{ij}` change no logit, and along them the posterior is the prior. Such directions are
common: when features cover every entity (:math:`F u = 1`, as two complementary features do),
:math:`s + c` and :math:`W - c\, u u^\top` give the same links for every :math:`c`; when two
features are copies (:math:`F u = 0`), weights move freely between them. The posterior is a
ridge there, as long as the prior allows, and the HMC move, whose step size fits the
directions the links pin down, crosses it by a random walk (biases with R-hat 1.02-1.09 on
planted data where every other quantity has converged).

In both cases the directions follow from the features alone. Let :math:`F^\top F = U
\operatorname{diag}(\lambda) U^\top` over the active features. The weights' directions
:math:`U_a U_b^\top` with :math:`\lambda_a = 0` or :math:`\lambda_b = 0` change no logit of
any pair; and when :math:`F u = 1` has a solution (the least-squares one in the range of
:math:`F^\top`), so does :math:`(s, W) \to (s + c, W - c\, u u^\top)`. These directions are
orthonormal (the bias direction after scaling) and, the weights' prior being isotropic,
independent under the prior, so the prior's conditional on the affine set they span is
explicit: the weights along :math:`U_a U_b^\top` are drawn afresh from
:math:`\mathcal N(0, \sigma_w^2)`, and along the bias direction :math:`r = (1, -\mathrm{vec}\,
u u^\top)`

.. math::

    c \sim \mathcal N\Big(-\frac{s / \sigma_s^2 - u^\top W u / \sigma_w^2}{q},\;
    \frac1q\Big), \qquad q = \frac{1}{\sigma_s^2} + \frac{(u^\top u)^2}{\sigma_w^2}.

That draw is a Gibbs step of the prior, reversible with respect to it, and the directions
depend on the features only, which the move leaves alone; so Metropolis-Hastings with the
likelihood ratio as acceptance probability leaves the posterior invariant. On exact null
directions the ratio is one (up to rounding); the tolerances that decide which eigenvalue is
zero and whether :math:`F u = 1` is solved only change which directions are proposed, never
the exactness. Directions null only for the observed pairs (not for every pair) are not
proposed. Relations share nothing given the features, and each relation makes two such
moves, the weights along the null directions and then the bias direction, each accepted on its
own, so that a direction only nearly null, rejected, does not take the other with it. The
cost is one ``C x C`` eigendecomposition and a few ``C x C`` products per relation: a Gram
matrix over all ``(s, W)`` coordinates would find the null space of the observed pairs too,
but its ``(1 + C^2)``-square eigendecomposition made the sampling of ``bnpjax demo ilfm``
2.6 times slower.

References
----------
Tierney, L. (1994). Markov chains for exploring posterior distributions. Annals of
Statistics 22, 1701-1728 (Metropolis-Hastings with a proposal reversible with respect to the
prior).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bnpjax.models.ilfm.joint import _active_pairs, _relation_log_likelihood

__all__ = ["ridge_move"]

#: eigenvalues of ``F'F`` below this many machine epsilons of the largest are zero: the
#: rounding of an exact zero is about ``eps * largest``, while a pair of features that differ
#: in one entity of ``m`` already has about 1/2
NULL_TOLERANCE_EPS = 100
#: ``F u = 1`` counts as solved when no entity's ``f_i u`` is further than this from 1
RIDGE_TOLERANCE = 1e-3


def _null_directions(F):
    """The eigenvectors ``U`` of ``F'F`` (columns), which of them lie in the span of the
    active features, which of those are null, and the least-squares ``u`` of ``F u = 1``
    with whether it solves it."""
    N, C = F.shape
    active = F.sum(0) > 0
    # inactive slots get an eigenvalue above any of the active block (at most trace F'F
    # <= N C), so no direction leans on them
    big = 2.0 * (1.0 + N * C)
    values, U = jnp.linalg.eigh(F.T @ F + jnp.diag(big * ~active))
    in_span = values < 0.5 * big
    largest = jnp.max(jnp.where(in_span, values, 0.0))
    tolerance = NULL_TOLERANCE_EPS * jnp.finfo(F.dtype).eps * jnp.maximum(largest, 1.0)
    null = in_span & (values < tolerance)
    solvable = in_span & ~null
    inverse = jnp.where(solvable, 1.0 / jnp.where(solvable, values, 1.0), 0.0)
    u = U @ (inverse * (U.T @ (F.T @ jnp.ones((N,), F.dtype))))
    ridge = jnp.any(active) & (jnp.max(jnp.abs(F @ u - 1.0)) < RIDGE_TOLERANCE)
    return U, in_span, null, u, ridge


def ridge_move(key, data, hyper, F, W, bias, beta, likelihood, correct=True):
    """One move of every relation's bias and active weights along the directions that
    change no logit (module docstring), accepted by the likelihood ratio.

    Parameters
    ----------
    key
        a ``jax.random.key``.
    data, hyper
        the model's data (its mask scaled by the temperature in a tempered chain) and
        hyperparameters (``sigma_w`` the current weights' scale).
    F, W, bias, beta
        the state's features, weights (R, C, C), biases (R,) and covariate coefficients (not
        moved).
    likelihood
        ``"logit"`` or ``"probit"``.
    correct
        False leaves the weights' pull out of the bias direction's conditional mean (a broken
        twin for tests: the draw then follows the bias's prior alone).

    Returns
    -------
    tuple
        the new ``W`` and ``bias``, and the number of accepted moves (two per relation:
        the weights along null directions, then the bias direction).
    """
    R = W.shape[0]
    dtype = W.dtype
    key_weights, key_bias, key_accept = jax.random.split(key, 3)
    U, in_span, null, u, ridge = _null_directions(F)
    pair = _active_pairs(F, dtype)
    # two Metropolis-Hastings steps, each with a proposal reversible under the prior: a
    # direction only nearly null, rejected, then does not take the bias's move with it
    # (1) the weights along U_a U_b' with a null a or b: fresh prior draws
    redraw = in_span[:, None] & in_span[None, :] & (null[:, None] | null[None, :])
    rotated = jnp.einsum("ka,rkl,lb->rab", U, W, U)
    fresh = hyper.sigma_w * jax.random.normal(key_weights, W.shape, dtype)
    W_new = jnp.einsum("ka,rab,lb->rkl", U, jnp.where(redraw[None], fresh, rotated), U) * pair
    key_first, key_second = jax.random.split(key_accept)
    current = _relation_log_likelihood(data, F, W, bias, beta, likelihood)
    W, bias, first, current = _accept(key_first, data, F, beta, likelihood, (W, bias, current),
                                      (W_new, bias), jnp.any(redraw))  # fmt: skip
    # (2) the bias direction (1, -vec(u u')): its conditional under the prior
    sw2, ss2 = hyper.sigma_w**2, hyper.sigma_s**2
    q = 1.0 / ss2 + jnp.sum(u**2) ** 2 / sw2
    along = bias / ss2 - correct * jnp.einsum("k,rkl,l->r", u, W, u) / sw2
    c = (-along + jnp.sqrt(q) * jax.random.normal(key_bias, (R,), dtype)) / q
    W_new = (W - c[:, None, None] * (u[:, None] * u[None, :])[None]) * pair
    W, bias, second, _ = _accept(key_second, data, F, beta, likelihood, (W, bias, current),
                                 (W_new, bias + c), ridge)  # fmt: skip
    return W, bias, jnp.sum(first) + jnp.sum(second)


def _accept(key, data, F, beta, likelihood, current, proposal, any_direction):
    """Each relation's ``(W, bias)`` proposal accepted with its likelihood ratio; none
    where there was no direction to move along (the state is then kept exactly, not
    through a rotation and back). ``current`` carries the state's log-likelihoods, and so
    does the result."""
    (W, bias, log_lik), (W_new, bias_new) = current, proposal
    log_lik_new = _relation_log_likelihood(data, F, W_new, bias_new, beta, likelihood)
    log_u = jnp.log(jax.random.uniform(key, bias.shape, W.dtype))
    take = any_direction & (log_u < log_lik_new - log_lik)
    return (
        jnp.where(take[:, None, None], W_new, W),
        jnp.where(take, bias_new, bias),
        take,
        jnp.where(take, log_lik_new, log_lik),
    )
