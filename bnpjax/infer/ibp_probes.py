"""How :class:`bnpjax.infer.IBPGibbs` finds the structure of a user's model: which rows of an
IBP site are conditionally independent, whether a feature's parameter coordinates interact, and
whether births and deaths can move every row at once. Each probe runs the model once or a few
times on concrete random values at ``init``, outside the compiled run (module docstring of
:mod:`bnpjax.infer.ibp_gibbs`)."""

from __future__ import annotations

import warnings
from functools import partial
from typing import NamedTuple

import jax
import numpy as np
from numpyro.infer.gibbs import (
    GIBBS_SITES_KWARG,
    conditioned,
    latent_sample_sites,
    prototype_trace,
)

from bnpjax.infer import ibp_parallel
from bnpjax.infer.ibp_sites import _elementwise

__all__: list[str] = []


class _Plan(NamedTuple):
    num_rows: int
    capacity: int
    axes: tuple[tuple[str, int], ...] | None  # (site, row axis) per Z-dependent site; None: joint


class _StructureProbes:
    """The probes of :class:`bnpjax.infer.IBPGibbs` (a mixin: they run the kernel's model
    through its ``_trace`` and ``_log_lik``)."""

    def _site_logs(self, name, values, model_args, model_kwargs):
        """Every site's elementwise log density but ``name``'s, on concrete values (probes)."""
        model_trace = self._trace(values, model_args, model_kwargs)
        return {
            n: np.asarray(_elementwise(s))
            for n, s in model_trace.items()
            if s["type"] == "sample" and n != name
        }

    # ---------------------------------------------------------------------------------------
    # structure

    def _probe(self, name, model_args, model_kwargs) -> tuple[tuple[str, int], ...] | None:
        """Find the row axis of every site whose density depends on ``name`` (module
        docstring); raise when the probe cannot run on concrete values."""
        kwargs = {k: v for k, v in model_kwargs.items() if k != GIBBS_SITES_KWARG}
        with jax.ensure_compile_time_eval():
            keys = jax.random.split(jax.random.key(20240611))
            base = prototype_trace(conditioned(self._model), keys[0], model_args, kwargs)
            values = {n: base[n]["value"] for n in latent_sample_sites(base)}
            num_rows, capacity = base[name]["fn"].num_rows, base[name]["fn"].capacity
            Z = jax.random.bernoulli(keys[1], 0.5, (num_rows, capacity)).astype(float)

            def logs(Zm):
                return self._site_logs(name, {**values, name: Zm}, model_args, kwargs)

            reference = logs(Z)
            rows = sorted({0, num_rows // 2, num_rows - 1})
            moved = {r: logs(Z.at[r].set(1.0 - Z[r])) for r in rows}
            moved["all"] = logs(1.0 - Z)

        def same(a, b):
            return (a == b) | (np.isnan(a) & np.isnan(b))

        axes = []
        for site, ref in reference.items():
            if all(np.all(same(ref, m[site])) for m in moved.values()):
                continue  # does not depend on this IBP site
            found = None
            for axis in range(-ref.ndim, 0):
                if ref.shape[axis] == num_rows and all(
                    np.all(np.delete(np.moveaxis(same(ref, moved[r][site]), axis, 0), r, 0))
                    for r in rows
                ):
                    found = axis
                    break
            if found is None:
                return None
            axes.append((site, found))
        return tuple(axes)

    def _probe_features(self, name, linked, model_args, model_kwargs) -> tuple[bool, bool]:
        """Two facts about the feature parameters of ``name``, on concrete random values:
        whether their coordinates do not interact in the log density (its Hessian in ``U[k]``
        is diagonal, as for ``Z @ A`` in an elementwise likelihood; the Laplace proposals then
        need one Hessian-vector product instead of the whole Hessian), and whether births and
        deaths can move every row at once
        (:func:`bnpjax.infer.ibp_parallel.footprint_is_separable`). Only speed and acceptance
        depend on the answers, not the chain's correctness; a probe that cannot run answers
        ``(False, False)`` (full Hessians, rows one after another)."""
        kwargs = {k: v for k, v in model_kwargs.items() if k != GIBBS_SITES_KWARG}
        try:
            with jax.ensure_compile_time_eval():
                keys = jax.random.split(jax.random.key(20240612), 4)
                base = prototype_trace(conditioned(self._model), keys[0], model_args, kwargs)
                values = {n: base[n]["value"] for n in latent_sample_sites(base)}
                fn = base[name]["fn"]
                values[name] = jax.random.bernoulli(
                    keys[1], 0.5, (fn.num_rows, fn.capacity)
                ).astype(float)
                values[name] = values[name].at[:, 0].set(1.0)
                U = linked.pack(values)
                U = U + 0.1 * jax.random.normal(keys[2], U.shape)

                def log_density(v):
                    moved = {**values, **linked.unpack(U.at[0].set(v))}
                    return self._log_lik(name, moved, model_args, kwargs) + linked.log_jacobian(
                        U.at[0].set(v)
                    )

                hessian = np.asarray(jax.hessian(log_density)(U[0]))
                axes = self._plans[name].axes
                separable = axes is not None and ibp_parallel.footprint_is_separable(
                    partial(self._site_logs, name, model_args=model_args, model_kwargs=kwargs),
                    values,
                    name,
                    linked,
                    dict(axes),
                    keys[3],
                )
        except Exception:  # traced arguments, or a model the probe cannot run
            return False, False
        diagonal = np.abs(np.diag(hessian))
        off = np.abs(hessian - np.diag(np.diag(hessian)))
        diagonal = bool(np.all(np.isfinite(hessian)) and np.all(off <= 1e-8 * np.max(diagonal)))
        return diagonal, bool(separable)

    def _plan(self, name, fn, model_args, model_kwargs) -> _Plan:
        known = self._plans.get(name)
        shape = (fn.num_rows, fn.capacity)
        if self._rows == "joint":
            return _Plan(*shape, None)
        try:
            axes = self._probe(name, model_args, model_kwargs)
        except Exception as error:  # traced arguments, or a model the probe cannot run
            if known is not None and (known.num_rows, known.capacity) == shape:
                return known
            warnings.warn(
                f"IBPGibbs could not probe the row structure of site {name!r} ({error!r:.200}); "
                "it samples the site one entry at a time (correct, slower). Run MCMC with "
                "concrete model arguments (jit_model_args=False) to let it find the structure.",
                RuntimeWarning,
                stacklevel=3,
            )
            return _Plan(*shape, None)
        return _Plan(*shape, axes)
