"""Convergence diagnostics of a run, in plain words.

:func:`check_convergence` computes rank-normalised split R-hat and bulk and tail effective
sample sizes (Vehtari, Gelman, Simpson, Carpenter and Buerkner 2021) for
the quantities a run reports, and warns (:class:`ConvergenceWarning`) when any R-hat is above
1.01 or any ESS is below 100 per chain, the thresholds Stan and NumPyro use. The warning names
the variables and says what to do.

Which quantities. By default the scalar variables of ``posterior`` and ``sample_stats``
(``lp``, the number of active features ``num_features``, noise scales, ``alpha``, ...), and
vector variables of at most :data:`MAX_ELEMENTS` values whose dims are identified (``group``,
``coef``, ``cutpoint``, ...); a vector is reported by its worst element. Left out: arrays
along a latent dim (:data:`LATENT_DIMS`: per-feature parameters of nonparametric models are
born, die and swap labels, and the factors of low-rank models are identified only up to
rotation, so their per-element R-hat measures label switching rather than mixing),
bookkeeping statistics (:data:`BOOKKEEPING`, e.g. ``acceptance_rate``), and values that are
constant over every draw of every chain. Pass ``var_names`` to choose.

One chain. R-hat compares chains, so a single chain gets ESS only, and the report says that
R-hat needs at least two chains.

Works on what :func:`bnpjax.sample` returns on either ArviZ line (``arviz.InferenceData`` or
``xarray.DataTree``, through :mod:`bnpjax.infer.arviz_adapter`) and on the ``trace`` dict of
:func:`bnpjax.infer.run`; the estimators (:mod:`bnpjax.infer.rhat_ess`) are ArviZ's, written in
NumPy so that checking a fit does not import ArviZ.

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. and Buerkner, P.-C. (2021).
Rank-normalization, folding, and localization: an improved R-hat for assessing convergence of
MCMC. Bayesian Analysis 16(2), 667-718.
"""

from __future__ import annotations

import hashlib
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from bnpjax.infer.arviz_adapter import group, group_names
from bnpjax.infer.checks import check_flag
from bnpjax.infer.rhat_ess import summary_estimates

__all__ = [
    "BOOKKEEPING",
    "LATENT_DIMS",
    "ConvergenceReport",
    "ConvergenceWarning",
    "VariableDiagnostics",
    "check_convergence",
    "convergence_report",
]

#: R-hat above this flags a quantity (Vehtari et al. 2021, section 4).
R_HAT_MAX = 1.01
#: bulk or tail ESS below this many per chain flags a quantity (Vehtari et al. 2021).
ESS_PER_CHAIN_MIN = 100
#: chains shorter than this are not diagnosed (ArviZ's estimators need 4 draws).
MIN_DRAWS = 4
#: vector variables with more values than this are not checked unless named.
MAX_ELEMENTS = 32
#: dims along which values are not identified (labels of latent features, communities,
#: components; factors of a low-rank model): variables with such a dim are not checked
#: unless named.
LATENT_DIMS = frozenset(
    {"feature", "factor", "community", "community_to", "component", "cluster", "topic"}
)
#: sample statistics that describe the sampler, not the posterior.
BOOKKEEPING = frozenset(
    {
        "acceptance_rate",
        "accept_prob",
        "birth_acceptance",
        "births_deaths",
        "capacity_exceeded",
        "capacity_needed",
        "diverging",
        "merges_splits",
        "num_steps",
        "step_size",
        "swap_acceptance",
        "tree_depth",
    }
)
_GROUPS = ("posterior", "sample_stats")


class ConvergenceWarning(UserWarning):
    """A run's chains have not converged or mixed well enough (R-hat or ESS)."""


class VariableDiagnostics(NamedTuple):
    """The diagnostics of one variable; for a vector, of its worst element.

    ``r_hat`` is NaN for a single chain. ``worst`` names the element (``"mu_w[0]"``), or is
    the name itself for a scalar. ``num_flagged`` counts the elements over a threshold.
    """

    name: str
    group: str
    r_hat: float
    ess_bulk: float
    ess_tail: float
    worst: str
    num_elements: int
    num_flagged: int


