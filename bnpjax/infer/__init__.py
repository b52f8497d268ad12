"""Inference machinery shared by every model: the kernel protocol, the driver, ArviZ output.

The driver knows no model; models know no driver.
"""

from bnpjax.infer.arviz_adapter import groups_to_inference_data, pooled_draws, to_inference_data
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, default_trace, pad_axis
from bnpjax.infer.checkpoint import Checkpoint, load_checkpoint, resume, save_checkpoint
from bnpjax.infer.driver import (
    SamplingResult,
    clear_compile_cache,
    compile_count,
    run,
    sample,
)

__all__ = [
    "ArvizSpec",
    "Checkpoint",
    "NumPyroKernel",
    "SamplingAlgorithm",
    "SamplingResult",
    "bind",
    "clear_compile_cache",
    "compile_count",
    "default_trace",
    "groups_to_inference_data",
    "load_checkpoint",
    "mcmc_to_inference_data",
    "pad_axis",
    "pooled_draws",
    "resume",
    "run",
    "sample",
    "save_checkpoint",
    "to_inference_data",
]


def __getattr__(name):
    # the NumPyro bridge imports numpyro (a second of start-up), so only when it is asked for
    if name in ("NumPyroKernel", "mcmc_to_inference_data"):
        from bnpjax.infer import numpyro_bridge

        return getattr(numpyro_bridge, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
