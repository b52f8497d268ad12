r"""A bnpjax sampler as a block of :class:`numpyro.infer.Gibbs`.

::

    def model(X):                      # the user's model: the IBP part as bnpjax has it,
        N, D = X.shape                 # a heavy-tailed prior on the noise scale
        alpha = numpyro.sample("alpha", dist.Gamma(1.0, 1.0))
        Z = numpyro.sample("Z", IndianBuffetProcess(alpha, N, capacity=32))
        sigma_a = numpyro.sample("sigma_a", dist.InverseGamma(1.0, 1.0))   # as ibp_lg's hyper
        A = numpyro.sample("A", dist.Normal(0, sigma_a).expand([32, D]).to_event(2))
        sigma_x = numpyro.sample("sigma_x", dist.HalfCauchy(1.0))
        numpyro.sample("X", dist.Normal(Z @ A, sigma_x).to_event(2), obs=X)

    block = ibp_lg.gibbs_block(model, given={"sigma_x": "sigma_x"}, capacity=32)
    MCMC(Gibbs([(block, block.sites), (NUTS(model), None)]), ...).run(key, X)

:class:`KernelBlock` runs a bnpjax kernel (a :class:`~bnpjax.infer.SamplingAlgorithm`) as one
block: its state fields named in ``sites`` are the block's sites of the NumPyro model, the
fields named in ``given`` are held at the values other blocks currently have for their sites
(the kernel is built not to sample them), and the remaining fields are the kernel's own
auxiliary variables (hyperparameters of a hierarchical prior, imputed entries, ...), which no
other block sees. :meth:`KernelBlock.refresh`, which :class:`numpyro.infer.Gibbs` calls
whenever another block moved, writes the ``given`` values into the kernel's state; one
:meth:`~KernelBlock.sample` is one step of the kernel.

Why the composition is exact. Let ``theta`` be the block's sites and auxiliaries and ``phi``
the other blocks' sites. One step of the kernel with ``phi`` held leaves the kernel's
posterior ``p_b(theta | phi, data)`` invariant; a block that samples ``phi`` from the NumPyro
model's conditional leaves ``p(phi | theta, data)`` invariant. Both are conditionals of one
joint law, ``p_b(theta) p(phi) p(data | theta, phi)``, when the NumPyro model's factors
that involve ``phi`` (its prior and the likelihood) are those of the bnpjax model given
``phi``, e.g. the likelihood of ``X`` given ``Z, A, sigma_x`` above. The priors the NumPyro
model writes on the block's own sites are not used by the sampler (the kernel brings its
own); write them as the bnpjax model has them so that ``log_likelihood``, ``Predictive`` and
the model's log density mean the same thing. The model factories (:func:`ibp_lg.gibbs_block
<bnpjax.models.ibp_lg.gibbs_block>`, :func:`fm.gibbs_block <bnpjax.models.fm.gibbs_block>`)
say what their kernel assumes.

Data. The kernel is built from the model's arguments, ``kernel(*model_args, **model_kwargs)``
(or given built, bound to its data); NumPyro's loop cannot grow a feature buffer, so a step
that needed more room sets ``capacity_exceeded`` and warns, as :class:`NumPyroKernel` does.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from bnpjax.infer.base import SamplingAlgorithm
from bnpjax.infer.numpyro_bridge import kernel_step, warn_if_any

__all__ = ["KernelBlock", "KernelBlockState"]

_GIBBS_SITES = "_gibbs_sites"  # numpyro.infer.gibbs.GIBBS_SITES_KWARG

_CAPACITY_MESSAGE = (
    "a bnpjax Gibbs block needed more room than its kernel's feature capacity; NumPyro "
    "cannot grow the buffer, so the draws from here on are those of a truncated sampler. "
    "Build the block (and the model's buffer) with a larger capacity."
)


def _mcmc_kernel_base():
    from numpyro.infer.mcmc import MCMCKernel

    return MCMCKernel


class KernelBlockState(NamedTuple):
    """``z``: the block's sites; ``sampler_state``: the kernel's state; ``i``: steps taken
    (warmup steps first); ``capacity_exceeded``: some step needed more room; ``rng_key``."""

    z: dict
    sampler_state: Any
    i: jax.Array
    num_warmup: jax.Array
    capacity_exceeded: jax.Array
    rng_key: jax.Array


class KernelBlock(_mcmc_kernel_base()):
    """A bnpjax kernel as a block of :class:`numpyro.infer.Gibbs` (module docstring).

    Parameters
    ----------
    model
        the user's NumPyro model (the same callable as the other blocks').
    kernel
        a :class:`~bnpjax.infer.SamplingAlgorithm`, or ``kernel(*model_args,
        **model_kwargs) -> SamplingAlgorithm`` building it from the model's arguments (it
        may then be called with traced arguments). It must not sample the fields in
        ``given``.
    sites
        ``{site: field}``: the model's sites this block samples, each a field of the
        kernel's state, or ``{site: fn}`` with ``fn(state)`` its value.
    given
        ``{field: site}``: fields of the kernel's state held at another block's site, or
        ``{field: fn}`` with ``fn(values)`` computing the field from the other sites'
        (constrained) values, e.g. ``{"sigma_x": lambda v: jnp.sqrt(v["sigma_x2"])}``.

    The block starts from ``kernel.init`` (the composite's prototype values of the block's
    sites are not used: a kernel's state holds more than its sites). A kernel's
    ``warmup_step`` runs (or its adaptation is on) for the first ``num_warmup`` steps.
    """

    sample_field = "z"

    def __init__(
        self,
        model,
        kernel: SamplingAlgorithm | Callable[..., SamplingAlgorithm],
        *,
        sites: Mapping[str, str | Callable],
        given: Mapping[str, str | Callable] | None = None,
    ):
        if not callable(model):
            raise ValueError(f"model must be a NumPyro model (a callable), got {model!r}")
        if not (isinstance(kernel, SamplingAlgorithm) or callable(kernel)):
            raise ValueError(
                "kernel must be a bnpjax SamplingAlgorithm or a function of the model's "
                f"arguments returning one, got {type(kernel).__name__}"
            )
        if not sites:
            raise ValueError("sites must name at least one site of the model")
        self._model = model
        self._kernel = kernel
        self._site_map = dict(sites)
        self._given = dict(given or {})

    @property
    def model(self):
        return self._model

    @property
    def sites(self) -> list[str]:
        """The model's sites this block samples (for ``Gibbs([(block, block.sites), ...])``)."""
        return list(self._site_map)

    def algorithm(self, model_args=(), model_kwargs=None) -> SamplingAlgorithm:
        """The kernel for these model arguments (conditioning values removed)."""
        if isinstance(self._kernel, SamplingAlgorithm):
            return self._kernel
        kwargs = {k: v for k, v in (model_kwargs or {}).items() if k != _GIBBS_SITES}
        return self._kernel(*model_args, **kwargs)

    # ---------------------------------------------------------------------------------------

    def _read(self, sampler_state) -> dict:
        out = {}
        for site, field in self._site_map.items():
            value = field(sampler_state) if callable(field) else getattr(sampler_state, field)
            out[site] = jnp.asarray(value)
        return out

    def _condition(self, sampler_state, model_kwargs):
        values = (model_kwargs or {}).get(_GIBBS_SITES, {})
        updates = {}
        for field, source in self._given.items():
            if callable(source):
                value = source(values)
            elif source in values:
                value = values[source]
            else:
                continue  # not known yet (Gibbs.init conditions on every site)
            old = getattr(sampler_state, field)
            updates[field] = jnp.asarray(value, jnp.result_type(old)).reshape(jnp.shape(old))
        return sampler_state._replace(**updates) if updates else sampler_state

    def _check_sites(self, model_args, model_kwargs, z):
        from numpyro.infer.gibbs import conditioned, latent_sample_sites, prototype_trace

        kwargs = dict(model_kwargs or {})
        with jax.ensure_compile_time_eval():
            model_trace = prototype_trace(
                conditioned(self._model), jax.random.key(0), model_args, kwargs
            )
        latent = set(latent_sample_sites(model_trace)) | set(kwargs.get(_GIBBS_SITES, {}))
        for site, value in z.items():
            if site not in latent:
                raise ValueError(f"KernelBlock: site {site!r} is not a latent site of the model")
            if site in model_trace and jnp.shape(model_trace[site]["value"]) != jnp.shape(value):
                raise ValueError(
                    f"KernelBlock: site {site!r} has shape "
                    f"{jnp.shape(model_trace[site]['value'])} in the model but "
                    f"{jnp.shape(value)} in the kernel's state (is the capacity the same?)"
                )
        for field, source in self._given.items():
            if isinstance(source, str) and source not in latent:
                raise ValueError(
                    f"KernelBlock: given[{field!r}] names {source!r}, which is not a latent "
                    "site of the model"
                )

    # ---------------------------------------------------------------------------------------
    # MCMCKernel

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        from numpyro.util import is_prng_key

        if not is_prng_key(rng_key):
            raise ValueError(
                "KernelBlock runs one chain per call: use it as a block of numpyro.infer.Gibbs "
                'with chain_method "sequential", "parallel" or jax.vmap'
            )
        algorithm = self.algorithm(model_args, model_kwargs)
        init_key, run_key = jax.random.split(rng_key)
        sampler_state = self._condition(algorithm.init(init_key), model_kwargs)
        z = self._read(sampler_state)
        self._check_sites(model_args, model_kwargs, z)
        return KernelBlockState(
            z=z,
            sampler_state=sampler_state,
            i=jnp.zeros((), jnp.int32),
            num_warmup=jnp.asarray(num_warmup, jnp.int32),
            capacity_exceeded=jnp.zeros((), bool),
            rng_key=run_key,
        )

    def sample(self, state, model_args, model_kwargs):
        new, _, exceeded = kernel_step(
            self.algorithm(model_args, model_kwargs),
            state.rng_key,
            state.sampler_state,
            state.i,
            state.num_warmup,
        )
        fresh = exceeded & ~state.capacity_exceeded
        lax.cond(
            fresh,
            lambda: jax.debug.callback(
                functools.partial(warn_if_any, message=_CAPACITY_MESSAGE), fresh
            ),
            lambda: None,
        )
        return state._replace(
            z=self._read(new),
            sampler_state=new,
            i=state.i + 1,
            capacity_exceeded=state.capacity_exceeded | exceeded,
        )

    def refresh(self, state, model_args, model_kwargs):
        """Hold the ``given`` fields at the other blocks' current values."""
        sampler_state = self._condition(state.sampler_state, model_kwargs)
        return state._replace(sampler_state=sampler_state, z=self._read(sampler_state))

    def wrap_model(self, wrapper):
        kernel = copy.copy(self)
        kernel._model = wrapper(self._model)
        return kernel

    def get_constrain_fn(self, model_args, model_kwargs):
        return lambda z: z

    def postprocess_fn(self, model_args, model_kwargs):
        return lambda z: z

    @property
    def default_fields(self):
        return ("z", "capacity_exceeded")

    def get_diagnostics_str(self, state) -> str:
        if bool(np.any(np.asarray(state.capacity_exceeded))):
            return "CAPACITY EXCEEDED"
        return ""
