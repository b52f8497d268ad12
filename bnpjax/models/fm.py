r"""Bayesian factorization machines: the Gibbs sampler of Rendle (2012) / libFM MCMC.

Model (``../shared/seeds/004_530d5665a5aa3b14.txt``, with INDEX's corrections). For a row
:math:`x \in \mathbb R^p` of the design matrix

.. math::

    \hat y(x) = b + \sum_i w_i x_i + \sum_{i<j} \langle v_i, v_j\rangle x_i x_j
              = b + \sum_i w_i x_i
                + \tfrac12 \sum_{f=1}^{K} \Big[\big(\textstyle\sum_i v_{if} x_i\big)^2
                                              - \textstyle\sum_i v_{if}^2 x_i^2\Big],

:math:`y \mid x \sim \mathcal N(\hat y(x), \sigma_n^2)`. Priors, per feature group ``g``
(myFM's ``group_shapes``, libFM's meta file)::

    b ~ N(0, 1 / reg_0)                 w_i ~ N(mu_w[g], sigma_w^2[g])
    mu_w[g] ~ N(mu_0, sigma_w^2[g] / gamma_0)       sigma_w^2[g] ~ InvGamma(alpha_0/2, beta_0/2)
    v_if ~ N(mu_v[g,f], sigma_v^2[g,f])  with the same hyperpriors per (g, f)
    sigma_n^2 ~ InvGamma(alpha_0/2, beta_0/2)

(the seed's :math:`a_\theta, b_\theta` are ``alpha_0/2, beta_0/2``, its :math:`m_\theta,
\lambda_\theta` are ``mu_0, gamma_0``; defaults are myFM's.)

**Gibbs updates** (seed, "conjugate posteriors"). Every parameter :math:`\theta` enters
:math:`\hat y^{(d)}` linearly, :math:`\hat y^{(d)} = g_\theta^{(d)} + \theta h_\theta^{(d)}` with
:math:`h_b = 1`, :math:`h_{w_i} = x_i`, :math:`h_{v_{if}} = x_i (q_f^{(d)} - v_{if} x_i)` and
:math:`q_f^{(d)} = \sum_j v_{jf} x_j^{(d)}`, so

.. math::

    \theta \mid \cdot \sim \mathcal N(\mu^\star, \sigma^{\star 2}), \quad
    \sigma^{\star -2} = \frac{\sum_d h^{(d)2}}{\sigma_n^2} + \frac1{\sigma_\theta^2}, \quad
    \mu^\star = \sigma^{\star 2}\Big(\frac{\sum_d h^{(d)} (e^{(d)} + \theta h^{(d)})}{\sigma_n^2}
                + \frac{\mu_\theta}{\sigma_\theta^2}\Big)

with the cached residual :math:`e^{(d)} = y^{(d)} - \hat y^{(d)}` and :math:`q_f^{(d)}` updated
after each draw (:math:`\Delta e = -\Delta\theta\, h`, :math:`\Delta q_f = x_i \Delta v_{if}`).
The seed draws each coordinate in turn. Because :math:`(v_{if} x_i + Q_{-i,f})^2 - v_{if}^2
x_i^2 = 2 v_{if} x_i Q_{-i,f} + Q_{-i,f}^2` with :math:`Q_{-i,f} = q_f - v_{if} x_i` free of
:math:`v_i`, :math:`\hat y` is linear in the whole vector :math:`\theta_i = (w_i, v_{i1}, \dots,
v_{iK})` with :math:`h_i = (x_i, x_i Q_{-i,1}, \dots, x_i Q_{-i,K})`, so bnpjax draws
:math:`\theta_i` in one block from the same formulas in matrix form (precision
:math:`\sum_d h h^\top/\sigma_n^2 + \mathrm{diag}(1/\sigma_\theta^2)`): exact Gibbs on a coarser
block, which mixes at least as well and replaces ``K + 1`` passes over the data by one.
Then :math:`\mu_\theta \sim \mathcal N\big((\sum_i \theta_i + \gamma_0\mu_0)/(n_g + \gamma_0),
\sigma_\theta^2/(n_g+\gamma_0)\big)`, :math:`\sigma_\theta^2 \sim \mathrm{InvGamma}\big(
\alpha_0/2 + (n_g+1)/2, \beta_0/2 + \tfrac12[\sum_i(\theta_i - \mu_\theta)^2 +
\gamma_0(\mu_\theta - \mu_0)^2]\big)` per group (and factor), and
:math:`\sigma_n^2 \sim \mathrm{InvGamma}(\alpha_0/2 + D/2, \beta_0/2 + \tfrac12\sum_d e^{(d)2})`.
The sweep order is libFM's: the hyperparameters (and :math:`\sigma_n^2`) given the current
parameters, then ``b``, then the :math:`\theta_i`.

**Exact parallel blocks.** Two features ``i, j`` that never appear in the same row are
conditionally independent given everything else: :math:`h_{w_i}` and :math:`h_{v_{if}}` involve
only rows where ``i`` is nonzero, and updating :math:`\theta_j` changes :math:`e^{(d)}` and
:math:`q_f^{(d)}` only in rows where ``j`` is nonzero, a disjoint set. So the conditional of
:math:`\theta_i` is the same before and after :math:`\theta_j` is redrawn, and drawing every
feature of such a set at once is the same Markov kernel as drawing them one after another.
:func:`make_data` finds these sets by a greedy colouring of the co-occurrence graph of the
features (an edge where two features share a row); a block of one-hot user ids is one colour.
Within a colour every row holds at most one feature, so a colour is stored as one entry per
covered row; the per-feature sums are dense reductions over degree buckets (features of
similar degree padded to a common width), followed by one batched Cholesky, and the row
updates are elementwise. The sweep is the exact Gibbs sweep above, its colours in turn.

**Relation blocks** (Rendle 2013, "Scaling factorization machines to relational data";
myFM's ``RelationBlock``). A block is a matrix :math:`X^B` (``B`` block rows) and an index
:math:`b(d)`: row ``d`` of the full design is ``[X_d, X^{B_1}_{b_1(d)}, ...]``. Features shared
by many rows (a user's side information, the implicit feedback of everything a user rated) are
stored once per entity. The sweep over a block's features never expands the design: with
:math:`r^{(d)} = q^{(d)} - q^B_{b(d)}` (the other features' part of :math:`q`) and, for
feature ``i`` of the block, :math:`a_b = q^B_b - v_i x_{bi}`, every row of block row ``b`` has
:math:`h_i^{(d)} = x_{bi}\,(1, a_b + r^{(d)})`, so

.. math::

    \sum_{d: b(d)=b} h h^\top = x_{bi}^2 \begin{pmatrix} c_b & (c_b a_b + S_b)^\top \\
        c_b a_b + S_b & c_b a_b a_b^\top + a_b S_b^\top + S_b a_b^\top + T_b\end{pmatrix},\quad
    \sum_{d: b(d)=b} h\, e = x_{bi} \begin{pmatrix} E_b \\ a_b E_b + R_b\end{pmatrix}

with the per-block-row sums :math:`c_b = \#\{d\}`, :math:`S_b = \sum r`, :math:`T_b = \sum
r r^\top`, :math:`E_b = \sum e`, :math:`R_b = \sum r e`, formed once per block and sweep in
O(n K^2). :math:`S, T` do not change while the block's features are drawn; after a draw
:math:`\Delta\theta_i = (\Delta w, \Delta v)` they shift in closed form,
:math:`\Delta E_b = -x(c_b\Delta w + \Delta v\cdot(c_b a_b + S_b))`,
:math:`\Delta R_b = -x(S_b\Delta w + S_b (a_b\cdot\Delta v) + T_b\Delta v)`,
:math:`\Delta q^B_b = x\Delta v`. A sweep over a block therefore costs O(nnz(X^B) K^2 + n K^2)
instead of O(sum_d nnz of the expanded row). Features of a block that never share a block row
never share a row of the design, so they are coloured and drawn together as above; a colour is
cut into chunks of bounded size (any subset of a colour is still a set of conditionally
independent features) and the chunks, padded to a few widths, are run by ``lax.scan``.

**Likelihoods.** ``"gaussian"`` as above. ``"probit"`` (labels 0/1, Albert & Chib 1993):
:math:`y = 1[z > 0]`, :math:`z \sim \mathcal N(\hat y, 1)`; each sweep first draws
:math:`z \mid y, \hat y` from the truncated normal and then runs the Gaussian updates on
``z`` with :math:`\sigma_n = 1`. ``"ordinal"`` (labels ``0..L-1``, ordered probit):
:math:`y = k` iff :math:`c_{k-1} < z \le c_k` (:math:`c_{-1} = -\infty, c_{L-1} = \infty`);
the cutpoints, parametrised as :math:`\gamma_0 = c_0`, :math:`\gamma_k = \log(c_k - c_{k-1})`
with independent :math:`\mathcal N(0, s_c^2)` priors, get a random-walk Metropolis step with
``z`` integrated out (Cowles 1996), then ``z`` is drawn given them. The intercept ``b`` is not
identified beside the cutpoints, so ordinal models fix ``b = 0`` (as ``fit_w0=False``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular
from jax.scipy.special import log_ndtr

from bnpjax._checks import check_integer
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, concrete_or_none
from bnpjax.ops import sample_inverse_gamma, sample_truncated_normal

__all__ = [
    "FMBlock",
    "FMChunks",
    "FMData",
    "FMHyper",
    "FMInfo",
    "FMRelation",
    "FMState",
    "RelationBlock",
    "colour_features",
    "data_sample",
    "gibbs",
    "log_likelihood",
    "make_data",
    "make_hyper",
    "predict",
    "prior_sample",
    "relation_design",
    "relation_widths",
    "to_coo",
]

LIKELIHOODS = ("gaussian", "probit", "ordinal")
_LOG_2PI = math.log(2 * math.pi)


class FMBlock(NamedTuple):
    """One colour: features that never share a row. ``rows`` (nnz_c,) sorted row ids (all
    rows, in order, when the colour covers every row), ``local`` (nnz_c,) the entry's feature
    as a position in ``features``, ``values`` (nnz_c,), ``features`` (p_c,) global ids ordered
    by decreasing number of entries. ``buckets``: the entries of each feature for the
    per-feature sums, as index matrices (features of similar degree padded to a common width
    with the index ``nnz_c``, a zero entry); their rows follow ``features`` in order."""

    rows: jax.Array
    local: jax.Array
    values: jax.Array
    features: jax.Array
    buckets: tuple[jax.Array, ...]


class RelationBlock(NamedTuple):
    """myFM's relation block: row ``d`` of the design continues with row
    ``original_to_block[d]`` of ``data`` (``scipy.sparse`` or dense, one row per entity)."""

    original_to_block: np.ndarray
    data: object


class FMChunks(NamedTuple):
    """Chunks of one width: ``rows`` (C, P) block rows of the entries (padding: the extra
    block row ``B``), ``slot`` (C, P) the entry's feature within its chunk (padding: ``F``),
    ``values`` (C, P) (padding: 0), ``features`` (C, F) global feature ids (padding: ``p``,
    out of range, so that writes to it are dropped)."""

    rows: jax.Array
    slot: jax.Array
    values: jax.Array
    features: jax.Array


class FMRelation(NamedTuple):
    """A relation block laid out for the sweep (module docstring). ``index`` (n,) block row of
    each design row; ``counts`` (B + 1,) design rows per block row (0 for the padding row);
    ``rows``, ``cols``, ``values``: the block's entries (cols as global feature ids);
    ``chunks``: the entries again, cut into chunks of conditionally independent features."""

    index: jax.Array
    counts: jax.Array
    rows: jax.Array
    cols: jax.Array
    values: jax.Array
    chunks: tuple[FMChunks, ...]


class FMData(NamedTuple):
    """The design as colour blocks, the targets ``y`` (n,) and ``group`` (p,) per feature.
    For ``"probit"`` ``y`` holds 0/1, for ``"ordinal"`` the level ``0..L-1`` (as floats).
    ``relations``: the relation blocks; their features follow the columns of ``X``."""

    blocks: tuple[FMBlock, ...]
    y: jax.Array
    group: jax.Array
    group_sizes: jax.Array  # (G,) features per group
    relations: tuple[FMRelation, ...] = ()


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
    r"""One state of the chain: the FM parameters ``b, w, V`` (module docstring's
    :math:`\hat y`), the noise variance, the per-group hyperparameters ``mu_w, var_w`` (G,)
    and ``mu_v, var_v`` (G, K) of the priors of ``w`` and ``V``, and the ordinal cutpoints
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
    ``acceptance_rate`` of the ordinal cutpoint Metropolis step (1 when there is none)."""

    lp: jax.Array  # log-likelihood of the training targets
    rmse: jax.Array  # training RMSE of hat y against y (gaussian) or the latent z
    acceptance_rate: jax.Array  # cutpoint Metropolis step (1 when there is none)


def make_hyper(
    alpha_0: float = 1.0,
    beta_0: float = 1.0,
    gamma_0: float = 1.0,
    mu_0: float = 0.0,
    reg_0: float = 1.0,
    cutpoint_scale: float = 3.0,
) -> FMHyper:
    """Hyperparameters (module docstring); defaults are myFM's."""
    values = dict(
        alpha_0=alpha_0,
        beta_0=beta_0,
        gamma_0=gamma_0,
        mu_0=mu_0,
        reg_0=reg_0,
        cutpoint_scale=cutpoint_scale,
    )
    for name, value in values.items():
        if not np.isfinite(value) or (name != "mu_0" and value <= 0):
            raise ValueError(f"{name} must be {'finite' if name == 'mu_0' else 'positive'}")
    dtype = jnp.result_type(float)
    return FMHyper(**{k: jnp.asarray(v, dtype) for k, v in values.items()})


