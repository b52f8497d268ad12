r"""Latent IBP features in any NumPyro model: a block of :class:`numpyro.infer.Gibbs`.

::

    kernel = Gibbs([(IBPGibbs(model), ["Z"]), (NUTS(model), None)])
    MCMC(kernel, num_warmup=500, num_samples=1000, num_chains=4,
         chain_method="parallel").run(key, X)

:class:`IBPGibbs` samples the ``IndianBuffetProcess`` sites of a user's model
(:mod:`bnpjax.priors.ibp_distribution`: a capacity buffer, active columns anywhere in it) from
their conditional given every other site, computed from the model's own log density; the
other sites (``alpha``, per-feature parameters shaped by the capacity, noise scales, ...)
belong to other blocks. What the block leaves invariant, and why (in any order of the
moves), is in :mod:`bnpjax.infer.ibp_moves`; in short, one sweep per IBP site is

1. a Gibbs flip of every ``z_nk`` of a feature that other rows hold;
2. new features and their removal, in one of two ways:

   * **with feature parameters** (the recommended form): the block also owns the sites that
     hold one row per feature (``A`` above, leading axis = the capacity, found by shape or
     declared with ``linked=``): ``Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model),
     None)])``. For every row, a birth-death move flips one of the row's singleton columns
     (death) or an empty column (birth) *together with* that column's parameters, drawn from a
     Laplace approximation of their conditional given the proposed ``Z`` (Newton steps on the
     model's own log density with ``jax.grad``/Hessians, from the origin of the unconstrained
     space), and accepted by the exact Metropolis-Hastings ratio, which includes the density
     of the reverse move's draw (:func:`bnpjax.infer.ibp_moves.birth_death_pass`). When the
     model's density splits into a term per row of ``Z`` and a term per feature (probed at
     ``init``), every row does this at once, with empty columns allocated to the rows that
     propose a birth uniformly at random (:mod:`bnpjax.infer.ibp_parallel`, which says why
     that is exact), and the empty columns' parameters are redrawn together. Then every
     row of the parameters is updated given ``Z`` by an independence Metropolis-Hastings step
     from the same kind of Laplace approximation (:func:`bnpjax.infer.ibp_moves.feature_pass`;
     a Gibbs draw when the conditional is Gaussian, as in the linear-Gaussian model). A new
     feature thus starts where the data put it, and ``K_+`` mixes in many dimensions.
     After the births and deaths, ``split_merge`` proposals merge two features into one
     (the parameters kept, or summed so that rows holding both keep ``Z @ A``) or split one
     in two, the reverse (:mod:`bnpjax.infer.ibp_split_merge`): the way out of modes that
     hold one feature as two copies held by disjoint rows, or as two parts held by the same
     rows; as many reallocations shear one feature's parameters by a multiple of another's and
     send the rows of both where their likelihood puts them (two features in another basis);
     ``anchored_splits`` proposals split a feature with both halves' parameters drawn where
     the data put them (a launch from two anchor rows, Jain & Neal's scheme) or merge two,
     and ``anchored_births`` propose a whole new feature held by many rows (from one anchor
     row) or remove one:
     the way out of modes that hold two features as one, or lack one.
   * **without** (``["Z"]`` only): Meeds et al. (2007)'s Metropolis-Hastings move that removes
     a row's singleton features and proposes ``Poisson(alpha / N)`` new ones in empty columns,
     accepted by the likelihood ratio. A new feature's parameters are then the values another
     block holds in that empty column, i.e. draws from the prior: correct, but in more than a
     few dimensions such a feature is almost never accepted and ``K_+`` collapses (36 pixels:
     ``K_+`` 0 where the posterior has 5). The block warns when a site that looks like feature
     parameters is left to another block.

The chain's stationary law is the model's posterior with the features arranged uniformly at
random in the buffer (the model's ``sample`` puts them first, in order of appearance): every
quantity that does not depend on the order of the features (``K_+``, ``Z @ A``, ``alpha``,
noise scales, predictions, the log density) has exactly the model's law. ``form="buffet"``
changes only what ``log_prob`` reports.

Rows. Step 1 costs two model evaluations per non-empty column when the rows of ``Z`` are
conditionally independent given the other sites: every site's log density, taken element by
element (``Independent`` / ``to_event`` wrappers removed), splits along one axis of length ``N``
into terms that each depend on one row of ``Z`` only. :class:`IBPGibbs` detects this at
``init`` by probing the model once on concrete random values (outside the compiled run):
rerandomising one row of ``Z`` may change only that row's slice of each site. A model that
fails the probe (a likelihood coupling rows, e.g. a Gaussian process over rows) is sampled
one entry at a time (one model evaluation per entry), as is every model with
``rows="joint"``; when the probe cannot run (the model's arguments are traced, e.g. with
``jit_model_args=True``) the block warns and uses the entry-at-a-time sweep, unless an earlier
``init`` of the same kernel found the structure.

Capacity. NumPyro's loop cannot grow a buffer. A step whose ``Poisson(alpha / N)`` draw of new
features exceeded a row's free columns sets ``needed_more_room`` in the block's state (count
in ``num_overflows``, shown in the progress bar), and the block issues a ``RuntimeWarning``
from inside the compiled run; the chain is then exact for the IBP truncated to the buffer
(``K_+ <= capacity``), never silently truncated. Collect the flag with
``mcmc.run(..., extra_fields=("z",))`` on the composite, or read ``block_states`` of
``mcmc.last_state``.

References
----------
Griffiths, T. L. & Ghahramani, Z. (2011). The Indian buffet process: an introduction and
review. JMLR 12, 1185-1224.
Meeds, E., Ghahramani, Z., Neal, R. & Roweis, S. (2007). Modeling dyadic data with binary
latent factors. NIPS 19.
Jain, S. & Neal, R. M. (2007). Splitting and merging components of a nonconjugate Dirichlet
process mixture model. Bayesian Analysis 2, 445-472.
"""

