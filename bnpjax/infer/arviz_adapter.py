"""The one place where bnpjax meets ArviZ.

Everything else in the library produces plain dictionaries of NumPy arrays grouped like
InferenceData (``posterior``, ``sample_stats``, ``log_likelihood``, ``observed_data``,
``constant_data``), with ``(chain, draw)`` leading axes. This module turns them into an
:class:`arviz.InferenceData` (arviz 0.2x). A move to arviz 1.x (``arviz_base.from_dict`` and
DataTree) changes this file only.
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np

from bnpjax.infer.base import ArvizSpec

__all__ = ["groups_to_inference_data", "package_versions", "pooled_draws", "to_inference_data"]


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def package_versions() -> dict[str, str]:
    """Versions of bnpjax and the libraries a result depends on."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("bnpjax", "jax", "jaxlib", "numpyro", "arviz", "numpy"):
        try:
            out[f"{name}_version"] = version(name)
        except PackageNotFoundError:
            out[f"{name}_version"] = "unknown"
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return repr(value)


def _attr_value(value: Any):
    """netCDF attributes hold strings and numbers only."""
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        return value
    return json.dumps(_jsonable(value))


def _storable(value) -> np.ndarray:
    """Booleans (active masks) as int8: ArviZ's plots and NumPyro's summary refuse bools."""
    array = np.asarray(value)
    return array.astype(np.int8) if array.dtype == np.bool_ else array


def groups_to_inference_data(
    groups: dict[str, dict[str, Any]],
    *,
    dims: dict | None = None,
    coords: dict | None = None,
    attrs: dict[str, Any] | None = None,
):
    """Build InferenceData from ``{group: {variable: array}}`` (draw groups lead with
    ``(chain, draw)``). Empty groups are left out; non-finite log-likelihood values are kept."""
    az = _arviz()
    attrs = {k: _attr_value(v) for k, v in (attrs or {}).items()}
    present = {g: {k: _storable(v) for k, v in d.items()} for g, d in groups.items() if d}
    dims = {k: list(v) for k, v in (dims or {}).items()}
    coords = {k: list(v) for k, v in (coords or {}).items()}
    # dims referring to variables that are absent are harmless; unused coords are not.
    used = {d for name, ds in dims.items() for d in ds if any(name in g for g in present.values())}
    coords = {k: v for k, v in coords.items() if k in used}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(**present, dims=dims, coords=coords, attrs=attrs)
    return idata


def to_inference_data(result) -> Any:
    """Turn a :class:`bnpjax.infer.SamplingResult` into :class:`arviz.InferenceData`.

    Dims and coords come from the kernel's :class:`~bnpjax.infer.ArvizSpec`. ``attrs`` carry
    the seed, the kernel name and settings, the driver settings, timings (compile time apart
    from run time) and package versions.
    """
    spec: ArvizSpec = result.algorithm.spec
    groups = {name: dict(values) for name, values in result.trace.items()}
    groups["observed_data"] = dict(spec.observed_data)
    groups["constant_data"] = dict(spec.constant_data)
    attrs: dict[str, Any] = {
        "kernel": spec.name,
        "kernel_settings": dict(spec.settings),
        "inference_library": "bnpjax",
        **{k: v for k, v in result.settings.items()},
        **{k: float(v) for k, v in result.timings.items()},
        **package_versions(),
    }
    return groups_to_inference_data(
        groups, dims=dict(spec.dims), coords=dict(spec.coords), attrs=attrs
    )


def pooled_draws(draws, group: str, name: str) -> np.ndarray:
    """Variable ``name`` of ``group`` with the draws of every chain on one leading axis
    ``(chain * draw, ...)``, from the InferenceData of :func:`bnpjax.sample`, the ``trace`` of
    :func:`bnpjax.infer.run`, or a list of them (pooled in order). ``ValueError`` when
    ``draws`` is none of these or lacks the variable."""
    runs = list(draws) if isinstance(draws, list | tuple) else [draws]
    if not runs:
        raise ValueError("draws is empty")
    values = []
    for run in runs:
        if hasattr(run, "posterior"):
            table = getattr(run, group, None)
        elif isinstance(run, dict) and "posterior" in run:
            table = run.get(group)
        else:
            raise ValueError(
                "draws must be the InferenceData of bnpjax.sample, a run's trace, or a list of them"
            )
        if table is None or name not in table:
            raise ValueError(f"draws: {group} lacks {name!r}")
        value = np.asarray(table[name])
        values.append(value.reshape(-1, *value.shape[2:]))
    return np.concatenate(values)