# --------------------------------------------------------------------------------------------
# host-side preparation


def to_coo(X, name: str = "X", *, allow_no_columns: bool = False):
    """Validate a design matrix (``scipy.sparse`` of any format or a dense 2-D array) and
    return its nonzero entries ``(rows, cols, values, shape)`` in row-major order. A design
    with no columns is allowed when relation blocks carry all the features."""
    import scipy.sparse as sp

    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=float)
        X.sum_duplicates()
        X.eliminate_zeros()
        shape = X.shape
        values = np.asarray(X.data, float)
        cols = np.asarray(X.indices, np.int64)
        rows = np.repeat(np.arange(shape[0]), np.diff(X.indptr))
    else:
        try:
            dense = np.asarray(X, float)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be a 2-D array or scipy.sparse matrix: {err}") from err
        if dense.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {dense.shape}")
        shape = dense.shape
        rows, cols = np.nonzero(dense)
        values = dense[rows, cols]
        if not np.all(np.isfinite(dense)):
            raise ValueError(f"{name} contains NaN or infinite values")
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} contains NaN or infinite values")
    if shape[0] == 0 or (shape[1] == 0 and not allow_no_columns):
        raise ValueError(f"{name} is empty (shape {shape})")
    return rows.astype(np.int64), cols.astype(np.int64), values, shape


