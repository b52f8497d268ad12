"""Data, hyperparameters, state and diagnostics of the Bayesian factorization machine.

:func:`make_data` validates a design (``scipy.sparse`` or dense, with optional relation
blocks) and its targets once, and lays the design out for the sampler
(:mod:`bnpjax.models.fm.layout`); :func:`make_hyper` builds the hyperparameters in myFM's
names.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.checks import check_flag, check_positive, check_real_array
from bnpjax.infer.scaling import location_scale
from bnpjax.models.fm.layout import (
    FMBlock,
    FMRelation,
    colour_blocks,
    relation_design,
    relation_widths,
    to_coo,
)
from bnpjax.ops._dtypes import device_array

__all__ = [
    "LIKELIHOODS",
    "FMData",
    "FMHyper",
    "FMInfo",
    "FMState",
    "check_targets",
    "make_data",
    "make_hyper",
]

#: the observation models: Gaussian noise, probit (labels 0/1), ordered probit (0..L-1)
LIKELIHOODS = ("gaussian", "probit", "ordinal")


class FMData(NamedTuple):
    """The design as colour blocks, the targets ``y`` (n,) and ``group`` (p,) per feature.
    For ``"probit"`` ``y`` holds 0/1, for ``"ordinal"`` the level ``0..L-1`` (as floats).
    ``relations``: the relation blocks; their features follow the columns of ``X``.
    ``y_loc``, ``y_scale``: the standardisation of gaussian targets (``y`` holds
    ``(targets - y_loc) / y_scale``; 0 and 1 otherwise)."""

    blocks: tuple[FMBlock, ...]
    y: jax.Array
    group: jax.Array
    group_sizes: jax.Array  # (G,) features per group
    relations: tuple[FMRelation, ...] = ()
    y_loc: jax.Array | float = 0.0  # gaussian: y is (targets - y_loc) / y_scale
    y_scale: jax.Array | float = 1.0

    #: the targets split by row over devices (:mod:`bnpjax.infer.sharding`); the colour blocks
    #: stay whole, since a feature's entries are gathered from every row
    sharded_axes = (("y", 0),)


class FMHyper(NamedTuple):
    """myFM's names: InvGamma(alpha_0/2, beta_0/2) variances, N(mu_0, var/gamma_0) means,
    b ~ N(0, 1/reg_0); ``cutpoint_scale`` is the prior sd of the ordinal cutpoint parameters."""

    alpha_0: jax.Array
    beta_0: jax.Array
    gamma_0: jax.Array
    mu_0: jax.Array
    reg_0: jax.Array
    cutpoint_scale: jax.Array


class FMState(NamedTuple):
    r"""One state of the chain: the FM parameters ``b, w, V`` of
    :math:`\hat y(x) = b + \sum_i w_i x_i + \sum_{i<j} \langle v_i, v_j\rangle x_i x_j`,
    the noise variance, the per-group hyperparameters ``mu_w, var_w`` (G,) and
    ``mu_v, var_v`` (G, K) of the priors of ``w`` and ``V``, and the ordinal cutpoints
    :math:`c_0 < \dots < c_{L-2}` (empty for the other likelihoods)."""

    b: jax.Array  # ()
    w: jax.Array  # (p,)
    V: jax.Array  # (p, K)
    noise_var: jax.Array  # () sigma_n^2 (1 for probit and ordinal)
    mu_w: jax.Array  # (G,)
    var_w: jax.Array  # (G,)
    mu_v: jax.Array  # (G, K)
    var_v: jax.Array  # (G, K)
    cutpoints: jax.Array  # (L-1,) ordinal only, else (0,)


class FMInfo(NamedTuple):
    r"""Diagnostics of one sweep, traced as ``sample_stats``: ``lp`` the log-likelihood
    :math:`\sum_d \log p(y_d \mid \text{state})`, ``rmse`` the training RMSE of
    :math:`\hat y` against ``y`` (gaussian) or the latent ``z`` (probit, ordinal), and
    ``acceptance_rate`` of the ordinal cutpoint Metropolis step (1 when there is none), and
    ``log_likelihood`` the pointwise terms :math:`\log p(y_d \mid \text{state})` (n,) whose
    sum is ``lp`` (traced as the ``log_likelihood`` group)."""

    lp: jax.Array  # log-likelihood of the training targets
    rmse: jax.Array  # training RMSE of hat y against y (gaussian) or the latent z
    acceptance_rate: jax.Array  # cutpoint Metropolis step (1 when there is none)
    log_likelihood: jax.Array  # (n,) pointwise log p(y_d | state)


def make_hyper(
    alpha_0: float = 1.0,
    beta_0: float = 1.0,
    gamma_0: float = 1.0,
    mu_0: float = 0.0,
    reg_0: float = 1.0,
    cutpoint_scale: float = 3.0,
) -> FMHyper:
    """Hyperparameters of the BFM priors, in myFM's names and with its defaults.

    Parameters
    ----------
    alpha_0, beta_0 : float
        every variance (``sigma_n^2``, ``sigma_w^2[g]``, ``sigma_v^2[g, f]``) is
        ``InvGamma(alpha_0 / 2, beta_0 / 2)``.
    gamma_0, mu_0 : float
        the group means are ``N(mu_0, variance / gamma_0)``.
    reg_0 : float
        the intercept is ``N(0, 1 / reg_0)``.
    cutpoint_scale : float
        prior sd of the ordinal cutpoint parameters (first cutpoint and log gaps).

    Returns
    -------
    FMHyper

    References
    ----------
    Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57, section 4.3.
    """
    values = dict(
        alpha_0=alpha_0,
        beta_0=beta_0,
        gamma_0=gamma_0,
        mu_0=mu_0,
        reg_0=reg_0,
        cutpoint_scale=cutpoint_scale,
    )
    for name, value in values.items():
        if name == "mu_0":
            # a number, finite and in range (None, text or an object is refused by name)
            values[name] = float(check_real_array(value, name, ndim=0))
        else:
            check_positive(value, name)
    dtype = jnp.result_type(float)
    return FMHyper(**{k: device_array(v, dtype) for k, v in values.items()})


def _groups(group_shapes, num_features: int) -> np.ndarray:
    if group_shapes is None:
        return np.zeros(num_features, np.int64)
    try:
        items = list(group_shapes)
    except TypeError:
        items = None
    # int(2.5) would silently truncate: only integer types are group sizes
    if items is None or not all(
        isinstance(s, int | np.integer) and not isinstance(s, bool) for s in items
    ):
        raise ValueError(f"group_shapes must be a sequence of integers, got {group_shapes!r}")
    shapes = [int(s) for s in items]
    if any(s <= 0 for s in shapes) or sum(shapes) != num_features:
        raise ValueError(
            f"group_shapes must be positive integers summing to the {num_features} columns of "
            f"X (and of the relation blocks), got {list(group_shapes)}"
        )
    return np.repeat(np.arange(len(shapes)), shapes)


def check_targets(
    y, num_rows: int, likelihood: str, num_levels: int | None = None, *, name: str = "y"
):
    """Validate targets against the likelihood; returns them as floats (ordinal: 0-based,
    levels ``0..num_levels-1``). ``name`` is the argument named in the errors."""
    y = check_real_array(y, name)
    if y.ndim != 1 or y.shape[0] != num_rows:
        raise ValueError(f"{name} must have shape ({num_rows},) to match X, got {y.shape}")
    if likelihood == "probit" and not np.all((y == 0) | (y == 1)):
        labels = np.unique(y)[:5].tolist()
        raise ValueError(
            f"{name} must hold class labels 0 and 1 for the probit classifier, got {labels}; "
            "map the two classes to 0 and 1"
        )
    if likelihood == "ordinal":
        if not np.all(y == np.round(y)) or y.min() < 0:
            raise ValueError(f"{name} must hold ordinal levels 0, 1, ..., L-1 (integers)")
        levels = int(y.max()) + 1 if num_levels is None else int(num_levels)
        if y.max() >= levels:
            raise ValueError(
                f"{name} has levels up to {int(y.max())} but num_levels = {levels}: levels are "
                f"0..num_levels-1, so num_levels must be at least {int(y.max()) + 1}"
            )
    return y


def make_data(
    X, y, *, likelihood: str = "gaussian", group_shapes=None, X_rel=(), standardize: bool = True,
    bucket_shapes: bool = True,
) -> FMData:  # fmt: skip
    """Validate a design and its targets and lay the design out for the sampler.

    Gaussian targets are standardised once, on the host in float64: ``y`` is stored as
    ``(y - mean) / sd`` (``y_loc``, ``y_scale``). The sampler runs on the unit scale, where
    myFM's default priors (the intercept's ``N(0, 1 / reg_0)``, the ``InvGamma(alpha_0 / 2,
    beta_0 / 2)`` variances) and the start ``V ~ N(0, init_scale^2)`` fit any data, and
    traces its draws back in the targets' units: ``b`` as ``y_loc + y_scale b``, ``w`` and
    ``mu_w`` times ``y_scale``, ``V`` and ``mu_v`` times ``sqrt(y_scale)``, the variances
    ``noise_var``, ``var_w`` times ``y_scale^2`` and ``var_v`` times ``y_scale``, the
    log-likelihood minus ``log y_scale`` per target. So multiplying or shifting ``y``
    changes the predictions by the same transformation and leaves the standardised RMSE as
    it was.

    Parameters
    ----------
    X : scipy.sparse matrix or array_like, shape (n, p)
        the design (it may have no columns when ``X_rel`` carries every feature).
    y : array_like, shape (n,)
        targets: reals (``"gaussian"``), labels 0/1 (``"probit"``) or levels ``0..L-1``
        (``"ordinal"``).
    likelihood : {"gaussian", "probit", "ordinal"}
        the observation model the targets are checked against.
    group_shapes : sequence of int, optional
        sizes of consecutive feature groups (over the columns of ``X``, then of the relation
        blocks), each with its own prior means and variances (myFM's argument).
    X_rel : sequence of RelationBlock
        myFM's relation blocks ``RelationBlock(original_to_block, data)``; their columns follow
        those of ``X`` in the feature numbering.
    standardize : bool
        False stores gaussian targets as given (``y_loc = 0``, ``y_scale = 1``); then the
        priors of :func:`make_hyper` are in the targets' units, and targets far from order 1
        (for instance ratings shifted by 1e6) need priors to match. Ignored for the probit
        and ordinal likelihoods, whose targets are labels.
    bucket_shapes : bool
        pad the colour blocks' sizes (features, entries, per-feature segments) to a geometric
        set of sizes with steps of at most 25 %
        (:func:`bnpjax.models.fm.layout.bucket_size`), so that another fold or a grown data
        set of similar size reuses the compiled sweep. The padding contributes exact zeros:
        the draws equal those of the unpadded layout (``False``) up to the rounding of the
        per-feature sums, whose summation order differs. The number of rows and the relation
        blocks are not padded.

    Returns
    -------
    FMData
        the design as colour blocks and relation chunks
        (:func:`bnpjax.models.fm.layout.colour_blocks`,
        :func:`bnpjax.models.fm.layout.relation_design`).

    Raises
    ------
    ValueError
        naming the argument, on NaN or infinite values, shape mismatches, bad block indices
        or labels that do not fit ``likelihood``.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    standardize = check_flag(standardize, "standardize")
    bucket_shapes = check_flag(bucket_shapes, "bucket_shapes")
    X_rel = tuple(X_rel or ())
    rows, cols, values, (n, p) = to_coo(X, allow_no_columns=bool(X_rel))
    y = check_targets(y, n, likelihood)
    widths = relation_widths(X_rel)
    num_features = p + sum(widths)
    group = _groups(group_shapes, num_features)
    dtype = jnp.result_type(float)
    blocks = colour_blocks(
        rows, cols, values, n, p, bucket_shapes=bucket_shapes, total_features=num_features
    )
    relations, offset = [], p
    for position, (block, width) in enumerate(zip(X_rel, widths, strict=True)):
        relations.append(
            relation_design(block, n, offset=offset, position=position, num_features=num_features)
        )
        offset += width
    loc, scale = (0.0, 1.0)
    if likelihood == "gaussian" and standardize:
        loc, scale = location_scale(y, "mean")
    return FMData(
        blocks=blocks,
        y=device_array((np.asarray(y, np.float64) - loc) / scale, dtype),
        group=device_array(group, jnp.int32),
        group_sizes=device_array(
            np.bincount(group, minlength=int(group.max(initial=0)) + 1), dtype
        ),
        relations=tuple(relations),
        y_loc=device_array(loc, dtype),
        y_scale=device_array(scale, dtype),
    )
