r"""The Gibbs sampler of the Bayesian factorization machine (Rendle 2012; libFM's MCMC).

One sweep: when the design pairs users with items only (two groups, at most one feature of
each per row), the factors of the two sides are first rescaled against each other with
their priors' means and variances, which leaves every prediction as it is (an exact
Metropolis step on the balance that only the hyperpriors fix, and that the Gibbs updates
move by a few per cent per sweep). Then, in libFM's order: the per-group hyperparameters
(and the noise variance) given the current parameters, then the intercept ``b`` jointly
with the linear weights' prior means ``mu_w`` (the weights moving with their means, so that
one-hot groups, which make ``b`` and a common shift of a group's weights interchangeable,
do not stall the chain), then each group's linear weights rescaled about their mean with
their variance by an exact Metropolis step (an interweaving of the centred and non-centred
parametrisations, Yu and Meng 2011: the variance of many weakly informed weights otherwise
crawls), then ``theta_i = (w_i, v_i1..v_iK)`` of every feature as one Gaussian block, all
features of a colour at once (:mod:`bnpjax.models.fm.layout`), relation blocks without
expanding the design (Rendle 2013). Probit and ordered-probit likelihoods add a latent Gaussian per
target (Albert and Chib 1993) and, for ordinal targets, a Metropolis step for the
cutpoints (Cowles 1996); ordinal models fix ``b = 0`` (it is not identified beside the
cutpoints).

References
----------
Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57.

Rendle, S. (2013). Scaling factorization machines to relational data. PVLDB 6(5), 337-348.

Freudenthaler, C., Schmidt-Thieme, L. and Rendle, S. (2011). Bayesian factorization
machines. NIPS Workshop on Sparse Representation and Low-rank Approximation.

Yu, Y. and Meng, X.-L. (2011). To center or not to center: that is not the question. JCGS
20(3), 531-570.

Liu, J. S. and Sabatti, C. (2000). Generalised Gibbs sampler and multigrid Monte Carlo for
Bayesian computation. Biometrika 87(2), 353-369.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, as_step, bind, concrete_or_none
from bnpjax.infer.checks import check_flag, check_integer, check_start_scale, renamed_arguments
from bnpjax.infer.programs import WITHOUT_YNN_FUSIONS
from bnpjax.models.fm.conditionals import (
    FACTOR_SCALE_STEPS,
    SCALE_STEPS,
    _factor_scale_block,
    _intercept_block,
    _inverse_gamma_draws,
    _joint_block,
    _normal_hyper,
    _predict_coo,
    _predict_parts,
    _relation_sweep,
    _scale_block,
    _standard_draws,
    _take_features,
    _two_sided,
    wide_segments,
)
from bnpjax.models.fm.data import (
    LIKELIHOODS,
    FMData,
    FMHyper,
    FMInfo,
    FMState,
    check_targets,
    make_hyper,
)
from bnpjax.models.fm.layout import FMRelation
from bnpjax.models.fm.likelihoods import _cutpoint_step, _log_likelihood_terms, _sample_latent

__all__ = ["build_step", "gibbs", "init"]


def _step(
    data, hyper, step_sizes, two_sided, key, state, *, likelihood, fit_w0, fit_linear,
    joint_block=None, row_sums=None, intercept_block=None, sample_noise=True,
    scale_block=None, factor_scale_block=None,
):  # fmt: skip
    """One sweep (module docstring). ``joint_block``, ``row_sums``, ``intercept_block`` and
    ``scale_block``, ``factor_scale_block`` replace the colour draw, the relation block-row
    sums, the joint ``(b, mu_w)`` draw, the scale move and the factor-scale move (tests build
    broken twins with them). ``two_sided``: the factor-scale move applies
    (:func:`~bnpjax.models.fm.conditionals._two_sided`).
    ``sample_noise=False`` keeps the state's noise variance (a block of
    ``numpyro.infer.Gibbs`` whose noise another block samples)."""
    joint_block = joint_block or _joint_block
    n = data.y.shape[0]
    K = state.V.shape[1]
    keys = jax.random.split(key, 8)
    G, p = data.group_sizes.shape[0], data.group.shape[0]
    D = int(fit_linear) + K
    # every standard normal of the sweep from one call (_standard_draws)
    # the factor-scale move's normals are drawn for every two-group design, whether or not
    # it applies, so that deciding it on the host or in the trace gives the same draws
    balance = G == 2 and K > 0
    shapes = [(G,), (G, K), (1, int(fit_w0) + G * int(fit_linear)), (G, len(SCALE_STEPS))]
    shapes += [(K * int(balance), len(FACTOR_SCALE_STEPS)), (p, D)]
    # and the MH moves' uniforms after them, in the same call
    tests = [(len(FACTOR_SCALE_STEPS), K * int(balance)), (G, len(SCALE_STEPS))]
    normals, (log_u_balance, log_u_scale) = _standard_draws(keys[3], shapes, tests, state.w.dtype)
    normals_w, normals_v, normals_b, normals_scale, normals_balance, noise = normals
    if balance and two_sided is not False:  # users' factors against items', same predictions
        V, mu_v, var_v = (factor_scale_block or _factor_scale_block)(
            log_u_balance, hyper, data.group, state.V, state.mu_v, state.var_v,
            normals=normals_balance, two_sided=two_sided,
        )  # fmt: skip
        state = state._replace(V=V, mu_v=mu_v, var_v=var_v)
    yhat, q = _predict_parts(data, state.b, state.w, state.V)
    # hyperparameters first, given the current b, w, V (libFM's order): from the usual start,
    # w = 0 and small V, the first sweeps then use variances fitted to them rather than the
    # initial unit variances, which would let V overshoot and lengthen burn-in
    group, sizes = data.group, data.group_sizes
    variances = []  # (shape, scale) of each inverse-gamma conditional, drawn in one call
    if fit_linear:
        mu_w, conditional_w = _normal_hyper(normals_w, state.w, group, sizes, state.var_w, hyper)
        variances.append(conditional_w)
    else:
        mu_w, var_w = state.mu_w, state.var_w
    mu_v, conditional_v = _normal_hyper(normals_v, state.V, group, sizes, state.var_v, hyper)
    variances.append(conditional_v)
    cutpoints, accepted = state.cutpoints, jnp.ones((), yhat.dtype)
    noise_var = state.noise_var if likelihood == "gaussian" else jnp.ones((), yhat.dtype)
    if likelihood == "gaussian":
        resid = data.y - yhat
        if sample_noise:
            variances.append((hyper.alpha_0 / 2 + n / 2, hyper.beta_0 / 2 + 0.5 * resid @ resid))
        target = data.y
    else:
        if likelihood == "ordinal":
            cutpoints, accepted = _cutpoint_step(
                keys[0], data.y, yhat, state.cutpoints, hyper, step_sizes
            )
        target = _sample_latent(keys[1], data.y, yhat, cutpoints, likelihood)
    # var_w, var_v and the noise are independent given b, w, V and the means
    drawn = _inverse_gamma_draws(keys[7], variances)
    if fit_linear:
        var_w = drawn.pop(0)
    var_v = drawn.pop(0)
    if drawn:
        noise_var = drawn.pop(0)
    e = target - yhat

    # b with mu_w (the weights' deviations from it held): with one-hot groups they are
    # confounded, and b alone would crawl along the ridge (_intercept_block)
    b, w = state.b, state.w
    if fit_w0 or fit_linear:
        b, mu_w, w, e = (intercept_block or _intercept_block)(
            normals_b, data, hyper, e, b, w, mu_w, var_w, noise_var,
            fit_w0=fit_w0, fit_linear=fit_linear,
        )  # fmt: skip
    if fit_linear:  # var_w with the spread of w (_scale_block)
        w, var_w, e = (scale_block or _scale_block)(
            log_u_scale, data, hyper, e, w, mu_w, var_w, noise_var, normals=normals_scale
        )

    # theta_i = (w_i, v_i): one joint Gaussian block per feature, all features of a colour at
    # once (module docstring); the prior's mean and precision per feature follow its group
    parts, means, precisions = [], [], []
    if fit_linear:
        parts.append(w[:, None])
        means.append(mu_w[group][:, None])
        precisions.append(1.0 / var_w[group][:, None])
    if K:
        parts.append(state.V)
        means.append(mu_v[group])
        precisions.append(1.0 / var_v[group])
    V = state.V
    if parts:
        theta = jnp.concatenate(parts, axis=1)
        prior_mean = jnp.concatenate(means, axis=1)
        prior_precision = jnp.concatenate(precisions, axis=1)
        for block in data.blocks:  # a bucketed block's padding features: see FMBlock
            new, e, q = joint_block(
                _take_features(noise, block), e, q, block, _take_features(theta, block),
                _take_features(prior_mean, block), _take_features(prior_precision, block, 1),
                noise_var, n,
            )  # fmt: skip
            theta = theta.at[block.features].set(new, mode="drop")
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
                row_sums,
            )
        if fit_linear:
            w = theta[:, 0]
        V = theta[:, theta.shape[1] - K :]

    new = FMState(b, w, V, noise_var, mu_w, var_w, mu_v, var_v, cutpoints)
    yhat = target - e
    pointwise = _log_likelihood_terms(data.y, yhat, noise_var, cutpoints, likelihood)
    info = FMInfo(
        lp=jnp.sum(pointwise),
        rmse=jnp.sqrt(jnp.mean(e**2)),
        acceptance_rate=accepted,
        log_likelihood=pointwise,
    )
    return new, info


def _init(data, hyper, key, *, rank, likelihood, num_levels, init_scale, fit_w0):
    """libFM/myFM's start: b = 0, w = 0, V ~ N(0, init_scale^2), unit variances; ordinal
    cutpoints at the normal quantiles of the observed level frequencies."""
    dtype = data.y.dtype
    p = data.group.shape[0]
    G = data.group_sizes.shape[0]
    V = init_scale * jax.random.normal(key, (p, rank), dtype)
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


def _step_sizes(data: FMData, likelihood: str, num_levels: int) -> jax.Array:
    """Proposal scales of the ordinal cutpoint parameters, about their posterior sd: a
    function of the data, not adapted from the chain, so the Metropolis step stays exact
    (and traceable, for Geweke). Empty for the other likelihoods."""
    if likelihood != "ordinal":
        return jnp.zeros((0,), data.y.dtype)
    counts = jnp.bincount(data.y.astype(jnp.int32), length=num_levels)
    near = (counts[:-1] + counts[1:]).astype(data.y.dtype)
    return 1.5 / jnp.sqrt(near + 1.0)


def _check_settings(data, hyper, rank, likelihood, init_scale, num_levels):
    """Validate the factory's settings; returns ``hyper`` (defaults for None) and the number
    of ordinal levels (0 for the other likelihoods)."""
    if not isinstance(data, FMData):
        raise ValueError("data must come from bnpjax.models.fm.make_data")
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    check_integer(rank, "rank", 0)
    check_start_scale(init_scale, "init_scale")
    hyper = make_hyper() if hyper is None else hyper
    if not isinstance(hyper, FMHyper):
        raise ValueError(
            f"hyper must come from bnpjax.models.fm.make_hyper, got {type(hyper).__name__}"
        )
    return hyper, _check_levels(data, likelihood, num_levels)


def init(
    key, data: FMData, hyper: FMHyper | None = None, *, rank: int = 10,
    likelihood: str = "gaussian", init_scale: float = 0.1, fit_w0: bool = True,
    fit_linear: bool = True, num_levels: int | None = None, **unused,
) -> FMState:  # fmt: skip
    """The sampler's start (libFM's and myFM's): ``b = 0`` (the mean target for Gaussian
    models with an intercept), ``w = 0``, ``V ~ N(0, init_scale^2)``, unit variances, ordinal
    cutpoints at the normal quantiles of the observed level frequencies.

    Parameters
    ----------
    key : jax.random.key
    data : FMData
    hyper : FMHyper, optional
    rank, likelihood, init_scale, fit_w0, fit_linear, num_levels
        the settings of :func:`gibbs` (other keywords of :func:`gibbs` are ignored).

    Returns
    -------
    FMState
    """
    hyper, num_levels = _check_settings(data, hyper, rank, likelihood, init_scale, num_levels)
    check_flag(fit_linear, "fit_linear")  # no part in the start, but checked like the rest
    fit_w0 = check_flag(fit_w0, "fit_w0") and likelihood != "ordinal"
    return _init(
        data, hyper, key, rank=rank, likelihood=likelihood, num_levels=num_levels,
        init_scale=float(init_scale), fit_w0=fit_w0,
    )  # fmt: skip


def build_step(
    *, likelihood: str = "gaussian", fit_w0: bool = True, fit_linear: bool = True,
    num_levels: int | None = None, **unused,
):  # fmt: skip
    """One Gibbs sweep as a pure function ``step(key, state, data, hyper) -> (state, info)``.

    Parameters
    ----------
    likelihood, fit_w0, fit_linear, num_levels
        the settings of :func:`gibbs` (other keywords of :func:`gibbs` are ignored). Ordinal
        models need ``num_levels`` or concrete ``data.y`` (the largest label + 1).

    Returns
    -------
    callable
        ``step(key, state, data, hyper) -> (FMState, FMInfo)``.
    """
    if likelihood not in LIKELIHOODS:
        raise ValueError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
    fit_w0 = check_flag(fit_w0, "fit_w0") and likelihood != "ordinal"
    fit_linear = check_flag(fit_linear, "fit_linear")

    def derive(data, hyper):
        levels = _check_levels(data, likelihood, num_levels)
        return _step_sizes(data, likelihood, levels), _two_sided(data)

    return as_step(
        _step, derive=derive, likelihood=likelihood, fit_w0=fit_w0, fit_linear=fit_linear
    )


def _trace(data, hyper, test, state, info, *, likelihood, num_test, pointwise):
    posterior = {
        "b": state.b,
        "w": state.w,
        "V": state.V,
        "mu_w": state.mu_w,
        "var_w": state.var_w,
        "mu_v": state.mu_v,
        "var_v": state.var_v,
    }
    pointwise_terms = info.log_likelihood
    stats = {"lp": info.lp, "rmse": info.rmse}
    if likelihood == "gaussian":
        posterior["noise_var"] = state.noise_var
        posterior, stats, pointwise_terms = _to_target_units(
            data, posterior, stats, pointwise_terms
        )
    if likelihood == "ordinal":
        posterior["cutpoints"] = state.cutpoints
    if likelihood == "ordinal":
        stats["acceptance_rate"] = info.acceptance_rate
    if test is not None:
        rows, cols, values, relations = test
        stats["yhat_test"] = _predict_coo(
            rows, cols, values, num_test, posterior["b"], posterior["w"], posterior["V"],
            relations,
        )  # fmt: skip
    out = {"posterior": posterior, "sample_stats": stats}
    if pointwise:
        out["log_likelihood"] = {"y": pointwise_terms}
    return out


def _to_target_units(data, posterior, stats, pointwise_terms):
    """Draws of the standardised gaussian model (``make_data``) back in the targets' units:
    ``y = y_loc + y_scale y'`` makes ``b = y_loc + y_scale b'``, ``w = y_scale w'``,
    ``V = sqrt(y_scale) V'`` (an interaction is a product of two rows of ``V``) and the
    variances of each by the square of its factor."""
    loc, scale = data.y_loc, data.y_scale
    root = jnp.sqrt(scale)
    factor = {"w": scale, "mu_w": scale, "var_w": scale**2, "V": root, "mu_v": root,
              "var_v": scale, "noise_var": scale**2}  # fmt: skip
    posterior = {k: v * factor[k] if k in factor else v for k, v in posterior.items()}
    posterior["b"] = loc + scale * posterior["b"]
    log_scale = jnp.log(scale)
    stats = dict(stats, lp=stats["lp"] - pointwise_terms.shape[0] * log_scale,
                 rmse=stats["rmse"] * scale)  # fmt: skip
    return posterior, stats, pointwise_terms - log_scale


def _check_levels(data: FMData, likelihood: str, num_levels) -> int:
    """Validate ``data.y`` against ``likelihood`` on the host (skipped while ``data`` is traced,
    as in the Geweke harness, whose data come from :func:`data_sample`) and return the number
    of ordinal levels (0 for the other likelihoods). Labels are ``0..num_levels-1``, so
    ``num_levels`` must exceed the largest label: at or below it, the bincount of the labels
    would drop the higher levels."""
    y = concrete_or_none(data.y)
    loc, scale = concrete_or_none(data.y_loc), concrete_or_none(data.y_scale)
    standardised = loc is not None and scale is not None and (loc != 0 or scale != 1)
    if likelihood != "gaussian" and standardised:
        raise ValueError(
            f"data holds standardised gaussian targets, not {likelihood} labels: build it with "
            f"make_data(X, y, likelihood={likelihood!r})"
        )
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


@renamed_arguments(init_stdev="init_scale")
def gibbs(
    data: FMData,
    hyper: FMHyper | None = None,
    *,
    rank: int = 10,
    likelihood: str = "gaussian",
    init_scale: float = 0.1,
    fit_w0: bool = True,
    fit_linear: bool = True,
    num_levels: int | None = None,
    test=None,
    num_test: int = 0,
    pointwise_log_likelihood: bool = True,
    sample_noise: bool = True,
) -> SamplingAlgorithm:
    r"""The BFM Gibbs sampler as a kernel for :func:`bnpjax.sample`.

    The conjugate updates of Rendle (2012, section 4.3; Freudenthaler et al. 2011) with
    ``(w_i, v_i)`` drawn as one block and the features of a colour drawn together (module
    docstring); probit and ordered-probit likelihoods by latent Gaussians.

    Parameters
    ----------
    data : FMData
        from :func:`bnpjax.models.fm.make_data`.
    hyper : FMHyper, optional
        from :func:`bnpjax.models.fm.make_hyper` (None: its defaults, myFM's).
    rank : int
        the number of factors ``K`` (0: a linear model).
    likelihood : {"gaussian", "probit", "ordinal"}
    init_scale : float
        sd of the random start of ``V`` (myFM's ``init_stdev``, the deprecated keyword).
    fit_w0, fit_linear : bool
        sample the intercept and the linear weights (else they stay 0). Ordinal models fix
        ``b = 0``.
    num_levels : int, optional
        ordinal models: the number of levels (default the largest label + 1; labels are
        ``0..num_levels-1``).
    test : tuple, optional
        a COO design ``(rows, cols, values)`` with ``num_test`` rows, optionally with a fourth
        item, its relation blocks from :func:`bnpjax.models.fm.layout.relation_design` (one
        per block of ``data``): ``yhat_test`` is traced in ``sample_stats`` at every kept draw.
    num_test : int
        the number of rows of ``test``.
    pointwise_log_likelihood : bool
        trace the pointwise log-likelihood of the training targets (group
        ``log_likelihood``, variable ``y``, dim ``obs``), for ``az.loo``.
    sample_noise : bool
        gaussian likelihood: sample the noise variance (else it keeps the state's value, as
        in :func:`gibbs_block`, where another block samples it).

    Returns
    -------
    SamplingAlgorithm

    Raises
    ------
    ValueError
        naming the argument, when ``data.y`` does not fit ``likelihood`` (checked on the host
        unless ``data`` is traced), ``num_levels`` is not above every label, or ``test`` does
        not fit ``num_test`` and ``data``.

    References
    ----------
    Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57.
    """
    hyper, num_levels = _check_settings(data, hyper, rank, likelihood, init_scale, num_levels)
    fit_w0 = check_flag(fit_w0, "fit_w0") and likelihood != "ordinal"
    fit_linear = check_flag(fit_linear, "fit_linear")
    static = dict(likelihood=likelihood, fit_w0=fit_w0, fit_linear=fit_linear)
    pointwise = check_flag(pointwise_log_likelihood, "pointwise_log_likelihood")
    if not check_flag(sample_noise, "sample_noise"):
        static["sample_noise"] = False
    test_arrays, num_test = _check_test(test, num_test, data)
    y = concrete_or_none(data.y)
    return SamplingAlgorithm(
        init=bind(
            _init,
            data,
            hyper,
            rank=rank,
            likelihood=likelihood,
            num_levels=int(num_levels),
            init_scale=float(init_scale),
            fit_w0=fit_w0,
        ),
        step=bind(
            _step,
            data,
            hyper,
            _step_sizes(data, likelihood, num_levels),
            _two_sided(data),
            **static,
        ),
        trace=bind(
            _trace,
            data,
            hyper,
            test_arrays,
            likelihood=likelihood,
            num_test=int(num_test),
            pointwise=pointwise,
        ),
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
                "y": ["obs"],
            },
            observed_data={} if y is None else {"y": _observed_targets(data, y, likelihood)},
            settings={"rank": rank, "num_levels": num_levels, **static},
        ),
        # with few factors faster without on the CPU (bnpjax.infer.programs;
        # docs/benchmarks.md), with many the wide segments' sums gain from them
        compiler_options=(
            () if wide_segments(int(static["fit_linear"]) + rank + 1) else WITHOUT_YNN_FUSIONS
        ),
    )


def _observed_targets(data, y, likelihood):
    """The targets in their own units (``make_data`` standardises gaussian ones)."""
    if likelihood != "gaussian":
        return y
    return np.asarray(y, np.float64) * float(data.y_scale) + float(data.y_loc)


# BlackJAX's lower levels on the factory itself: the package re-exports the factory under
# this module's name, so users reach them as `gibbs.init` and `.build_step`.
gibbs.init = init
gibbs.build_step = build_step
