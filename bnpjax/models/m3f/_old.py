r"""Gibbs max-margin matrix factorization: Gibbs M3F and Gibbs iPM3F (Xu, Zhu & Zhang 2013).

Sources: ``../shared/seeds/001_5b97c3640b159855.txt`` (appendix of the ICML 2013 paper: eqs.
29-33, Tables 3-4) and ``../shared/design/m3f.md`` (the model, the augmentation, the
authors' protocol). Everything below is derived here; the Geweke tests judge it.

**Model.** Users ``i < N``, items ``j < M``, observed pairs :math:`(i, j) \in \mathcal I`,
ratings :math:`Y_{ij} \in \{1..L\}`, scores :math:`x_{ij} = U_i \cdot V_j`, per-user
thresholds :math:`\theta_i \in \mathbb R^{L-1}`, :math:`T^r_{ij} = +1` if :math:`r \ge Y_{ij}`
else :math:`-1` and :math:`\zeta_{ijr} = \ell - T^r_{ij}(\theta_{ir} - x_{ij})`. Gibbs M3F
samples the pseudo-posterior

.. math::

    q(U, V, \theta) \propto \prod_i \mathcal N(U_i; 0, \sigma_U^2 I)
        \prod_j \mathcal N(V_j; 0, \sigma_V^2 I) \prod_{ir} \mathcal N(\theta_{ir};
        \rho_r, \varsigma^2) \; \exp\Big(-C \sum_{ij \in \mathcal I} \sum_r
        \max(0, \zeta_{ijr})\Big).

**Augmentation** (Polson & Scott 2011; m3f.md). With :math:`u = C\zeta/2`,
:math:`e^{-2\max(0, u)} = \int_0^\infty (2\pi\lambda)^{-1/2}
e^{-(\lambda + u)^2 / (2\lambda)} d\lambda`, and :math:`(\lambda + u)^2/(2\lambda) =
\lambda/2 + u + u^2/(2\lambda)`. So the augmented density is

.. math::

    q(U, V, \theta, \lambda) \propto \text{prior} \prod_{ijr} \lambda_{ijr}^{-1/2}
        \exp\Big(-\frac{\lambda_{ijr}}2 - \frac C2 \zeta_{ijr}
        - \frac{C^2 \zeta_{ijr}^2}{8 \lambda_{ijr}}\Big).

*lambda.* :math:`q(\lambda \mid \cdot) \propto \lambda^{-1/2} e^{-\lambda/2 - u^2/(2\lambda)}`,
a GIG(1/2, 1, u^2), i.e. :math:`\omega = 1/\lambda \sim \mathrm{IG}(1/|u|, 1)` (mean, shape).
All :math:`|\mathcal I|(L-1)` of them are independent: one vectorized draw
(:func:`bnpjax.ops.sample_inverse_gaussian`). ``lambda_rate = c > 0`` multiplies the
density by a proper prior :math:`e^{-c\lambda/2}`; then :math:`\omega \sim
\mathrm{IG}(\sqrt{1+c}/|u|, 1+c)`. The model is ``c = 0``; ``c > 0`` exists only to give the
Geweke test a proper joint (tests/test_m3f.py explains it).

*Scores.* Write :math:`\zeta_r = T_r x + c_r`, :math:`c_r = \ell - T_r\theta_{ir}`,
:math:`\omega_r = 1/\lambda_r`. The exponent is, in :math:`x = x_{ij}`,

.. math::

    \sum_r -\frac C2 T_r x - \frac{C^2\omega_r}{8}(x^2 + 2 T_r c_r x) + \text{const}
    = -\frac{b_{ij}}2 x^2 + \xi_{ij} x, \quad
    b_{ij} = \sum_r \frac{C^2 \omega_{ijr}}4, \quad
    \xi_{ij} = -\frac C2 \sum_r T^r_{ij}\Big(1 + \frac{C \omega_{ijr} c_{ijr}}2\Big),

the seed's :math:`b_{ij}` and :math:`\xi_{ij}` (Appendix A, with :math:`\Delta^r_{ij} =
C c_{ijr}/2`). Neither depends on :math:`x`, so they are computed once per sweep. Given
:math:`U, \theta, \lambda` the item vectors are independent Gaussians (each :math:`x_{ij}`
involves one item):

.. math::

    V_j \mid \cdot \sim \mathcal N(B_j^{-1} h_j, B_j^{-1}), \quad
    B_j = \sigma_V^{-2} I + \sum_{i \in \mathcal I_j} b_{ij} U_i U_i^\top, \quad
    h_j = \sum_{i \in \mathcal I_j} \xi_{ij} U_i,

drawn for all items at once: items are grouped in buckets of similar degree (widths
powers of two, padding below a factor 2), :math:`B_j` built by one batched product, one
batched Cholesky :math:`B_j = R_j R_j^\top`, mean by two triangular solves, noise
:math:`R_j^{-\top}\epsilon` (seed Appendix B, Table 3: :math:`O(|\mathcal I|(L + K^2)) +
O(M K^3)`). :math:`U` likewise, users in parallel.

*Thresholds.* In :math:`\theta = \theta_{ir}`, :math:`\zeta = -T\theta + d`,
:math:`d = \ell + T x`, so the exponent is :math:`\frac{CT}2\theta -
\frac{C^2\omega}8(\theta^2 - 2T d\theta)`:

.. math::

    \theta_{ir} \mid \cdot \sim \mathcal N(m/p, 1/p), \quad
    p = \varsigma^{-2} + \sum_{j \in \mathcal I_i}\frac{C^2\omega_{ijr}}4, \quad
    m = \frac{\rho_r}{\varsigma^2} + \sum_{j \in \mathcal I_i} T^r_{ij}\Big(\frac C2 +
        \frac{C^2\omega_{ijr}}4 (\ell + T^r_{ij} x_{ij})\Big),

all :math:`N(L-1)` independent (segment sums over the pairs).

One sweep: :math:`\lambda \mid U, V, \theta`; :math:`V \mid U, \theta, \lambda`;
:math:`U \mid V, \theta, \lambda`; :math:`\theta \mid U, V, \lambda`. Every step is an exact
conditional of the augmented density, so the sweep leaves it invariant and its
:math:`(U, V, \theta)` marginal is :math:`q`.

**Gibbs iPM3F.** :math:`U` is replaced by binary features :math:`Z \sim \mathrm{IBP}(\alpha)`
(:mod:`bnpjax.priors.ibp`), :math:`x_{ij} = Z_i \cdot V_j`, :math:`V_{jk} \sim
\mathcal N(0, \sigma^2)`. :math:`\lambda, V, \theta` as above (with :math:`Z` for :math:`U`).
Users in turn (the IBP couples rows through :math:`m_{-i,k}`):

* each feature another user holds: :math:`P(z_{ik} = 1 \mid \cdot) \propto m_{-i,k}/N`
  times :math:`\exp\sum_{j \in \mathcal I_i} (-b_{ij} x_{ij}^2/2 + \xi_{ij} x_{ij})`; a flip
  moves :math:`x_{ij}` by :math:`\pm V_{jk}` (seed Table 4, :math:`O(|\mathcal I|(L+K))`);
* the user's singleton features and their weights are redrawn as a block: their number
  :math:`k_i \in 0..\kappa` with the weights integrated out, then the weights given
  :math:`k_i`. With :math:`x^0_{ij}` the score without singletons and
  :math:`\xi'_{ij} = \xi_{ij} - b_{ij} x^0_{ij}`, the :math:`k` new weights :math:`v \in
  \mathbb R^k` of item :math:`j` enter as :math:`\exp(-\tfrac12 v^\top P_k v + \xi'_{ij}
  1^\top v)` with :math:`P_k = \sigma^{-2} I + b_{ij} 1 1^\top` (prior included), an
  equicorrelation matrix (seed eq. 29 with :math:`a - b = \sigma^{-2}`, :math:`b = b_{ij}`).
  Integrating :math:`v`,

  .. math::

      \log p(k_i = k \mid \cdot) = \log \mathrm{Poisson}_\kappa(k; \alpha/N) +
          \sum_{j \in \mathcal I_i} \Big(-\frac k2 \log\sigma^2 - \frac12 \log|P_k|
          + \frac{\xi'^2_{ij}}2 1^\top P_k^{-1} 1\Big) + \text{const},

  with :math:`\log|P_k|` and :math:`1^\top P_k^{-1} 1 = k/(k b_{ij} + \sigma^{-2})` from
  seed eqs. (31) and (33) for every :math:`k` at once
  (:func:`bnpjax.ops.equicorrelation_terms`, :math:`O(\kappa)` per pair). Given :math:`k`,
  :math:`v \mid \cdot \sim \mathcal N(P_k^{-1}\xi' 1, P_k^{-1})` with
  :math:`P_k^{-1} = \sigma^2(I - \beta 1 1^\top)`, :math:`\beta = b\sigma^2/(1 + k b
  \sigma^2)`: mean :math:`\xi'/(\sigma^{-2} + k b)` in every coordinate, noise
  :math:`\sigma(\epsilon - \eta 1 1^\top\epsilon)` with :math:`\eta = (1 - (1 + k b
  \sigma^2)^{-1/2})/k` (then :math:`2\eta - k\eta^2 = \beta`). Items the user did not rate
  get their new weights from the prior. The truncation is the authors' :math:`\kappa`.

Users are visited bucket by bucket (a fixed systematic order); the buffer of feature columns
grows through the driver when a user needs more free columns than there are. With
``alpha_prior = (a, b)`` the sweep ends with :math:`\alpha \mid Z \sim \mathrm{Gamma}(a +
K_+, b + H_N)` (seed 002).

*Weight scale.* With :math:`\ell = 9` a score of the margin's size needs about
:math:`(\ell/\sigma)^2` active binary features per user, and at the authors' fixed :math:`\sigma
= 1` a long chain keeps opening features (hundreds at :math:`C \ge 0.13` on MovieLens), which
suggests letting :math:`\sigma` adapt. ``weight_precision_prior = (a, b)`` makes :math:`\tau =
1/\sigma^2 \sim \mathrm{Gamma}(a, b)` part of the model; only the :math:`M K_+` active weights
have the prior :math:`\mathcal N(0, 1/\tau)`, so :math:`\tau \mid V \sim \mathrm{Gamma}(a + M
K_+/2, b + \sum_{j, k\ \text{active}} V_{jk}^2/2)`, drawn at the end of the sweep; every other
step uses the current :math:`\sigma` (the new-feature block integrates its weights under it). On
ML-100K at :math:`C = 0.1` (Gamma(1, 1), row-parallel step) this did not stop the growth:
:math:`\sigma` and :math:`K_+` rose together (1.5 and 61 after 10 sweeps, 3.5 and 251 after 60)
while the training error kept falling, so the hinge pseudo-likelihood, not the weight scale,
drives :math:`K_+` there; the IBP's penalty per feature is too small against the
:math:`|\mathcal I|(L-1)` hinge terms.

**Row-parallel iPM3F** (``feature_step="parallel"``). Given :math:`V`, :math:`\theta` and
:math:`\lambda` the users share nothing but the IBP counts :math:`m_{-i,k}`. Instantiating
the feature probabilities removes that coupling (Zhang, Dubey & Williamson 2017's hybrid
scheme; :func:`bnpjax.models.ibp_lg.parallel_gibbs` does the same): for each instantiated
column :math:`k`, in a uniformly random order, :math:`\pi_k \mid z_k \sim \mathrm{Beta}(m_k, N
- m_k + 1)` (:func:`bnpjax.priors.ibp.feature_log_odds`), then every user's :math:`z_{ik}
\mid \pi_k, \cdot` at once, with log-odds :math:`\log\frac{\pi_k}{1-\pi_k} + \sum_{j \in
\mathcal I_i} V_{jk}(\xi_{ij} - b_{ij} x^{-k}_{ij} - b_{ij} V_{jk}/2)` (:math:`x^{-k}_{ij}`
the score with :math:`z_{ik} = 0`), conditioned on the column staying non-empty
(:func:`bnpjax.priors.ibp.sample_nonempty_column`). Then every user's singleton features are
redrawn at once, as a block (number, weights) as in the previous section. Why this is exact
(the argument is in :mod:`bnpjax.priors.ibp`): the IBP's features are the points of a Poisson
process of (probability, column) pairs; a point's probability given its column is that Beta;
its column given the probability is the Bernoulli pattern restricted to non-empty columns
(redrawing one point's column cannot delete the point); and the features held by exactly one
user are, for each user independently, :math:`\mathrm{Poisson}(\alpha/N)` in number and
independent of the others. The sweep costs :math:`O(K_+ |\mathcal I|)` as :math:`K_+` steps
over all pairs in parallel, with no loop over users. Both feature steps leave the same
posterior invariant (each has its Geweke test).

**Prediction.** The rating-level rule :math:`1 + \#\{r : \theta_{ir} < x_{ij}\}` applied to
posterior-mean scores and thresholds. A single draw of :math:`x_{ij}` is very noisy (the
pseudo-posterior of :math:`U_i` is wide), so the plain average over draws converges slowly.
The trace also holds a Rao-Blackwellized score, ``score_test_rb``: in Gibbs M3F
:math:`E[U_i \mid V, \theta, \lambda] \cdot V_j`, the conditional mean that the
:math:`U` step computes anyway (:math:`B_i^{-1} h_i`), with the :math:`V` it conditioned on;
in Gibbs iPM3F :math:`Z_i \cdot E[V_j \mid Z, \theta, \lambda]` from the :math:`V` step.
At stationarity the conditioning variables are draws from the target and the conditional is
exact, so :math:`E_q[x_{ij}] = E_q[E[x_{ij} \mid \cdot]]`: the same posterior mean with
less Monte Carlo noise. The kernel itself is unchanged by it.
"""