class ConvergenceReport(NamedTuple):
    """What :func:`convergence_report` found.

    ``variables``: one :class:`VariableDiagnostics` per checked variable; ``skipped``: names
    left out (latent dims, too many values, constant); ``flagged``: the checked variables
    over a threshold.
    """

    variables: tuple[VariableDiagnostics, ...]
    num_chains: int
    num_draws: int
    skipped: tuple[str, ...]
    r_hat_max: float = R_HAT_MAX
    ess_per_chain_min: float = ESS_PER_CHAIN_MIN

    @property
    def flagged(self) -> tuple[VariableDiagnostics, ...]:
        return tuple(v for v in self.variables if v.num_flagged)

    @property
    def converged(self) -> bool:
        """No checked quantity over a threshold (ESS only for a single chain)."""
        return not self.flagged

    def lines(self) -> list[str]:
        """The report in plain words: one line of figures, then what is wrong and what to do."""
        if not self.variables:
            if 0 < self.num_draws < MIN_DRAWS:
                return [f"convergence: not checked ({self.num_draws} draws per chain)"]
            return ["convergence: nothing to check (no scalar quantity in the run)"]
        worst_r = max((v.r_hat for v in self.variables), default=np.nan)
        worst_ess = min(min(v.ess_bulk, v.ess_tail) for v in self.variables)
        head = (
            f"convergence ({self.num_chains} chain{'s' * (self.num_chains != 1)} x "
            f"{self.num_draws} draws, {len(self.variables)} "
            f"{'quantity' if len(self.variables) == 1 else 'quantities'}): "
        )
        head += (
            "R-hat needs at least 2 chains; "
            if self.num_chains < 2
            else f"max R-hat {_r_hat_text(worst_r, 3)}, "
        )
        head += f"min ESS {worst_ess:.0f}"
        lines = [head]
        if self.converged:
            lines[0] += f" - OK (R-hat <= {self.r_hat_max}, ESS >= {self.ess_per_chain_min:g}"
            lines[0] += " per chain)"
            return lines
        lines.extend(self._problems())
        return lines

    def _problems(self) -> list[str]:
        need = self.ess_per_chain_min * self.num_chains
        high_r, low_ess = [], []
        for v in self.flagged:
            more = f" ({v.num_flagged} of {v.num_elements} values)" if v.num_elements > 1 else ""
            if v.r_hat > self.r_hat_max:
                high_r.append(f"{v.worst} {_r_hat_text(v.r_hat)}{more}")
            if min(v.ess_bulk, v.ess_tail) < need:
                low_ess.append(f"{v.worst} {min(v.ess_bulk, v.ess_tail):.0f}{more}")
        out = []
        if high_r:
            out.append(
                f"NOT CONVERGED: R-hat above {self.r_hat_max} for " + ", ".join(high_r) + ": "
                "the chains disagree. Run longer warmup (num_warmup) and more draws, and check "
                "the trace plot; chains stuck in different places need a better start or a "
                "sampler that mixes."
            )
        if low_ess:
            out.append(
                f"TOO FEW EFFECTIVE DRAWS: ESS below {need:g} ({self.ess_per_chain_min:g} per "
                "chain) for " + ", ".join(low_ess) + ": means and intervals are unreliable. "
                "Run more draws (num_samples) or more chains (num_chains)."
            )
        if self.num_chains < 2:
            out.append(
                "R-hat needs at least 2 chains: run num_chains >= 2 (4 recommended; for an "
                "estimator, fits with other random_state) to check that independent chains "
                "agree."
            )
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())


