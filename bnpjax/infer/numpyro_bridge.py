"""Run any bnpjax sampler under :class:`numpyro.infer.MCMC`.

:class:`NumPyroKernel` wraps a :class:`~bnpjax.infer.SamplingAlgorithm` (``init(key) -> State``,
``step(key, state) -> (State, Info)``) as a :class:`numpyro.infer.mcmc.MCMCKernel`, so NumPyro's
run loop, chain methods, thinning, ``warmup()`` / ``post_warmup_state`` continuation,
``print_summary`` and ``az.from_numpyro`` work on it::

    import numpyro
    from bnpjax.infer import NumPyroKernel, mcmc_to_inference_data

    kernel = NumPyroKernel(ibp_lg.collapsed_gibbs(data, alpha_prior=(1.0, 1.0)))
    mcmc = numpyro.infer.MCMC(kernel, num_warmup=200, num_samples=500, num_chains=2,
                              chain_method="vectorized")
    mcmc.run(jax.random.key(0))
    mcmc.get_samples()          # the kernel's kept variables (its trace's posterior group)
    mcmc.get_extra_fields()     # its sample statistics (lp, num_features, ...)
    idata = mcmc_to_inference_data(mcmc)   # named dims and coords, observed data, settings
    # or az.from_numpyro(mcmc, dims=kernel.dims, coords=kernel.coords)

Keys follow :func:`bnpjax.infer.sample`: a chain key is split into an init key and a run key,
and step ``t`` (counted from 0 at the first warmup step) uses ``fold_in(run_key, t)``. NumPyro
splits the key given to ``run`` into ``num_chains`` chain keys exactly as the driver does, so
with two or more chains ``MCMC(NumPyroKernel(alg), num_warmup=W, num_samples=S,
num_chains=C)`` draws the same chains as ``bnpjax.sample(alg, key, S, num_warmup=W,
num_chains=C)`` (tested). With one chain NumPyro uses the key itself as the chain key.

What the bridge cannot do is grow a fixed-capacity feature buffer: NumPyro compiles the whole
run as one loop over an unchanging state. A step that needed more room sets the state's
``capacity_exceeded`` flag (collected by default, and shown as a sample statistic); the first
such step issues a ``RuntimeWarning`` from inside the compiled loop, and
:func:`mcmc_to_inference_data` refuses such a run. Build the kernel with a larger capacity,
or use :func:`bnpjax.infer.sample`, whose driver grows the buffer and re-runs the chunk, for
models whose number of features is not known in advance.

To run a kernel as one block of ``numpyro.infer.Gibbs`` (conditioned on other blocks' sites
through ``refresh``) use :class:`bnpjax.infer.KernelBlock` instead.
"""

from __future__ import annotations

import collections
import functools
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bnpjax.infer.arviz_adapter import groups_to_inference_data, package_versions
from bnpjax.infer.base import CAPACITY_FIELDS, SamplingAlgorithm, default_trace
from bnpjax.infer.checks import check_flag

__all__ = ["NumPyroKernel", "mcmc_to_inference_data"]

_BASE_FIELDS = (
    "i",
    "num_warmup",
    "z",
    "log_likelihood",
    "capacity_exceeded",
    "sampler_state",
    "rng_key",
)


def _mcmc_kernel_base():
    from numpyro.infer.mcmc import MCMCKernel

    return MCMCKernel


def warn_if_any(flag, message: str) -> None:
    """Host side of a ``jax.debug.callback``: a ``RuntimeWarning`` when any of ``flag`` is set
    (NumPyro's loop cannot grow a buffer, so a step that needed more room is said, not hidden)."""
    if np.any(np.asarray(flag)):
        warnings.warn(message, RuntimeWarning, stacklevel=1)


def kernel_step(algorithm: SamplingAlgorithm, run_key, sampler_state, i, num_warmup):
    """Step ``i`` of a chain as the driver takes it (key ``fold_in(run_key, i)``, the
    kernel's ``warmup_step``, or its adaptation switched on, while ``i < num_warmup``):
    ``(state, info, needed_more_room)``."""
    key = jax.random.fold_in(run_key, i)
    switch = algorithm.set_adaptation
    if switch is not None:
        sampler_state = switch(sampler_state, i < num_warmup)
    if algorithm.warmup_step is None:
        new, info = algorithm.step(key, sampler_state)
    else:
        new, info = lax.cond(
            i < num_warmup, algorithm.warmup_step, algorithm.step, key, sampler_state
        )
    if switch is not None:  # set for the next step: a state after warmup (NumPyro's
        new = switch(new, i + 1 < num_warmup)  # post_warmup_state) steps exactly
    exceeded = getattr(info, CAPACITY_FIELDS[0], None)
    exceeded = jnp.zeros((), bool) if exceeded is None else jnp.any(exceeded)
    return new, info, exceeded