from __future__ import annotations

import functools
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import betaln
from jax.scipy.stats import gamma as gamma_distribution

from bnpjax._checks import check_integer as _positive_int
from bnpjax.infer.arviz_adapter import pooled_draws
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, pad_axis
from bnpjax.ops import equicorrelation_terms, sample_categorical, sample_inverse_gaussian
from bnpjax.priors import ibp

__all__ = [
    "IPM3FState",
    "M3FData",
    "M3FHyper",
    "M3FInfo",
    "M3FState",
    "data_sample",
    "fit_map",
    "gibbs",
    "ipm3f_gibbs",
    "ipm3f_prior_sample",
    "levels_from_scores",
    "make_data",
    "make_hyper",
    "new_feature_log_weights",
    "predict_levels",
    "predictive_distribution",
    "prior_sample",
    "pseudo_log_posterior",
]


class Bucket(NamedTuple):
    """Entities (users or items) of similar degree: ``ids`` (n_b,) and ``pairs`` (n_b, w),
    the indices of their observed pairs padded with ``nnz`` (a dummy pair of zero weight)."""

    ids: jax.Array
    pairs: jax.Array


class M3FData(NamedTuple):
    """Observed pairs (0-based ``users``, ``items``; ``ratings`` in 1..L), ``signs``
    :math:`T^r_{ij}` (nnz, L-1), ``margin`` :math:`\\ell` (scalar, or per pair and threshold:
    the Geweke construction), and the pairs grouped by user and by item in buckets."""

    users: jax.Array
    items: jax.Array
    ratings: jax.Array
    signs: jax.Array
    margin: jax.Array
    user_buckets: tuple[Bucket, ...]
    item_buckets: tuple[Bucket, ...]
    user_degree: jax.Array  # (N,) pairs per user; N = its length (a static shape)
    item_degree: jax.Array  # (M,)


class M3FHyper(NamedTuple):
    """``C``, prior sds ``sigma_u``, ``sigma_v``, threshold prior ``rho`` (L-1,) and
    ``varsigma``, ``lambda_rate`` (0 for the model; see the module docstring) and the prior sd
    ``sigma_b`` of the item biases (used by ``gibbs(item_bias=True)``)."""

    C: jax.Array
    sigma_u: jax.Array
    sigma_v: jax.Array
    rho: jax.Array
    varsigma: jax.Array
    lambda_rate: jax.Array
    sigma_b: jax.Array


class M3FState(NamedTuple):
    """A Gibbs M3F draw: factors ``U``, ``V``, thresholds ``theta``, the augmentation
    :math:`\\omega = 1/\\lambda` per (pair, threshold) and the item biases (module
    docstring)."""

    U: jax.Array  # (N, K)
    V: jax.Array  # (M, K)
    theta: jax.Array  # (N, L-1)
    omega: jax.Array  # (nnz, L-1) = 1 / lambda
    bias: jax.Array  # (M,) item biases c_j (zero, and never drawn, without item_bias)


class IPM3FState(NamedTuple):
    """A Gibbs iPM3F draw: binary features ``Z`` in a buffer of ``capacity`` columns (the
    active ones are the non-empty columns), weights ``V``, thresholds, the augmentation and
    the (fixed or sampled) ``alpha`` and weight sd (module docstring, "Gibbs iPM3F")."""

    Z: jax.Array  # (N, capacity) in {0, 1}
    V: jax.Array  # (M, capacity); columns of inactive features carry no meaning
    theta: jax.Array  # (N, L-1)
    omega: jax.Array  # (nnz, L-1)
    alpha: jax.Array  # () IBP concentration (fixed, or sampled with alpha_prior)
    sigma_v: jax.Array  # () weight sd (fixed, or sampled with weight_precision_prior)


class M3FInfo(NamedTuple):
    """What one sweep reports: the log pseudo-posterior, the training MAE, the number of
    (active) features, whether the feature buffer ran short and how many columns it needs,
    and the factors of the Rao-Blackwellized score."""

    lp: jax.Array  # log pseudo-posterior of (U or Z, V, theta), hinge form, up to a constant
    train_mae: jax.Array  # MAE of the rating-level rule on the training pairs
    num_features: jax.Array  # K (M3F) or K+ (iPM3F)
    capacity_exceeded: jax.Array
    capacity_needed: jax.Array
    # (F, G) with F_i . G_j = E[x_ij | the other factor block and theta, lambda] at this sweep:
    # (E[U | V, theta, lambda], V) for M3F, (Z, E[V | Z, theta, lambda]) for iPM3F; their
    # average over draws is the Rao-Blackwellized posterior-mean score (``score_test_rb``)
    score_factors: tuple


# --------------------------------------------------------------------------------------------
# data and hyperparameters (host side)