def _r_hat_text(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if value < 100 else ">100"


# --------------------------------------------------------------------------------------------
# reading the draws


def _variables(draws, var_names):
    """``(group, name, array (chain, draw, ...), dims)`` of the quantities to check, and the
    names left out."""
    spec_dims = {}
    if hasattr(draws, "trace") and hasattr(draws, "algorithm"):  # a SamplingResult
        spec_dims = dict(draws.algorithm.spec.dims)
        draws = draws.trace
    names = group_names(draws)
    chosen, skipped = [], []
    wanted = None if var_names is None else list(var_names)
    for group_name in _GROUPS:
        if group_name not in names:
            continue
        table = group(draws, group_name)
        for name in list(table.keys()) if isinstance(table, dict) else list(table.data_vars):
            value = table[name]
            array = np.asarray(value)
            dims = tuple(getattr(value, "dims", ()))[2:] or tuple(spec_dims.get(name, ()))
            if wanted is not None:
                if name in wanted:
                    chosen.append((group_name, name, array, dims))
                continue
            if group_name == "sample_stats" and name in BOOKKEEPING:
                continue
            if array.ndim < 2 or not np.issubdtype(array.dtype, np.number):
                continue
            size = int(np.prod(array.shape[2:], dtype=np.int64))
            if array.ndim > 2 and (LATENT_DIMS.intersection(dims) or size > MAX_ELEMENTS):
                skipped.append(name)
                continue
            chosen.append((group_name, name, array, dims))
    if wanted is not None:
        missing = sorted(set(wanted) - {name for _, name, _, _ in chosen})
        if missing:
            raise ValueError(f"var_names: the run has no variables {missing}")
    return chosen, skipped


def _estimates(values, num_chains: int):
    """Bulk ESS, tail ESS and split R-hat (NaN for one chain) of each column of ``values``
    (chain, draw, column). A NaN estimate (a value constant within every chain) counts as ESS
    0 and R-hat infinity: the chains do not move."""
    if values is None:
        empty = np.zeros(0)
        return empty, empty, empty
    bulk, tail, r = summary_estimates(values)
    bulk, tail = np.nan_to_num(bulk, nan=0.0), np.nan_to_num(tail, nan=0.0)
    if num_chains < 2:
        return bulk, tail, np.full(bulk.shape, np.nan)
    return bulk, tail, np.where(np.isnan(r), np.inf, r)


#: The estimates of recently checked variables, by a digest of their draws: a run is often
#: checked twice (by :func:`bnpjax.sample`, then by a summary or the user's own check), and a
#: few hundred thresholds over 4 x 1000 draws take 0.6 s to rank and sort again.
_RECENT: OrderedDict[bytes, tuple] = OrderedDict()
MAX_RECENT = 32


def _digest(columns: np.ndarray) -> bytes:
    digest = hashlib.blake2b(repr((columns.shape, columns.dtype.str)).encode(), digest_size=20)
    digest.update(np.ascontiguousarray(columns).data)
    return digest.digest()


def _estimates_by_variable(columns: list[np.ndarray], num_chains: int) -> list[tuple]:
    """:func:`_estimates` of each variable's columns; those not checked recently are
    estimated in one call (each column's estimates depend on that column alone)."""
    keys = [_digest(c) for c in columns]
    missing = [i for i, k in enumerate(keys) if k not in _RECENT]
    if missing:
        estimates = _estimates(np.concatenate([columns[i] for i in missing], axis=2), num_chains)
        start = 0
        for i in missing:
            part = slice(start, start + columns[i].shape[2])
            start = part.stop
            _RECENT[keys[i]] = tuple(e[part] for e in estimates)
    for k in keys:
        _RECENT.move_to_end(k)
    found = [_RECENT[k] for k in keys]
    while len(_RECENT) > MAX_RECENT:
        _RECENT.popitem(last=False)
    return found


def _label(name: str, shape: tuple, flat_index: int) -> str:
    if not shape:
        return name
    index = np.unravel_index(flat_index, shape)
    return f"{name}[{', '.join(str(int(i)) for i in index)}]"


def convergence_report(
    draws,
    var_names: Sequence[str] | None = None,
    *,
    r_hat_max: float = R_HAT_MAX,
    ess_per_chain_min: float = ESS_PER_CHAIN_MIN,
) -> ConvergenceReport:
    """Split R-hat and bulk and tail ESS of a run's quantities (module docstring).

    Parameters
    ----------
    draws : InferenceData, DataTree, SamplingResult or dict
        The result of :func:`bnpjax.sample` (either ArviZ line) or of :func:`bnpjax.infer.run`
        (its kernel's dims are used), or a run's ``trace`` (whose arrays carry no dims).
    var_names : sequence of str, optional
        Variables of ``posterior`` or ``sample_stats`` to check, whatever their dims (default:
        the run's identified quantities, module docstring).
    r_hat_max, ess_per_chain_min : float
        Thresholds: R-hat above ``r_hat_max`` or bulk or tail ESS below ``ess_per_chain_min``
        times the number of chains flags a quantity.

    Returns
    -------
    ConvergenceReport

    Raises
    ------
    ValueError
        When ``var_names`` names variables the run lacks.

    References
    ----------
    Vehtari, A. et al. (2021). Rank-normalization, folding, and localization: an improved
    R-hat for assessing convergence of MCMC. Bayesian Analysis 16(2), 667-718, sections 3-4.
    """
    chosen, skipped = _variables(draws, var_names)
    if not chosen:
        return ConvergenceReport((), 0, 0, tuple(skipped), r_hat_max, ess_per_chain_min)
    num_chains, num_draws = chosen[0][2].shape[:2]
    if num_draws < MIN_DRAWS:
        names = tuple(name for _, name, _, _ in chosen)
        return ConvergenceReport((), int(num_chains), int(num_draws), names, r_hat_max,
                                 ess_per_chain_min)  # fmt: skip
    # every varying value of every variable side by side: one call of each estimator
    columns, pieces = [], []
    for group_name, name, array, _ in chosen:
        flat = array.reshape(num_chains, num_draws, -1).astype(float)
        varying = np.flatnonzero(np.ptp(flat, axis=(0, 1)) > 0)
        if varying.size:
            pieces.append((group_name, name, array.shape[2:], varying))
            columns.append(flat[:, :, varying])
        else:
            skipped.append(name)
    results = []
    estimates = _estimates_by_variable(columns, num_chains) if columns else []
    for (group_name, name, shape, varying), (bulk, tail, r) in zip(pieces, estimates, strict=True):
        ess_min = np.minimum(bulk, tail)
        flagged = (ess_min < ess_per_chain_min * num_chains) | (r > r_hat_max)
        # the worst value: the highest R-hat, else (one chain) the lowest ESS
        worst = int(np.argmax(r) if num_chains >= 2 else np.argmin(ess_min))
        results.append(
            VariableDiagnostics(
                name=name,
                group=group_name,
                r_hat=float(r[worst]),
                ess_bulk=float(bulk.min()),
                ess_tail=float(tail.min()),
                worst=_label(name, shape, int(varying[worst])),
                num_elements=int(varying.size),
                num_flagged=int(flagged.sum()),
            )
        )
    return ConvergenceReport(
        tuple(results), int(num_chains), int(num_draws), tuple(skipped), r_hat_max,
        ess_per_chain_min,
    )  # fmt: skip


def check_convergence(
    draws,
    var_names: Sequence[str] | None = None,
    *,
    r_hat_max: float = R_HAT_MAX,
    ess_per_chain_min: float = ESS_PER_CHAIN_MIN,
    warn: bool = True,
    stacklevel: int = 2,
) -> ConvergenceReport:
    """:func:`convergence_report`, and a :class:`ConvergenceWarning` in plain words when a
    quantity is flagged (``warn=False``: the report only).

    Parameters
    ----------
    draws, var_names, r_hat_max, ess_per_chain_min
        As :func:`convergence_report`.
    warn : bool
        Issue the warning.
    stacklevel : int
        Passed to :func:`warnings.warn` (2: the caller of this function).

    Returns
    -------
    ConvergenceReport
        Its ``lines()`` are what the command line prints under a summary table.
    """
    warn = check_flag(warn, "warn")
    report = convergence_report(
        draws, var_names, r_hat_max=r_hat_max, ess_per_chain_min=ess_per_chain_min
    )
    if warn and not report.converged:
        warnings.warn("\n".join(report.lines()), ConvergenceWarning, stacklevel=stacklevel)
    return report
