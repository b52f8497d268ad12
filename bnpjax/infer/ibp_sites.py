"""The sites of a user's NumPyro model as the IBP Gibbs block sees them.

A feature's parameters (one row per column of the IBP buffer, possibly spread over several
sites) packed into one unconstrained vector per feature, and a site's log density element by
element, so that the block can tell which terms one row of ``Z`` touches
(:class:`bnpjax.infer.IBPGibbs`).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from numpyro.distributions import Independent, constraints
from numpyro.distributions.transforms import biject_to

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