from __future__ import annotations

import copy
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.handlers import seed, trace
from numpyro.infer.gibbs import (
    conditioned,
    latent_sample_sites,
    prototype_trace,
    with_conditioning,
)
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import identity

from bnpjax.infer import ibp_anchored, ibp_moves, ibp_parallel, ibp_split_merge
from bnpjax.infer.ibp_probes import _Plan, _StructureProbes
from bnpjax.infer.ibp_sites import (
    _elementwise,
    _Linked,
    resolve_links,
    warn_unowned_parameters,
)
from bnpjax.infer.numpyro_bridge import warn_if_any

__all__ = ["IBPGibbs", "IBPGibbsState"]

_IBP_CLASS = ("bnpjax.priors.ibp_distribution", "IndianBuffetProcess")


def _is_ibp(fn) -> bool:
    # by name: infer/ sits below priors/ and must not import it
    return any((c.__module__, c.__name__) == _IBP_CLASS for c in type(fn).__mro__)


class IBPGibbsState(NamedTuple):
    """``z``: the block's IBP sites (0/1 floats); ``num_features``: K+ of each;
    ``needed_more_room``: this step wanted more columns than the capacity had free;
    ``num_overflows``: how many steps did so far; ``rng_key``; ``num_steps``: steps taken."""

    z: dict
    num_features: dict
    needed_more_room: jax.Array
    num_overflows: jax.Array
    rng_key: jax.Array
    num_steps: jax.Array


_OVERFLOW_MESSAGE = (
    "IBPGibbs: a step needed more feature columns than the IndianBuffetProcess "
    "capacity had free; the chain samples the IBP truncated to the buffer from here "
    "on. Give the IndianBuffetProcess a larger capacity."
)


