r"""The Indian buffet process as a NumPyro distribution, for use inside NumPyro models.

``IndianBuffetProcess(alpha, num_rows, capacity)`` is a distribution over ``num_rows x
capacity`` binary matrices: an IBP draw (Griffiths & Ghahramani 2011, section "The Indian
buffet process") stored in bnpjax's fixed-capacity buffer, active columns first, the
rest zero. Its ``log_prob`` is the log probability of the matrix's left-ordered-form
equivalence class (Griffiths & Ghahramani 2011, eq. 14; :func:`bnpjax.priors.ibp.log_prob`),

.. math::

    \log P([Z]) = K_+ \log\alpha - \sum_h \log K_h! - \alpha H_N
        + \sum_{k=1}^{K_+} \log\frac{(N - m_k)!\,(m_k - 1)!}{N!},

a function of everything that does not depend on column order; all-zero columns are ignored,
so any number of padding columns is accepted. ``form="buffet"`` gives the probability of the
matrix as the buffet generates it instead (columns in order of first appearance). Both are
differentiable in ``alpha``, so NUTS can infer alpha from observed features::

    def model(Z):
        alpha = numpyro.sample("alpha", dist.Gamma(2.0, 1.0))
        numpyro.sample("Z", IndianBuffetProcess(alpha, *Z.shape), obs=Z)

(whose posterior is ``Gamma(2 + K_+, 1 + H_N)``, Griffiths & Ghahramani 2011: tested).

Capacity. A draw has ``K_+ ~ Poisson(alpha H_N)`` columns. With ``capacity=None`` and a concrete
``alpha`` the buffer is :func:`capacity_for` ``(alpha, num_rows)``, which a draw overflows with
probability below 1e-9. A draw that does not fit (possible when the capacity is given, or
when ``alpha`` is traced and large) loses its extra columns; ``sample`` then issues a
``RuntimeWarning`` from inside the compiled code rather than truncate silently.
"""

from __future__ import annotations

import warnings
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Distribution, constraints
from scipy import stats

from bnpjax.infer.base import concrete_or_none
from bnpjax.infer.checks import check_integer
from bnpjax.infer.keys import check_key
from bnpjax.priors import ibp

__all__ = ["IndianBuffetProcess", "capacity_for"]


def capacity_for(alpha: float, num_rows: int, tail: float = 1e-9) -> int:
    r"""The smallest buffer that an ``IBP(alpha)`` draw on ``num_rows`` rows overflows with
    probability at most ``tail``: the ``1 - tail`` quantile of
    :math:`K_+ \sim \mathrm{Poisson}(\alpha H_N)` (Griffiths & Ghahramani 2011: row ``i`` takes
    Poisson(alpha / i) new dishes), and at least 1."""
    num_rows = check_integer(num_rows, "num_rows")
    alpha = float(alpha)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ValueError(f"alpha must be a positive finite number, got {alpha!r}")
    if not 0 < tail < 1:
        raise ValueError(f"tail must lie in (0, 1), got {tail!r}")
    rate = alpha * float(np.sum(1.0 / np.arange(1, num_rows + 1)))
    capacity = int(stats.poisson.isf(tail, rate))
    while stats.poisson.sf(capacity, rate) > tail:  # isf of a discrete law can fall one short
        capacity += 1
    return max(capacity, 1)


def _warn_overflow(num_needed, capacity) -> None:
    needed = int(np.max(np.asarray(num_needed)))
    if needed > capacity:
        warnings.warn(
            f"an IndianBuffetProcess draw had {needed} features but the buffer holds "
            f"{capacity}; the extra columns are missing from the sample. Give a larger "
            "capacity (capacity_for(alpha, num_rows) for a concrete alpha).",
            RuntimeWarning,
            stacklevel=1,
        )