def _integer_array(value, name: str) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
        raise ValueError(f"{name} must be numeric integers")
    as_float = arr.astype(float)
    if not np.all(np.isfinite(as_float)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if not np.all(as_float == np.round(as_float)):
        raise ValueError(f"{name} must hold integers")
    return as_float.astype(np.int64)


def _gamma_prior(prior, name: str) -> tuple[float, float] | None:
    """``None`` or a (shape, rate) pair of positive finite numbers."""
    if prior is None:
        return None
    if isinstance(prior, (str, bytes)):
        raise ValueError(f"{name} must be None or a (shape, rate) pair, got {prior!r}")
    try:
        shape, rate = (float(v) for v in prior)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be None or a (shape, rate) pair, got {prior!r}") from None
    if not (np.isfinite(shape) and np.isfinite(rate) and shape > 0 and rate > 0):
        raise ValueError(f"{name} must hold a positive shape and rate, got {prior!r}")
    return shape, rate


def _buckets(owner: np.ndarray, num: int) -> tuple[Bucket, ...]:
    """Group entities ``0..num-1`` by degree (number of pairs with ``owner == e``) into
    buckets of widths 1, 2, 4, ...: an entity of degree ``d`` goes to the smallest width
    ``>= d``. Its pairs are listed in its row, padded with ``nnz``."""
    nnz = owner.shape[0]
    degree = np.bincount(owner, minlength=num)
    by_owner = np.argsort(owner, kind="stable")
    starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
    width_of = 2 ** np.ceil(np.log2(np.maximum(degree, 1))).astype(np.int64)
    out = []
    for width in np.unique(width_of):
        ids = np.nonzero(width_of == width)[0]
        offsets = np.arange(width)[None, :]
        position = np.minimum(starts[ids, None] + offsets, max(nnz - 1, 0))
        pairs = np.where(offsets < degree[ids, None], by_owner[position], nnz)
        out.append(Bucket(jnp.asarray(ids, jnp.int32), jnp.asarray(pairs, jnp.int32)))
    return tuple(out)


def make_data(
    users, items, ratings, num_users: int, num_items: int, num_levels: int, *, margin=9.0
) -> M3FData:
    """Validate ordinal ratings and lay them out for the samplers (module docstring).

    ``users``, ``items``: 0-based integer ids (< ``num_users``, < ``num_items``);
    ``ratings``: integers in ``1..num_levels``; each (user, item) pair at most once.
    ``margin``: the hinge margin :math:`\\ell` (the authors' 9). Raises ``ValueError`` naming
    the argument on NaN/inf, non-integers, out-of-range ids or ratings, duplicate pairs,
    mismatched lengths, or a ``num_levels`` below the largest rating.

    Users and items without any rating are kept, not dropped: their factors (and a user's
    thresholds) are then drawn from the prior, so a test pair of theirs is predicted from the
    prior (a cold start). Items without training ratings are routine in a held-out split;
    users without any are not (the rows of the rating matrix: often a sign of 1-based ids
    with ``num_users = max id + 1``), so they raise a ``UserWarning`` naming the first ones.

    The pairs are grouped by user and by item in buckets of power-of-two degree widths, and
    the compiled sweep depends on that layout: refitting the same ratings with another ``C``
    or seed reuses the compiled program, while other ratings of the same size recompile once
    when their degree profile falls into other buckets.
    """
    num_users = _positive_int(num_users, "num_users")
    num_items = _positive_int(num_items, "num_items")
    num_levels = _positive_int(num_levels, "num_levels", 2)
    u = _integer_array(users, "users")
    v = _integer_array(items, "items")
    y = _integer_array(ratings, "ratings")
    if not (u.shape == v.shape == y.shape):
        raise ValueError(
            f"users, items and ratings must have the same length, got {u.size}, {v.size}, {y.size}"
        )
    if u.size == 0:
        raise ValueError("ratings is empty")
    if u.min() < 0 or u.max() >= num_users:
        raise ValueError(f"users must lie in 0..{num_users - 1} (num_users), got {u.min()}..")
    if v.min() < 0 or v.max() >= num_items:
        raise ValueError(f"items must lie in 0..{num_items - 1} (num_items), got {v.min()}..")
    if y.min() < 1:
        raise ValueError(f"ratings must lie in 1..num_levels, got a rating {y.min()}")
    if y.max() > num_levels:
        raise ValueError(
            f"num_levels = {num_levels} does not match the data: ratings go up to {y.max()}"
        )
    if np.unique(u * num_items + v).size != u.size:
        raise ValueError("users, items: a (user, item) pair occurs more than once")
    margin = np.asarray(margin, float)
    if not np.all(np.isfinite(margin)):
        raise ValueError("margin must be finite")
    if margin.ndim == 0 and margin < 0:
        # (per-pair margins, the Geweke construction's, may take any sign)
        raise ValueError(f"margin must be >= 0 (the hinge margin ell), got {float(margin)}")
    if margin.shape not in ((), (u.size, num_levels - 1)):
        raise ValueError(f"margin must be a scalar or of shape ({u.size}, {num_levels - 1})")
    unrated_users = np.flatnonzero(np.bincount(u, minlength=num_users) == 0)
    if unrated_users.size:
        warnings.warn(
            f"num_users = {num_users}, but {unrated_users.size} users have no ratings (ids "
            f"{unrated_users[:5].tolist()}{', ...' if unrated_users.size > 5 else ''}): their "
            "factors and thresholds are drawn from the prior; are the ids 0-based?",
            UserWarning,
            stacklevel=2,
        )
    dtype = jnp.result_type(float)
    r = np.arange(1, num_levels)
    signs = np.where(r[None, :] >= y[:, None], 1.0, -1.0)
    return M3FData(
        users=jnp.asarray(u, jnp.int32),
        items=jnp.asarray(v, jnp.int32),
        ratings=jnp.asarray(y, jnp.int32),
        signs=jnp.asarray(signs, dtype),
        margin=jnp.asarray(margin, dtype),
        user_buckets=_buckets(u, num_users),
        item_buckets=_buckets(v, num_items),
        user_degree=jnp.asarray(np.bincount(u, minlength=num_users), jnp.int32),
        item_degree=jnp.asarray(np.bincount(v, minlength=num_items), jnp.int32),
    )


def make_hyper(
    num_levels: int,
    *,
    C: float = 0.1,
    margin: float = 9.0,
    sigma_u: float = 1.0,
    sigma_v: float = 1.0,
    rho=None,
    varsigma: float | None = None,
    lambda_rate: float = 0.0,
    sigma_b: float | None = None,
) -> M3FHyper:
    """Hyperparameters; defaults are the authors' (m3f.md): :math:`\\rho` = ``linspace(-1.5
    (L-2) ell, 1.5 (L-2) ell, L-1)``, :math:`\\varsigma = 1.5\\,\\ell`; the item biases' sd
    ``sigma_b`` defaults to :math:`\\ell` (biases on the scale of the margin)."""
    num_levels = _positive_int(num_levels, "num_levels", 2)
    if rho is None:
        half = 1.5 * (num_levels - 2) * margin
        rho = np.linspace(-half, half, num_levels - 1)
    rho = np.asarray(rho, float)
    if rho.shape != (num_levels - 1,) or not np.all(np.isfinite(rho)):
        raise ValueError(f"rho must be {num_levels - 1} finite values")
    varsigma = 1.5 * margin if varsigma is None else varsigma
    sigma_b = margin if sigma_b is None else sigma_b
    for name, value in (
        ("sigma_b", sigma_b),
        ("C", C),
        ("sigma_u", sigma_u),
        ("sigma_v", sigma_v),
        ("varsigma", varsigma),
    ):
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be positive, got {value}")
    if not (np.isfinite(lambda_rate) and lambda_rate >= 0):
        raise ValueError(f"lambda_rate must be >= 0, got {lambda_rate}")
    dtype = jnp.result_type(float)
    return M3FHyper(
        *(jnp.asarray(x, dtype) for x in (C, sigma_u, sigma_v, rho, varsigma, lambda_rate, sigma_b))
    )


# --------------------------------------------------------------------------------------------
# shared conditionals


def _scores(data, F, V):
    return jnp.sum(F[data.users] * V[data.items], axis=1)


def _sample_omega(key, data, hyper, theta, x):
    """omega = 1/lambda | rest ~ IG(sqrt(1+c)/|u|, 1+c), u = C zeta / 2 (module docstring)."""
    zeta = data.margin - data.signs * (theta[data.users] - x[:, None])
    u = 0.5 * hyper.C * jnp.abs(zeta)
    floor = jnp.finfo(x.dtype).tiny ** 0.25  # keeps mean * normal^2 finite; u ~ 0 is lambda ~ chi2
    shape = 1.0 + hyper.lambda_rate
    return sample_inverse_gaussian(key, jnp.sqrt(shape) / jnp.maximum(u, floor), shape)


def _pair_terms(data, hyper, theta, omega):
    """b_ij and xi_ij (module docstring), each (nnz,)."""
    C = hyper.C
    c = data.margin - data.signs * theta[data.users]
    b = 0.25 * C**2 * jnp.sum(omega, axis=1)
    xi = -0.5 * C * jnp.sum(data.signs * (1.0 + 0.5 * C * omega * c), axis=1)
    return b, xi


def _extend(x):
    """Append the dummy pair (index nnz) with value 0."""
    return jnp.concatenate([x, jnp.zeros((1, *x.shape[1:]), x.dtype)])


# Above this many bytes of per-row work arrays (the K x K precision matrices and the gathered
# factor rows) a factor block is drawn in chunks of rows. iPM3F's buffer can reach K ~ 1000,
# where all M matrices at once need M K^2 8 bytes: 14 GB on ML-100K, 30 GB on ML-1M.
ROW_BLOCK_BYTES = 1 << 30


def column_normals(key, num_rows: int, num_columns: int, dtype) -> jax.Array:
    """Standard normals ``(num_rows, num_columns)`` whose column ``s`` depends only on ``key``
    and ``s``: when the driver grows a feature buffer and reruns a chunk, every column that
    existed before gets the same noise, so the rerun retraces the same chain (a draw of shape
    ``(rows, capacity)`` would reshuffle all of it)."""
    return jax.vmap(
        lambda s: jax.random.normal(jax.random.fold_in(key, s), (num_rows,), dtype), out_axes=1
    )(jnp.arange(num_columns))


def _bucket_row_bytes(bucket, K, itemsize) -> int:
    width = int(bucket.pairs.shape[1])
    return (K * K + 2 * width * K) * itemsize


def _gaussian_rows(key, other, other_ids, b, xi, buckets, sigma, out):
    """Draw every row ``e`` of ``out`` from N(B_e^{-1} h_e, B_e^{-1}) with
    B_e = I / sigma^2 + sum_pairs b F F^T and h_e = sum_pairs xi F, F = other[other_ids[pair]]
    (module docstring). B and h are built per bucket of similar degree, then all rows share
    ONE batched Cholesky B = R R^T and two dependent triangular solves,
    mean = R^{-T} R^{-1} h and row = mean + R^{-T} eps (the second solve takes both right-hand
    sides at once). Returns ``(rows, conditional means)``. (One LAPACK call at a time: jaxlib's
    batched CPU kernels block thread-pool workers, and independent calls running concurrently
    on a small pool were seen to deadlock.) The noise ``eps`` of row ``e`` is row ``e`` of
    :func:`column_normals`. When the work arrays of all rows would exceed ``ROW_BLOCK_BYTES``,
    the rows are drawn in chunks by :func:`_gaussian_rows_chunked`. In float32 (by default;
    ``FACTORIZATION``) the factor comes from a QR decomposition instead, without forming
    ``B``: :func:`_gaussian_rows_square_root`."""
    num_out, K = out.shape
    itemsize = out.dtype.itemsize
    noise = column_normals(key, num_out, K, out.dtype)
    if _use_square_root(out.dtype):
        return _gaussian_rows_square_root(noise, other, other_ids, b, xi, buckets, sigma, out)
    total = sum(int(bk.ids.shape[0]) * _bucket_row_bytes(bk, K, itemsize) for bk in buckets)
    if total > ROW_BLOCK_BYTES:
        return _gaussian_rows_chunked(noise, other, other_ids, b, xi, buckets, sigma, out)
    ids_ext = _extend(other_ids)
    b_ext, xi_ext = _extend(b), _extend(xi)
    eye = jnp.eye(K, dtype=out.dtype) / sigma**2
    Bs, hs = [], []
    for bucket in buckets:
        G = other[ids_ext[bucket.pairs]]  # (n, w, K)
        weight = b_ext[bucket.pairs]
        Bs.append(jnp.einsum("nwk,nw,nwl->nkl", G, weight, G) + eye)
        hs.append(jnp.einsum("nwk,nw->nk", G, xi_ext[bucket.pairs]))
    ids = jnp.concatenate([bucket.ids for bucket in buckets])
    B, h = jnp.concatenate(Bs), jnp.concatenate(hs)
    draw, mean = _draw_from_factor(jnp.linalg.cholesky(B), h, noise[ids])
    return out.at[ids].set(draw), out.at[ids].set(mean)


def _draw_from_factor(L, h, eps):
    """Given the lower Cholesky factors ``L`` of the precisions ``B = L L^T``, the linear
    terms ``h`` and standard normals ``eps`` (all batched over rows): the draws
    ``mean + L^{-T} eps`` and the means ``B^{-1} h = L^{-T} L^{-1} h``, by two dependent
    triangular solves (the second takes both right-hand sides at once)."""
    z = solve_triangular(L, h[..., None], lower=True)
    both = solve_triangular(L, jnp.concatenate([z, eps[..., None]], -1), lower=True, trans="T")
    mean = both[..., 0]
    return mean + both[..., 1], mean


# "auto": the square-root (QR) factorization below float64, the Cholesky of B in float64;
# "cholesky" or "qr" force one (tests compare them).
FACTORIZATION = "auto"


def _use_square_root(dtype) -> bool:
    if FACTORIZATION not in ("auto", "cholesky", "qr"):
        raise ValueError(f"FACTORIZATION must be 'auto', 'cholesky' or 'qr', got {FACTORIZATION!r}")
    if FACTORIZATION == "auto":
        return jnp.dtype(dtype).itemsize < 8
    return FACTORIZATION == "qr"


def _gaussian_rows_square_root(noise, other, other_ids, b, xi, buckets, sigma, out):
    """:func:`_gaussian_rows` in square-root form, for float32.

    Why: an augmentation draw :math:`\\omega_{ijr}` can reach :math:`10^8` (a pair whose
    :math:`|\\zeta|` is near 0), and then :math:`B = \\sigma^{-2} I + \\sum b F F^\\top` has
    entries near :math:`10^8` whose float32 rounding (about 6 each) swamps its small
    eigenvalues; the Cholesky factor of such a ``B`` turns NaN (seen on MovieLens at
    ``C >= 0.1``). Here ``B`` is never formed: with the stacked matrix
    :math:`A = [\\sqrt{b_1} F_1; \\ldots; \\sqrt{b_w} F_w; \\mathrm{diag}(1/\\sigma)]`,
    :math:`A^\\top A = B`, and the QR decomposition :math:`A = Q R` gives :math:`B = R^\\top
    R`; with the rows of ``R`` signed to a positive diagonal, :math:`L = R^\\top` IS the
    Cholesky factor of ``B`` (it is unique), so the draws are the same as the Cholesky
    path's, from the same noise. QR is backward stable in ``A``, whose condition number is
    the square root of ``B``'s, so float32 keeps about half of its digits where the
    Cholesky of ``B`` kept none. About twice the flops of forming ``B`` and factoring it.

    ``A`` has ``w + K`` rows for a row of ``w`` pairs, so the buckets cannot share one batched
    call: ONE loop runs over pieces of buckets (at most about ``ROW_BLOCK_BYTES`` of work
    arrays each), and a switch picks the bucket's branch, so no two factorizations can run
    at once (see :func:`_gaussian_rows_chunked` on the deadlock that this avoids)."""
    num_out, K = out.shape
    nnz = b.shape[0]
    dtype = out.dtype
    itemsize = dtype.itemsize
    ids_ext = _extend(other_ids)
    root_b, xi_ext = jnp.sqrt(_extend(b)), _extend(xi)
    prior_root = jnp.eye(K, dtype=dtype) / jnp.asarray(sigma, dtype)
    noise_ext = _extend(noise)
    branches, branch_of_piece, piece_in_branch = [], [], []
    for k, bucket in enumerate(buckets):
        rows, width = int(bucket.ids.shape[0]), int(bucket.pairs.shape[1])
        per_piece = max(1, min(rows, ROW_BLOCK_BYTES // ((2 * width + 2 * K) * K * itemsize)))
        num_pieces = -(-rows // per_piece)
        extra = num_pieces * per_piece - rows
        pairs = jnp.pad(bucket.pairs, ((0, extra), (0, 0)), constant_values=nnz)
        ids = jnp.pad(bucket.ids, (0, extra), constant_values=num_out)
        pairs = pairs.reshape(num_pieces, per_piece, width)
        ids = ids.reshape(num_pieces, per_piece)

        def branch(s, carry, pairs=pairs, ids=ids, size=per_piece):
            draws, means = carry
            p, e = pairs[s], ids[s]
            G = other[ids_ext[p]]  # (size, w, K)
            A = jnp.concatenate(
                [G * root_b[p][..., None], jnp.broadcast_to(prior_root, (size, K, K))], axis=1
            )
            R = jnp.linalg.qr(A, mode="r")
            sign = jnp.where(jnp.diagonal(R, axis1=-2, axis2=-1) < 0, -1.0, 1.0).astype(dtype)
            L = jnp.swapaxes(R * sign[..., :, None], -1, -2)
            h = jnp.einsum("nwk,nw->nk", G, xi_ext[p])
            draw, mean = _draw_from_factor(L, h, noise_ext[e])
            return draws.at[e].set(draw, mode="drop"), means.at[e].set(mean, mode="drop")

        branches.append(branch)
        branch_of_piece += [k] * num_pieces
        piece_in_branch += list(range(num_pieces))
    branch_of_piece = jnp.asarray(branch_of_piece, jnp.int32)
    piece_in_branch = jnp.asarray(piece_in_branch, jnp.int32)

    def piece(t, carry):
        return jax.lax.switch(branch_of_piece[t], branches, piece_in_branch[t], carry)

    return jax.lax.fori_loop(0, int(branch_of_piece.shape[0]), piece, (out, out))


def _gaussian_rows_chunked(noise, other, other_ids, b, xi, buckets, sigma, out):
    """:func:`_gaussian_rows` with at most about ``ROW_BLOCK_BYTES`` of work arrays at a time:
    the rows, in bucket order (ascending degree), are cut into equal chunks; each chunk's pairs
    are padded to the widest row in it, and ONE loop over the chunks builds each chunk's B, h
    (a switch over the chunk widths) and draws its rows. The same conditionals and the same
    noise per row; the rows are conditionally independent given ``other``.

    Why one loop with one Cholesky call site: jaxlib's batched CPU Cholesky waits inside an
    XLA thread-pool worker for work queued on that same pool, so two factorizations that XLA
    is free to run at once (e.g. from separate loops, which XLA flattens when they have a
    single iteration) deadlocked on a 2-thread pool."""
    num_out, K = out.shape
    nnz = b.shape[0]
    itemsize = out.dtype.itemsize
    ids_ext = _extend(other_ids)
    b_ext, xi_ext = _extend(b), _extend(xi)
    eye = jnp.eye(K, dtype=out.dtype) / sigma**2
    noise_ext = _extend(noise)  # padded rows read the dummy row
    widths = [int(bucket.pairs.shape[1]) for bucket in buckets]
    counts = [int(bucket.ids.shape[0]) for bucket in buckets]
    total = sum(counts)
    row_bytes = (K * K + 2 * max(widths) * K) * itemsize
    per_chunk = max(1, min(total, ROW_BLOCK_BYTES // row_bytes))
    num_chunks = -(-total // per_chunk)
    size = -(-total // num_chunks)  # equal chunks: the padding stays under one chunk's worth
    # every row's bucket (static) and its global position
    bucket_of_row = np.repeat(np.arange(len(buckets)), counts)
    first_row = np.concatenate([[0], np.cumsum(counts)[:-1]])
    # chunks grouped by their width (that of their widest, i.e. last, row)
    groups: dict[int, list[int]] = {}
    for t in range(num_chunks):
        last = min((t + 1) * size, total) - 1
        groups.setdefault(widths[bucket_of_row[last]], []).append(t)
    branch_of_chunk = np.zeros(num_chunks, np.int32)
    index_in_branch = np.zeros(num_chunks, np.int32)
    branch_tables = []
    for g, (width, chunks) in enumerate(sorted(groups.items())):
        pair_rows, id_rows = [], []
        for t in chunks:
            lo, hi = t * size, min((t + 1) * size, total)
            parts_p, parts_i = [], []
            for k in np.unique(bucket_of_row[lo:hi]):
                a = max(lo, first_row[k]) - first_row[k]
                z = min(hi, first_row[k] + counts[k]) - first_row[k]
                pad = ((0, 0), (0, width - widths[k]))
                parts_p.append(jnp.pad(buckets[k].pairs[a:z], pad, constant_values=nnz))
                parts_i.append(buckets[k].ids[a:z])
            extra = size - (hi - lo)
            # padded rows: the dummy pair (weight 0) and an id past the end (dropped on write)
            parts_p.append(jnp.full((extra, width), nnz, jnp.int32))
            parts_i.append(jnp.full((extra,), num_out, jnp.int32))
            pair_rows.append(jnp.concatenate(parts_p))
            id_rows.append(jnp.concatenate(parts_i))
            branch_of_chunk[t], index_in_branch[t] = g, len(pair_rows) - 1
        branch_tables.append((jnp.stack(pair_rows), jnp.stack(id_rows)))

    def build(s, tables):
        pairs, ids = tables
        p, e = pairs[s], ids[s]
        G = other[ids_ext[p]]
        B = jnp.einsum("nwk,nw,nwl->nkl", G, b_ext[p], G) + eye
        h = jnp.einsum("nwk,nw->nk", G, xi_ext[p])
        return B, h, e

    branches = [functools.partial(build, tables=tables) for tables in branch_tables]
    branch_of_chunk = jnp.asarray(branch_of_chunk)
    index_in_branch = jnp.asarray(index_in_branch)

    def chunk(t, carry):
        draws, means = carry
        B, h, e = jax.lax.switch(branch_of_chunk[t], branches, index_in_branch[t])
        draw, mean = _draw_from_factor(jnp.linalg.cholesky(B), h, noise_ext[e])
        return draws.at[e].set(draw, mode="drop"), means.at[e].set(mean, mode="drop")

    return jax.lax.fori_loop(0, num_chunks, chunk, (out, out))


def _sample_theta(key, data, hyper, omega, x, num_users):
    """theta_ir | rest ~ N(m/p, 1/p) (module docstring), all at once."""
    C, T = hyper.C, data.signs
    w = 0.25 * C**2 * omega
    prec = 1.0 / hyper.varsigma**2 + jax.ops.segment_sum(w, data.users, num_users)
    lin = T * (0.5 * C + w * (data.margin + T * x[:, None]))
    lin = hyper.rho / hyper.varsigma**2 + jax.ops.segment_sum(lin, data.users, num_users)
    eps = jax.random.normal(key, prec.shape, prec.dtype)
    return lin / prec + eps * jax.lax.rsqrt(prec)


def levels_from_scores(scores, thresholds) -> jax.Array:
    """The rating-level rule: ``1 + #{r : theta_r < x}`` (``thresholds`` broadcast against
    ``scores[..., None]``)."""
    return 1 + jnp.sum(thresholds < scores[..., None], axis=-1)


def _hinge_log_posterior(data, hyper, F_prior, V, theta, x):
    zeta = data.margin - data.signs * (theta[data.users] - x[:, None])
    hinge = -hyper.C * jnp.sum(jnp.maximum(zeta, 0.0))
    prior_v = -0.5 * jnp.sum(V**2) / hyper.sigma_v**2
    prior_t = -0.5 * jnp.sum((theta - hyper.rho) ** 2) / hyper.varsigma**2
    return hinge + F_prior + prior_v + prior_t


def _with_bias(U, V, bias):
    """``(U | 1, V | c)``: the factors with the item biases as one more column, so that
    ``F_i . G_j = U_i . V_j + c_j``."""
    ones = jnp.ones((U.shape[0], 1), U.dtype)
    return jnp.concatenate([U, ones], 1), jnp.concatenate([V, bias[:, None]], 1)


def pseudo_log_posterior(data: M3FData, hyper: M3FHyper, state: M3FState) -> jax.Array:
    """:math:`\\log q(U, V, c, \\theta)` of Gibbs M3F up to a constant: the Gaussian priors
    plus :math:`-C \\sum_{(i,j), r} \\max(0, \\zeta_{ijr})`: the hinge-loss pseudo-posterior
    of ``../shared/design/m3f.md`` before augmentation (module docstring; the item biases
    ``c`` are zero without ``item_bias``)."""
    x = _scores(data, state.U, state.V) + state.bias[data.items]
    prior_u = -0.5 * jnp.sum(state.U**2) / hyper.sigma_u**2
    prior_u += -0.5 * jnp.sum(state.bias**2) / hyper.sigma_b**2
    return _hinge_log_posterior(data, hyper, prior_u, state.V, state.theta, x)


def _train_mae(data, theta, x):
    level = levels_from_scores(x, theta[data.users])
    return jnp.mean(jnp.abs(level - data.ratings).astype(x.dtype))


# --------------------------------------------------------------------------------------------
# Gibbs M3F


def _m3f_init(data, hyper, fixed, key, *, rank, num_users, num_items, init_scale):
    key_u, key_v, key_w = jax.random.split(key, 3)
    dtype = data.signs.dtype
    U = init_scale * jax.random.normal(key_u, (num_users, rank), dtype)
    if fixed is None:
        V = init_scale * jax.random.normal(key_v, (num_items, rank), dtype)
        bias = jnp.zeros((num_items,), dtype)
    else:
        V, bias = fixed
    theta = jnp.broadcast_to(hyper.rho, (num_users, hyper.rho.shape[0])).astype(dtype)
    omega = _sample_omega(key_w, data, hyper, theta, _scores(data, U, V) + bias[data.items])
    return M3FState(U, V, theta, omega, bias)


def _m3f_step(data, hyper, key, state, *, num_users, num_items, item_bias=False, fixed_items=False):
    key_w, key_v, key_u, key_t = jax.random.split(key, 4)
    bias = state.bias
    x = _scores(data, state.U, state.V) + bias[data.items]
    omega = _sample_omega(key_w, data, hyper, state.theta, x)
    b, xi = _pair_terms(data, hyper, state.theta, omega)
    if fixed_items:
        # strong generalization: V and c stay as given; the sweep samples q(U, theta | V, c)
        V = state.V
    elif item_bias:
        # (V_j, c_j) as one block: the biases are the weights of a feature every user holds
        rank = state.V.shape[1]
        U1, Vc = _with_bias(state.U, state.V, bias)
        sd = jnp.concatenate([jnp.full((rank,), hyper.sigma_v), hyper.sigma_b[None]])
        Vc, _ = _gaussian_rows(key_v, U1, data.users, b, xi, data.item_buckets, sd, Vc)
        V, bias = Vc[:, :rank], Vc[:, rank]
    else:
        V, _ = _gaussian_rows(
            key_v, state.U, data.users, b, xi, data.item_buckets, hyper.sigma_v, state.V
        )
    # given c, the bias enters each pair's exponent -b/2 (x + c)^2 + xi (x + c) as xi - b c
    U, U_mean = _gaussian_rows(
        key_u,
        V,
        data.items,
        b,
        xi - b * bias[data.items],
        data.user_buckets,
        hyper.sigma_u,
        state.U,
    )
    x = _scores(data, U, V) + bias[data.items]
    theta = _sample_theta(key_t, data, hyper, omega, x, num_users)
    new = M3FState(U, V, theta, omega, bias)
    info = M3FInfo(
        lp=pseudo_log_posterior(data, hyper, new),
        train_mae=_train_mae(data, theta, x),
        num_features=jnp.asarray(U.shape[1], jnp.int32),
        capacity_exceeded=jnp.zeros((), bool),
        capacity_needed=jnp.zeros((), jnp.int32),
        score_factors=_with_bias(U_mean, V, bias),
    )
    return new, info


def _test_trace(test, F, V, theta, info):
    users, items = test
    scores = jnp.sum(F[users] * V[items], axis=1)
    F_rb, V_rb = info.score_factors
    rb = jnp.sum(F_rb[users] * V_rb[items], axis=1)
    return {
        "score_test": scores,
        "level_test": levels_from_scores(scores, theta[users]),
        "score_test_rb": rb,
    }


def _m3f_trace(data, test, state, info, *, keep_factors, item_bias=False, fixed_items=False):
    posterior = {"theta": state.theta}
    if keep_factors:
        posterior["U"] = state.U
        if not fixed_items:
            posterior["V"] = state.V
    if item_bias and not fixed_items:
        posterior["bias"] = state.bias
    stats = {"lp": info.lp, "train_mae": info.train_mae}
    if test is not None:
        stats.update(
            _test_trace(test, *_with_bias(state.U, state.V, state.bias), state.theta, info)
        )
    return {"posterior": posterior, "sample_stats": stats}


def _test_arrays(test, data):
    if test is None:
        return None
    users, items = test
    users = _integer_array(users, "test users")
    items = _integer_array(items, "test items")
    if users.shape != items.shape:
        raise ValueError("test users and items must have the same length")
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    if users.size and (users.min() < 0 or users.max() >= N or items.min() < 0 or items.max() >= M):
        raise ValueError("test ids out of range of num_users / num_items")
    return jnp.asarray(users, jnp.int32), jnp.asarray(items, jnp.int32)


def _dims(factors: str, axis: str) -> dict:
    return {
        factors: ["user", axis],
        "V": ["item", axis],
        "bias": ["item"],
        "theta": ["user", "threshold"],
        "score_test": ["test_pair"],
        "level_test": ["test_pair"],
        "score_test_rb": ["test_pair"],
    }


def _check_common(data, hyper):
    if not isinstance(data, M3FData):
        raise ValueError("data must come from bnpjax.models.m3f.make_data")
    if not isinstance(hyper, M3FHyper):
        raise ValueError("hyper must come from bnpjax.models.m3f.make_hyper")
    if hyper.rho.shape[0] != data.signs.shape[1]:
        raise ValueError(
            f"hyper has {hyper.rho.shape[0] + 1} levels but data has {data.signs.shape[1] + 1}"
        )


def _item_factors(item_factors, num_items) -> np.ndarray:
    V = np.asarray(item_factors, dtype=float)
    if V.ndim != 2 or V.shape[0] != num_items or V.shape[1] < 1:
        raise ValueError(
            f"item_factors must be (num_items, K) = ({num_items}, K), got shape {V.shape}"
        )
    if not np.all(np.isfinite(V)):
        raise ValueError("item_factors contains NaN or infinite values")
    return V


def _fixed_items(item_factors, item_biases, item_bias, rank, num_items, dtype):
    """Check the strong-generalization inputs of :func:`gibbs`; returns ``(rank, fixed)``."""
    if item_factors is None:
        if item_biases is not None:
            raise ValueError("item_biases is given without item_factors")
        return (10 if rank is None else _positive_int(rank, "rank")), None
    V = _item_factors(item_factors, num_items)
    if rank is not None and _positive_int(rank, "rank") != V.shape[1]:
        raise ValueError(f"rank={rank} does not match item_factors with {V.shape[1]} columns")
    if item_biases is None:
        if item_bias:
            raise ValueError("item_bias=True with fixed item_factors needs item_biases")
        c = np.zeros(num_items)
    else:
        c = np.asarray(item_biases, dtype=float)
        if c.shape != (num_items,):
            raise ValueError(f"item_biases must have shape ({num_items},), got {c.shape}")
        if not np.all(np.isfinite(c)):
            raise ValueError("item_biases contains NaN or infinite values")
    return V.shape[1], (jnp.asarray(V, dtype), jnp.asarray(c, dtype))


def gibbs(
    data: M3FData,
    *,
    rank: int | None = None,
    hyper: M3FHyper | None = None,
    init_scale: float = 0.1,
    test=None,
    keep_factors: bool = True,
    item_bias: bool = False,
    item_factors=None,
    item_biases=None,
) -> SamplingAlgorithm:
    """Gibbs M3F (module docstring: the augmentation of ``../shared/design/m3f.md``, the
    seed 001's :math:`b_{ij}`, :math:`\\xi_{ij}` (Appendix A) and its Table 3 for the batched
    factor draws) as a kernel for :func:`bnpjax.sample`; ``rank`` K (default 10).

    ``item_bias=True`` adds an item bias to every score, :math:`x_{ij} = U_i \\cdot V_j + c_j`,
    :math:`c_j \\sim \\mathcal N(0, \\sigma_b^2)` (``hyper.sigma_b``), as the factorization
    machines' item terms (the per-user thresholds already play the user bias). It is the
    weight of a feature every user holds, so :math:`(V_j, c_j)` is drawn as one Gaussian block
    (:math:`B_j` with a row and column for the constant 1) and :math:`U` given :math:`c` sees
    :math:`\\xi_{ij} - b_{ij} c_j` in place of :math:`\\xi_{ij}`; exact Gibbs as before.

    ``item_factors=V`` (``(num_items, K)``, and ``item_biases=c`` with biases) holds the item
    side fixed: the sweep is :math:`\\lambda`, :math:`U`, :math:`\\theta` given ``V`` (the
    same conditionals, the :math:`V` step left out), so the chain samples
    :math:`q(U, \\theta \\mid Y, V, c)`. This is the strong-generalization protocol
    (``../shared/design/m3f.md``; the authors' code fixes ``V`` at the posterior mean of
    the run on the other users): fit new users, whose ratings had no part in ``V``, and
    predict their held-out ratings. ``rank`` is then ``V``'s width.

    ``test=(users, items)``: held-out pairs whose scores ``score_test`` and rating levels
    ``level_test`` (rating-level rule) are traced at every kept draw, with the
    Rao-Blackwellized ``score_test_rb`` (module docstring); average ``score_test_rb`` (or
    ``score_test``) over draws and apply :func:`levels_from_scores` with the mean thresholds
    for the posterior-mean prediction, or use :func:`predictive_distribution` on
    ``level_test``.
    ``keep_factors=False`` keeps only the thresholds of ``U``, ``V``, ``theta`` (memory); a
    fixed ``V`` is never traced."""
    if hyper is None:
        hyper = make_hyper(int(data.signs.shape[1]) + 1)
    _check_common(data, hyper)
    if not (np.isfinite(init_scale) and init_scale >= 0):
        raise ValueError(f"init_scale must be >= 0, got {init_scale}")
    sizes = dict(num_users=data.user_degree.shape[0], num_items=data.item_degree.shape[0])
    rank, fixed = _fixed_items(
        item_factors, item_biases, item_bias, rank, sizes["num_items"], data.signs.dtype
    )
    item_bias = bool(item_bias or item_biases is not None)
    fixed_items = fixed is not None
    test_arrays = _test_arrays(test, data)
    return SamplingAlgorithm(
        init=bind(_m3f_init, data, hyper, fixed, rank=rank, init_scale=float(init_scale), **sizes),
        step=bind(_m3f_step, data, hyper, item_bias=item_bias, fixed_items=fixed_items, **sizes),
        trace=bind(
            _m3f_trace,
            data,
            test_arrays,
            keep_factors=bool(keep_factors),
            item_bias=item_bias,
            fixed_items=fixed_items,
        ),
        spec=ArvizSpec(
            name="m3f.gibbs",
            dims=_dims("U", "factor"),
            settings={
                "rank": rank,
                "C": float(hyper.C),
                "item_bias": item_bias,
                "fixed_items": fixed_items,
            },
        ),
    )


def prior_sample(
    key, data: M3FData, hyper: M3FHyper, rank: int, item_bias: bool = False
) -> M3FState:
    """``U, V, theta`` (and the item biases with ``item_bias``) from their priors and
    ``lambda ~ Exponential(rate c/2)`` (``c = hyper.lambda_rate > 0``; the Geweke construction
    of tests/test_m3f.py)."""
    key_u, key_v, key_t, key_l = jax.random.split(key, 4)
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    dtype = data.signs.dtype
    U = hyper.sigma_u * jax.random.normal(key_u, (N, rank), dtype)
    V = hyper.sigma_v * jax.random.normal(key_v, (M, rank), dtype)
    theta = hyper.rho + hyper.varsigma * jax.random.normal(key_t, (N, hyper.rho.shape[0]), dtype)
    lam = jax.random.exponential(key_l, data.signs.shape, dtype) * 2.0 / hyper.lambda_rate
    bias = jnp.zeros((M,), dtype)
    if item_bias:
        bias = hyper.sigma_b * jax.random.normal(jax.random.fold_in(key, 1), (M,), dtype)
    return M3FState(U, V, theta, 1.0 / lam, bias)


def data_sample(key, state, data: M3FData, hyper: M3FHyper) -> M3FData:
    """Per-(pair, threshold) margins given everything else: ``u ~ N(-lambda, lambda)`` (the
    augmented factor as a density in ``u``), ``margin = 2u/C + T (theta_i - x_ij)``: the data
    step of the Geweke "margin-data" joint, built on the augmentation identity
    :math:`e^{-2\\max(0, u)} = \\int_0^\\infty (2\\pi\\lambda)^{-1/2}
    e^{-(\\lambda + u)^2 / (2\\lambda)} d\\lambda` (Polson & Scott 2011;
    ``../shared/design/m3f.md``, "Augmentation"); tests/test_m3f.py derives the joint."""
    if isinstance(state, M3FState):
        x = _scores(data, state.U, state.V) + state.bias[data.items]
    else:
        x = _scores(data, state.Z, state.V)
    lam = 1.0 / state.omega
    u = -lam + jnp.sqrt(lam) * jax.random.normal(key, lam.shape, lam.dtype)
    margin = 2.0 * u / hyper.C + data.signs * (state.theta[data.users] - x[:, None])
    return data._replace(margin=margin)


# --------------------------------------------------------------------------------------------
# Gibbs iPM3F


def new_feature_log_weights(b, xi_res, valid, sigma, alpha, num_users, kappa: int):
    """Unnormalized ``log p(k_i = k | rest)``, ``k = 0..kappa`` (module docstring): the
    truncated Poisson(alpha/N) prior plus, per rated item, ``-k/2 log sigma^2 - 1/2 log|P_k|
    + xi'^2/2 1^T P_k^{-1} 1`` with ``P_k = I/sigma^2 + b 1 1^T`` (seed eqs. 29, 31, 33)."""
    per_pair = _new_feature_pair_terms(b, xi_res, sigma, kappa)
    loglik = jnp.sum(jnp.where(valid[:, None], per_pair, 0.0), axis=0)
    return ibp.new_feature_log_prior(alpha, num_users, kappa).astype(b.dtype) + loglik


def _new_feature_pair_terms(b, xi_res, sigma, kappa: int):
    """Per rated pair and ``k = 0..kappa``: the log of the new weights' Gaussian integral."""
    logdet, quad = equicorrelation_terms(1.0 / sigma**2, b, kappa)  # (w, kappa + 1)
    k = jnp.arange(kappa + 1, dtype=b.dtype)
    return -k * jnp.log(sigma) - 0.5 * logdet + 0.5 * xi_res[:, None] ** 2 * quad


def _redraw_columns(key, data, b, xi, Z, V, order, num_columns, reference=None):
    """Columns ``order[:num_columns]`` in turn, each for every user at once given its
    :math:`\\pi_k` (module docstring, "Row-parallel iPM3F"). Given :math:`\\pi_k`, V and
    the other columns, the users' :math:`z_{ik}` are independent (each touches only its own
    pairs' pseudo-likelihood), so the column is one exact block. Returns ``Z`` and its scores.

    ``reference = (counts, num_rows)``: feature counts of users held fixed outside ``Z``
    (strong generalization). :math:`\\pi_k`'s Beta then counts them too, and a column may
    empty among ``Z``'s users, since the reference users hold it."""
    N = Z.shape[0]
    users, items = data.users, data.items
    dtype = V.dtype

    def column(position, carry):
        Z, x = carry
        k = order[position]
        key_pi, key_z = jax.random.split(jax.random.fold_in(key, k))
        z_k = Z[:, k]
        v = V[items, k]
        x_off = x - z_k[users] * v
        # log pseudo-likelihood ratio of z_ik = 1 against 0, summed over the user's pairs
        gain = jax.ops.segment_sum(v * (xi - b * x_off - 0.5 * b * v), users, num_segments=N)
        if reference is None:
            # only columns active at the start are visited, and they stay non-empty
            on = ibp.sample_nonempty_column(key_z, ibp.feature_log_odds(key_pi, z_k) + gain)
        else:
            counts, num_rows = reference
            log_odds = ibp.feature_log_odds(key_pi, z_k, counts[k], num_rows) + gain
            uniforms = jax.random.uniform(key_z, (N,), dtype)
            on = jnp.log(uniforms) < -jax.nn.softplus(-log_odds)
        on = on.astype(dtype)
        return Z.at[:, k].set(on), x_off + on[users] * v

    return jax.lax.fori_loop(0, num_columns, column, (Z, _scores(data, Z, V)))


def _parallel_features(key, data, b, xi, Z, V, alpha, sigma, kappa):
    """Row-parallel Z step (module docstring, "Row-parallel iPM3F"): the instantiated columns
    in a random order, each for every user at once given ``pi_k``, then every user's
    singletons and their weights at once. Returns ``Z, V, exceeded, needed``."""
    key_order, key_cols, key_new, key_v = jax.random.split(key, 4)
    N, cap = Z.shape
    M = V.shape[0]
    users, items = data.users, data.items
    dtype = V.dtype
    order = ibp.active_column_order(key_order, Z)
    Z, x = _redraw_columns(key_cols, data, b, xi, Z, V, order, jnp.sum(Z.sum(0) > 0))

    # every user's singletons redrawn at once, their weights integrated out
    singleton = (Z.sum(0) == 1).astype(dtype)
    x0 = x - _scores(data, Z * singleton, V)
    Z = Z * (1.0 - singleton)
    xi_res = xi - b * x0
    per_pair = _new_feature_pair_terms(b, xi_res, sigma, kappa)
    log_w = ibp.new_feature_log_prior(alpha, N, kappa).astype(dtype) + jax.ops.segment_sum(
        per_pair, users, num_segments=N
    )
    k_new = sample_categorical(key_new, log_w)
    owned, shortfall = ibp.place_new_features(Z.sum(0) < 0.5, k_new)
    Z = Z + owned.astype(dtype)

    # weights of the new columns: prior for every item, posterior for each owner's rated items
    opened = owned.any(0)
    eps = column_normals(key_v, M, cap, dtype)
    V = jnp.where(opened[None, :], sigma * eps, V)
    placed = owned.sum(1)  # k_new, or fewer when the buffer ran short (the step is redone)
    slots = jnp.argsort(~owned, axis=1)[:, :kappa]  # each user's new columns first
    use = (jnp.arange(kappa)[None, :] < placed[:, None])[users]
    pair_slots = slots[users]
    kf = placed[users].astype(dtype)
    sig2 = sigma**2
    eta = (1.0 - jax.lax.rsqrt(1.0 + kf * b * sig2)) / jnp.maximum(kf, 1.0)
    mean = xi_res / (1.0 / sig2 + kf * b)
    eps_w = eps[items[:, None], pair_slots] * use
    rated = mean[:, None] + sigma * (eps_w - eta[:, None] * jnp.sum(eps_w, 1, keepdims=True))
    rows = jnp.where(use, items[:, None], M)  # M: dropped on write
    V = V.at[rows, pair_slots].set(rated, mode="drop")
    needed = (jnp.sum(Z.sum(0) > 0) + shortfall).astype(jnp.int32)
    return Z, V, shortfall > 0, needed


FEATURE_STEPS = ("sequential", "parallel")


def _user_features(carry, xs, *, data, b_ext, xi_ext, sigma, alpha, kappa):
    """One user's Z step (module docstring): Gibbs flips of shared features, then the block
    (number of singletons, their weights)."""
    Z, V, m, exceeded, needed = carry
    i, pairs, key = xs
    N, cap = Z.shape
    M = V.shape[0]
    key_flip, key_k, key_v = jax.random.split(key, 3)
    valid = pairs < data.users.shape[0]
    items = jnp.where(valid, _extend(data.items)[pairs], M)  # M: dropped on write
    b, xi = b_ext[pairs], xi_ext[pairs]
    Vw = jnp.where(valid[:, None], V[jnp.minimum(items, M - 1)], 0.0)
    z = Z[i]
    m_minus = m - z
    held = m_minus > 0.5
    x = Vw @ z
    order = jnp.argsort(~held)
    uniforms = jax.random.uniform(key_flip, (cap,), V.dtype)

    def flip(t, c):
        z, x = c
        k = order[t]
        delta = 1.0 - 2.0 * z[k]
        x_new = x + delta * Vw[:, k]
        gain = jnp.sum(-0.5 * b * (x_new**2 - x**2) + xi * (x_new - x))
        p_on = m_minus[k] / N
        prior = jnp.where(
            z[k] > 0, jnp.log1p(-p_on) - jnp.log(p_on), jnp.log(p_on) - jnp.log1p(-p_on)
        )
        take = jnp.log(uniforms[k]) < -jax.nn.softplus(-(gain + prior))
        return jnp.where(take, z.at[k].set(1.0 - z[k]), z), jnp.where(take, x_new, x)

    z, x = jax.lax.fori_loop(0, jnp.sum(held), flip, (z, x))
    singles = z * (~held)
    x0 = x - Vw @ singles
    xi_res = xi - b * x0
    logw = new_feature_log_weights(b, xi_res, valid, sigma, alpha, N, kappa)
    k_new = sample_categorical(key_k, logw)
    owned, short = ibp.place_new_features(~held, k_new[None])
    owned = owned[0]
    z = jnp.where(held, z, owned.astype(z.dtype))

    placed = jnp.sum(owned)  # k_new, or fewer when the buffer ran short (the step is redone)

    def write_new_columns(V):
        # weights of the new columns: prior for every item, posterior for the rated ones
        slots = jnp.argsort(~owned)[:kappa]
        use = jnp.arange(kappa) < placed
        eps = jax.random.normal(key_v, (M, kappa), V.dtype) * use
        kf = placed.astype(V.dtype)
        sig2 = sigma**2
        grow = 1.0 + kf * b * sig2
        eta = (1.0 - jax.lax.rsqrt(grow)) / jnp.maximum(kf, 1.0)
        mean = xi_res / (1.0 / sig2 + kf * b)
        eps_w = eps[jnp.minimum(items, M - 1)]
        rated = mean[:, None] + sigma * (eps_w - eta[:, None] * jnp.sum(eps_w, 1, keepdims=True))
        cols = jnp.where(use[None, :], sigma * eps, V[:, slots])
        cols = cols.at[items].set(
            jnp.where(use[None, :], rated, cols[jnp.minimum(items, M - 1)]), mode="drop"
        )
        return V.at[:, slots].set(cols)

    # Most users open no feature in a sweep; skipping the M x kappa prior draws for them is
    # what keeps the sequential user loop cheap (those draws dominated the sweep on a CPU).
    # Under vmap (several chains in one program) the cond becomes a select and both branches
    # run: still exact, no longer cheaper.
    V = jax.lax.cond(placed > 0, write_new_columns, lambda V: V, V)
    Z = Z.at[i].set(z)
    carry = (
        Z,
        V,
        m_minus + z,
        exceeded | (short > 0),
        jnp.maximum(needed, (jnp.sum(held) + k_new).astype(jnp.int32)),
    )
    return carry, None


def _sequential_features(key, data, b, xi, Z, V, alpha, sigma, kappa):
    """The authors' Z step (module docstring, "Gibbs iPM3F"): users in turn, bucket by bucket.
    Returns ``Z, V, exceeded, needed``."""
    b_ext, xi_ext = _extend(b), _extend(xi)
    carry = (Z, V, Z.sum(0), jnp.zeros((), bool), jnp.zeros((), jnp.int32))
    for t, bucket in enumerate(data.user_buckets):
        keys = jax.random.split(jax.random.fold_in(key, t), bucket.ids.shape[0])
        user = functools.partial(
            _user_features,
            data=data,
            b_ext=b_ext,
            xi_ext=xi_ext,
            sigma=sigma,
            alpha=alpha,
            kappa=kappa,
        )
        carry, _ = jax.lax.scan(user, carry, (bucket.ids, bucket.pairs, keys))
    Z, V, _, exceeded, needed = carry
    return Z, V, exceeded, needed


def _ipm3f_step(
    data,
    hyper,
    key,
    state,
    *,
    num_users,
    num_items,
    kappa,
    alpha_prior,
    feature_step,
    weight_precision_prior=None,
):
    key_w, key_v, key_t, key_z, key_alpha, key_sigma = jax.random.split(key, 6)
    hyper = hyper._replace(sigma_v=state.sigma_v)
    Z, theta = state.Z, state.theta
    active = Z.sum(0) > 0
    x = _scores(data, Z, state.V)
    omega = _sample_omega(key_w, data, hyper, theta, x)
    b, xi = _pair_terms(data, hyper, theta, omega)
    V, V_mean = _gaussian_rows(
        key_v, Z, data.users, b, xi, data.item_buckets, hyper.sigma_v, state.V
    )
    V = V * active  # inactive columns carry nothing (their draws were from the prior)
    theta = _sample_theta(key_t, data, hyper, omega, _scores(data, Z, V), num_users)
    b, xi = _pair_terms(data, hyper, theta, omega)
    features = _parallel_features if feature_step == "parallel" else _sequential_features
    Z, V, exceeded, needed = features(key_z, data, b, xi, Z, V, state.alpha, hyper.sigma_v, kappa)
    m = Z.sum(0)
    V = V * (m > 0)  # columns of features nobody holds any more carry nothing
    alpha = state.alpha
    if alpha_prior is not None:
        # alpha | Z ~ Gamma(a + K+, b + H_N): the IBP pmf is alpha^K+ exp(-alpha H_N) in alpha
        shape, rate = alpha_prior
        alpha = ibp.sample_alpha(key_alpha, jnp.sum(m > 0), num_users, shape, rate).astype(
            alpha.dtype
        )
    feature_log_prior = ibp.log_prob(Z, alpha)
    if alpha_prior is not None:
        shape, rate = alpha_prior
        feature_log_prior += gamma_distribution.logpdf(alpha, shape, scale=1.0 / rate)
    num_weights = num_items * jnp.sum(m > 0)
    sigma_v = state.sigma_v
    if weight_precision_prior is not None:
        sigma_v = _sample_weight_sd(key_sigma, V, num_weights, weight_precision_prior)
        hyper = hyper._replace(sigma_v=sigma_v)
        # the weights' Normal normalizer and the precision's Gamma density: both vary with sigma
        shape, rate = weight_precision_prior
        feature_log_prior += -num_weights * jnp.log(sigma_v) + gamma_distribution.logpdf(
            sigma_v**-2, shape, scale=1.0 / rate
        )
    new = IPM3FState(Z, V, theta, omega, alpha, sigma_v)
    x = _scores(data, Z, V)
    info = M3FInfo(
        lp=_hinge_log_posterior(data, hyper, feature_log_prior, V, theta, x),
        train_mae=_train_mae(data, theta, x),
        num_features=jnp.sum(m > 0).astype(jnp.int32),
        capacity_exceeded=exceeded,
        capacity_needed=needed,
        score_factors=(state.Z, V_mean * active),
    )
    return new, info


def _sample_weight_sd(key, V, num_weights, prior):
    """sigma_v given the active weights: 1/sigma_v^2 ~ Gamma(a + n/2, b + sum V^2 / 2), n the
    number of active weights (``V`` is zero outside the active columns). Returns sigma_v."""
    shape, rate = prior
    precision = jax.random.gamma(key, shape + 0.5 * num_weights, dtype=V.dtype) / (
        rate + 0.5 * jnp.sum(V**2)
    )
    return jax.lax.rsqrt(precision)


def _reference_log_prior(Z, counts, num_rows):
    """:math:`\\log p(Z \\mid \\text{reference users})` on the reference users' features:
    per feature, the Beta-Bernoulli marginal :math:`B(m_k + n_k, R - m_k + 1 + N - n_k) /
    B(m_k, R - m_k + 1)` (``m_k`` of ``R`` reference users hold it, ``n_k`` of ``Z``'s N)."""
    n = Z.sum(0)
    N = Z.shape[0]
    tail = num_rows - counts + 1.0
    return jnp.sum(betaln(counts + n, tail + N - n) - betaln(counts, tail))


def _ipm3f_fixed_items_step(data, hyper, reference, key, state, *, num_users):
    key_w, key_t, key_order, key_z = jax.random.split(key, 4)
    Z, V = state.Z, state.V
    x = _scores(data, Z, V)
    omega = _sample_omega(key_w, data, hyper, state.theta, x)
    theta = _sample_theta(key_t, data, hyper, omega, x, num_users)
    b, xi = _pair_terms(data, hyper, theta, omega)
    K = Z.shape[1]
    order = jax.random.permutation(key_order, K)
    Z, x = _redraw_columns(key_z, data, b, xi, Z, V, order, K, reference)
    new = state._replace(Z=Z, theta=theta, omega=omega)
    info = M3FInfo(
        lp=_hinge_log_posterior(data, hyper, _reference_log_prior(Z, *reference), V, theta, x),
        train_mae=_train_mae(data, theta, x),
        num_features=jnp.sum(Z.sum(0) > 0).astype(jnp.int32),
        capacity_exceeded=jnp.zeros((), bool),
        capacity_needed=jnp.zeros((), jnp.int32),
        score_factors=(state.Z, V),
    )
    return new, info


def _ipm3f_fixed_items_init(data, hyper, reference, V, key, *, num_users, alpha):
    key_z, key_w = jax.random.split(key)
    counts, num_rows = reference
    dtype = data.signs.dtype
    # each new user as the next customer of the reference users' buffet
    p_on = counts / (num_rows + 1.0)
    Z = (jax.random.uniform(key_z, (num_users, counts.shape[0]), dtype) < p_on).astype(dtype)
    theta = jnp.broadcast_to(hyper.rho, (num_users, hyper.rho.shape[0])).astype(dtype)
    omega = _sample_omega(key_w, data, hyper, theta, _scores(data, Z, V))
    return IPM3FState(Z, V, theta, omega, jnp.asarray(alpha, dtype), hyper.sigma_v.astype(dtype))


def _reference_features(item_factors, feature_counts, num_reference_users, num_items, dtype):
    """Check the strong-generalization inputs of :func:`ipm3f_gibbs`; returns ``None`` or
    ``(V, (counts, num_reference_users))``."""
    given = [v is not None for v in (item_factors, feature_counts, num_reference_users)]
    if not any(given):
        return None
    if not all(given):
        raise ValueError(
            "item_factors, feature_counts and num_reference_users go together (the fixed "
            "features' weights, how many reference users hold each, and how many there are)"
        )
    V = _item_factors(item_factors, num_items)
    rows = _positive_int(num_reference_users, "num_reference_users")
    counts = np.asarray(feature_counts, dtype=float)
    if counts.shape != (V.shape[1],):
        raise ValueError(
            f"feature_counts must have one count per column of item_factors ({V.shape[1]}), "
            f"got shape {counts.shape}"
        )
    if not np.all(np.isfinite(counts)) or np.any(counts != np.round(counts)):
        raise ValueError("feature_counts must be integers")
    if counts.min() < 1 or counts.max() > rows:
        raise ValueError(
            "feature_counts must lie in 1..num_reference_users: a fixed feature is one that "
            f"some reference user holds (got {counts.min():g}..{counts.max():g}, {rows} users)"
        )
    return jnp.asarray(V, dtype), (jnp.asarray(counts, dtype), rows)


def _ipm3f_init(data, hyper, key, *, num_users, num_items, capacity, alpha, num_init_features):
    key_z, key_v, key_w = jax.random.split(key, 3)
    dtype = data.signs.dtype
    slots = jnp.arange(capacity) < num_init_features
    Z = ((jax.random.uniform(key_z, (num_users, capacity)) < 0.5) & slots).astype(dtype)
    V = 0.1 * hyper.sigma_v * jax.random.normal(key_v, (num_items, capacity), dtype) * slots
    theta = jnp.broadcast_to(hyper.rho, (num_users, hyper.rho.shape[0])).astype(dtype)
    omega = _sample_omega(key_w, data, hyper, theta, _scores(data, Z, V))
    return IPM3FState(Z, V, theta, omega, jnp.asarray(alpha, dtype), hyper.sigma_v.astype(dtype))


def _ipm3f_trace(data, test, state, info, *, keep_factors, fixed_items=False):
    posterior = {"num_features": info.num_features, "theta": state.theta}
    if not fixed_items:
        posterior.update(alpha=state.alpha, sigma_v=state.sigma_v)
    if keep_factors:
        posterior["Z"] = state.Z
        if not fixed_items:
            posterior["V"] = state.V
    stats = {"lp": info.lp, "train_mae": info.train_mae}
    if test is not None:
        stats.update(_test_trace(test, state.Z, state.V, state.theta, info))
    return {"posterior": posterior, "sample_stats": stats}


def _ipm3f_grow(state: IPM3FState, capacity: int) -> IPM3FState:
    return state._replace(Z=pad_axis(state.Z, 1, capacity), V=pad_axis(state.V, 1, capacity))


def ipm3f_gibbs(
    data: M3FData,
    *,
    hyper: M3FHyper | None = None,
    alpha: float = 3.0,
    kappa: int = 10,
    capacity: int = 32,
    num_init_features: int = 8,
    test=None,
    keep_factors: bool = True,
    alpha_prior: tuple[float, float] | None = None,
    feature_step: str = "sequential",
    weight_precision_prior: tuple[float, float] | None = None,
    item_factors=None,
    feature_counts=None,
    num_reference_users: int | None = None,
) -> SamplingAlgorithm:
    """Gibbs iPM3F (module docstring) as a kernel for :func:`bnpjax.sample`: ``Z ~ IBP(alpha)``
    (alpha fixed at the authors' 3 unless ``alpha_prior`` is given), at most ``kappa`` new
    features per user per sweep (the authors' 10), a feature buffer of ``capacity`` columns
    grown by the driver. ``hyper``'s ``sigma_v`` is the weight sd :math:`\\sigma`. ``test`` and
    ``keep_factors`` as in :func:`gibbs`.

    ``alpha_prior = (a, b)`` puts a Gamma(shape a, rate b) hyperprior on alpha (``alpha`` is
    then the starting value) and adds its conjugate draw to every sweep,
    :math:`\\alpha \\mid Z \\sim \\mathrm{Gamma}(a + K_+, b + H_N)` (seed 002; the IBP pmf is
    :math:`\\alpha^{K_+} e^{-\\alpha H_N}` times terms free of alpha; exact up to the kappa
    truncation of new features, whose normalizer the conditional leaves out).

    ``feature_step``: ``"sequential"`` (the authors' sampler: users in turn, each flipping the
    shared features and redrawing its singletons) or ``"parallel"`` (module docstring,
    "Row-parallel iPM3F": instantiated columns in turn, all users at once in each, then all
    users' singletons at once; no loop over users, so it suits a GPU).

    ``weight_precision_prior = (a, b)`` puts a Gamma(shape a, rate b) hyperprior on the weight
    precision :math:`1/\\sigma^2` (``hyper.sigma_v`` is then the starting value) and ends every
    sweep with its conjugate draw, :math:`1/\\sigma^2 \\mid V \\sim \\mathrm{Gamma}(a + M K_+/2,
    b + \\sum_{j, k \\text{ active}} V_{jk}^2/2)`. The scale of the weights then comes from the
    data instead of being fixed at the authors' :math:`\\sigma = 1` (module docstring, "Weight
    scale", for what it did on MovieLens).

    Strong generalization (``../shared/design/m3f.md``): ``item_factors=V`` (``(num_items,
    K)``), ``feature_counts=m`` and ``num_reference_users=R`` hold the item side at a draw of
    a run on R other users, of whom :math:`m_k` hold feature k, and fit this data's users as
    new customers of that buffet. Their prior is the IBP given the reference users' Z,
    restricted to its K features: :math:`z_{ik} \\mid \\pi_k \\sim
    \\mathrm{Bernoulli}(\\pi_k)`, :math:`\\pi_k \\sim \\mathrm{Beta}(m_k, R - m_k + 1)`,
    so :math:`p(z_{ik} = 1 \\mid Z_{-i}) = (m_k + n_{-ik}) / (R + N)` as in the buffet.
    (A new user's new dishes are Poisson and independent of its choices among existing
    ones, so leaving them out conditions on their absence and changes no other
    conditional; with V fixed, their weights would come from the new users alone.)
    The sweep is :math:`\\lambda`, :math:`\\theta`, then every column in a random order
    with all users at once given :math:`\\pi_k \\mid z_k \\sim \\mathrm{Beta}(m_k + n_k,
    R + N - m_k - n_k + 1)`: exact Gibbs for :math:`q(Z, \\theta \\mid Y, V, Z_{ref})`.
    ``alpha``, ``kappa`` and the weight scale play no part; ``V`` is never traced."""
    if hyper is None:
        hyper = make_hyper(int(data.signs.shape[1]) + 1)
    _check_common(data, hyper)
    sizes = dict(num_users=data.user_degree.shape[0], num_items=data.item_degree.shape[0])
    fixed = _reference_features(
        item_factors, feature_counts, num_reference_users, sizes["num_items"], data.signs.dtype
    )
    if fixed is not None:
        if alpha_prior is not None or weight_precision_prior is not None:
            raise ValueError(
                "alpha_prior and weight_precision_prior have no part with fixed item_factors"
            )
        V, reference = fixed
        return SamplingAlgorithm(
            init=bind(
                _ipm3f_fixed_items_init,
                data,
                hyper,
                reference,
                V,
                num_users=sizes["num_users"],
                alpha=float(alpha),
            ),
            step=bind(
                _ipm3f_fixed_items_step, data, hyper, reference, num_users=sizes["num_users"]
            ),
            trace=bind(
                _ipm3f_trace,
                data,
                _test_arrays(test, data),
                keep_factors=bool(keep_factors),
                fixed_items=True,
            ),
            spec=ArvizSpec(
                name="m3f.ipm3f_gibbs",
                dims=_dims("Z", "feature"),
                settings={
                    "fixed_items": True,
                    "num_reference_users": reference[1],
                    "C": float(hyper.C),
                },
            ),
        )
    kappa = _positive_int(kappa, "kappa")
    capacity = _positive_int(capacity, "capacity")
    if capacity < kappa:
        raise ValueError(f"capacity ({capacity}) must be at least kappa ({kappa})")
    if not (np.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be positive, got {alpha}")
    alpha_prior = _gamma_prior(alpha_prior, "alpha_prior")
    weight_precision_prior = _gamma_prior(weight_precision_prior, "weight_precision_prior")
    if feature_step not in FEATURE_STEPS:
        raise ValueError(f"feature_step must be one of {FEATURE_STEPS}, got {feature_step!r}")
    num_init_features = _positive_int(num_init_features, "num_init_features", 0)
    if num_init_features > capacity:
        raise ValueError(
            f"num_init_features ({num_init_features}) must be at most capacity ({capacity})"
        )
    test_arrays = _test_arrays(test, data)
    settings = dict(
        hyper=hyper,
        alpha=alpha,
        alpha_prior=alpha_prior,
        feature_step=feature_step,
        weight_precision_prior=weight_precision_prior,
        kappa=kappa,
        num_init_features=num_init_features,
        test=test,
        keep_factors=keep_factors,
    )
    return SamplingAlgorithm(
        init=bind(
            _ipm3f_init,
            data,
            hyper,
            capacity=capacity,
            alpha=float(alpha),
            num_init_features=num_init_features,
            **sizes,
        ),
        step=bind(
            _ipm3f_step,
            data,
            hyper,
            kappa=kappa,
            alpha_prior=alpha_prior,
            feature_step=feature_step,
            weight_precision_prior=weight_precision_prior,
            **sizes,
        ),
        trace=bind(_ipm3f_trace, data, test_arrays, keep_factors=bool(keep_factors)),
        spec=ArvizSpec(
            name="m3f.ipm3f_gibbs",
            dims=_dims("Z", "feature"),
            settings={
                "kappa": kappa,
                "alpha": float(alpha),
                "alpha_prior": "fixed" if alpha_prior is None else list(alpha_prior),
                "feature_step": feature_step,
                "weight_precision_prior": (
                    "fixed" if weight_precision_prior is None else list(weight_precision_prior)
                ),
                "C": float(hyper.C),
            },
        ),
        capacity=capacity,
        resize=lambda c: ipm3f_gibbs(data, capacity=c, **settings),
        grow_state=_ipm3f_grow,
    )


def ipm3f_prior_sample(
    key,
    data: M3FData,
    hyper: M3FHyper,
    alpha,
    capacity: int,
    alpha_prior=None,
    weight_precision_prior=None,
    item_factors=None,
    feature_counts=None,
    num_reference_users=None,
) -> IPM3FState:
    """``Z ~ IBP(alpha)`` (buffet process), active ``V`` from the prior, thresholds from their
    prior, ``lambda ~ Exponential(rate c/2)`` (the Geweke construction). With
    ``alpha_prior = (a, b)``, alpha is drawn from Gamma(a, rate b) first; with
    ``weight_precision_prior = (a, b)``, the weight precision from Gamma(a, rate b).

    With ``item_factors``, ``feature_counts`` and ``num_reference_users`` (strong
    generalization, :func:`ipm3f_gibbs`), ``V`` is the given one and ``Z`` comes from the
    reference users' buffet: :math:`\\pi_k \\sim \\mathrm{Beta}(m_k, R - m_k + 1)`, then
    :math:`z_{ik} \\sim \\mathrm{Bernoulli}(\\pi_k)` for every user (``capacity`` unused)."""
    key_z, key_rest, key_alpha, key_sigma = jax.random.split(key, 4)
    dtype = data.signs.dtype
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    fixed = _reference_features(item_factors, feature_counts, num_reference_users, M, dtype)
    if fixed is not None:
        V, (counts, num_rows) = fixed
        g = jax.random.gamma(key_z, jnp.stack([counts, num_rows - counts + 1.0]), dtype=dtype)
        pi = g[0] / (g[0] + g[1])
        Z = (jax.random.uniform(key_alpha, (N, V.shape[1]), dtype) < pi).astype(dtype)
        base = prior_sample(key_rest, data, hyper, V.shape[1])
        return IPM3FState(
            Z, V, base.theta, base.omega, jnp.asarray(alpha, dtype), hyper.sigma_v.astype(dtype)
        )
    if alpha_prior is not None:
        shape, rate = _gamma_prior(alpha_prior, "alpha_prior")
        alpha = jax.random.gamma(key_alpha, shape, dtype=dtype) / rate
    if weight_precision_prior is not None:
        shape, rate = _gamma_prior(weight_precision_prior, "weight_precision_prior")
        precision = jax.random.gamma(key_sigma, shape, dtype=dtype) / rate
        hyper = hyper._replace(sigma_v=jax.lax.rsqrt(precision))
    draw = ibp.sample_buffet(key_z, alpha, data.user_degree.shape[0], capacity)
    base = prior_sample(key_rest, data, hyper, capacity)
    V = base.V * draw.active
    return IPM3FState(
        draw.Z.astype(dtype),
        V,
        base.theta,
        base.omega,
        jnp.asarray(alpha, dtype),
        jnp.asarray(hyper.sigma_v, dtype),
    )


# --------------------------------------------------------------------------------------------
# prediction


def predictive_distribution(levels, num_levels: int) -> np.ndarray:
    """Share of draws at each level ``1..L`` per test pair, from ``level_test`` draws
    (``(..., n_test)``, leading axes = draws): the pseudo-posterior predictive distribution
    of the rating-level rule. Returns (n_test, L)."""
    levels = np.asarray(levels).reshape(-1, np.shape(levels)[-1])
    counts = np.stack([(levels == k).mean(0) for k in range(1, num_levels + 1)], axis=1)
    return counts


def predict_levels(draws, test_users, *, rule: str = "score", score: str = "score_test_rb"):
    """Predicted rating levels of the test pairs of a fit made with ``test=(users, items)``.

    ``rule="score"``: the authors' rating-level rule on posterior means,
    :math:`\\hat y = 1 + \\#\\{r : \\bar\\theta_{ir} < \\bar x_{ij}\\}`
    (:func:`levels_from_scores`), with :math:`\\bar x` the posterior mean of ``score``
    (``"score_test_rb"``, the Rao-Blackwellized score, or ``"score_test"``, the drawn one) and
    :math:`\\bar\\theta` that of the thresholds. ``rule="median"``: the median of the
    pseudo-posterior predictive distribution of the level (:func:`predictive_distribution`),
    the level that minimizes the expected absolute error.

    ``draws``: the InferenceData of :func:`bnpjax.sample`, the ``trace`` of
    :func:`bnpjax.infer.run`, or a list of them (pooled: several runs or chains);
    ``test_users``: the test pairs' users (``test[0]``). Returns integer levels (n_test,)."""
    if rule not in ("score", "median"):
        raise ValueError(f"rule must be 'score' or 'median', got {rule!r}")
    if score not in ("score_test_rb", "score_test"):
        raise ValueError(f"score must be 'score_test_rb' or 'score_test', got {score!r}")

    test_users = _integer_array(test_users, "test_users")
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


# --------------------------------------------------------------------------------------------
# the optimization baseline (Rennie & Srebro 2005)


def _smooth_hinge(z):
    """Rennie & Srebro's smooth hinge: 1/2 - z (z <= 0), (1 - z)^2 / 2 (0 < z < 1), 0."""
    return jnp.where(z <= 0, 0.5 - z, jnp.where(z < 1, 0.5 * (1 - z) ** 2, 0.0))


def fit_map(
    data: M3FData,
    *,
    rank: int | None = None,
    reg: float = 1.0,
    max_iter: int = 500,
    seed: int = 0,
    init_scale: float = 0.1,
    item_factors=None,
):
    """Fast max-margin matrix factorization (Rennie & Srebro 2005): minimize

    .. math::

        \\sum_{ij \\in \\mathcal I} \\sum_r h\\big(T^r_{ij}(\\theta_{ir} - U_i \\cdot V_j)\\big)
            + \\frac{\\mathrm{reg}}2 (\\|U\\|^2 + \\|V\\|^2)

    with the smooth hinge ``h`` and per-user thresholds, by L-BFGS (``optax.lbfgs`` with its
    zoom line search) in one jitted ``lax.fori_loop`` of ``max_iter`` iterations. Returns
    ``(U, V, theta, final objective)``; predict with :func:`levels_from_scores`. ``rank``
    defaults to 10. ``item_factors=V`` holds ``V`` fixed and minimizes over ``U`` and the
    thresholds only (strong generalization, as in :func:`gibbs`)."""
    max_iter = _positive_int(max_iter, "max_iter")
    if not (np.isfinite(reg) and reg > 0):
        raise ValueError(f"reg must be positive, got {reg}")
    N, M = data.user_degree.shape[0], data.item_degree.shape[0]
    dtype = data.signs.dtype
    rank, fixed = _fixed_items(item_factors, None, False, rank, M, dtype)
    key_u, key_v = jax.random.split(jax.random.key(seed))
    L1 = data.signs.shape[1]
    params = {
        "U": init_scale * jax.random.normal(key_u, (N, rank), dtype),
        "theta": jnp.broadcast_to(jnp.linspace(-1.5, 1.5, L1, dtype=dtype), (N, L1)),
    }
    if fixed is None:
        params["V"] = init_scale * jax.random.normal(key_v, (M, rank), dtype)
    fixed_V = None if fixed is None else fixed[0]
    return _fit_map(data, params, fixed_V, jnp.asarray(reg, dtype), max_iter)


@functools.partial(jax.jit, static_argnames="max_iter")
def _fit_map(data, params, fixed_V, reg, max_iter):
    import optax

    def item_side(p):
        return p["V"] if fixed_V is None else fixed_V

    def objective(p):
        V = item_side(p)
        x = _scores(data, p["U"], V)
        z = data.signs * (p["theta"][data.users] - x[:, None])
        penalty = jnp.sum(p["U"] ** 2) + (jnp.sum(V**2) if fixed_V is None else 0.0)
        return jnp.sum(_smooth_hinge(z)) + 0.5 * reg * penalty

    opt = optax.lbfgs()
    value_and_grad = optax.value_and_grad_from_state(objective)

    def body(_, carry):
        p, s = carry
        value, grad = value_and_grad(p, state=s)
        updates, s = opt.update(grad, s, p, value=value, grad=grad, value_fn=objective)
        return optax.apply_updates(p, updates), s

    p, _ = jax.lax.fori_loop(0, max_iter, body, (params, opt.init(params)))
    return p["U"], item_side(p), p["theta"], objective(p)
