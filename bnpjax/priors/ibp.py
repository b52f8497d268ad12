r"""The Indian buffet process prior, ``Z ~ IBP(alpha)``.

Reference: Griffiths & Ghahramani (2011), *The Indian buffet process: an introduction and
review*, JMLR 12, 1185-1224.

A draw is an ``N x infinity`` binary matrix with finitely many non-zero columns. bnpjax stores it
in a fixed-capacity buffer: ``Z`` of shape ``(N, capacity)`` and the column mask
``active = Z.sum(0) > 0``; inactive columns are all zero. Column order carries no meaning.

Generative process (Griffiths & Ghahramani 2011, "The Indian Buffet Process"): customer
``i = 1..N`` takes each previously sampled dish ``k`` with probability ``m_k / i`` and
``Poisson(alpha / i)`` new dishes.

Probability of a matrix (Griffiths & Ghahramani 2011, the equation after Figure 2.1):

.. math::

    P(Z) = \frac{\alpha^{K_+}}{\prod_{i=1}^{N} K_1^{(i)}!}\, e^{-\alpha H_N}
        \prod_{k=1}^{K_+} \frac{(N - m_k)!\,(m_k - 1)!}{N!},

with :math:`K_1^{(i)}` the number of new dishes of customer ``i``: the probability of the matrix
as the buffet generates it (columns in order of first appearance). The probability of its
left-ordered-form equivalence class :math:`[Z]` (Griffiths & Ghahramani 2011, eq. 14), the
distribution of column-exchangeable statistics, replaces :math:`\prod_i K_1^{(i)}!` by
:math:`\prod_{h} K_h!`, :math:`K_h` the number of columns with history ``h``.

Gibbs conditionals (Griffiths & Ghahramani 2011, "Gibbs Sampler for Indian Buffet Process", in
the exchangeable form): an existing column with :math:`m_{-i,k} > 0` has
:math:`P(z_{ik} = 1 \mid Z_{-(ik)}) = m_{-i,k} / N`; row ``i`` then takes
:math:`\mathrm{Poisson}(\alpha / N)` new columns in place of its singletons.

Row-parallel samplers (:func:`active_column_order`, :func:`feature_log_odds`,
:func:`sample_nonempty_column`; used by ``ibp_lg.parallel_gibbs`` and iPM3F's
``feature_step="parallel"``). The IBP is the Bernoulli-process limit of a beta process: its
features are the points :math:`(\pi, h)` of a Poisson process with intensity
:math:`\alpha \pi^{-1} \prod_{i=1}^N \pi^{h_i} (1 - \pi)^{1 - h_i}\, d\pi` over
probabilities :math:`\pi \in (0, 1)` and non-empty columns :math:`h \in \{0,1\}^N`. Three
exact conditionals follow, whatever the likelihood: a point's probability given its column,
:math:`\pi_k \mid h_k \sim \mathrm{Beta}(m_k, N - m_k + 1)`; a point's column given its
probability (and the likelihood), independent Bernoulli entries restricted to
:math:`h_k \neq 0`, since redrawing one point's column cannot delete the point; and the
points with exactly one owner, which form a Poisson process independent of the others:
:math:`\mathrm{Poisson}(\alpha \int_0^1 (1 - \pi)^{N-1} d\pi) = \mathrm{Poisson}(\alpha / N)`
of them per row, independently across rows. So a sweep can redraw each shared column for all
rows at once and then every row's singletons at once.

Hyperprior: :math:`\alpha \sim \mathrm{Gamma}(a, \text{rate } b)` gives
:math:`\alpha \mid Z \sim \mathrm{Gamma}(a + K_+, \text{rate } b + H_N)` (Griffiths &
Ghahramani 2011, last equation, where ``b`` is a scale: rate = 1 / scale).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from bnpjax.infer.checks import (
    check_integer,
    check_positive_if_concrete,
    check_real_array,
    concrete,
)
from bnpjax.ops import sample_categorical, truncated_poisson_log_pmf
from bnpjax.ops.gamma import sample_gamma

__all__ = [
    "IBPDraw",
    "active_column_order",
    "alpha_posterior",
    "feature_log_odds",
    "harmonic_number",
    "log_prob",
    "new_feature_log_prior",
    "place_new_features",
    "sample_alpha",
    "sample_buffet",
    "sample_nonempty_column",
    "sample_stick_breaking",
]


class IBPDraw(NamedTuple):
    """``Z`` (N, capacity) in {0, 1}, ``active`` (capacity,) and ``num_needed``: the number of
    columns the draw has (larger than capacity when the buffer was too small; then the extra
    columns are missing from ``Z``)."""

    Z: jax.Array
    active: jax.Array
    num_needed: jax.Array


def _check_rows(num_rows, name: str = "num_rows"):
    """``num_rows`` must be a positive integer when it is concrete (a shape, or a count)."""
    host = concrete(num_rows)
    if host is None:
        return num_rows
    if host.ndim == 0 and host.dtype.kind in "iu":
        return check_integer(host.item(), name, 1)
    if (
        host.dtype.kind not in "iuf"
        or not np.all(np.isfinite(host))
        or not np.all(host == np.round(host))
        or not np.all(host >= 1)
    ):
        raise ValueError(f"{name} must be an integer >= 1, got {num_rows!r}")
    return num_rows


def _check_binary(Z, name: str = "Z"):
    """``Z`` as an array, refused unless it is a 2-D matrix of zeros and ones (checked when
    it is concrete)."""
    if jnp.ndim(Z) != 2:
        raise ValueError(
            f"{name} must be a 2-D (num_rows, num_columns) matrix, got shape {jnp.shape(Z)}"
        )
    if concrete(Z) is None:
        return Z
    host = check_real_array(Z, name, finite=False)
    if not np.all((host == 0) | (host == 1)):
        raise ValueError(f"{name} must be a binary matrix of zeros and ones (no NaN)")
    return host


def harmonic_number(n) -> jax.Array:
    r""":math:`H_n = \sum_{i=1}^n 1/i` (as digamma(n + 1) + Euler's gamma, exact for integers)."""
    n = jnp.asarray(n, jnp.result_type(float))
    return jax.scipy.special.digamma(n + 1.0) + np.euler_gamma


def sample_buffet(key, alpha, num_rows: int, capacity: int) -> IBPDraw:
    """Draw ``Z ~ IBP(alpha)`` by the buffet process (module docstring), customers in order:
    Griffiths & Ghahramani (2011), section "The Indian buffet process":
    customer ``i`` takes dish ``k`` with probability ``m_k / i`` and ``Poisson(alpha / i)`` new
    dishes.

    New dishes fill the next free columns, so active columns come first. A run of
    ``num_rows`` compiled steps of ``O(capacity)`` each. A draw with more dishes than
    ``capacity`` keeps the first ``capacity`` of them and reports how many it had in
    ``num_needed`` (compare it with ``capacity``, or size the buffer with
    :func:`bnpjax.priors.capacity_for`).

    Raises
    ------
    ValueError
        for ``alpha`` not positive and finite, or ``num_rows`` / ``capacity`` not positive
        integers.
    """
    check_positive_if_concrete(alpha, "alpha")
    num_rows = check_integer(num_rows, "num_rows", 1)
    capacity = check_integer(capacity, "capacity", 1)
    dtype = jnp.result_type(float)
    alpha = jnp.asarray(alpha, dtype)

    def customer(carry, i):
        counts, total = carry
        key_old, key_new = jax.random.split(jax.random.fold_in(key, i))
        n = (i + 1).astype(dtype)
        take_old = jax.random.uniform(key_old, (capacity,), dtype) < counts / n
        new = jax.random.poisson(key_new, alpha / n).astype(jnp.int32)
        slot = jnp.arange(capacity)
        take_new = (slot >= total) & (slot < total + new)
        row = (take_old & (counts > 0)) | take_new
        return (counts + row, total + new), row

    init = (jnp.zeros(capacity, dtype), jnp.zeros((), jnp.int32))
    (counts, total), Z = jax.lax.scan(customer, init, jnp.arange(num_rows))
    return IBPDraw(Z.astype(dtype), counts > 0, total)


def sample_stick_breaking(key, alpha, num_rows: int, truncation: int) -> IBPDraw:
    r"""Draw ``Z`` by the stick-breaking construction (Teh, Gorur & Ghahramani 2007):
    :math:`\nu_j \sim \mathrm{Beta}(\alpha, 1)`, :math:`\mu_k = \prod_{j \le k} \nu_j`,
    :math:`z_{ik} \sim \mathrm{Bernoulli}(\mu_k)`, for ``k < truncation``. The columns beyond
    the truncation carry total probability :math:`E[\mu_T] = (\alpha / (1 + \alpha))^T`.
    Returned in the buffer layout (empty columns inactive, not compacted)."""
    check_positive_if_concrete(alpha, "alpha")
    num_rows = check_integer(num_rows, "num_rows", 1)
    truncation = check_integer(truncation, "truncation", 1)
    dtype = jnp.result_type(float)
    key_nu, key_z = jax.random.split(key)
    log_nu = jnp.log(jax.random.beta(key_nu, alpha, 1.0, (truncation,), dtype))
    mu = jnp.exp(jnp.cumsum(log_nu))
    Z = (jax.random.uniform(key_z, (num_rows, truncation), dtype) < mu).astype(dtype)
    active = Z.sum(0) > 0
    return IBPDraw(Z, active, jnp.sum(active))


def log_prob(Z, alpha, *, form: str = "lof") -> jax.Array:
    """Log probability of a binary matrix under ``IBP(alpha)`` (module docstring).

    ``form="lof"``: of its left-ordered-form equivalence class (``prod_h K_h!``), the
    probability of everything invariant to column order; ``form="buffet"``: of the matrix as
    the buffet process generates it (Griffiths & Ghahramani's formula, ``prod_i K_1^(i)!``),
    for ``Z`` whose
    columns are in order of first appearance. All-zero columns are ignored, so padded buffers
    are accepted. Costs ``O(N K^2)`` for "lof" (columns compared pairwise).
    """
    if form not in ("lof", "buffet"):
        raise ValueError(f"form must be 'lof' or 'buffet', got {form!r}")
    Z = _check_binary(Z)
    check_positive_if_concrete(alpha, "alpha")
    Z = jnp.asarray(Z)
    dtype = jnp.result_type(float)
    alpha = jnp.asarray(alpha, dtype)
    N = Z.shape[0]
    binary = Z > 0
    m = binary.sum(0).astype(dtype)
    active = m > 0
    k_plus = active.sum()
    if form == "lof":
        same = jnp.all(binary[:, :, None] == binary[:, None, :], axis=0)
        same = same & active[:, None] & active[None, :]
        group = jnp.maximum(same.sum(1), 1).astype(dtype)
        # each history group of size K_h contributes log K_h! once, spread over its K_h columns
        log_multiplicity = jnp.sum(jnp.where(active, gammaln(group + 1) / group, 0.0))
    else:
        first = jnp.argmax(binary, axis=0)
        new_per_row = jnp.zeros(N, dtype).at[first].add(active.astype(dtype))
        log_multiplicity = jnp.sum(gammaln(new_per_row + 1))
    per_column = gammaln(N - m + 1) + gammaln(jnp.maximum(m, 1)) - gammaln(N + 1.0)
    return (
        k_plus * jnp.log(alpha)
        - log_multiplicity
        - alpha * harmonic_number(N)
        + jnp.sum(jnp.where(active, per_column, 0.0))
    )


def alpha_posterior(num_active, num_rows, shape, rate) -> tuple[jax.Array, jax.Array]:
    """Shape and rate of ``alpha | Z ~ Gamma(shape + K_+, rate + H_N)`` (Griffiths &
    Ghahramani 2011)."""
    check_positive_if_concrete(shape, "shape")
    check_positive_if_concrete(rate, "rate")
    _check_rows(num_rows)
    return shape + num_active, rate + harmonic_number(num_rows)


def sample_alpha(key, num_active, num_rows, shape, rate) -> jax.Array:
    """Draw ``alpha | Z`` from its conjugate Gamma conditional (:func:`alpha_posterior`):
    Griffiths & Ghahramani (2011), ``alpha | Z ~ Gamma(a + K_+, (1/b + H_N)^-1)`` with the
    paper's scale ``b``; here ``rate`` is ``1/b``."""
    a, b = alpha_posterior(num_active, num_rows, shape, rate)
    dtype = jnp.result_type(float)
    return sample_gamma(key, jnp.asarray(a, dtype), dtype) / b


def new_feature_log_prior(alpha, num_rows, kappa: int) -> jax.Array:
    """Log prior of ``k = 0..kappa`` new features for one row: Poisson(alpha / N) truncated at
    ``kappa`` (Griffiths & Ghahramani 2011; the truncation level of Xu, Zhu & Zhang 2013),
    shape ``(..., kappa + 1)``."""
    kappa = check_integer(kappa, "kappa", 0)
    check_positive_if_concrete(alpha, "alpha")
    _check_rows(num_rows)
    k = jnp.arange(kappa + 1)
    rate = jnp.asarray(alpha, jnp.result_type(float)) / num_rows
    return truncated_poisson_log_pmf(k, rate[..., None], kappa)


def place_new_features(free, counts) -> tuple[jax.Array, jax.Array]:
    """Assign new columns to rows: ``free`` (capacity,) marks free slots, ``counts`` (N,) the
    number of new features per row. Row ``i`` gets the free slots of rank
    ``sum(counts[:i]) .. sum(counts[:i+1]) - 1`` (lowest slots first, so the layout does not
    depend on the capacity). Returns the new ``(N, capacity)`` indicator block and the number
    of slots needed beyond the free ones (0 when everything fit)."""
    counts = counts.astype(jnp.int32)
    rank = jnp.cumsum(free) - 1  # rank among free slots
    ends = jnp.cumsum(counts)
    starts = ends - counts
    owned = free[None, :] & (rank[None, :] >= starts[:, None]) & (rank[None, :] < ends[:, None])
    shortfall = jnp.maximum(ends[-1] - jnp.sum(free), 0).astype(jnp.int32)
    return owned, shortfall


def active_column_order(key, Z) -> jax.Array:
    """Slot indices with the active columns of ``Z`` first, in a uniformly random order (a
    random scan, so that no column is favoured by its slot label), the inactive ones after
    them. The row-parallel samplers visit the first ``sum(active)`` of them. One uniform per
    slot: the order of the existing columns does not change when the buffer grows."""
    active = Z.sum(0) > 0
    return jnp.argsort(jnp.where(active, jax.random.uniform(key, active.shape), 2.0))


def feature_log_odds(key, z_k, reference_count=0.0, num_reference_rows=0) -> jax.Array:
    """Draw an instantiated feature's probability :math:`\\pi_k \\mid z_k \\sim
    \\mathrm{Beta}(m_k, N - m_k + 1)` (the finite-model limit of the row-parallel samplers)
    and return its log-odds :math:`\\log \\pi_k / (1 - \\pi_k)`. Beta(a, b) is
    :math:`G_a / (G_a + G_b)` with Gamma draws, so the log-odds is :math:`\\log G_a - \\log
    G_b`: one Gamma sampler in a compiled loop, and finite even where :math:`\\pi_k` would
    round to 1 in float32.

    The beta-process representation behind it (module docstring, "Row-parallel samplers") is
    agrees with the Gibbs prior of Griffiths & Ghahramani (2011): integrating ``pi_k`` out of
    ``Bernoulli(pi_k)`` gives ``m_{-i,k} / N``, the exchangeable form.

    ``reference_count`` and ``num_reference_rows`` add rows held fixed outside ``z_k`` (new
    customers of a buffet whose first ``num_reference_rows`` customers are known): ``m_k``
    and ``N`` then count them too."""
    N = z_k.shape[0] + num_reference_rows
    m_k = jnp.sum(z_k) + reference_count
    # max(m_k, 1): an empty column is never visited, but a batched loop evaluates it anyway
    g = sample_gamma(key, jnp.stack([jnp.maximum(m_k, 1.0), N - m_k + 1.0]), z_k.dtype)
    return jnp.log(g[0]) - jnp.log(g[1])


def sample_nonempty_column(key, log_odds) -> jax.Array:
    """Draw independent ``z_i ~ Bernoulli(sigmoid(log_odds_i))`` conditioned on at least one
    ``z_i = 1``, exactly and in parallel: the first row that is on, ``J``, has
    ``P(J = j) ∝ q_j prod_{i<j} (1 - q_i)``; rows before it are off, rows after it free.

    The row-parallel IBP samplers (Zhang, Dubey & Williamson 2017's hybrid scheme) redraw an
    instantiated column ``z_k | pi_k`` this way: the feature is a point of a Poisson process
    whose column is non-empty by definition (module docstring), so its column is drawn
    conditioned on staying non-empty. This is the instantiated counterpart of the Gibbs step
    of Griffiths & Ghahramani (2011) for an existing column, where a
    column left with ``m_{-i,k} = 0`` is deleted, not redrawn."""
    key_first, key_rest = jax.random.split(key)
    log_q = -jax.nn.softplus(-log_odds)
    log_1mq = -jax.nn.softplus(log_odds)
    before = jnp.cumsum(log_1mq) - log_1mq  # exclusive prefix sums
    first = sample_categorical(key_first, log_q + before)
    rows = jnp.arange(log_odds.shape[0])
    free = jnp.log(jax.random.uniform(key_rest, log_odds.shape, log_odds.dtype)) < log_q
    return jnp.where(rows < first, False, jnp.where(rows == first, True, free))