class IndianBuffetProcess(Distribution):
    r"""``Z ~ IBP(alpha)`` on ``num_rows`` rows in a buffer of ``capacity`` columns (module
    docstring).

    Parameters
    ----------
    alpha
        concentration, > 0; an array gives a batch of independent matrices.
    num_rows
        N, the number of rows (customers).
    capacity
        columns of the buffer; ``None`` picks :func:`capacity_for` ``(max alpha, num_rows)``
        (``alpha`` must then be concrete).
    form
        ``"lof"`` (default): ``log_prob`` of the left-ordered-form class; ``"buffet"``: of the
        matrix with columns in order of first appearance (module docstring).

    ``sample`` returns floats in {0, 1} of shape ``sample_shape + batch_shape + (num_rows,
    capacity)``; ``log_prob`` takes binary matrices with any number of columns.
    """

    arg_constraints: ClassVar[dict] = {"alpha": constraints.positive}
    support = constraints.independent(constraints.boolean, 2)
    is_discrete = True
    pytree_data_fields = ("alpha",)
    pytree_aux_fields = ("num_rows", "capacity", "form")

    def __init__(self, alpha, num_rows, capacity=None, *, form="lof", validate_args=None):
        num_rows = check_integer(num_rows, "num_rows")
        if form not in ("lof", "buffet"):
            raise ValueError(f"form must be 'lof' or 'buffet', got {form!r}")
        concrete = concrete_or_none(alpha)
        if concrete is not None and np.asarray(concrete).dtype.kind not in "iuf":
            raise ValueError(f"alpha must be a positive number, got {alpha!r}")
        if concrete is not None and not np.all(np.isfinite(concrete) & (concrete > 0)):
            raise ValueError(f"alpha must be positive and finite, got {concrete!r}")
        if capacity is None:
            if concrete is None:
                raise ValueError(
                    "capacity must be given when alpha is a traced value (inside a model "
                    "under inference); capacity_for(alpha, num_rows) gives a safe one"
                )
            capacity = capacity_for(float(np.max(concrete)), num_rows)
        capacity = check_integer(capacity, "capacity")
        self.alpha = jnp.asarray(alpha, jnp.result_type(float))
        self.num_rows = num_rows
        self.capacity = capacity
        self.form = form
        super().__init__(
            batch_shape=jnp.shape(self.alpha),
            event_shape=(num_rows, capacity),
            validate_args=validate_args,
        )

    def sample(self, key, sample_shape=()):
        """Buffet-process draws (:func:`bnpjax.priors.ibp.sample_buffet`), one per batch entry
        and sample, from independent keys."""
        shape = tuple(sample_shape) + self.batch_shape
        alphas = jnp.broadcast_to(self.alpha, shape).reshape(-1)
        keys = jax.random.split(check_key(key), alphas.shape[0])
        draws = jax.vmap(lambda k, a: ibp.sample_buffet(k, a, self.num_rows, self.capacity))(
            keys, alphas
        )
        if alphas.shape[0] > 0:
            jax.debug.callback(_warn_overflow, jnp.max(draws.num_needed), self.capacity)
        return draws.Z.reshape(shape + self.event_shape)

    def log_prob(self, value):
        """:func:`bnpjax.priors.ibp.log_prob` of each matrix (module docstring)."""
        value = jnp.asarray(value)
        if value.ndim < 2 or value.shape[-2] != self.num_rows:
            raise ValueError(f"value must have shape (..., {self.num_rows}, K), got {value.shape}")
        concrete = concrete_or_none(value)
        if concrete is not None and not np.all((concrete == 0) | (concrete == 1)):
            raise ValueError("value must be a binary (0/1) matrix")
        batch = jnp.broadcast_shapes(value.shape[:-2], self.batch_shape)
        matrices = jnp.broadcast_to(value, batch + value.shape[-2:]).reshape(
            (-1, *value.shape[-2:])
        )
        alphas = jnp.broadcast_to(self.alpha, batch).reshape(-1)
        log_p = jax.vmap(lambda z, a: ibp.log_prob(z, a, form=self.form))(matrices, alphas)
        return log_p.reshape(batch)