_CAPACITY_MESSAGE = (
    "a bnpjax step needed more room than the kernel's feature capacity; NumPyro "
    "cannot grow the buffer, so the draws from here on are those of a truncated "
    "sampler. Build the kernel with a larger capacity or run it with bnpjax.sample."
)


class NumPyroKernel(_mcmc_kernel_base()):
    """A bnpjax sampler as a :class:`numpyro.infer.mcmc.MCMCKernel` (module docstring).

    Parameters
    ----------
    algorithm
        any bnpjax :class:`~bnpjax.infer.SamplingAlgorithm`, e.g.
        ``bnpjax.models.ibp_lg.collapsed_gibbs(data)``. Its ``warmup_step`` (if any) is used
        for the first ``num_warmup`` steps, its ``step`` afterwards, as in the driver; a
        kernel that adapts through its state (``set_adaptation``) has it on for those steps
        and off after them (the state after warmup has it off).
    log_likelihood
        also keep the trace's pointwise log-likelihood (state field ``log_likelihood``,
        collected with ``mcmc.run(key, extra_fields=("log_likelihood",))`` and read by
        :func:`mcmc_to_inference_data`). Off by default: XLA then leaves it uncomputed.

    The collected ``state.z`` is a dict of the trace's posterior variables (what
    :func:`bnpjax.infer.sample` keeps per draw), and every sample statistic of the trace is a
    state field collected by default (``mcmc.get_extra_fields()``), as is
    ``capacity_exceeded``. ``init_params`` given to ``MCMC.run`` is taken as the sampler's
    initial state (with a leading chain axis when ``num_chains > 1``), e.g. the
    ``final_state`` of a :func:`bnpjax.infer.run`.
    """

    sample_field = "z"

    def __init__(self, algorithm: SamplingAlgorithm, *, log_likelihood: bool = False):
        if not isinstance(algorithm, SamplingAlgorithm):
            raise ValueError(
                "algorithm must be a bnpjax SamplingAlgorithm (a model factory's result, e.g. "
                f"ibp_lg.collapsed_gibbs(data)), got {type(algorithm).__name__}"
            )
        self.algorithm = algorithm
        self.keep_log_likelihood = check_flag(log_likelihood, "log_likelihood")
        self.model = None  # az.from_numpyro reads it; there is no NumPyro model to replay
        self._trace_fn = algorithm.trace if algorithm.trace is not None else default_trace

        def first_trace(key):
            new_state, info = algorithm.step(key, algorithm.init(key))
            return self._trace_fn(new_state, info)

        trace_shape = jax.eval_shape(first_trace, jax.random.key(0))
        self._trace_shape = trace_shape
        stats = tuple(trace_shape.get("sample_stats", {}))
        clash = [name for name in stats if name in _BASE_FIELDS or not name.isidentifier()]
        if clash:
            raise ValueError(f"sample statistics {clash} cannot be NumPyro state fields")
        self.stat_names = stats
        self.State = collections.namedtuple("BnpjaxMCMCState", _BASE_FIELDS + stats)

    # ---------------------------------------------------------------------------------------
    # what NumPyro reads

    @property
    def default_fields(self):
        return ("z", "capacity_exceeded", *self.stat_names)

    @property
    def dims(self) -> dict:
        """Named dims of the kept posterior variables, for ``az.from_numpyro(mcmc, dims=...)``."""
        kept = self._trace_shape.get("posterior", {})
        return {k: list(v) for k, v in self.algorithm.spec.dims.items() if k in kept}

    @property
    def coords(self) -> dict:
        """Coordinates of those dims, for ``az.from_numpyro(mcmc, coords=...)``."""
        used = {d for ds in self.dims.values() for d in ds}
        return {k: list(v) for k, v in self.algorithm.spec.coords.items() if k in used}

    def postprocess_fn(self, model_args, model_kwargs):
        return lambda z: z

    def get_diagnostics_str(self, state) -> str:
        parts = []
        for name, label in (("num_features", "K+"), ("acceptance_rate", "acc"), ("lp", "lp")):
            if name in self.stat_names:
                value = np.asarray(getattr(state, name), dtype=float)
                parts.append(f"{label} {float(np.mean(value)):.4g}")
        if bool(np.any(np.asarray(state.capacity_exceeded))):
            parts.append("CAPACITY EXCEEDED")
        return ", ".join(parts)

    # ---------------------------------------------------------------------------------------
    # the transition

    def _pack(self, i, num_warmup, sampler_state, run_key, trace, exceeded):
        stats = trace.get("sample_stats", {})
        log_lik = trace.get("log_likelihood", {}) if self.keep_log_likelihood else {}
        return self.State(
            i=i,
            num_warmup=num_warmup,
            z=dict(trace.get("posterior", {})),
            log_likelihood=dict(log_lik),
            capacity_exceeded=exceeded,
            sampler_state=sampler_state,
            rng_key=run_key,
            **{name: stats[name] for name in self.stat_names},
        )

    def _init_one(self, chain_key, num_warmup, init_params):
        init_key, run_key = jax.random.split(chain_key)
        sampler_state = self.algorithm.init(init_key) if init_params is None else init_params
        zeros = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), self._trace_shape)
        return self._pack(
            jnp.zeros((), jnp.int32),
            jnp.asarray(num_warmup, jnp.int32),
            sampler_state,
            run_key,
            zeros,
            jnp.zeros((), bool),
        )

    def _sample_one(self, state):
        new_state, info, exceeded = kernel_step(
            self.algorithm, state.rng_key, state.sampler_state, state.i, state.num_warmup
        )
        trace = self._trace_fn(new_state, info)
        new = self._pack(
            state.i + 1,
            state.num_warmup,
            new_state,
            state.rng_key,
            trace,
            state.capacity_exceeded | exceeded,
        )
        return new, exceeded & ~state.capacity_exceeded

    # ---------------------------------------------------------------------------------------
    # MCMCKernel

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        from numpyro.util import is_prng_key

        if model_args or model_kwargs:
            raise ValueError(
                "a bnpjax kernel is bound to its data when built; MCMC.run takes no model "
                "arguments for it (got positional or keyword arguments)"
            )
        if is_prng_key(rng_key):
            return self._init_one(rng_key, num_warmup, init_params)
        # chain_method="vectorized": a batch of keys, and a batch of init_params if given
        if init_params is None:
            return jax.vmap(lambda k: self._init_one(k, num_warmup, None))(rng_key)
        return jax.vmap(lambda k, p: self._init_one(k, num_warmup, p))(rng_key, init_params)

    def sample(self, state, model_args, model_kwargs):
        if jnp.ndim(state.i) > 0:
            new, fresh = jax.vmap(self._sample_one)(state)
            fresh = jnp.any(fresh)
        else:
            new, fresh = self._sample_one(state)
        # a host call only on the step that first needs more room: a callback on every step
        # (and, under vmap, one per chain) cost more than the kernel on small problems
        lax.cond(
            fresh,
            lambda: jax.debug.callback(
                functools.partial(warn_if_any, message=_CAPACITY_MESSAGE), fresh
            ),
            lambda: None,
        )
        return new