def colour_features(rows, cols, num_rows: int, num_features: int) -> np.ndarray:
    """Colour the co-occurrence graph of the features (an edge joins two features that are
    nonzero in a common row) so that no two features of one colour share a row. DSatur
    (Brelaz 1979): repeatedly colour the feature whose neighbours already use the most
    distinct colours (ties: highest degree) with the smallest free colour. DSatur is exact on
    bipartite graphs, so a user x item one-hot design gets two colours; plain greedy by degree
    need not. Returns the colour of each feature (features in no row get colour 0)."""
    import heapq

    import scipy.sparse as sp

    pattern = sp.csr_matrix(
        (np.ones(len(rows), np.float32), (rows, cols)), shape=(num_rows, num_features)
    )
    pattern.data[:] = 1.0
    graph = (pattern.T @ pattern).tocsr()
    graph.setdiag(0)
    graph.eliminate_zeros()
    indptr, indices = graph.indptr, graph.indices
    degree = np.diff(indptr)
    colour = np.full(num_features, -1, np.int64)
    saturation: dict[int, set] = {}
    heap = [(0, -int(d), int(i)) for i, d in enumerate(degree)]
    heapq.heapify(heap)
    while heap:
        neg_sat, _, i = heapq.heappop(heap)
        used = saturation.get(i, set())
        if colour[i] >= 0 or -neg_sat != len(used):
            continue  # stale entry
        c = 0
        while c in used:
            c += 1
        colour[i] = c
        saturation.pop(i, None)
        for j in indices[indptr[i] : indptr[i + 1]]:
            if colour[j] < 0:
                seen = saturation.setdefault(int(j), set())
                if c not in seen:
                    seen.add(c)
                    heapq.heappush(heap, (-len(seen), -int(degree[j]), int(j)))
    return colour


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
    y = np.asarray(y)
    if y.dtype == bool:
        y = y.astype(np.int64)
    if y.ndim != 1 or y.shape[0] != num_rows:
        raise ValueError(f"{name} must have shape ({num_rows},) to match X, got {y.shape}")
    if not np.issubdtype(y.dtype, np.number) or not np.all(np.isfinite(y.astype(float))):
        raise ValueError(f"{name} contains NaN, infinite or non-numeric values")
    y = y.astype(float)
    if likelihood == "probit" and not np.all((y == 0) | (y == 1)):
        raise ValueError(f"{name} must hold class labels 0 and 1 for the probit classifier")
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


def _degree_buckets(local: np.ndarray, degree: np.ndarray) -> tuple[jax.Array, ...]:
    """Index matrices of each feature's entries (features in order, degrees decreasing),
    grouped so that a bucket's width is below twice its smallest degree: padding costs less
    than a factor 2, and per-feature sums become dense reductions instead of scatters."""
    nnz = len(local)
    entries = np.argsort(local, kind="stable")
    starts = np.concatenate([[0], np.cumsum(degree)[:-1]])
    buckets, first = [], 0
    while first < len(degree):
        width = max(int(degree[first]), 1)
        last = first
        while last < len(degree) and 2 * max(int(degree[last]), 1) > width:
            last += 1
        offsets = np.arange(width)[None, :]
        position = starts[first:last, None] + offsets
        valid = offsets < degree[first:last, None]
        index = np.where(valid, entries[np.minimum(position, max(nnz - 1, 0))], nnz)
        buckets.append(jnp.asarray(index, jnp.int32))
        first = last
    return tuple(buckets)


def _relation_entries(block, num_rows: int, position: int, *, offset: int):
    """Validate one relation block; returns its index, entries and shape."""
    name = f"X_rel[{position}]"
    if isinstance(block, tuple) and len(block) == 2:
        block = RelationBlock(*block)
    index = getattr(block, "original_to_block", None)
    matrix = getattr(block, "data", None)
    if index is None or matrix is None:
        raise ValueError(f"{name} must be a RelationBlock(original_to_block, data)")
    rows, cols, values, (num_block_rows, width) = to_coo(matrix, f"{name}.data")
    index = np.asarray(index)
    if index.shape != (num_rows,):
        raise ValueError(
            f"{name}.original_to_block must have one entry per row of X ({num_rows}), "
            f"got shape {index.shape}"
        )
    if index.size and (
        not np.issubdtype(index.dtype, np.integer)
        or index.min() < 0
        or index.max() >= num_block_rows
    ):
        raise ValueError(
            f"{name}.original_to_block must hold integer row numbers of {name}.data "
            f"(0..{num_block_rows - 1})"
        )
    return index.astype(np.int64), rows, cols + offset, values, num_block_rows, width


def _pack_chunks(rows, cols, values, num_block_rows, offset, width, num_features, dtype):
    """Cut a relation block's features into chunks of conditionally independent features
    (module docstring): colour them by shared block rows, split each colour greedily (features
    by decreasing degree) into chunks of at most ``max(largest degree, 16)`` entries and 64
    features, and pad the chunks to power-of-two sizes, one ``FMChunks`` per (entries,
    features) size."""
    local = cols - offset
    colour = colour_features(rows, local, num_block_rows, width)
    degree = np.bincount(local, minlength=width)
    by_feature = np.argsort(local, kind="stable")
    starts = np.concatenate([[0], np.cumsum(degree)])
    capacity, max_features = max(int(degree.max(initial=0)), 16), 64
    chunks, current, size = [], [], 0
    for c in range(int(colour.max(initial=0)) + 1):
        members = np.flatnonzero(colour == c)
        for f in members[np.argsort(-degree[members], kind="stable")]:
            cost = max(int(degree[f]), 1)
            if current and (size + cost > capacity or len(current) == max_features):
                chunks.append(current)
                current, size = [], 0
            current.append(int(f))
            size += cost
        if current:
            chunks.append(current)
            current, size = [], 0

    def power_of_two(m, low):
        return max(low, 1 << max(m - 1, 0).bit_length())

    by_shape: dict[tuple[int, int], list] = {}
    for chunk in chunks:
        entries = int(sum(degree[f] for f in chunk))
        # two feature widths only: every distinct shape is one more scan to compile
        shape = (power_of_two(entries, 8), 4 if len(chunk) <= 4 else max_features)
        by_shape.setdefault(shape, []).append(chunk)
    out = []
    for P, F in sorted(by_shape, reverse=True):
        group = by_shape[P, F]
        F = min(F, P)
        r = np.full((len(group), P), num_block_rows, np.int64)
        slot = np.full((len(group), P), F, np.int64)
        v = np.zeros((len(group), P))
        ids = np.full((len(group), F), num_features, np.int64)
        for m, chunk in enumerate(group):
            ids[m, : len(chunk)] = np.asarray(chunk) + offset
            fill = 0
            for k, f in enumerate(chunk):
                take = by_feature[starts[f] : starts[f + 1]]
                r[m, fill : fill + len(take)] = rows[take]
                slot[m, fill : fill + len(take)] = k
                v[m, fill : fill + len(take)] = values[take]
                fill += len(take)
        out.append(
            FMChunks(
                rows=jnp.asarray(r, jnp.int32),
                slot=jnp.asarray(slot, jnp.int32),
                values=jnp.asarray(v, dtype),
                features=jnp.asarray(ids, jnp.int32),
            )
        )
    return tuple(out)


def relation_design(
    block, num_rows: int, *, offset: int, position: int = 0, num_features: int | None = None
) -> FMRelation:
    """Validate a relation block and lay it out for prediction (``chunks`` empty), or for the
    sweep when ``num_features`` (the total number of features) is given."""
    index, rows, cols, values, num_block_rows, width = _relation_entries(
        block, num_rows, position, offset=offset
    )
    dtype = jnp.result_type(float)
    chunks = ()
    if num_features is not None:
        chunks = _pack_chunks(
            rows, cols, values, num_block_rows, offset, width, num_features, dtype
        )
    counts = np.bincount(index, minlength=num_block_rows + 1).astype(float)
    return FMRelation(
        index=jnp.asarray(index, jnp.int32),
        counts=jnp.asarray(counts, dtype),
        rows=jnp.asarray(rows, jnp.int32),
        cols=jnp.asarray(cols, jnp.int32),
        values=jnp.asarray(values, dtype),
        chunks=chunks,
    )


def relation_widths(X_rel) -> list[int]:
    """Number of columns of each relation block (its features follow those of ``X``)."""
    widths = []
    for position, block in enumerate(X_rel):
        matrix = block[1] if isinstance(block, tuple) else getattr(block, "data", None)
        if matrix is None or len(np.shape(matrix)) != 2:
            raise ValueError(f"X_rel[{position}] must be a RelationBlock(original_to_block, data)")
        widths.append(int(np.shape(matrix)[1]))
    return widths


