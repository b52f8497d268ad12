r"""The conditionals of the BFM Gibbs sweep, compiled: predictions from the layout, the
joint Gaussian draw of every feature of a colour, the relation-block sweep, and the
hyperparameter updates.

Every parameter enters :math:`\hat y^{(d)} = g^{(d)} + \theta h^{(d)}` linearly, so its
conditional is Gaussian (Rendle 2012, section 4.3; Freudenthaler, Schmidt-Thieme and Rendle
2011). The features ``(w_i, v_i1..v_iK)`` are drawn as one block from the same formulas in
matrix form, every feature of a colour at once (their conditionals do not interact); a
relation block's per-feature sums come from per-block-row sums without expanding the design
(Rendle 2013, section 5).

References
----------
Freudenthaler, C., Schmidt-Thieme, L. and Rendle, S. (2011). Bayesian factorization machines.
NIPS Workshop on Sparse Representation and Low-rank Approximation.

Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57.

Rendle, S. (2013). Scaling factorization machines to relational data. PVLDB 6(5), 337-348.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.models.fm.data import FMData
from bnpjax.models.fm.layout import SEGMENT_WIDTH, FMBlock, FMRelation
from bnpjax.ops import gaussian_from_precision, sample_inverse_gamma


def _num_rows(data: FMData) -> int:
    return data.y.shape[0]


def _gather_rows(vector, block: FMBlock, n: int):
    """``vector[rows]``; the padding rows of a bucketed colour (out of range) read 0."""
    if block.rows.shape[0] == n:
        return vector
    return vector.at[block.rows].get(mode="fill", fill_value=0)


def _add_rows(vector, block: FMBlock, values, n: int):
    """``vector[rows] += values``; a colour that covers every row is in row order already,
    and the padding rows of a bucketed colour (out of range) are dropped."""
    if block.rows.shape[0] == n:
        return vector + values
    return vector.at[block.rows].add(
        values, indices_are_sorted=True, unique_indices=True, mode="drop"
    )


def _feature_sums_of(block: FMBlock, H_pad, r_pad):
    """Per feature of ``block``: ``sum_d h h'`` and ``sum_d h r`` over its entries, from the
    rows of ``H_pad`` and ``r_pad`` (the entries plus a zero row) that the degree buckets
    index; a bucketed block sums its segments' parts by feature."""
    D = H_pad.shape[1]
    # [h, r] as one array, its Gram matrix ending in the column h r': one gather and one
    # reduction per bucket instead of two, 9 % of the sweep (ML-100K u1, rank 10: 38.5
    # against 42.0 ms, one process, 2026-11-28). The products are summed over the bucket's
    # width rather than by a batched einsum, which XLA's CPU backend runs as thousands of
    # tiny matrix products (64 against 86 ms per sweep, 2026-11-28)
    augmented = jnp.concatenate([H_pad, r_pad[:, None]], axis=1)
    if block.segment_feature is None:
        both = jnp.concatenate([_outer_sums(augmented[index]) for index in block.buckets])
        return both[:, :D, :D], both[:, :D, D]
    F = block.features.shape[0]
    both = jnp.zeros((F, D + 1, D + 1), H_pad.dtype)
    for index, owner in zip(block.buckets, block.segment_feature, strict=True):
        S, width = index.shape
        if not wide_segments(D + 1) and width > SEGMENT_WIDTH:
            # narrow segments again: with few factors a segment's sums are smaller than its
            # entries anyway, and XLA's CPU reduction over the wide ones runs slower (ML-100K
            # at rank 10: 17-20 against 24 ms per sweep, 2026-11-30)
            index = index.reshape(S * width // SEGMENT_WIDTH, SEGMENT_WIDTH)
            owner = jnp.repeat(owner, width // SEGMENT_WIDTH, total_repeat_length=index.shape[0])
        # each width's segments summed by feature (they are in feature order)
        # summed by feature as (segments, D + 1, D + 1): flattening the Gram matrices first
        # makes XLA's CPU emitter run the reduction about 3x slower
        sums = _outer_sums(augmented[index])
        both = both + jax.ops.segment_sum(sums, owner, F, indices_are_sorted=True)
    return both[:, :D, :D], both[:, :D, D]


#: the number of columns of ``[h, r]`` above which a bucketed colour's wide segments are
#: summed as they are (fewer per-segment sums); up to it they are cut into narrow ones
WIDE_SEGMENTS_FROM = SEGMENT_WIDTH


def wide_segments(columns: int) -> bool:
    """Whether the per-feature sums of ``[h, r]`` with ``columns`` columns use the wide
    segments of a bucketed colour, and the sweep XLA's YNNPACK fusions (which run the wide
    reductions as library calls): from ``rank = 15`` with linear weights. The sweep's time
    per sweep, classic emitters, ML-100K u1 (one process, interleaved, 2026-11-30): rank 16,
    29.9 ms as before, 23.5 with YNNPACK, 19.4 with both; rank 10, 14.8, 15.3 and 15.8 (equal
    within noise; the FM demo's small fits ran 0.70x as long without YNNPACK, 2026-11-28).
    ML-1M ratings, rank 32: 439 ms as before, 348 with YNNPACK, 254 with both."""
    return columns > WIDE_SEGMENTS_FROM


def _outer_sums(A):
    """``sum_w a a'`` over the middle axis of ``A`` (segments, width, columns)."""
    return jnp.sum(A[:, :, :, None] * A[:, :, None, :], axis=1)


def _take_features(array, block: FMBlock, fill=0):
    """``array[block.features]``; the padding features of a bucketed colour read ``fill``."""
    return array.at[block.features].get(mode="fill", fill_value=fill)


def _design_parts(rows, cols, values, num_rows: int, w, V):
    """Per row of a COO design: the linear part ``sum_i w_i x_i``, ``q = sum_i v_i x_i``
    (num_rows, K) and ``sum_i |v_i|^2 x_i^2``."""
    x = values
    xv = x[:, None] * V[cols]
    # one segment sum of the three parts: XLA's CPU scatter is a scalar loop per call
    parts = jnp.concatenate([(x * w[cols])[:, None], xv, jnp.sum(xv**2, axis=1)[:, None]], 1)
    sums = jax.ops.segment_sum(parts, rows, num_segments=num_rows)
    return sums[:, 0], sums[:, 1:-1], sums[:, -1]


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
        w_e = _take_features(w, block)[block.local]
        V_e = _take_features(V, block)[block.local]  # (nnz_c, K)
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
    diag(prior_precision)``, ``m = hr / noise_var + prior_precision * prior_mean``
    (:func:`bnpjax.ops.gaussian_from_precision`); ``noise`` is standard normal of the shape of
    ``hr``."""
    eye = jnp.eye(gram.shape[-1], dtype=gram.dtype)
    precision = gram / noise_var + prior_precision[:, :, None] * eye
    rhs = hr / noise_var + prior_precision * prior_mean
    return gaussian_from_precision(precision, rhs, noise)


def _joint_block(noise, e, q, block, theta, prior_mean, prior_precision, noise_var, n):
    """Draw ``theta_i = (w_i, v_i1..v_iK)`` (or the part that is sampled) of every feature
    of one colour from its joint Gaussian conditional, then update ``e`` and ``q``.

    ``hat y^{(d)} = g^{(d)} + theta_i . h^{(d)}`` with ``h = (x, x (q^{(d)} - v_i x))`` not
    depending on ``theta_i`` (Rendle 2012, section 4.3), so the conditional has precision
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
    gram, hr = _feature_sums_of(block, H_pad, r_pad)
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

    sums = segment(jnp.concatenate([r, e[:, None], r * e[:, None]], axis=1))  # one scatter
    S, E, R = sums[:, :K], sums[:, K], sums[:, K + 1 :]
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


def _relation_sweep(
    key, e, q, theta, relation, prior_mean, prior_precision, noise_var, K, row_sums=None
):
    """Draw ``theta_i`` of every feature of one relation block, chunk after chunk, from the
    block-row sums (Rendle 2013, section 5); returns the new ``theta``, ``e`` and ``q``.
    ``theta``, ``prior_*``: (p, D) for all features, ``D = K`` or ``K + 1`` (with ``w``).

    Per block row the sum of ``h h'`` is ``c hbar hbar' + [[0, 0], [0, x^2 Tc]]`` with
    ``hbar = x (1, a + S/c)`` and ``Tc = T - S S'/c``: ``Tc`` does not change within the
    block's sweep, so its part of each feature's precision is summed once per sweep and each
    entry of a chunk contributes a rank-one term; likewise ``R`` shifts by
    ``-x (S (hbar . dtheta) + Tc dv)``. ``row_sums`` replaces :func:`_block_row_sums` (tests
    build broken twins with it)."""
    p, D = theta.shape
    index, counts = relation.index, relation.counts
    linear = D > K
    w = theta[:, 0] if linear else jnp.zeros((p,), theta.dtype)
    lin_b, q_b, sq_b = _relation_parts(relation, w, theta[:, D - K :])
    r = q - q_b[index]
    S, T, E, R = (row_sums or _block_row_sums)(relation, r, e)
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
        # per-feature sums as matrix products with the entries' membership (F, P): XLA's CPU
        # scatter (a segment sum) is a scalar loop, and the chunk's step is on the critical path
        if F <= 8:
            member = (slot[None, :] == jnp.arange(F)[:, None]).astype(u.dtype)
            gram = jnp.einsum("fpk,pl->fkl", member[:, :, None] * u[None], u)
            hr = member @ h_e
        else:  # F x P x D^2 products would cost more than the scatter
            outer = (u[:, :, None] * u[:, None, :]).reshape(-1, D * D)
            sums = jax.ops.segment_sum(jnp.concatenate([outer, h_e], 1), slot, num_segments=F + 1)
            gram, hr = sums[:F, : D * D].reshape(F, D, D), sums[:F, D * D :]
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


def _group_row_sums(data: FMData, theta=None, entry=None):
    """``S[d, g] = sum_{i in g} x_di`` (n, G): how much a shift of every weight of group ``g``
    moves ``hat y^{(d)}``. A function of the design only. With ``theta`` (p,) the sums are
    weighted, ``sum_{i in g} x_di theta_i``; ``entry`` maps the values ``x_di`` first."""
    n, G = _num_rows(data), data.group_sizes.shape[0]
    entry = entry or (lambda x: x)
    one_hot = jax.nn.one_hot(data.group, G, dtype=data.y.dtype)  # (p, G)
    if theta is not None:
        one_hot = one_hot * theta[:, None]
    S = jnp.zeros((n, G), data.y.dtype)
    for block in data.blocks:
        entries = entry(block.values)[:, None] * _take_features(one_hot, block)[block.local]
        S = _add_rows(S, block, entries, n)
    for relation in data.relations:
        num = relation.counts.shape[0]
        entries = entry(relation.values)[:, None] * one_hot[relation.cols]
        S = S + jax.ops.segment_sum(entries, relation.rows, num_segments=num)[relation.index]
    return S


def _two_sided(data: FMData):
    """Whether there are two groups and no row holds two features of one group: every
    pairwise term then pairs a feature of group 0 with one of group 1 (users and items). A
    Python bool from the host copy of the design when it is concrete (no program to compile
    for it), else a traced bool; False whenever the number of groups is not two."""
    if data.group_sizes.shape[0] != 2:
        return False
    host = _two_sided_on_host(data)
    if host is not None:
        return host
    counts = _group_row_sums(data, entry=lambda x: (x != 0).astype(data.y.dtype))
    return jnp.all(counts <= 1)


def _two_sided_on_host(data: FMData):
    """:func:`_two_sided` with NumPy, or None while the design is traced."""
    try:
        group = np.asarray(data.group)
        n, p = data.y.shape[0], group.shape[0]
        counts = np.zeros((n, 2), np.int64)
        for block in data.blocks:
            rows, values = np.asarray(block.rows), np.asarray(block.values)
            ids = np.asarray(block.features)[np.asarray(block.local)]
            keep = (ids < p) & (values != 0) & (rows < n)
            np.add.at(counts, (rows[keep], group[ids[keep]]), 1)
        for relation in data.relations:
            per_block_row = np.zeros((np.asarray(relation.counts).shape[0], 2), np.int64)
            rows, cols = np.asarray(relation.rows), np.asarray(relation.cols)
            keep = np.asarray(relation.values) != 0
            np.add.at(per_block_row, (rows[keep], group[cols[keep]]), 1)
            counts += per_block_row[np.asarray(relation.index)]
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None
    return bool(np.all(counts <= 1))


#: random-walk scales of the factor-scale move's log factor, cycled
FACTOR_SCALE_STEPS = (0.05, 0.2, 0.5, 1.0) * 2


def _factor_scale_block(
    log_uniforms, hyper, group, V, mu_v, var_v, *, normals, two_sided, items_side=1.0
):
    r"""Scale factor ``k`` of group 0 (users) by :math:`c_k` and of group 1 (items) by
    :math:`1/c_k`, each with its prior mean and sd, by Metropolis-Hastings on :math:`s_k =
    \log c_k` (``FACTOR_SCALE_STEPS`` random-walk steps, all factors at once); returns ``V,
    mu_v, var_v``. Only when ``two_sided`` (:func:`_two_sided`), else nothing changes.

    Every pairwise term is :math:`x_a x_b \sum_k v_{ak} v_{bk}` with ``a`` in group 0 and
    ``b`` in group 1, so no prediction changes. The standardised factors
    :math:`(v - \mu)/\sqrt{var}` are held, so their density and the map's Jacobian
    (:math:`c^{n_0 + 3 - n_1 - 3}`) cancel the factors' priors, and what is left is the
    hyperpriors of the two sides' means and variances (InvGamma(:math:`\alpha_0/2,
    \beta_0/2`), :math:`N(\mu_0, var/\gamma_0)`):

    .. math::

        -\frac{\gamma_0 (\mu_0' - \mu_0 e^{-s})^2 + \beta_0 e^{-2s}}{2 var_0'}
        -\frac{\gamma_0 (\mu_1' - \mu_0 e^{s})^2 + \beta_0 e^{2s}}{2 var_1'}

    with :math:`\mu_g', var_g'` the current values of factor ``k`` (the :math:`\alpha_0 s`
    terms of the two sides cancel). Why: the data fix only the products of users' and items'
    factors, their balance only these weak hyperpriors, and the Gibbs updates given the
    variances move it by a few per cent per sweep: on ML-100K u1 the sums of squares of the
    users' and the items' factors had ESS 6-11 in 1500 sweeps, with the items' ``var_w``
    among the quantities tied to them. ``items_side=0.5`` halves the items' terms (the broken
    twin of the Geweke test). ``normals`` (K, ``len(FACTOR_SCALE_STEPS)``) and
    ``log_uniforms`` (``len(FACTOR_SCALE_STEPS)``, K): the proposals' and the tests' draws.

    References
    ----------
    Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo
    for Bayesian computation. Biometrika 87(2), 353-369.
    """
    K = V.shape[1]
    steps = jnp.asarray(FACTOR_SCALE_STEPS, V.dtype)
    gamma, beta, mu_0 = hyper.gamma_0, hyper.beta_0, hyper.mu_0

    def log_target(s):  # (K,)
        side0 = gamma * (mu_v[0] - mu_0 * jnp.exp(-s)) ** 2 + beta * jnp.exp(-2 * s)
        side1 = gamma * (mu_v[1] - mu_0 * jnp.exp(s)) ** 2 + beta * jnp.exp(2 * s)
        return -side0 / (2 * var_v[0]) - items_side * side1 / (2 * var_v[1])

    def one(s, xs):
        step, normal, log_uniform = xs
        proposal = s + step * normal
        take = log_uniform < log_target(proposal) - log_target(s)
        return jnp.where(take, proposal, s), None

    s, _ = jax.lax.scan(one, jnp.zeros((K,), V.dtype), (steps, normals.T, log_uniforms))
    c = jnp.where(two_sided, jnp.exp(s), 1.0)
    factor = jnp.stack([c, 1.0 / c])  # (2, K)
    return V * factor[group], mu_v * factor, var_v * factor**2


#: random-walk scales of the scale move's log factor, cycled (each step is exact on its own)
SCALE_STEPS = (0.02, 0.05, 0.1, 0.2, 0.5) * 4


def _scale_block(
    log_uniforms, data, hyper, e, w, mu_w, var_w, noise_var, *, normals, jacobian=True
):
    r"""Rescale each group's linear weights about their mean together with its variance:
    ``w_i -> mu_g + c (w_i - mu_g)``, ``var_g -> c^2 var_g``, by Metropolis-Hastings on
    :math:`t = \log c` (``SCALE_STEPS`` random-walk steps per group); returns ``w, var_w, e``.

    In the non-centred parametrisation :math:`z_i = (w_i - \mu_g)/\sqrt{var_g}` this is an
    MH step on :math:`u = \log var_g` with ``z`` held, whose target is the likelihood times
    :math:`p(var_g) p(\mu_g \mid var_g) var_g` (the Jacobian; ``z``'s density is free of
    ``var_g``): :math:`-(\alpha_0/2 + 1/2) u - S e^{-u}` with :math:`S = \beta_0/2 +
    \gamma_0 (\mu_g - \mu_0)^2/2`. The predictions move by ``(c - 1) D_g`` with ``D`` from
    :func:`_group_row_sums` of the deviations, so the likelihood is a quadratic in ``c`` and
    every step costs O(1) after one O(nnz) pass. It interweaves the centred Gibbs draws of
    ``var_w`` (Yu and Meng 2011): a group of many weakly informed weights (items with few
    ratings) otherwise moves its variance by a few per cent per sweep. ``jacobian=False``
    drops the Jacobian (the broken twin of the Geweke test). ``normals`` (G,
    ``len(SCALE_STEPS)``) standard normal, the random walk's steps; ``key`` its uniforms.

    References
    ----------
    Yu, Y. and Meng, X.-L. (2011). To center or not to center: that is not the question. An
    ancillarity-sufficiency interweaving strategy (ASIS) for boosting MCMC efficiency. JCGS
    20(3), 531-570.
    """
    G = var_w.shape[0]
    D = _group_row_sums(data, w - mu_w[data.group])  # (n, G)
    # every group's move sees the residual the previous ones left, e - sum_{h<g} (c_h - 1) d_h,
    # so its quadratic needs only A = D'D and D'e: one O(n G^2) pass, then a scan over the
    # groups of O(G) work per step (a scan per group, over the rows, cost more than the rest)
    A = D.T @ D
    r0 = D.T @ e + jnp.diagonal(A)  # (e + d_g) . d_g before any group moves
    rate = hyper.beta_0 / 2 + hyper.gamma_0 * (mu_w - hyper.mu_0) ** 2 / 2
    power = hyper.alpha_0 / 2 + (0.5 if jacobian else 1.5)
    steps = jnp.asarray(SCALE_STEPS, e.dtype)

    def group_move(moved, g):  # moved: c - 1 of the groups before g (0 for the others)
        a, r = A[g, g], r0[g] - A[g] @ moved

        def log_target(t):
            c = jnp.exp(t)
            u = jnp.log(var_w[g]) + 2 * t
            return -(a * c**2 - 2 * r * c) / (2 * noise_var) - power * u - rate[g] * jnp.exp(-u)

        def one(t, xs):
            proposal = t + xs[0] * xs[1]
            take = xs[2] < log_target(proposal) - log_target(t)
            return jnp.where(take, proposal, t), None

        t, _ = jax.lax.scan(one, jnp.zeros((), e.dtype), (steps, normals[g], log_uniforms[g]))
        return moved.at[g].set(jnp.exp(t) - 1), None

    moved, _ = jax.lax.scan(group_move, jnp.zeros((G,), e.dtype), jnp.arange(G))
    e = e - D @ moved
    c = 1 + moved
    w = mu_w[data.group] + c[data.group] * (w - mu_w[data.group])
    return w, var_w * c**2, e


def _intercept_block(noise, data, hyper, e, b, w, mu_w, var_w, noise_var, *, fit_w0, fit_linear):
    r"""Draw the intercept ``b`` and the linear weights' prior means ``mu_w`` jointly from
    their Gaussian conditional given the deviations ``eta = w - mu_w[group]`` (and ``V``, the
    variances, the targets), then set ``w = eta + mu_w[group]``; returns ``b, mu_w, w, e``.

    In the parametrisation ``(b, mu_w, eta)`` (unit Jacobian) ``hat y^{(d)} = b + sum_g
    mu_w[g] S_dg + (terms free of b, mu_w)`` with ``S`` from :func:`_group_row_sums`, and the
    prior is ``b ~ N(0, 1/reg_0)``, ``mu_w[g] ~ N(mu_0, var_w[g]/gamma_0)``, ``eta_i ~ N(0,
    var_w[g_i])`` independently, so this is an exact Gibbs step on ``(b, mu_w)`` (Rendle
    2012, section 4.3, in another parametrisation). With one-hot groups ``b`` and a common
    shift of a group's weights and their mean give the same predictions; one-at-a-time
    updates of ``b``, ``w`` and ``mu_w`` crawl along that ridge, this step crosses it in one
    draw. ``e`` is the residual ``target - hat y``; ``noise`` (1, ``fit_w0 + G``) standard
    normal."""
    columns, current, prior_mean, prior_precision = [], [], [], []
    if fit_w0:
        columns.append(jnp.ones_like(e)[:, None])
        current.append(b[None])
        prior_mean.append(jnp.zeros((1,), e.dtype))
        prior_precision.append(hyper.reg_0[None])
    if fit_linear:
        columns.append(_group_row_sums(data))
        current.append(mu_w)
        prior_mean.append(jnp.broadcast_to(hyper.mu_0, mu_w.shape))
        prior_precision.append(hyper.gamma_0 / var_w)
    C = jnp.concatenate(columns, axis=1)  # (n, D)
    theta = jnp.concatenate(current)
    r = e + C @ theta
    new = _gaussian_draw(
        (C.T @ C)[None], (C.T @ r)[None], jnp.concatenate(prior_mean)[None],
        jnp.concatenate(prior_precision)[None], noise, noise_var,
    )[0]  # fmt: skip
    e = r - C @ new
    if fit_w0:
        b = new[0]
    if fit_linear:
        new_mu = new[theta.shape[0] - mu_w.shape[0] :]
        w = w + (new_mu - mu_w)[data.group]
        mu_w = new_mu
    return b, mu_w, w, e


def _normal_hyper(normals, theta, group, sizes, var, hyper):
    """Per group (and factor): mu | var, theta, then the conditional of var | mu, theta
    (Rendle 2012, section 4.3) as the shape and scale of its inverse gamma, which
    :func:`_inverse_gamma_draws` draws together with the sweep's other variances.
    ``theta`` (p, ...), ``var`` and ``normals`` (standard normal) (G, ...); returns
    ``mu, (shape, scale)``."""
    G = sizes.shape[0]
    extra = (1,) * (theta.ndim - 1)
    n_g = sizes.reshape((G, *extra))
    total = jax.ops.segment_sum(theta, group, num_segments=G)
    lam = n_g + hyper.gamma_0
    mu = (total + hyper.gamma_0 * hyper.mu_0) / lam + jnp.sqrt(var / lam) * normals
    dev = jax.ops.segment_sum((theta - mu[group]) ** 2, group, num_segments=G)
    shape = jnp.broadcast_to(hyper.alpha_0 / 2 + (n_g + 1) / 2, var.shape)
    scale = hyper.beta_0 / 2 + 0.5 * (dev + hyper.gamma_0 * (mu - hyper.mu_0) ** 2)
    return mu, (shape, scale)


def _standard_draws(key, normal_shapes, uniform_shapes, dtype):
    """Standard normal arrays of ``normal_shapes`` and the logs of uniform arrays of
    ``uniform_shapes`` (the MH moves' tests), all from one call of the uniform sampler: each
    call compiles its own counter-based hash, and the sweep's normal draws (the groups'
    means, the intercept block, the scale moves, the colours' noise) were 1,324 of its 7,973
    HLO lines in five calls (ML-100K u1, rank 10, 2026-11-28). The normals are
    :func:`jax.random.normal`'s (the same uniforms on ``(-1, 1)``, the same inverse error
    function; with JAX's default partitionable threefry the hash is counter-based, so the
    first values of a longer call are those of a shorter one), the uniforms ``(v + 1) / 2``
    of the values ``v`` after them."""
    # no numpy here: a stored traced program's key reads the attributes a function may
    # reach through the modules it uses, and numpy's ``random`` next to ``jax.random``
    # leads it to a numpy object it cannot fingerprint (bnpjax.infer.traced_programs)
    sizes = [math.prod(shape) for shape in normal_shapes]
    extra = [math.prod(shape) for shape in uniform_shapes]
    low = jnp.nextafter(jnp.asarray(-1.0, dtype), jnp.asarray(0.0, dtype))
    flat = jax.random.uniform(key, (sum(sizes) + sum(extra),), dtype, low, 1.0)
    normals = jnp.sqrt(jnp.asarray(2.0, dtype)) * jax.lax.erf_inv(flat[: sum(sizes)])
    log_uniforms = jnp.log((flat[sum(sizes) :] + 1.0) / 2.0)
    return _split_flat(normals, normal_shapes), _split_flat(log_uniforms, uniform_shapes)


def _split_flat(flat, shapes):
    """``flat`` cut, in order, into arrays of the given shapes."""
    out, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(flat[start : start + size].reshape(shape))
        start += size
    return out


def _inverse_gamma_draws(key, conditionals):
    """One inverse-gamma draw per element of each ``(shape, scale)`` pair, all from one call
    of the gamma sampler: each call of :func:`jax.random.gamma` compiles to a rejection loop
    of about a thousand HLO lines, and the sweep's variances (``var_w``, ``var_v``, the
    noise) are conditionally independent given ``b, w, V`` and the means, so drawing them
    together is the same Gibbs step with one rejection loop instead of three (ML-100K u1,
    rank 10: the sampling chunk had 11,603 lines, 3,449 of them the gamma sampler,
    2026-11-28)."""
    pairs = [jnp.broadcast_arrays(shape, scale) for shape, scale in conditionals]
    shapes = jnp.concatenate([jnp.ravel(shape) for shape, _ in pairs])
    scales = jnp.concatenate([jnp.ravel(scale) for _, scale in pairs])
    draws = sample_inverse_gamma(key, shapes.astype(scales.dtype), scales)
    return _split_flat(draws, [scale.shape for _, scale in pairs])


def _predict_coo(rows, cols, values, num_rows: int, b, w, V, relations=()):
    """``hat y`` (num_rows,) of one draw for the COO design ``(rows, cols, values)`` and the
    relation blocks ``relations`` (:func:`bnpjax.models.fm.layout.relation_design`), through
    the cached :math:`q_k = \\sum_j v_{jk} x_j` (Rendle 2012, eq. 5)."""
    linear, q, squares = _design_parts(rows, cols, values, num_rows, w, V)
    for relation in relations:
        lin_b, q_b, sq_b = _relation_parts(relation, w, V)
        linear = linear + lin_b[relation.index]
        q = q + q_b[relation.index]
        squares = squares + sq_b[relation.index]
    return b + linear + 0.5 * (jnp.sum(q**2, axis=1) - squares)