def mcmc_to_inference_data(mcmc) -> Any:
    """:class:`arviz.InferenceData` of a :class:`numpyro.infer.MCMC` run of a
    :class:`NumPyroKernel`, laid out as :func:`bnpjax.infer.to_inference_data` lays out a
    driver run: the kernel's dims and coords, its observed and constant data, sample
    statistics, the pointwise log-likelihood when the kernel kept it and the run collected it
    (``extra_fields=("log_likelihood",)``), and the kernel's settings in ``attrs``.

    Raises ``RuntimeError`` if a step of the run needed more feature capacity than the
    kernel had (module docstring): such draws are not those of the model's sampler.
    """
    kernel = getattr(mcmc, "sampler", None)
    if not isinstance(kernel, NumPyroKernel):
        raise ValueError("mcmc must be a numpyro.infer.MCMC run of a bnpjax NumPyroKernel")
    if getattr(mcmc, "_states", None) is None:
        raise ValueError("mcmc has not been run yet")
    extra = mcmc.get_extra_fields(group_by_chain=True)
    exceeded = extra.get("capacity_exceeded")
    if exceeded is not None and bool(np.any(np.asarray(exceeded))):
        raise RuntimeError(
            "a step of this run needed more feature capacity than the kernel had, and NumPyro "
            "cannot grow the buffer: rebuild the kernel with a larger capacity, or use "
            "bnpjax.sample"
        )
    spec = kernel.algorithm.spec
    groups = {
        "posterior": jax.device_get(mcmc.get_samples(group_by_chain=True)),
        "sample_stats": {
            name: np.asarray(extra[name]) for name in kernel.stat_names if name in extra
        },
        "log_likelihood": jax.device_get(extra.get("log_likelihood", {})),
        "observed_data": dict(spec.observed_data),
        "constant_data": dict(spec.constant_data),
    }
    attrs = {
        "kernel": spec.name,
        "kernel_settings": dict(spec.settings),
        "inference_library": "bnpjax (numpyro.infer.MCMC)",
        "num_warmup": int(mcmc.num_warmup),
        "num_samples": int(mcmc.num_samples),
        "thin": int(mcmc.thinning),
        "num_chains": int(mcmc.num_chains),
        **package_versions(),
    }
    return groups_to_inference_data(
        groups, dims=dict(spec.dims), coords=dict(spec.coords), attrs=attrs
    )