def make_data(X, y, *, likelihood: str = "gaussian", group_shapes=None, X_rel=()) -> FMData:
    """Validate the design ``X`` (n, p) (``scipy.sparse`` or dense), the relation blocks
    ``X_rel`` (myFM's ``RelationBlock(original_to_block, data)``; their columns follow those of
    ``X`` in feature numbering and ``group_shapes``) and targets ``y`` (n,), and lay the design
    out as colour blocks and relation chunks (module docstring). Raises ``ValueError`` naming
    the argument on NaN/inf, shape mismatches, bad block indices, or labels that do not fit
    ``likelihood``."""
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    X_rel = tuple(X_rel or ())
    rows, cols, values, (n, p) = to_coo(X, allow_no_columns=bool(X_rel))
    y = check_targets(y, n, likelihood)
    widths = relation_widths(X_rel)
    num_features = p + sum(widths)
    group = _groups(group_shapes, num_features)
    blocks = []
    dtype = jnp.result_type(float)
    colour = colour_features(rows, cols, n, p) if p else np.zeros(0, np.int64)
    entry_colour = colour[cols]
    for c in range(int(colour.max(initial=-1)) + 1):
        take = entry_colour == c
        r, f, v = rows[take], cols[take], values[take]
        order = np.argsort(r, kind="stable")
        r, f, v = r[order], f[order], v[order]
        if len(r) == n:  # covers every row: kept dense, in row order (see _add_rows)
            assert np.array_equal(r, np.arange(n))
        features = np.flatnonzero(colour == c)
        degree = np.bincount(f, minlength=p)[features]
        by_degree = np.argsort(-degree, kind="stable")
        features, degree = features[by_degree], degree[by_degree]
        position = np.full(p, -1, np.int64)
        position[features] = np.arange(len(features))
        local = position[f]
        blocks.append(
            FMBlock(
                rows=jnp.asarray(r, jnp.int32),
                local=jnp.asarray(local, jnp.int32),
                values=jnp.asarray(v, dtype),
                features=jnp.asarray(features, jnp.int32),
                buckets=_degree_buckets(local, degree),
            )
        )
    relations, offset = [], p
    for position, (block, width) in enumerate(zip(X_rel, widths, strict=True)):
        relations.append(
            relation_design(block, n, offset=offset, position=position, num_features=num_features)
        )
        offset += width
    return FMData(
        blocks=tuple(blocks),
        y=jnp.asarray(y, dtype),
        group=jnp.asarray(group, jnp.int32),
        group_sizes=jnp.asarray(np.bincount(group, minlength=int(group.max(initial=0)) + 1), dtype),
        relations=tuple(relations),
    )


# --------------------------------------------------------------------------------------------
# compiled building blocks


def _num_rows(data: FMData) -> int:
    return data.y.shape[0]


def _gather_rows(vector, block: FMBlock, n: int):
    return vector if block.rows.shape[0] == n else vector[block.rows]


def _add_rows(vector, block: FMBlock, values, n: int):
    """``vector[rows] += values``; a colour that covers every row is in row order already."""
    if block.rows.shape[0] == n:
        return vector + values
    return vector.at[block.rows].add(values, indices_are_sorted=True, unique_indices=True)


def _design_parts(rows, cols, values, num_rows: int, w, V):
    """Per row of a COO design: the linear part ``sum_i w_i x_i``, ``q = sum_i v_i x_i``
    (num_rows, K) and ``sum_i |v_i|^2 x_i^2``."""
    x = values
    linear = jax.ops.segment_sum(x * w[cols], rows, num_segments=num_rows)
    xv = x[:, None] * V[cols]
    q = jax.ops.segment_sum(xv, rows, num_segments=num_rows)
    squares = jax.ops.segment_sum(jnp.sum(xv**2, axis=1), rows, num_segments=num_rows)
    return linear, q, squares


def _relation_parts(relation: FMRelation, w, V):
    """The parts of :func:`_design_parts` per block row (plus the padding row)."""
    num = relation.counts.shape[0]
    return _design_parts(relation.rows, relation.cols, relation.values, num, w, V)


def _predict_parts(data: FMData, b, w, V):
    """``hat y`` (n,) and ``q`` (n, K) of the training rows, from scratch (O(nnz K))."""
    n, K = _num_rows(data), V.shape[1]
    linear = jnp.full((n,), b, w.dtype)
    q = jnp.zeros((n, K), w.dtype)
    squares = jnp.zeros((n,), w.dtype)
    for block in data.blocks:
        x = block.values
        w_e = w[block.features][block.local]
        V_e = V[block.features][block.local]  # (nnz_c, K)
        linear = _add_rows(linear, block, x * w_e, n)
        q = _add_rows(q, block, x[:, None] * V_e, n)
        squares = _add_rows(squares, block, x**2 * jnp.sum(V_e**2, axis=1), n)
    for relation in data.relations:
        lin_b, q_b, sq_b = _relation_parts(relation, w, V)
        linear = linear + lin_b[relation.index]
        q = q + q_b[relation.index]
        squares = squares + sq_b[relation.index]
    return linear + 0.5 * (jnp.sum(q**2, axis=1) - squares), q


def _gaussian_draw(gram, hr, prior_mean, prior_precision, noise, noise_var):
    """Draws from N(P^-1 m, P^-1) per leading index, ``P = gram / noise_var +
    diag(prior_precision)``, ``m = hr / noise_var + prior_precision * prior_mean``, by one
    batched Cholesky; ``noise`` is standard normal of the shape of ``hr``."""
    eye = jnp.eye(gram.shape[-1], dtype=gram.dtype)
    precision = gram / noise_var + prior_precision[:, :, None] * eye
    chol = jnp.linalg.cholesky(precision)
    rhs = hr / noise_var + prior_precision * prior_mean
    half = solve_triangular(chol, rhs[..., None], lower=True)
    return solve_triangular(chol, half + noise[..., None], lower=True, trans="T")[..., 0]


def _joint_block(noise, e, q, block, theta, prior_mean, prior_precision, noise_var, n):
    """Draw ``theta_i = (w_i, v_i1..v_iK)`` (or the part that is sampled) of every feature
    of one colour from its joint Gaussian conditional, then update ``e`` and ``q``.

    ``hat y^{(d)} = g^{(d)} + theta_i . h^{(d)}`` with ``h = (x, x (q^{(d)} - v_i x))`` not
    depending on ``theta_i`` (module docstring), so the conditional has precision
    ``sum_d h h' / sigma_n^2 + diag(prior precision)``; the per-feature sums are dense
    reductions over the block's degree buckets, then one batched Cholesky.
    ``theta``, ``prior_*``, ``noise``: (p_c, D); ``q``: (n, K) with ``K = D`` or ``D - 1``."""
    D = theta.shape[1]
    K = q.shape[1]
    x = block.values
    theta_e = theta[block.local]
    columns = []
    if D > K:
        columns.append(x[:, None])
    if K:
        v_e = theta_e[:, D - K :]
        columns.append(x[:, None] * (_gather_rows(q, block, n) - v_e * x[:, None]))
    H = jnp.concatenate(columns, axis=1)
    residual = _gather_rows(e, block, n) + jnp.sum(theta_e * H, axis=1)
    H_pad = jnp.concatenate([H, jnp.zeros((1, D), H.dtype)])
    r_pad = jnp.concatenate([residual, jnp.zeros((1,), H.dtype)])
    grams, sums = [], []
    for index in block.buckets:
        H_b = H_pad[index]
        grams.append(jnp.einsum("mwk,mwl->mkl", H_b, H_b))
        sums.append(jnp.einsum("mwk,mw->mk", H_b, r_pad[index]))
    gram, hr = jnp.concatenate(grams), jnp.concatenate(sums)
    new = _gaussian_draw(gram, hr, prior_mean, prior_precision, noise, noise_var)
    delta = new - theta
    delta_e = delta[block.local]
    e = _add_rows(e, block, -jnp.sum(delta_e * H, axis=1), n)
    if K:
        q = _add_rows(q, block, delta_e[:, D - K :] * x[:, None], n)
    return new, e, q


