"""The sites of a user's NumPyro model as the IBP Gibbs block sees them.

A feature's parameters (one row per column of the IBP buffer, possibly spread over several
sites) packed into one unconstrained vector per feature, and a site's log density element by
element, so that the block can tell which terms one row of ``Z`` touches
(:class:`bnpjax.infer.IBPGibbs`).
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Independent, constraints
from numpyro.distributions.transforms import biject_to
from numpyro.infer.gibbs import GIBBS_SITES_KWARG

__all__: list[str] = []


class _Linked(NamedTuple):
    """The per-feature parameter sites of one IBP site, packed row by row: ``U[k]`` is the
    unconstrained concatenation of row ``k`` of every linked site."""

    names: tuple[str, ...]
    row_shapes: tuple[tuple[int, ...], ...]
    transforms: tuple  # elementwise bijections from R to each site's support

    def pack(self, values):
        return jnp.concatenate(
            [
                jnp.reshape(t.inv(values[n]), (values[n].shape[0], -1))
                for n, t in zip(self.names, self.transforms, strict=True)
            ],
            axis=1,
        )

    def _split(self, U):
        sizes = np.cumsum([int(np.prod(shape)) for shape in self.row_shapes])[:-1]
        return jnp.split(U, sizes, axis=1)

    def unpack(self, U):
        return {
            n: t(jnp.reshape(u, (U.shape[0], *shape)))
            for n, shape, t, u in zip(
                self.names, self.row_shapes, self.transforms, self._split(U), strict=True
            )
        }

    def column_log_jacobian(self, U):
        """``(K,)``: each feature's share of the log Jacobian of the unconstrained coordinates."""
        return sum(
            jnp.sum(
                jnp.reshape(
                    jnp.broadcast_to(t.log_abs_det_jacobian(u, t(u)), u.shape), (U.shape[0], -1)
                ),
                1,
            )
            for t, u in zip(self.transforms, self._split(U), strict=True)
        )

    def log_jacobian(self, U):
        return jnp.sum(self.column_log_jacobian(U))


def _elementwise_transform(name, fn):
    support = fn.support
    while isinstance(support, constraints.independent):
        support = support.base_constraint
    if support.is_discrete or support.event_dim != 0:
        raise ValueError(
            f"IBPGibbs: the feature parameters {name!r} must be continuous with an elementwise "
            f"support (got {support}); give the site to another block"
        )
    return biject_to(support)


def _elementwise(site) -> jax.Array:
    """The site's log density without summing over event dimensions of ``Independent``."""
    fn, value = site["fn"], site["value"]
    if site["intermediates"]:
        log_p = fn.log_prob(value, site["intermediates"])
    else:
        while isinstance(fn, Independent):
            fn = fn.base_dist
        log_p = fn.log_prob(value)
    if site["scale"] is not None:
        log_p = site["scale"] * log_p
    return log_p


def resolve_links(sites, ibp_sites, model_trace, declared_links) -> dict[str, _Linked]:
    """Which IBP site each non-IBP site of the block parametrises (leading axis = that
    site's capacity, or declared with ``linked=``); a ValueError names any other site."""
    capacity = {z: model_trace[z]["fn"].capacity for z in ibp_sites}
    unknown = sorted(set(declared_links) - set(sites))
    if unknown:
        raise ValueError(f"IBPGibbs: linked names {unknown}, which are not sites of the block")
    groups: dict[str, list[str]] = {z: [] for z in ibp_sites}
    for name in sites:
        if name in ibp_sites:
            continue
        fn, value = model_trace[name]["fn"], jnp.shape(model_trace[name]["value"])
        fits = [z for z in ibp_sites if len(value) >= 1 and value[0] == capacity[z]]
        declared = declared_links.get(name)
        if declared is not None:
            if declared not in ibp_sites:
                raise ValueError(
                    f"IBPGibbs: linked[{name!r}] = {declared!r} is not an "
                    "IndianBuffetProcess site of the block"
                )
            fits = [z for z in fits if z == declared]
        if len(fits) != 1:
            why = (
                f"its leading axis (shape {value}) is not the feature axis of "
                f"{declared or list(ibp_sites)} (capacity {[capacity[z] for z in ibp_sites]})"
                if not fits
                else f"its leading axis fits several IBP sites {fits}; declare one with linked="
            )
            raise ValueError(
                "IBPGibbs samples IndianBuffetProcess sites and their per-feature "
                f"parameters; site {name!r} has a {type(fn).__name__} distribution and "
                f"{why} (give it to another block)"
            )
        _elementwise_transform(name, fn)
        groups[fits[0]].append(name)
    return {
        z: _Linked(
            names=tuple(names),
            row_shapes=tuple(tuple(jnp.shape(model_trace[n]["value"])[1:]) for n in names),
            transforms=tuple(_elementwise_transform(n, model_trace[n]["fn"]) for n in names),
        )
        for z, names in groups.items()
        if names
    }


def warn_unowned_parameters(ibp_sites, linked, model_trace, model_kwargs):
    """A site shaped like per-feature parameters but owned by another block makes a new
    feature start from that block's draw, nearly always rejected in many dimensions."""
    siblings = model_kwargs.get(GIBBS_SITES_KWARG, {})
    for z in ibp_sites:
        if z in linked:
            continue
        capacity = model_trace[z]["fn"].capacity
        suspects = [
            n
            for n, v in siblings.items()
            if jnp.ndim(v) >= 1
            and jnp.shape(v)[0] == capacity
            and not model_trace[n]["fn"].support.is_discrete
        ]
        if suspects:
            warnings.warn(
                f"IBPGibbs: sites {suspects} look like per-feature parameters of {z!r} "
                f"(leading axis = its capacity {capacity}) but another block samples them: "
                "a new feature then has to start from that block's value of an empty row, "
                "and K+ may collapse. Give them to this block: "
                f"(IBPGibbs(model), [{z!r}, {', '.join(map(repr, suspects))}]).",
                RuntimeWarning,
                stacklevel=4,
            )
