r"""Geweke's "getting it right" test of a posterior sampler (Geweke 2004, JASA 99:799-804).

Two simulators of the joint distribution :math:`p(\theta, y) = p(\theta) p(y \mid \theta)`:

* marginal-conditional: :math:`\theta \sim p(\theta)`, then :math:`y \sim p(y \mid \theta)`,
  independently ``num_marginal`` times;
* successive-conditional: start from a marginal-conditional draw and alternate one
  application of the kernel under test (``steps_per_iteration`` steps of a sampler that should
  leave :math:`p(\theta \mid y)` invariant) with a fresh :math:`y \sim p(y \mid \theta)`.

If the kernel is right, both simulators have :math:`p(\theta, y)` as their (stationary)
distribution, so every test function :math:`g(\theta, y)` has the same expectation under both.
For each test function

.. math::

    z = \frac{\bar g_{MC} - \bar g_{SC}}
             {\sqrt{\hat\sigma^2_{MC}/n_{MC} + \hat\sigma^2_{SC}/\widehat{ESS}_{SC}}},

where the successive-conditional draws are autocorrelated and their effective sample size is
estimated over several independent chains (``arviz.ess(method="mean")``, Geyer's initial
monotone sequence). The test fails when any :math:`|z|` exceeds the two-sided Bonferroni
quantile :math:`\Phi^{-1}(1 - \mathrm{level} / (2m))` for :math:`m` test functions, so the
false-alarm probability of a correct sampler is at most ``level`` (up to the error of the ESS
estimate). It also fails when any statistic's successive-conditional ESS is below
``min_ess``: a kernel that hardly moves has a tiny ESS, so a wide standard error and a small
:math:`|z|`, and would otherwise pass for want of evidence.

A model needs to provide only a prior sampler, a data sampler and its kernel factory.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from functools import partial
from statistics import NormalDist
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.infer.checks import check_integer, check_nonnegative

__all__ = [
    "GewekeCase",
    "GewekeResult",
    "default_test_functions",
    "exact_start_test",
    "geweke_test",
    "run_geweke_case",
]


class GewekeResult(NamedTuple):
    """Per test function: the two means, the standard error of their difference, the z-score
    and the successive-conditional ESS; ``threshold`` is the Bonferroni ``|z|`` bound and
    ``min_ess`` the ESS below which a statistic's z is not trusted (the test is then not
    passed, whatever its z: :func:`geweke_test`; 0, no floor, for
    :func:`exact_start_test`, whose chains are independent). ``too_few_draws`` lists the
    statistics below the floor and ``max_abs_z`` is the largest ``|z|``."""

    mean_marginal: dict[str, float]
    mean_successive: dict[str, float]
    std_error: dict[str, float]
    z: dict[str, float]
    ess_successive: dict[str, float]
    threshold: float
    passed: bool
    min_ess: float = 0.0

    @property
    def max_abs_z(self) -> float:
        """The largest ``|z|`` over the test functions (compared with ``threshold``)."""
        return max(abs(v) for v in self.z.values())

    @property
    def too_few_draws(self) -> list[str]:
        """The statistics whose successive-conditional ESS is below ``min_ess``."""
        return [name for name, ess in self.ess_successive.items() if not ess >= self.min_ess]

    def __str__(self) -> str:
        width = max(len(k) for k in self.z)
        lines = [
            f"{'statistic':<{width}}  {'marginal':>11}  {'successive':>11}  {'z':>7}  {'ess':>8}"
        ]
        for name in self.z:
            lines.append(
                f"{name:<{width}}  {self.mean_marginal[name]:>11.4g}  "
                f"{self.mean_successive[name]:>11.4g}  {self.z[name]:>7.2f}  "
                f"{self.ess_successive[name]:>8.0f}"
            )
        verdict = "passed" if self.passed else "FAILED"
        low = self.too_few_draws
        if low:
            verdict += (
                f" (ESS below {self.min_ess:g} for {', '.join(low)}: too few effective "
                "draws to trust their z; run longer or more successive-conditional chains)"
            )
        lines.append(f"max |z| = {self.max_abs_z:.2f}, threshold {self.threshold:.2f}: {verdict}")
        return "\n".join(lines)


#: the default ESS floor of :func:`geweke_test`: the smallest ESS of a correct row of the
#: Geweke table was 363 (2026-12-01), and one row at 46 had its draws raised
MIN_ESS = 100.0


def default_test_functions(state, data) -> dict[str, jax.Array]:
    """Mean and mean square of every floating-point field of the state."""
    out = {}
    fields = state._asdict() if hasattr(state, "_asdict") else {"state": state}
    for name, value in fields.items():
        value = jnp.asarray(value)
        if jnp.issubdtype(value.dtype, jnp.floating) or jnp.issubdtype(value.dtype, jnp.integer):
            value = value.astype(jnp.result_type(float))
            out[f"mean({name})"] = jnp.mean(value)
            out[f"mean({name}^2)"] = jnp.mean(value**2)
    return out


def _ess_mean(draws: np.ndarray) -> float:
    """ESS of the mean of ``draws`` (chain, draw) by Geyer's initial monotone sequence."""
    from bnpjax.infer.arviz_adapter import import_arviz

    if np.ptp(draws) == 0:
        return float(draws.size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(import_arviz().ess(draws, method="mean"))


def _joint_draw(key_prior, key_data, prior_sample, data_sample, refresh):
    """``(state, data)`` from the joint law: parameters from the prior, data given them."""
    state = prior_sample(key_prior)
    data = data_sample(key_data, state)
    return refresh(data, state), data


def _successive_iteration(key, state, data, *, kernel, data_sample, refresh, steps_per_iteration):
    """One iteration of the successive-conditional simulator: the kernel given the data, then
    fresh data given the parameters. Returns ``(state, data, capacity_exceeded)``."""
    key_kernel, key_data = jax.random.split(key)
    algorithm = kernel(data)
    exceeded = jnp.zeros((), bool)
    for j in range(steps_per_iteration):
        state, info = algorithm.step(jax.random.fold_in(key_kernel, j), state)
        flag = getattr(info, "capacity_exceeded", None)
        if flag is not None:
            exceeded = exceeded | jnp.any(flag)
    data = data_sample(key_data, state)
    return refresh(data, state), data, exceeded


def _check_capacity(num_exceeded: int, where: str) -> None:
    if num_exceeded:
        raise RuntimeError(
            f"the kernel ran out of feature capacity in {num_exceeded} {where}; "
            "build it with a larger capacity for the test"
        )


def _z_score(difference: float, std_error: float) -> float:
    """``difference / std_error``; a zero error gives 0 for no difference, else signed inf."""
    if std_error > 0:
        return difference / std_error
    return 0.0 if difference == 0 else math.copysign(math.inf, difference)


def _check_level(level: float) -> None:
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")


def geweke_test(
    key,
    *,
    prior_sample: Callable[[jax.Array], Any],
    data_sample: Callable[[jax.Array, Any], Any],
    kernel: Callable[[Any], SamplingAlgorithm],
    test_functions: Callable[[Any, Any], dict[str, jax.Array]] = default_test_functions,
    num_marginal: int = 20_000,
    num_successive: int = 5_000,
    num_chains: int = 4,
    burn_in: int = 200,
    steps_per_iteration: int = 1,
    refresh: Callable[[Any, Any], Any] | None = None,
    level: float = 0.01,
    min_ess: float = MIN_ESS,
) -> GewekeResult:
    """Run both simulators and compare the test functions (module docstring).

    Parameters
    ----------
    prior_sample
        ``prior_sample(key) -> state``: a kernel state whose parameters are drawn from the prior.
    data_sample
        ``data_sample(key, state) -> data``: fresh data given the parameters of ``state``.
    kernel
        ``kernel(data) -> SamplingAlgorithm``: the sampler under test, built for ``data``.
        It is called inside compiled code, so it must be traceable (validation belongs to the
        model's ``make_data``, not to the factory).
    test_functions
        ``test_functions(state, data) -> {name: scalar}``; functions of both the parameters and
        the data are the most sensitive.
    refresh
        ``refresh(data, state) -> state``: recompute data-dependent caches of the state after
        the data were redrawn (identity when omitted).
    level
        familywise false-alarm probability of the Bonferroni-corrected z-tests.
    min_ess
        the smallest successive-conditional ESS (over all chains) a statistic may have. Below
        it the test is not passed, whatever the z-scores: a kernel that barely moves has a
        tiny ESS, hence a wide standard error and a small z, and Geyer's ESS estimate is itself
        unreliable there. Vehtari et al. (2021) ask for an ESS above 100 per chain before the
        R-hat and ESS estimates are trusted; this floor is on the pooled chains' ESS, so with
        many short chains it is the weaker condition (a floor for the estimate's worst
        failures, not a guarantee of its accuracy). 0 turns it off.

    Returns
    -------
    GewekeResult
        ``passed`` when every ``|z|`` is below the Bonferroni threshold and every ESS is at
        least ``min_ess``.

    References
    ----------
    Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
    JASA 99(467), 799-804.

    Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Buerkner, P.-C. (2021).
    Rank-normalization, folding, and localization: an improved R-hat for assessing
    convergence of MCMC. Bayesian Analysis 16(2), 667-718.
    """
    min_ess = check_nonnegative(min_ess, "min_ess", "the Geweke test's ESS floor")
    for name, value, minimum in (
        ("num_marginal", num_marginal, 2),
        ("num_successive", num_successive, 2),
        ("num_chains", num_chains, 1),
        ("burn_in", burn_in, 0),
        ("steps_per_iteration", steps_per_iteration, 1),
    ):
        check_integer(value, name, minimum)
    _check_level(level)
    refresh = refresh if refresh is not None else (lambda data, state: state)
    key_marginal, key_successive = jax.random.split(key)
    iterate = partial(
        _successive_iteration,
        kernel=kernel,
        data_sample=data_sample,
        refresh=refresh,
        steps_per_iteration=steps_per_iteration,
    )

    def marginal_one(key):
        state, data = _joint_draw(*jax.random.split(key), prior_sample, data_sample, refresh)
        return test_functions(state, data)

    marginal = jax.jit(jax.vmap(marginal_one))(jax.random.split(key_marginal, num_marginal))

    def successive_chain(key):
        key_prior, key_data, key_run = jax.random.split(key, 3)
        start = _joint_draw(key_prior, key_data, prior_sample, data_sample, refresh)

        def iteration(carry, t):
            state, data, exceeded = iterate(jax.random.fold_in(key_run, t), *carry)
            return (state, data), (test_functions(state, data), exceeded)

        steps = jnp.arange(burn_in + num_successive)
        _, (values, exceeded) = jax.lax.scan(iteration, start, steps)
        values = jax.tree_util.tree_map(lambda v: v[burn_in:], values)
        return values, jnp.sum(exceeded)

    successive, exceeded = jax.jit(jax.vmap(successive_chain))(
        jax.random.split(key_successive, num_chains)
    )
    _check_capacity(int(np.sum(exceeded)), "Geweke iterations")

    marginal = {k: np.asarray(v, float) for k, v in marginal.items()}
    successive = {k: np.asarray(v, float) for k, v in successive.items()}
    names = list(marginal)
    threshold = NormalDist().inv_cdf(1 - level / (2 * len(names)))
    out = {f: {} for f in GewekeResult._fields[:5]}
    for name in names:
        mc, sc = marginal[name], successive[name]
        ess = min(_ess_mean(sc), sc.size)
        var_sc = np.var(sc, ddof=1)
        se = math.sqrt(np.var(mc, ddof=1) / mc.size + var_sc / ess)
        diff = mc.mean() - sc.mean()
        z = _z_score(diff, se)
        out["mean_marginal"][name] = float(mc.mean())
        out["mean_successive"][name] = float(sc.mean())
        out["std_error"][name] = float(se)
        out["z"][name] = float(z)
        out["ess_successive"][name] = float(ess)
    within = all(abs(z) < threshold for z in out["z"].values())
    result = GewekeResult(**out, threshold=threshold, passed=within, min_ess=min_ess)
    # one rule for the floor: what the result reports as too few draws is what fails it
    return result._replace(passed=within and not result.too_few_draws)


def exact_start_test(
    key,
    *,
    prior_sample: Callable[[jax.Array], Any],
    data_sample: Callable[[jax.Array, Any], Any],
    kernel: Callable[[Any], SamplingAlgorithm],
    test_functions: Callable[[Any, Any], dict[str, jax.Array]] = default_test_functions,
    num_chains: int = 2_000,
    num_steps: int = 20,
    steps_per_iteration: int = 1,
    refresh: Callable[[Any, Any], Any] | None = None,
    level: float = 0.01,
) -> GewekeResult:
    r"""Many short successive-conditional chains, each started from an exact joint draw.

    Every chain starts at :math:`(\theta_0, y_0) \sim p(\theta, y)` and runs ``num_steps``
    iterations of :func:`geweke_test`'s successive-conditional simulator (the kernel, then a
    fresh :math:`y`). A kernel that leaves :math:`p(\theta \mid y)` invariant keeps the joint
    law exactly at every iteration, with no burn-in, so for each test function the paired
    difference :math:`d = g(\theta_T, y_T) - g(\theta_0, y_0)` has mean zero. The chains are
    independent, so

    .. math::

        z = \frac{\bar d}{\hat\sigma_d / \sqrt{n_{\text{chains}}}}

    needs no effective-sample-size estimate: its standard error is that of a mean of
    independent draws, unaffected by how slowly the kernel mixes or how rarely one long chain
    visits a heavy tail, the two ways :func:`geweke_test`'s ESS-based error goes wrong. A slip
    in the kernel moves every chain a little in the same direction each step; the pairing
    removes the spread of :math:`g` over the joint law from the comparison, which makes the
    test sharp for moves that change the state little per step (a reallocation of a few rows,
    a merge of two features). It checks invariance, not mixing: a kernel that does nothing
    passes, so it complements the long-chain test rather than replacing it.

    Parameters
    ----------
    prior_sample, data_sample, kernel, test_functions, refresh, steps_per_iteration, level
        as in :func:`geweke_test`.
    num_chains
        independent chains, each from its own exact joint draw.
    num_steps
        successive-conditional iterations per chain; the last one is compared with the start.

    Returns
    -------
    GewekeResult
        ``mean_marginal``: the test functions' means at the exact starts; ``mean_successive``:
        after ``num_steps`` iterations; ``ess_successive``: ``num_chains`` (independent
        differences); ``threshold``: the Bonferroni bound on ``|z|``; ``min_ess``: 0 (no
        floor: the chains are independent).

    References
    ----------
    Geweke, J. (2004). Getting it right: joint distribution tests of posterior simulators.
    *JASA* 99(467), 799-804.
    Grosse, R. B. & Duvenaud, D. K. (2014). Testing MCMC code. *NIPS Workshop on Software
    Engineering for Machine Learning*.
    """
    for name, value, minimum in (
        ("num_chains", num_chains, 2),
        ("num_steps", num_steps, 1),
        ("steps_per_iteration", steps_per_iteration, 1),
    ):
        check_integer(value, name, minimum)
    _check_level(level)
    refresh = refresh if refresh is not None else (lambda data, state: state)
    iterate = partial(
        _successive_iteration,
        kernel=kernel,
        data_sample=data_sample,
        refresh=refresh,
        steps_per_iteration=steps_per_iteration,
    )

    def chain(key):
        key_prior, key_data, key_run = jax.random.split(key, 3)
        state, data = _joint_draw(key_prior, key_data, prior_sample, data_sample, refresh)
        start = test_functions(state, data)

        def iteration(carry, t):
            state, data, exceeded = carry
            state, data, more = iterate(jax.random.fold_in(key_run, t), state, data)
            return (state, data, exceeded | more), None

        init = (state, data, jnp.zeros((), bool))
        (state, data, exceeded), _ = jax.lax.scan(iteration, init, jnp.arange(num_steps))
        return start, test_functions(state, data), exceeded

    start, end, exceeded = jax.jit(jax.vmap(chain))(jax.random.split(key, num_chains))
    _check_capacity(int(np.sum(exceeded)), f"of {num_chains} exact-start chains")
    names = list(start)
    threshold = NormalDist().inv_cdf(1 - level / (2 * len(names)))
    out = {f: {} for f in GewekeResult._fields[:5]}
    for name in names:
        g0, g1 = np.asarray(start[name], float), np.asarray(end[name], float)
        d = g1 - g0
        se = float(np.std(d, ddof=1) / math.sqrt(d.size))
        mean = float(d.mean())
        z = _z_score(mean, se)
        out["mean_marginal"][name] = float(g0.mean())
        out["mean_successive"][name] = float(g1.mean())
        out["std_error"][name] = se
        out["z"][name] = float(-z)  # marginal minus successive, as geweke_test reports
        out["ess_successive"][name] = float(d.size)
    passed = all(abs(z) < threshold for z in out["z"].values())
    return GewekeResult(**out, threshold=threshold, passed=passed)


class GewekeCase(NamedTuple):
    """One row of the Geweke table: a kernel checked through its model's protocol.

    Attributes
    ----------
    name
        the row's id, e.g. ``"ibp_lg.collapsed_gibbs"``.
    module
        the model's ``geweke`` module: ``prior_sample(key, data, hyper, **settings)``,
        ``data_sample(key, state, data, hyper, **settings)``, ``refresh(data, state,
        **settings)``.
    factory
        ``factory(data, hyper, **settings) -> SamplingAlgorithm``, the kernel under test.
    data
        a data set fixing the design (sizes, covariates, masks); its observations are redrawn.
    hyper
        the hyperparameters passed to the protocol and the factory.
    settings
        the model settings passed to the protocol and the factory (``rank``, ``capacity``,
        ``likelihood``, ...).
    statistics
        ``statistics(state, data) -> {name: scalar}`` (default: means of the state's fields).
    broken_factory
        the same kernel with one deliberate slip; the table checks that it fails by a wide
        margin (None: no twin for this row, which the table reports).
    num_marginal, num_successive, num_chains, steps_per_iteration, burn_in, seed
        the simulators' sizes and the key.
    min_ess
        the ESS floor of :func:`geweke_test` (default 100).
    broken_num_successive
        the successive-conditional simulator's length for the broken twin (default:
        ``num_successive``). A slip the table is meant to catch moves the statistics by many
        standard errors within a few hundred steps; a twin whose slip also makes every step
        dearer (a runaway feature count fills the buffer) needs no more than that.
    """

    name: str
    module: Any
    factory: Callable[..., SamplingAlgorithm]
    data: Any
    hyper: Any = None
    settings: Mapping[str, Any] = {}
    statistics: Callable[[Any, Any], dict] | None = None
    broken_factory: Callable[..., SamplingAlgorithm] | None = None
    num_marginal: int = 20_000
    num_successive: int = 5_000
    num_chains: int = 4
    steps_per_iteration: int = 1
    burn_in: int = 200
    seed: int = 0
    broken_num_successive: int | None = None
    min_ess: float = MIN_ESS


def run_geweke_case(case: GewekeCase, *, broken: bool = False) -> GewekeResult:
    """Run :func:`geweke_test` on ``case`` (on its broken twin with ``broken=True``)."""
    module, hyper, settings = case.module, case.hyper, dict(case.settings)
    factory = case.broken_factory if broken else case.factory
    if factory is None:
        raise ValueError(f"case {case.name!r} has no broken twin")
    return geweke_test(
        jax.random.key(case.seed),
        prior_sample=lambda key: module.prior_sample(key, case.data, hyper, **settings),
        data_sample=lambda key, state: module.data_sample(key, state, case.data, hyper, **settings),
        kernel=lambda data: factory(data, hyper, **settings),
        refresh=lambda data, state: module.refresh(data, state, **settings),
        test_functions=case.statistics or default_test_functions,
        num_marginal=case.num_marginal,
        num_successive=(
            case.broken_num_successive or case.num_successive if broken else case.num_successive
        ),
        num_chains=case.num_chains,
        steps_per_iteration=case.steps_per_iteration,
        burn_in=case.burn_in,
        min_ess=case.min_ess,
    )
