"""Inference machinery shared by every model.

The algorithm types (:class:`SamplingAlgorithm` for Markov chains,
:class:`VariationalAlgorithm` for optimisers), the two drivers (:func:`sample` / :func:`run`
and :func:`fit` / :func:`fit_run`), capacity growth of feature buffers, checkpoints, the
model-agnostic predictive (:func:`map_draws`), replica exchange over temperatures
(:func:`replica_exchange`), convergence diagnostics
(:func:`check_convergence`), the ArviZ adapter and the NumPyro bridge.
The driver knows no model; models know no driver.
"""

from bnpjax.infer.arviz_adapter import (
    concat,
    groups_to_inference_data,
    pooled_draws,
    to_inference_data,
)
from bnpjax.infer.base import (
    ArvizSpec,
    CapacityGrowth,
    SamplingAlgorithm,
    as_step,
    bind,
    default_trace,
    pad_axis,
)
from bnpjax.infer.capacity import growable, pad_fields
from bnpjax.infer.checkpoint import Checkpoint, load_checkpoint, save_checkpoint
from bnpjax.infer.diagnostics import ConvergenceWarning, check_convergence
from bnpjax.infer.driver import (
    SamplingResult,
    clear_compile_cache,
    compile_count,
    resume,
    run,
    sample,
)
from bnpjax.infer.guard import NonFiniteStateError
from bnpjax.infer.predictive import map_draws
from bnpjax.infer.sharding import make_mesh, use_cpu_cores
from bnpjax.infer.tempering import TemperedKernel, geometric_temperatures, replica_exchange
from bnpjax.infer.variational import FitResult, VariationalAlgorithm, fit, fit_run

__all__ = [
    "ArvizSpec",
    "CapacityGrowth",
    "Checkpoint",
    "ConvergenceWarning",
    "FitResult",
    "GrowthReport",
    "IBPGibbs",
    "KernelBlock",
    "NonFiniteStateError",
    "NumPyroKernel",
    "SamplingAlgorithm",
    "SamplingResult",
    "TemperedKernel",
    "VariationalAlgorithm",
    "as_step",
    "bind",
    "check_convergence",
    "clear_compile_cache",
    "compile_count",
    "concat",
    "default_trace",
    "fit",
    "fit_run",
    "geometric_temperatures",
    "groups_to_inference_data",
    "growable",
    "load_checkpoint",
    "make_mesh",
    "map_draws",
    "mcmc_to_inference_data",
    "pad_axis",
    "pad_fields",
    "pooled_draws",
    "replica_exchange",
    "resume",
    "run",
    "run_with_growth",
    "sample",
    "save_checkpoint",
    "to_inference_data",
    "use_cpu_cores",
]


def __getattr__(name):
    # the NumPyro bridge imports numpyro (a second of start-up), so only when it is asked for
    if name in ("NumPyroKernel", "mcmc_to_inference_data"):
        from bnpjax.infer import numpyro_bridge

        return getattr(numpyro_bridge, name)
    if name == "IBPGibbs":
        from bnpjax.infer import ibp_gibbs

        return ibp_gibbs.IBPGibbs
    if name in ("run_with_growth", "GrowthReport"):
        from bnpjax.infer import ibp_growth

        return getattr(ibp_growth, name)
    if name == "KernelBlock":
        from bnpjax.infer import kernel_block

        return kernel_block.KernelBlock
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