class IBPGibbs(MCMCKernel, _StructureProbes):
    """Gibbs block for the ``IndianBuffetProcess`` sites of a NumPyro model (module
    docstring).

    Parameters
    ----------
    model
        the user's NumPyro model, the same callable as the other blocks'.
    rows
        ``"auto"`` (default): probe whether rows are conditionally independent and use the
        column-at-a-time sweep if so; ``"joint"``: always one entry at a time.
    linked
        ``{parameter site: IBP site}`` for feature-parameter sites the block owns, when their
        leading axis alone cannot tell (several IBP sites of one capacity); default: by shape.
    newton_steps
        Newton steps of each Laplace approximation (default 2; one is exact for a Gaussian
        conditional; any number leaves the chain exact, more only raise acceptance).
    init_features
        For an IBP site whose feature parameters the block owns: start from this many
        features (default 10, at most the capacity), each held by every row with probability
        1/2, as bnpjax's own samplers do: a chain drops surplus features easily but gains them
        slowly in many dimensions (a birth must pay for a whole new parameter row with one
        row's data). This replaces the initial value NumPyro gives the site (its prior draw or
        ``init_params``); ``None`` keeps that value. During warmup a chain whose ``K_+`` is 0
        at a 25th step (but the last) restarts from such a buffer: with no feature, a birth
        must pay for a whole parameter row with one row's data, and the prior scale of the
        parameters (drawn by another block given the empty columns' prior draws) drifts as a
        random walk, so a chain can stay at ``K_+ = 0`` for thousands of sweeps where the
        posterior puts no mass. Not a move of the posterior: warmup only, like NumPyro's
        step-size adaptation.
    births
        ``"auto"`` (default): births and deaths of features with parameters move every row at
        once when the model's density splits by rows and by features
        (:mod:`bnpjax.infer.ibp_parallel`, checked at ``init``); ``"rows"``: one row after
        another (:func:`bnpjax.infer.ibp_moves.birth_death_pass`). Both are exact.
    split_merge
        Merge or split proposals per sweep, and as many pair reallocations, for an IBP site
        with feature parameters whose rows are conditionally independent (default 5; 0:
        none): two features joined into one, their parameters kept or summed, and the
        reverse; one feature's parameters sheared by a multiple of another's with the rows of
        both reallocated (:mod:`bnpjax.infer.ibp_split_merge`, which says why each is exact).
        They let the chain leave modes that hold one feature as two, or two in another basis.
    anchored_splits, anchored_births
        Proposals per sweep (defaults 2 and 0; 0: none) of two moves whose new features'
        parameters are drawn from Laplace approximations of their conditionals after a
        launch that clusters the rows from anchor rows (Jain & Neal's non-conjugate scheme;
        each module function says why it is exact): a split of one feature in two or a merge
        (:func:`bnpjax.infer.ibp_anchored.anchored_split_merge_pass`), and the birth of a
        whole feature held by as many rows as the data want or a death
        (:func:`bnpjax.infer.ibp_anchored.anchored_birth_death_pass`). They are the way
        out of modes that hold two features as one, or lack one, which the moves above leave
        only by luck (a new feature's parameters there are a prior draw, or pay for a whole
        row of parameters with one row's data). Measured on bars (2026-11-27, one CPU core):
        under a Student-t likelihood with 3% outliers (4 bars planted, 4 chains of 350
        sweeps) the chains ended at ``K_+`` 1 with log densities -3711 to -3911 without
        them, 2-3 and -3524 to -3647 with the splits, 4, 2, 3, 2 and -3439 to -3632 with the
        births as well (the planted state: -3429); chains that hold the bars in another
        basis (sums and differences of bars) still stay there. Under the Gaussian likelihood
        (50 images, 2 chains of 450 sweeps) the splits raised the ESS of ``K_+`` from 18 to
        37 and of ``sigma_x`` from 13 to 324, but with the births as well they were 23 and 5
        on that seed: the births are off by default; turn them on where a chain seems to lack
        a feature. Each proposal costs about eight (split) or four (birth) Laplace
        approximations.

    Use it as ``Gibbs([(IBPGibbs(model), ["Z", "A"]), (NUTS(model), None)])`` (several IBP
    sites may be listed, or given to several blocks); alone it samples a model whose only
    latent sites are IBP sites and their feature parameters. Any chain method of ``MCMC`` that
    ``Gibbs`` accepts works (``"sequential"``, ``"parallel"``, ``jax.vmap``).
    """

    sample_field = "z"

    def __init__(
        self,
        model,
        *,
        rows: str = "auto",
        linked: dict | None = None,
        newton_steps: int = 2,
        init_features: int | None = 10,
        births: str = "auto",
        split_merge: int = 5,
        anchored_splits: int = 2,
        anchored_births: int = 0,
    ):
        if not callable(model):
            raise ValueError(f"model must be a NumPyro model (a callable), got {model!r}")
        if rows not in ("auto", "joint"):
            raise ValueError(f"rows must be 'auto' or 'joint', got {rows!r}")
        if births not in ("auto", "rows"):
            raise ValueError(f"births must be 'auto' or 'rows', got {births!r}")
        self._births = births
        if not (isinstance(split_merge, int) and split_merge >= 0):
            raise ValueError(f"split_merge must be a non-negative integer, got {split_merge!r}")
        self._split_merge = split_merge
        for name, value in (
            ("anchored_splits", anchored_splits),
            ("anchored_births", anchored_births),
        ):
            if not (isinstance(value, int) and value >= 0):
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        self._anchored = (anchored_splits, anchored_births)
        if linked is not None and not (
            isinstance(linked, dict)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in linked.items())
        ):
            raise ValueError(
                f"linked must map parameter site names to IBP site names, got {linked!r}"
            )
        if not (isinstance(newton_steps, int) and newton_steps >= 1):
            raise ValueError(f"newton_steps must be a positive integer, got {newton_steps!r}")
        self._model = model
        self._rows = rows
        self._declared_links = dict(linked or {})
        if init_features is not None and not (
            isinstance(init_features, int) and init_features >= 0
        ):
            raise ValueError(
                f"init_features must be a non-negative integer or None, got {init_features!r}"
            )
        self._newton_steps = newton_steps
        self._init_features = init_features
        self._num_warmup = 0
        self._plans: dict[str, _Plan] = {}
        self._linked: dict[str, _Linked] = {}
        self._diagonal: dict[str, bool] = {}
        self._separable: dict[str, bool] = {}
        self._sites: tuple[str, ...] = ()
        self._ibp_sites: tuple[str, ...] = ()

    @property
    def model(self):
        return self._model

    @property
    def sites(self) -> tuple[str, ...]:
        """The sites this block samples: IBP sites and their feature parameters (known after
        ``init``)."""
        return self._sites

    def linked_sites(self, site: str) -> tuple[str, ...]:
        """The feature-parameter sites this block moves with the IBP site ``site`` (known after
        ``init``)."""
        linked = self._linked.get(site)
        return () if linked is None else linked.names

    def row_axes(self, site: str) -> dict[str, int] | None:
        """The detected row structure of ``site``: {other site: row axis of its elementwise
        log density} when rows are conditionally independent, None when the sweep goes one
        entry at a time (known after ``init``)."""
        axes = self._plans[site].axes
        return None if axes is None else dict(axes)

    # ---------------------------------------------------------------------------------------
    # model evaluations

    def _trace(self, values, model_args, model_kwargs):
        kwargs = with_conditioning(model_kwargs, values)
        model = seed(conditioned(self._model), jax.random.key(0))
        return trace(model).get_trace(*model_args, **kwargs)

    def _log_lik(self, name, values, model_args, model_kwargs):
        """Every factor of the log density but the IBP prior of ``name``, summed."""
        model_trace = self._trace(values, model_args, model_kwargs)
        return sum(
            jnp.sum(_elementwise(site))
            for other, site in model_trace.items()
            if site["type"] == "sample" and other != name
        )

    def _row_log_lik(self, name, values, model_args, model_kwargs, model_trace=None):
        """``(N,)``: the factors that depend on row ``n`` of ``name``, summed per row."""
        plan = self._plans[name]
        if model_trace is None:
            model_trace = self._trace(values, model_args, model_kwargs)
        total = jnp.zeros(plan.num_rows)
        for other, axis in plan.axes:
            log_p = jnp.moveaxis(_elementwise(model_trace[other]), axis, 0)
            total = total + jnp.reshape(log_p, (plan.num_rows, -1)).sum(1)
        return total

    def _split_log_density(self, name, values, U, model_args, model_kwargs):
        """``(rows (N,), columns (K,))``: the per-row terms of the sites that depend on ``name``
        and the per-feature terms of its linked sites (Jacobian included), for
        :func:`bnpjax.infer.ibp_parallel.birth_death_pass`."""
        linked = self._linked[name]
        values = {**values, **linked.unpack(U)}
        model_trace = self._trace(values, model_args, model_kwargs)
        columns = linked.column_log_jacobian(U)
        for other in linked.names:
            log_p = _elementwise(model_trace[other])
            columns = columns + jnp.reshape(log_p, (U.shape[0], -1)).sum(1)
        return self._row_log_lik(name, values, None, None, model_trace), columns

    # ---------------------------------------------------------------------------------------
    # MCMCKernel

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else dict(model_kwargs)
        rng_key, key_trace = jax.random.split(rng_key)
        model_trace = prototype_trace(conditioned(self._model), key_trace, model_args, model_kwargs)
        latent = latent_sample_sites(model_trace)
        if init_params:
            unknown = sorted(set(init_params) - set(latent))
            if unknown:
                raise ValueError(f"IBPGibbs: {unknown} are not latent sample sites of the model")
            sites = tuple(n for n in latent if n in init_params)
        else:
            sites = tuple(n for n in latent if _is_ibp(model_trace[n]["fn"]))
            if not sites:
                raise ValueError("IBPGibbs: the model has no latent IndianBuffetProcess site")
        ibp_sites = tuple(n for n in sites if _is_ibp(model_trace[n]["fn"]))
        if not ibp_sites:
            raise ValueError(
                f"IBPGibbs: the block's sites {list(sites)} hold no IndianBuffetProcess site"
            )
        for name in ibp_sites:
            fn = model_trace[name]["fn"]
            if fn.batch_shape != ():
                raise ValueError(
                    f"IBPGibbs: site {name!r} is a batch of IndianBuffetProcess matrices "
                    f"(batch shape {fn.batch_shape}); give each matrix its own site"
                )
        linked = resolve_links(sites, ibp_sites, model_trace, self._declared_links)
        warn_unowned_parameters(ibp_sites, linked, model_trace, model_kwargs)
        others = [
            n
            for n in latent
            if n not in sites and model_trace[n]["infer"].get("enumerate", "") != "parallel"
        ]
        if others:
            raise ValueError(
                "IBPGibbs samples only IndianBuffetProcess sites and their per-feature "
                f"parameters; the latent sites {others} need a sampler: use IBPGibbs as a "
                "block of numpyro.infer.Gibbs, e.g. "
                "Gibbs([(IBPGibbs(model), ['Z', 'A']), (NUTS(model), None)])"
            )
        self._sites = sites
        self._ibp_sites = ibp_sites
        self._linked = linked
        self._plans = {
            name: self._plan(name, model_trace[name]["fn"], model_args, model_kwargs)
            for name in ibp_sites
        }
        probes = {
            name: self._probe_features(name, links, model_args, model_kwargs)
            for name, links in linked.items()
        }
        self._diagonal = {name: probe[0] for name, probe in probes.items()}
        self._separable = {
            name: probe[1] and self._births == "auto" for name, probe in probes.items()
        }
        init_params = init_params or {}
        z = {
            name: jnp.asarray(init_params.get(name, model_trace[name]["value"]), float)
            for name in sites
        }
        if self._init_features is not None:
            for name in linked:
                rng_key, key_z = jax.random.split(rng_key)
                z[name] = ibp_moves.starting_features(key_z, z[name].shape, self._init_features)
        self._num_warmup = int(num_warmup)
        return IBPGibbsState(
            z=z,
            num_features={n: jnp.sum(jnp.any(z[n] > 0, 0)).astype(jnp.int32) for n in ibp_sites},
            needed_more_room=jnp.zeros((), bool),
            num_overflows=jnp.zeros((), jnp.int32),
            rng_key=rng_key,
            num_steps=jnp.zeros((), jnp.int32),
        )

    def _update(self, key, name, values, model_args, model_kwargs, step):
        """One sweep of the IBP site ``name`` (and its feature parameters): returns the new
        values of the block's sites it moved and the capacity flag."""
        plan = self._plans[name]
        key_existing, key_single, key_features = jax.random.split(key, 3)
        alpha = self._trace(values, model_args, model_kwargs)[name]["fn"].alpha

        def with_z(Z):
            return {**values, name: Z}

        Z = values[name]
        if name in self._linked and self._init_features is not None:
            # warmup only (not a move of the posterior): a chain that lost every feature
            # restarts from init's buffer (class docstring, init_features)
            key_existing, key_restart = jax.random.split(key_existing)
            restart = (step < self._num_warmup - 25) & (step % 25 == 24) & ~jnp.any(Z > 0)
            start = ibp_moves.starting_features(key_restart, Z.shape, self._init_features)
            Z = jnp.where(restart, start, Z)
        if plan.axes is not None:

            def row_ll(Zm):
                return self._row_log_lik(name, with_z(Zm), model_args, model_kwargs)

            Z = ibp_moves.existing_column_pass(
                key_existing, Z, row_ll, log_odds=self._existing_log_odds
            )

            def log_lik(Zm):
                return jnp.sum(row_ll(Zm))

        else:

            def log_lik(Zm):
                return self._log_lik(name, with_z(Zm), model_args, model_kwargs)

            Z, _ = ibp_moves.existing_joint_pass(
                key_existing, Z, log_lik, log_lik(Z), log_odds=self._existing_log_odds
            )
        linked = self._linked.get(name)
        if linked is None:
            Z, short = ibp_moves.singleton_pass(
                key_single,
                Z,
                alpha,
                log_lik,
                log_lik(Z),
                log_correction=self._singleton_log_correction,
            )
            return {name: Z}, short

        def target(Zm, U):
            # the model's log density but the IBP prior of `name`, in the unconstrained
            # coordinates of the feature parameters (hence the Jacobian)
            moved = {**values, name: Zm, **linked.unpack(U)}
            return self._log_lik(name, moved, model_args, model_kwargs) + linked.log_jacobian(U)

        def split(Zm, U):
            return self._split_log_density(name, with_z(Zm), U, model_args, model_kwargs)

        U = linked.pack(values)
        columns = None  # the parameter rows the sequential pass updates (None: all)
        if self._separable[name]:
            Z, U, short = ibp_parallel.birth_death_pass(
                key_single,
                Z,
                U,
                alpha,
                split,
                newton_steps=self._newton_steps,
                diagonal=self._diagonal[name],
                log_proposal_ratio=self._proposal_log_ratio,
                log_rate=self._new_feature_log_rate,
            )
            # empty columns' parameters touch only their own prior term: all at once
            key_features, key_empty = jax.random.split(key_features)
            U = ibp_parallel.empty_feature_pass(
                key_empty,
                Z,
                U,
                split,
                newton_steps=self._newton_steps,
                diagonal=self._diagonal[name],
            )
            columns = jnp.any(Z > 0, 0)
            ll = target(Z, U)
        else:
            Z, U, ll, short = ibp_moves.birth_death_pass(
                key_single,
                Z,
                U,
                alpha,
                target,
                target(Z, U),
                newton_steps=self._newton_steps,
                diagonal=self._diagonal[name],
                log_proposal_ratio=self._proposal_log_ratio,
            )
        if (self._split_merge or any(self._anchored)) and plan.axes is not None:
            key_features, key_merge = jax.random.split(key_features)

            def row_target(Zm, U):
                moved = {**values, name: Zm, **linked.unpack(U)}
                return self._row_log_lik(name, moved, model_args, model_kwargs)

            Z, U, short_merge = ibp_split_merge.pair_moves(
                key_merge,
                Z,
                U,
                alpha,
                target,
                row_target,
                num_proposals=self._split_merge,
                log_ratios=(self._split_merge_log_ratio, self._reallocation_log_ratio),
            )
            Z, U, short_anchored = ibp_anchored.anchored_moves(
                jax.random.fold_in(key_merge, 1),
                Z,
                U,
                alpha,
                target,
                row_target,
                num_splits=self._anchored[0],
                num_births=self._anchored[1],
                newton_steps=self._newton_steps,
                diagonal=self._diagonal[name],
                log_ratios=(self._anchored_log_ratio, self._anchored_birth_log_ratio),
            )
            short_merge = short_merge | short_anchored
            short = short | short_merge
            if columns is not None:
                columns = jnp.any(Z > 0, 0)
            ll = target(Z, U)
        U, _ = ibp_moves.feature_pass(
            key_features,
            Z,
            U,
            target,
            ll,
            newton_steps=self._newton_steps,
            diagonal=self._diagonal[name],
            columns=columns,
        )
        return {name: Z, **linked.unpack(U)}, short

    # the prior and proposal ratios, as attributes so that a test can build a broken twin
    _existing_log_odds = staticmethod(ibp_moves.existing_log_odds)
    _singleton_log_correction = staticmethod(ibp_moves.singleton_log_correction)
    _proposal_log_ratio = staticmethod(ibp_moves.proposal_log_ratio)
    _new_feature_log_rate = staticmethod(ibp_parallel.new_feature_log_rate)
    _split_merge_log_ratio = staticmethod(ibp_split_merge.split_merge_log_proposal_ratio)
    _reallocation_log_ratio = staticmethod(ibp_split_merge.reallocation_log_proposal_ratio)
    _anchored_log_ratio = staticmethod(ibp_anchored.anchored_split_merge_log_proposal_ratio)
    _anchored_birth_log_ratio = staticmethod(ibp_anchored.anchored_birth_death_log_proposal_ratio)

    def sample(self, state, model_args, model_kwargs):
        model_kwargs = {} if model_kwargs is None else model_kwargs
        rng_key, *keys = jax.random.split(state.rng_key, len(self._ibp_sites) + 1)
        values = dict(state.z)
        short = jnp.zeros((), bool)
        for key, name in zip(keys, self._ibp_sites, strict=True):
            moved, short_site = self._update(
                key, name, values, model_args, model_kwargs, state.num_steps
            )
            values.update(moved)
            short = short | short_site
        jax.lax.cond(
            short,
            lambda: jax.debug.callback(partial(warn_if_any, message=_OVERFLOW_MESSAGE), short),
            lambda: None,
        )
        return IBPGibbsState(
            z=values,
            num_features={
                n: jnp.sum(jnp.any(values[n] > 0, 0)).astype(jnp.int32) for n in self._ibp_sites
            },
            needed_more_room=short,
            num_overflows=state.num_overflows + short.astype(jnp.int32),
            rng_key=rng_key,
            num_steps=state.num_steps + 1,
        )

    def refresh(self, state, model_args, model_kwargs):
        """Identity: the block caches nothing that depends on the other sites."""
        return state

    def wrap_model(self, wrapper):
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        kernel._plans = dict(self._plans)
        kernel._linked = dict(self._linked)
        kernel._diagonal = dict(self._diagonal)
        kernel._separable = dict(self._separable)
        return kernel

    def get_constrain_fn(self, model_args, model_kwargs):
        return identity

    def postprocess_fn(self, model_args, model_kwargs):
        return identity

    @property
    def default_fields(self):
        return ("z",)

    def get_diagnostics_str(self, state) -> str:
        parts = [f"K+ {int(np.max(np.asarray(k)))}" for k in state.num_features.values()]
        overflows = int(np.max(np.asarray(state.num_overflows)))
        if overflows:
            parts.append(f"needed more room {overflows}x")
        return ", ".join(parts)

    def __getstate__(self) -> dict[str, Any]:
        return self.__dict__.copy()