def _block_row_sums(relation: FMRelation, r, e):
    """``S_b = sum r``, ``T_b = sum r r'``, ``E_b = sum e``, ``R_b = sum r e`` over the design
    rows of each block row. ``T`` is accumulated over slices of rows so that no (n, K, K)
    array is formed."""
    n, K = r.shape
    num = relation.counts.shape[0]
    index = relation.index

    def segment(values):
        return jax.ops.segment_sum(values, index, num_segments=num)

    S, E, R = segment(r), segment(e), segment(r * e[:, None])
    size = max(1, min(n, (1 << 21) // max(K * K, 1)))
    pad = -n % size
    r_pad = jnp.concatenate([r, jnp.zeros((pad, K), r.dtype)]).reshape(-1, size, K)
    i_pad = jnp.concatenate([index, jnp.full((pad,), num - 1, index.dtype)]).reshape(-1, size)

    def accumulate(T, part):
        r_s, i_s = part
        return T.at[i_s].add(r_s[:, :, None] * r_s[:, None, :]), None

    T, _ = jax.lax.scan(accumulate, jnp.zeros((num, K, K), r.dtype), (r_pad, i_pad))
    return S, T, E, R


def _feature_sums(relation: FMRelation, T_centred, num_features: int):
    """``sum_b x_bi^2 (T_b - S_b S_b' / c_b)`` per feature (num_features, K, K), over slices
    of the block's entries so that no (nnz, K, K) array is formed."""
    K = T_centred.shape[-1]
    nnz = relation.rows.shape[0]
    size = max(1, min(nnz, (1 << 21) // max(K * K, 1)))
    pad = -nnz % size
    rows = jnp.concatenate([relation.rows, jnp.zeros((pad,), jnp.int32)]).reshape(-1, size)
    cols = jnp.concatenate([relation.cols, jnp.zeros((pad,), jnp.int32)]).reshape(-1, size)
    x2 = jnp.concatenate([relation.values**2, jnp.zeros((pad,), T_centred.dtype)])

    def accumulate(total, part):
        r, c, w = part
        return total.at[c].add(w[:, None, None] * T_centred[r]), None

    init = jnp.zeros((num_features, K, K), T_centred.dtype)
    total, _ = jax.lax.scan(accumulate, init, (rows, cols, x2.reshape(-1, size)))
    return total


def _relation_sweep(key, e, q, theta, relation, prior_mean, prior_precision, noise_var, K):
    """Draw ``theta_i`` of every feature of one relation block, chunk after chunk, from the
    block-row sums of the module docstring; returns the new ``theta``, ``e`` and ``q``.
    ``theta``, ``prior_*``: (p, D) for all features, ``D = K`` or ``K + 1`` (with ``w``).

    Per block row the sum of ``h h'`` is ``c hbar hbar' + [[0, 0], [0, x^2 Tc]]`` with
    ``hbar = x (1, a + S/c)`` and ``Tc = T - S S'/c``: ``Tc`` does not change within the
    block's sweep, so its part of each feature's precision is summed once per sweep and each
    entry of a chunk contributes a rank-one term; likewise ``R`` shifts by
    ``-x (S (hbar . dtheta) + Tc dv)``."""
    p, D = theta.shape
    index, counts = relation.index, relation.counts
    linear = D > K
    w = theta[:, 0] if linear else jnp.zeros((p,), theta.dtype)
    lin_b, q_b, sq_b = _relation_parts(relation, w, theta[:, D - K :])
    r = q - q_b[index]
    S, T, E, R = _block_row_sums(relation, r, e)
    mean_r = S / jnp.maximum(counts, 1.0)[:, None]
    T_centred = T - S[:, :, None] * mean_r[:, None, :]
    fixed = _feature_sums(relation, T_centred, p)  # (p, K, K)
    # what a chunk reads per block row and per feature, packed so that a chunk does one
    # gather of each (and one scatter for the block-row state): the scan is bound by the
    # number of operations per chunk, not by their size
    row_static = jnp.concatenate(
        [counts[:, None], jnp.sqrt(counts)[:, None], mean_r, T_centred.reshape(-1, K * K)], axis=1
    )
    feature_static = jnp.concatenate([prior_mean, prior_precision, fixed.reshape(p, K * K)], 1)
    feature_pad = jnp.concatenate([jnp.zeros((D,)), jnp.ones((D,)), jnp.zeros((K * K,))]).astype(
        theta.dtype
    )

    def with_ones(v):
        return jnp.concatenate([jnp.ones_like(v[:, :1]), v], axis=1) if linear else v

    def chunk_step(carry, inputs):
        theta, state = carry  # state per block row: q_b (K), lin_b, sq_b, E, R (K)
        chunk, noise = inputs
        rows, x, ids, slot = chunk.rows, chunk.values, chunk.features, chunk.slot
        F = ids.shape[0]
        theta_f = theta.at[ids].get(mode="fill", fill_value=0)
        theta_e = jnp.take(theta_f, slot, axis=0, mode="fill", fill_value=0)
        v_e = theta_e[:, D - K :]
        fixed_row = row_static[rows]
        c, root_c = fixed_row[:, 0], fixed_row[:, 1]
        mean_e, T_e = fixed_row[:, 2 : 2 + K], fixed_row[:, 2 + K :].reshape(-1, K, K)
        now = state[rows]
        q_e, E_e, R_e = now[:, :K], now[:, K + 2], now[:, K + 3 :]
        a = q_e - v_e * x[:, None]  # q^B of the block row without feature i
        hbar = with_ones(a + mean_e)
        u = (x * root_c)[:, None] * hbar
        h_e = x[:, None] * with_ones(a * E_e[:, None] + R_e)
        h_e = h_e.at[:, 0].set(x * E_e) if linear else h_e
        h_e = h_e + u * jnp.sum(u * theta_e, axis=1, keepdims=True)
        joint = jnp.concatenate([(u[:, :, None] * u[:, None, :]).reshape(-1, D * D), h_e], 1)
        sums = jax.ops.segment_sum(joint, slot, num_segments=F + 1)[:F]
        gram, hr = sums[:, : D * D].reshape(F, D, D), sums[:, D * D :]
        per_feature = feature_static.at[ids].get(mode="fill", fill_value=0)
        per_feature = jnp.where((ids < p)[:, None], per_feature, feature_pad)
        fixed_f = per_feature[:, 2 * D :].reshape(F, K, K)
        gram = gram.at[:, D - K :, D - K :].add(fixed_f)
        hr = hr.at[:, D - K :].add(jnp.einsum("fkl,fl->fk", fixed_f, theta_f[:, D - K :]))
        new = _gaussian_draw(
            gram, hr, per_feature[:, :D], per_feature[:, D : 2 * D], noise, noise_var
        )
        delta = jnp.take(new - theta_f, slot, axis=0, mode="fill", fill_value=0)
        dv = delta[:, D - K :]
        dw = delta[:, 0] if linear else jnp.zeros_like(x)
        shift = jnp.sum(hbar * delta, axis=1)  # dw + dv . (a + S/c)
        dR = -x[:, None] * (c[:, None] * mean_e * shift[:, None]
                            + jnp.einsum("pkl,pl->pk", T_e, dv))  # fmt: skip
        d_sq = x**2 * (jnp.sum((v_e + dv) ** 2, axis=1) - jnp.sum(v_e**2, axis=1))
        change = jnp.concatenate(
            [x[:, None] * dv, (x * dw)[:, None], d_sq[:, None], (-x * c * shift)[:, None], dR],
            axis=1,
        )
        return (theta.at[ids].set(new, mode="drop"), state.at[rows].add(change)), None

    state = jnp.concatenate([q_b, lin_b[:, None], sq_b[:, None], E[:, None], R], axis=1)
    carry = (theta, state)
    for position, chunks in enumerate(relation.chunks):
        C, F = chunks.features.shape
        noise = jax.random.normal(jax.random.fold_in(key, position), (C, F, D), theta.dtype)
        carry, _ = jax.lax.scan(chunk_step, carry, (chunks, noise))
    theta, state = carry
    q_new, lin_new, sq_new = state[:, :K], state[:, K], state[:, K + 1]
    q_rows = r + q_new[index]
    d_yhat = (lin_new - lin_b)[index] - 0.5 * (sq_new - sq_b)[index]
    d_yhat = d_yhat + 0.5 * (jnp.sum(q_rows**2, axis=1) - jnp.sum(q**2, axis=1))
    return theta, e - d_yhat, q_rows


def _normal_hyper(key, theta, group, sizes, var, hyper):
    """Per group (and factor): mu | var, theta, then var | mu, theta (module docstring).
    ``theta`` (p, ...), ``var`` (G, ...)."""
    key_mu, key_var = jax.random.split(key)
    G = sizes.shape[0]
    extra = (1,) * (theta.ndim - 1)
    n_g = sizes.reshape((G, *extra))
    total = jax.ops.segment_sum(theta, group, num_segments=G)
    lam = n_g + hyper.gamma_0
    mu = (total + hyper.gamma_0 * hyper.mu_0) / lam + jnp.sqrt(var / lam) * jax.random.normal(
        key_mu, var.shape, var.dtype
    )
    dev = jax.ops.segment_sum((theta - mu[group]) ** 2, group, num_segments=G)
    shape = hyper.alpha_0 / 2 + (n_g + 1) / 2
    scale = hyper.beta_0 / 2 + 0.5 * (dev + hyper.gamma_0 * (mu - hyper.mu_0) ** 2)
    return mu, sample_inverse_gamma(key_var, jnp.broadcast_to(shape, var.shape), scale)


def _interval_log_prob(lower, upper):
    """log(Phi(upper) - Phi(lower)) for lower < upper, stable in both tails."""
    flip = lower > 0
    a = jnp.where(flip, -upper, lower)
    b = jnp.where(flip, -lower, upper)
    log_b, log_a = log_ndtr(b), log_ndtr(a)
    return log_b + jnp.log1p(-jnp.exp(jnp.minimum(log_a - log_b, 0.0)))


def _bounds(y, cutpoints, likelihood):
    """Interval of the latent z for each target."""
    inf = jnp.asarray(jnp.inf, y.dtype)
    if likelihood == "probit":
        return jnp.where(y > 0, 0.0, -inf), jnp.where(y > 0, inf, 0.0)
    padded = jnp.concatenate([-inf[None], cutpoints, inf[None]])
    level = y.astype(jnp.int32)
    return padded[level], padded[level + 1]


def _cutpoints_from(params):
    return jnp.cumsum(jnp.concatenate([params[:1], jnp.exp(params[1:])]))


def _params_from(cutpoints):
    return jnp.concatenate([cutpoints[:1], jnp.log(jnp.diff(cutpoints))])


def _sample_latent(key, y, yhat, cutpoints, likelihood):
    lower, upper = _bounds(y, cutpoints, likelihood)
    # jax.random.truncated_normal returns the largest float beyond ~6 sd in float32
    z = yhat + sample_truncated_normal(key, lower - yhat, upper - yhat, yhat.shape, yhat.dtype)
    return jnp.clip(z, lower, upper)


def _cutpoint_step(key, y, yhat, cutpoints, hyper, step_sizes):
    """Random-walk Metropolis on (c_0, log gaps) with z integrated out (module docstring)."""
    key_prop, key_acc = jax.random.split(key)
    params = _params_from(cutpoints)
    proposal = params + step_sizes * jax.random.normal(key_prop, params.shape, params.dtype)
    new_cut = _cutpoints_from(proposal)

    def log_target(p, c):
        lower, upper = _bounds(y, c, "ordinal")
        prior = -0.5 * jnp.sum(p**2) / hyper.cutpoint_scale**2
        return jnp.sum(_interval_log_prob(lower - yhat, upper - yhat)) + prior

    log_ratio = log_target(proposal, new_cut) - log_target(params, cutpoints)
    accept = jnp.log(jax.random.uniform(key_acc, (), yhat.dtype)) < log_ratio
    return jnp.where(accept, new_cut, cutpoints), accept.astype(yhat.dtype)


def _log_likelihood_terms(y, yhat, noise_var, cutpoints, likelihood):
    if likelihood == "gaussian":
        return -0.5 * (_LOG_2PI + jnp.log(noise_var) + (y - yhat) ** 2 / noise_var)
    lower, upper = _bounds(y, cutpoints, likelihood)
    return _interval_log_prob(lower - yhat, upper - yhat)


def _step(data, hyper, step_sizes, key, state, *, likelihood, fit_w0, fit_linear):
    n = _num_rows(data)
    K = state.V.shape[1]
    keys = jax.random.split(key, 8)
    yhat, q = _predict_parts(data, state.b, state.w, state.V)
    # hyperparameters first, given the current b, w, V (libFM's order): from the usual start,
    # w = 0 and small V, the first sweeps then use variances fitted to them rather than the
    # initial unit variances, which would let V overshoot and lengthen burn-in
    group, sizes = data.group, data.group_sizes
    if fit_linear:
        mu_w, var_w = _normal_hyper(keys[5], state.w, group, sizes, state.var_w, hyper)
    else:
        mu_w, var_w = state.mu_w, state.var_w
    mu_v, var_v = _normal_hyper(keys[6], state.V, group, sizes, state.var_v, hyper)
    cutpoints, accepted = state.cutpoints, jnp.ones((), yhat.dtype)
    if likelihood == "gaussian":
        resid = data.y - yhat
        noise_var = sample_inverse_gamma(
            keys[7], hyper.alpha_0 / 2 + n / 2, hyper.beta_0 / 2 + 0.5 * resid @ resid
        )
        target = data.y
    else:
        if likelihood == "ordinal":
            cutpoints, accepted = _cutpoint_step(
                keys[0], data.y, yhat, state.cutpoints, hyper, step_sizes
            )
        target = _sample_latent(keys[1], data.y, yhat, cutpoints, likelihood)
        noise_var = jnp.ones((), yhat.dtype)
    e = target - yhat

    b = state.b
    if fit_w0:
        precision = n / noise_var + hyper.reg_0
        mean = jnp.sum(e + b) / noise_var / precision
        b = mean + jax.random.normal(keys[2], (), e.dtype) * jax.lax.rsqrt(precision)
        e = e - (b - state.b)

    # theta_i = (w_i, v_i): one joint Gaussian block per feature, all features of a colour at
    # once (module docstring); the prior's mean and precision per feature follow its group
    parts, means, precisions = [], [], []
    if fit_linear:
        parts.append(state.w[:, None])
        means.append(mu_w[group][:, None])
        precisions.append(1.0 / var_w[group][:, None])
    if K:
        parts.append(state.V)
        means.append(mu_v[group])
        precisions.append(1.0 / var_v[group])
    w, V = state.w, state.V
    if parts:
        theta = jnp.concatenate(parts, axis=1)
        prior_mean = jnp.concatenate(means, axis=1)
        prior_precision = jnp.concatenate(precisions, axis=1)
        noise = jax.random.normal(keys[3], theta.shape, theta.dtype)
        for block in data.blocks:
            f = block.features
            new, e, q = _joint_block(
                noise[f], e, q, block, theta[f], prior_mean[f], prior_precision[f], noise_var, n
            )
            theta = theta.at[f].set(new)
        for position, relation in enumerate(data.relations):
            theta, e, q = _relation_sweep(
                jax.random.fold_in(keys[4], position),
                e,
                q,
                theta,
                relation,
                prior_mean,
                prior_precision,
                noise_var,
                K,
            )
        if fit_linear:
            w = theta[:, 0]
        V = theta[:, theta.shape[1] - K :]

    new = FMState(b, w, V, noise_var, mu_w, var_w, mu_v, var_v, cutpoints)
    yhat = target - e
    lp = jnp.sum(_log_likelihood_terms(data.y, yhat, noise_var, cutpoints, likelihood))
    info = FMInfo(lp=lp, rmse=jnp.sqrt(jnp.mean(e**2)), acceptance_rate=accepted)
    return new, info


# --------------------------------------------------------------------------------------------
# prior, data, likelihood, prediction


def prior_sample(
    key, num_features: int, rank: int, hyper: FMHyper, *, num_groups: int = 1, group=None,
    likelihood: str = "gaussian", num_levels: int = 0, fit_w0: bool = True,
    fit_linear: bool = True,
) -> FMState:  # fmt: skip
    r"""A state drawn from the prior (hyperparameters, then b, w, V): the generative
    distributions of ``../shared/seeds/004_530d5665a5aa3b14.txt``, section "Factorization
    Machine as Hierarchical Bayesian Model" (:math:`\sigma_n^2 \sim \mathcal{IG}(a_n, b_n)`,
    :math:`\theta \sim \mathcal N(\mu_\theta, \sigma_\theta^2)`, :math:`\mu_\theta \sim
    \mathcal N(m_\theta, \sigma_\theta^2/\lambda_\theta)` (INDEX's correction),
    :math:`\sigma_\theta^2 \sim \mathcal{IG}(a_\theta, b_\theta)`) in myFM's names (module
    docstring), per feature group; ordinal cutpoints from their own prior."""
    keys = jax.random.split(key, 9)
    dtype = hyper.alpha_0.dtype
    group = jnp.zeros(num_features, jnp.int32) if group is None else jnp.asarray(group)

    def variance_and_mean(k1, k2, shape):
        var = sample_inverse_gamma(k1, jnp.full(shape, hyper.alpha_0 / 2), hyper.beta_0 / 2)
        mean = hyper.mu_0 + jnp.sqrt(var / hyper.gamma_0) * jax.random.normal(k2, shape, dtype)
        return mean, var

    mu_w, var_w = variance_and_mean(keys[0], keys[1], (num_groups,))
    mu_v, var_v = variance_and_mean(keys[2], keys[3], (num_groups, rank))
    w = mu_w[group] + jnp.sqrt(var_w[group]) * jax.random.normal(keys[4], (num_features,), dtype)
    w = w if fit_linear else jnp.zeros_like(w)
    V = mu_v[group] + jnp.sqrt(var_v[group]) * jax.random.normal(
        keys[5], (num_features, rank), dtype
    )
    b = jax.random.normal(keys[6], (), dtype) / jnp.sqrt(hyper.reg_0) if fit_w0 else 0.0
    if likelihood == "gaussian":
        noise_var = sample_inverse_gamma(keys[7], hyper.alpha_0 / 2, hyper.beta_0 / 2)
    else:
        noise_var = jnp.ones((), dtype)
    if likelihood == "ordinal":
        params = hyper.cutpoint_scale * jax.random.normal(keys[8], (num_levels - 1,), dtype)
        cutpoints = _cutpoints_from(params)
    else:
        cutpoints = jnp.zeros((0,), dtype)
    return FMState(jnp.asarray(b, dtype), w, V, noise_var, mu_w, var_w, mu_v, var_v, cutpoints)


def data_sample(key, state: FMState, data: FMData, likelihood: str = "gaussian") -> FMData:
    """Fresh targets ``y | state`` on the design of ``data``."""
    yhat, _ = _predict_parts(data, state.b, state.w, state.V)
    if likelihood == "gaussian":
        y = yhat + jnp.sqrt(state.noise_var) * jax.random.normal(key, yhat.shape, yhat.dtype)
    else:
        z = yhat + jax.random.normal(key, yhat.shape, yhat.dtype)
        if likelihood == "probit":
            y = (z > 0).astype(yhat.dtype)
        else:
            y = jnp.sum(z[:, None] > state.cutpoints[None, :], axis=1).astype(yhat.dtype)
    return data._replace(y=y)


def log_likelihood(data: FMData, state: FMState, likelihood: str = "gaussian") -> jax.Array:
    """Pointwise ``log p(y_d | state)`` (n,) of the training targets."""
    yhat, _ = _predict_parts(data, state.b, state.w, state.V)
    return _log_likelihood_terms(data.y, yhat, state.noise_var, state.cutpoints, likelihood)


def predict(rows, cols, values, num_rows: int, b, w, V, relations=()):
    r"""``hat y`` for the COO design ``(rows, cols, values)`` with ``num_rows`` rows and the
    relation blocks ``relations`` (:func:`relation_design`), the module docstring's formula,
    for one draw. ``vmap`` it over draws. The seed (``../shared/seeds/004_530d5665a5aa3b14.txt``)
    writes the model output as :math:`f^{(d)} = f(x^{(d)})` with the cached
    :math:`q_k^{(d)} = \sum_j v_{jk} x_j^{(d)}` (its section "Factorization Machine as
    Hierarchical Bayesian Model", the display of the pre-computed :math:`f^{(d)}, q_k^{(d)}`);
    this computes :math:`f` through those :math:`q_k`."""
    linear, q, squares = _design_parts(rows, cols, values, num_rows, w, V)
    for relation in relations:
        lin_b, q_b, sq_b = _relation_parts(relation, w, V)
        linear = linear + lin_b[relation.index]
        q = q + q_b[relation.index]
        squares = squares + sq_b[relation.index]
    return b + linear + 0.5 * (jnp.sum(q**2, axis=1) - squares)


# --------------------------------------------------------------------------------------------
# the kernel


def _init(data, hyper, key, *, rank, likelihood, num_levels, init_stdev, fit_w0):
    """libFM/myFM's start: b = 0, w = 0, V ~ N(0, init_stdev^2), unit variances; ordinal
    cutpoints at the normal quantiles of the observed level frequencies."""
    dtype = data.y.dtype
    p = data.group.shape[0]
    G = data.group_sizes.shape[0]
    V = init_stdev * jax.random.normal(key, (p, rank), dtype)
    if likelihood == "ordinal":
        counts = jnp.stack([jnp.sum(data.y == k) for k in range(num_levels)]).astype(dtype)
        cum = jnp.cumsum(counts)[:-1] / data.y.shape[0]
        cutpoints = jax.scipy.special.ndtri(jnp.clip(cum, 0.01, 0.99))
        cutpoints = cutpoints + 0.1 * jnp.arange(num_levels - 1)  # strictly increasing
    else:
        cutpoints = jnp.zeros((0,), dtype)
    b = jnp.where(fit_w0 & (likelihood == "gaussian"), jnp.mean(data.y), 0.0).astype(dtype)
    return FMState(
        b=b,
        w=jnp.zeros(p, dtype),
        V=V,
        noise_var=jnp.ones((), dtype),
        mu_w=jnp.zeros(G, dtype),
        var_w=jnp.ones(G, dtype),
        mu_v=jnp.zeros((G, rank), dtype),
        var_v=jnp.ones((G, rank), dtype),
        cutpoints=cutpoints,
    )


def _trace(data, hyper, test, state, info, *, likelihood, num_test):
    posterior = {
        "b": state.b,
        "w": state.w,
        "V": state.V,
        "mu_w": state.mu_w,
        "var_w": state.var_w,
        "mu_v": state.mu_v,
        "var_v": state.var_v,
    }
    if likelihood == "gaussian":
        posterior["noise_var"] = state.noise_var
    if likelihood == "ordinal":
        posterior["cutpoints"] = state.cutpoints
    stats = {"lp": info.lp, "rmse": info.rmse}
    if likelihood == "ordinal":
        stats["acceptance_rate"] = info.acceptance_rate
    if test is not None:
        rows, cols, values, relations = test
        stats["yhat_test"] = predict(
            rows, cols, values, num_test, state.b, state.w, state.V, relations
        )
    return {"posterior": posterior, "sample_stats": stats}


def _check_levels(data: FMData, likelihood: str, num_levels) -> int:
    """Validate ``data.y`` against ``likelihood`` on the host (skipped while ``data`` is traced,
    as in the Geweke harness, whose data come from :func:`data_sample`) and return the number
    of ordinal levels (0 for the other likelihoods). Labels are ``0..num_levels-1``, so
    ``num_levels`` must exceed the largest label: at or below it, the bincount of the labels
    would drop the higher levels."""
    y = concrete_or_none(data.y)
    if likelihood != "ordinal":
        if num_levels is not None:
            raise ValueError(
                f"num_levels applies to likelihood 'ordinal' only, got num_levels={num_levels!r} "
                f"with likelihood {likelihood!r}"
            )
        if y is not None:
            check_targets(y, y.shape[0], likelihood, name="data.y")
        return 0
    if num_levels is None:
        if y is None:
            raise ValueError("num_levels is required when data.y is traced")
        num_levels = int(np.max(check_targets(y, y.shape[0], likelihood, name="data.y"))) + 1
        if num_levels < 2:
            raise ValueError(
                "an ordinal model needs at least 2 levels: data.y holds level 0 only; pass "
                "num_levels"
            )
        return num_levels
    num_levels = check_integer(num_levels, "num_levels", 2)  # an ordinal model has 2 or more
    if y is not None:
        check_targets(y, y.shape[0], likelihood, num_levels, name="data.y")
    return num_levels


def _check_test(test, num_test, data: FMData):
    """Validate :func:`gibbs`'s ``test`` design against ``num_test`` and ``data``; returns the
    device arrays (or None) and ``num_test``. Out-of-range rows would be dropped by the
    segment sums and out-of-range columns clamped by the gathers, so both are rejected."""
    num_test = check_integer(num_test, "num_test", 0)
    if test is None:
        if num_test:
            raise ValueError(f"num_test = {num_test} is given without a test design (test)")
        return None, 0
    if not isinstance(test, tuple | list) or len(test) not in (3, 4):
        raise ValueError(
            "test must be a tuple (rows, cols, values) or (rows, cols, values, relations)"
        )
    if num_test < 1:
        raise ValueError(
            "num_test must be the number of rows of the test design (at least 1), got 0"
        )
    p = data.group.shape[0]
    rows, cols, values = (np.asarray(a) for a in test[:3])
    if not rows.ndim == cols.ndim == values.ndim == 1 or not (
        rows.shape == cols.shape == values.shape
    ):
        raise ValueError(
            f"test rows, cols and values must be 1-D of one length, got shapes {rows.shape}, "
            f"{cols.shape}, {values.shape}"
        )
    for name, index, bound, what in (
        ("rows", rows, num_test, "num_test"),
        ("cols", cols, p, "the number of features of data"),
    ):
        if index.size and (
            not np.issubdtype(index.dtype, np.integer) or index.min() < 0 or index.max() >= bound
        ):
            raise ValueError(
                f"test {name} must hold integers in 0..{bound - 1} ({what} = {bound}), got "
                f"{index.dtype} values in {index.min()}..{index.max()}"
            )
    if not np.issubdtype(values.dtype, np.number) or not np.all(np.isfinite(values)):
        raise ValueError("test values contain NaN, infinite or non-numeric values")
    relations = test[3] if len(test) == 4 else ()
    if isinstance(relations, FMRelation) or not isinstance(relations, tuple | list):
        raise ValueError("test's fourth item must be a tuple of relation_design blocks")
    for position, relation in enumerate(relations):
        if not isinstance(relation, FMRelation):
            raise ValueError(
                f"test relation block {position} must come from bnpjax.models.fm.relation_design"
            )
        if relation.index.shape != (num_test,):
            raise ValueError(
                f"test relation block {position} has {relation.index.shape[0]} rows but "
                f"num_test = {num_test}"
            )
        block_cols = np.asarray(relation.cols)
        if block_cols.size and (block_cols.min() < 0 or block_cols.max() >= p):
            raise ValueError(
                f"test relation block {position} has feature ids outside 0..{p - 1} (the "
                f"features of data)"
            )
    if len(relations) != len(data.relations):
        raise ValueError(
            f"test has {len(relations)} relation blocks but data has {len(data.relations)}: "
            "the predictions would leave out features"
        )
    dtype = data.y.dtype
    arrays = (
        jnp.asarray(rows, jnp.int32),
        jnp.asarray(cols, jnp.int32),
        jnp.asarray(values, dtype),
        tuple(relations),
    )
    return arrays, num_test


def gibbs(
    data: FMData,
    *,
    rank: int = 10,
    likelihood: str = "gaussian",
    hyper: FMHyper | None = None,
    init_stdev: float = 0.1,
    fit_w0: bool = True,
    fit_linear: bool = True,
    num_levels: int | None = None,
    test=None,
    num_test: int = 0,
) -> SamplingAlgorithm:
    r"""The BFM Gibbs sampler (module docstring) as a kernel for :func:`bnpjax.sample`.

    Implements ``../shared/seeds/004_530d5665a5aa3b14.txt`` (with INDEX's corrections): the
    conjugate posteriors of its section "Factorization Machine as Hierarchical Bayesian Model"
    (:math:`a_n^\star, b_n^\star` for :math:`\sigma_n^2`; :math:`\mu_\theta^\star,
    \sigma_\theta^{\star 2}` for :math:`\theta \in \{b, w, v\}`; :math:`m_\theta^\star,
    \lambda_\theta^\star, a_\theta^\star, b_\theta^\star` for the hyperparameters) after the
    substitution :math:`x_\theta^{(d)} := h_\theta^{(d)}`, :math:`y_\theta^{(d)} := y^{(d)} -
    g_\theta^{(d)}`, with the cached :math:`f^{(d)}, q_k^{(d)}` and their update rule
    (:math:`\Delta f^{(d)}, \Delta q_k^{(d)}, h_\theta^{(d)}`, the last display). The seed
    numbers no equations; these are its symbols. ``w_i, v_i`` are drawn as one block and the
    probit/ordinal likelihoods are added (module docstring).

    ``test``: an optional COO design ``(rows, cols, values)`` with ``num_test`` rows, and
    optionally a fourth item, its relation blocks from :func:`relation_design` (one per block
    of ``data``), whose predictions ``yhat_test`` are traced at every kept draw (the estimators
    use this). Ordinal models need ``num_levels`` (default: the largest label + 1; labels are
    ``0..num_levels-1``) and fix ``b = 0``. Raises ``ValueError`` naming the argument when
    ``data.y`` does not fit ``likelihood`` (checked on the host unless ``data`` is traced),
    ``num_levels`` is not above every label, or ``test`` does not fit ``num_test`` and
    ``data``."""
    if not isinstance(data, FMData):
        raise ValueError("data must come from bnpjax.models.fm.make_data")
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be a non-negative integer, got {rank!r}")
    if not (np.isfinite(init_stdev) and init_stdev >= 0):
        raise ValueError(f"init_stdev must be >= 0, got {init_stdev}")
    hyper = make_hyper() if hyper is None else hyper
    if not isinstance(hyper, FMHyper):
        raise ValueError(
            f"hyper must come from bnpjax.models.fm.make_hyper, got {type(hyper).__name__}"
        )
    num_levels = _check_levels(data, likelihood, num_levels)
    test_arrays, num_test = _check_test(test, num_test, data)
    step_sizes = jnp.zeros((0,), data.y.dtype)
    if likelihood == "ordinal":
        fit_w0 = False
        # proposal scale ~ the posterior sd of each cutpoint parameter: a function of the data,
        # not adapted from the chain, so the Metropolis step stays exact (traceable, for Geweke)
        counts = jnp.bincount(data.y.astype(jnp.int32), length=num_levels)
        near = (counts[:-1] + counts[1:]).astype(data.y.dtype)
        step_sizes = 1.5 / jnp.sqrt(near + 1.0)
    static = dict(likelihood=likelihood, fit_w0=bool(fit_w0), fit_linear=bool(fit_linear))
    return SamplingAlgorithm(
        init=bind(
            _init,
            data,
            hyper,
            rank=rank,
            likelihood=likelihood,
            num_levels=int(num_levels),
            init_stdev=float(init_stdev),
            fit_w0=bool(fit_w0),
        ),
        step=bind(_step, data, hyper, step_sizes, **static),
        trace=bind(_trace, data, hyper, test_arrays, likelihood=likelihood, num_test=int(num_test)),
        spec=ArvizSpec(
            name=f"fm.gibbs.{likelihood}",
            dims={
                "w": ["feature"],
                "V": ["feature", "factor"],
                "mu_w": ["group"],
                "var_w": ["group"],
                "mu_v": ["group", "factor"],
                "var_v": ["group", "factor"],
                "cutpoints": ["cutpoint"],
                "yhat_test": ["test_row"],
            },
            settings={"rank": rank, "num_levels": num_levels, **static},
        ),
    )
