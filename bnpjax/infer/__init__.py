"""Inference machinery shared by every model: the kernel protocol, the driver, ArviZ output.

The driver knows no model; models know no driver.
"""

from bnpjax.infer.arviz_adapter import groups_to_inference_data, pooled_draws, to_inference_data
from bnpjax.infer.base import ArvizSpec, SamplingAlgorithm, bind, default_trace, pad_axis
from bnpjax.infer.driver import SamplingResult, compile_count, run, sample

__all__ = [
    "ArvizSpec",
    "SamplingAlgorithm",
    "SamplingResult",
    "bind",
    "compile_count",
    "default_trace",
    "groups_to_inference_data",
    "pad_axis",
    "pooled_draws",
    "run",
    "sample",
    "to_inference_data",
]
