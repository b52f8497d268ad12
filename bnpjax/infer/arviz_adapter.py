"""The one place where bnpjax meets ArviZ, on either line of ArviZ.

Everything else in the library produces plain dictionaries of NumPy arrays grouped like
InferenceData (``posterior``, ``sample_stats``, ``log_likelihood``, ``observed_data``,
``constant_data``), with ``(chain, draw)`` leading axes. This module builds that dictionary of
groups once and hands it to one of two backends:

* ``"0"``: ArviZ 0.x, ``arviz.from_dict`` -> :class:`arviz.InferenceData`;
* ``"1"``: the ArviZ 1.x data layer, ``arviz_base.from_dict`` -> :class:`xarray.DataTree`
  (the object every ArviZ 1.x function, ``arviz_stats`` and ``arviz_plots``, takes).

The backend is, in order: the one set by :func:`set_backend`, the environment variable
``BNPJAX_ARVIZ`` (``0`` or ``1``), else the installed ArviZ (1.x when ``arviz>=1`` is installed,
or when only ``arviz-base`` is). Both return types answer the same reads: ``data.posterior``
(a Dataset, or a DataTree node), ``data["posterior"]["x"]`` (a DataArray), ``data.attrs`` (the
run's attributes, also copied onto every group). :func:`group` and :func:`pooled_draws` read
either, and :func:`concat` combines runs whose feature buffers grew to different capacities.

ArviZ 0.x's functions (``az.summary``, ``az.loo``, ``az.plot_trace``) take the InferenceData;
ArviZ 1.x's (``arviz_stats.loo``, ``arviz_stats.compare``, ``arviz_plots.plot_dist``) take the
DataTree. Booleans (``active`` masks) are stored as int8, which both lines' plots and NumPyro's
``print_summary`` accept.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import warnings
from typing import Any

import numpy as np

from bnpjax.infer.base import ArvizSpec

__all__ = [
    "backend",
    "backend_ready",
    "concat",
    "group",
    "group_names",
    "groups_to_inference_data",
    "import_arviz",
    "package_versions",
    "pooled_draws",
    "prepare_backend",
    "set_backend",
    "to_inference_data",
]

#: The environment variable that picks the backend (``0`` or ``1``) when :func:`set_backend`
#: has not.
BACKEND_VARIABLE = "BNPJAX_ARVIZ"
_BACKENDS = ("0", "1")
_SAMPLE_DIMS = ("chain", "draw")
_override: str | None = None


def import_arviz():
    """The ``arviz`` module, imported without the notice ArviZ 0.2x prints once a day about its
    own future (the ArviZ 0.x functions: ``summary``, ``ess``, ``plot_trace``)."""
    backend_ready()
    _hide_arviz_notice()
    import arviz

    return arviz


def _hide_arviz_notice() -> None:
    """Hide ArviZ 0.2x's once-a-day FutureWarning about its refactor, printed at import, by a
    filter that matches that message only. It is installed from the calling thread, before
    any import thread starts: the process's warning filters are shared by all its threads,
    and ``catch_warnings`` in a background thread would, on leaving, restore filters that
    the caller may have changed meanwhile (a test's ``pytest.warns``, say)."""
    warnings.filterwarnings("ignore", message=_ARVIZ_NOTICE, category=FutureWarning)


#: the start of ArviZ 0.2x's notice
_ARVIZ_NOTICE = r"\s*ArviZ is undergoing a major refactor"


def _import_matplotlib_style():
    """arviz 0.23 imports arviz-plots when it is installed, and arviz-plots 0.8 reads
    ``matplotlib.style.core``, a submodule matplotlib 3.11 no longer imports by itself (and
    deprecates): import it first when arviz-plots is there."""
    from importlib.util import find_spec

    if find_spec("arviz_plots") is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import matplotlib.style.core  # noqa: F401
        except ImportError:  # pragma: no cover - matplotlib reorganised
            pass


# at import, so that a plain ``import arviz`` anywhere after bnpjax works in such environments
_import_matplotlib_style()


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _check_backend(value) -> str:
    text = str(value).strip()
    if text not in _BACKENDS:
        raise ValueError(f"ArviZ backend must be 0 or 1 (0.x or 1.x), got {value!r}")
    return text


def set_backend(version: str | int | None) -> str | None:
    """Choose the ArviZ line bnpjax writes its results for.

    Parameters
    ----------
    version : {"0", "1", 0, 1, None}
        ``"0"``: :class:`arviz.InferenceData` built by ArviZ 0.x's ``from_dict``; ``"1"``:
        :class:`xarray.DataTree` built by ``arviz_base.from_dict`` (the ArviZ 1.x data layer,
        package ``arviz-base``); ``None``: back to the default (``BNPJAX_ARVIZ``, else the
        installed ArviZ).

    Returns
    -------
    str or None
        The previous setting (pass it back to restore it).
    """
    global _override
    previous = _override
    _override = None if version is None else _check_backend(version)
    return previous


def backend() -> str:
    """The ArviZ line in use, ``"0"`` or ``"1"`` (see the module docstring for the order)."""
    if _override is not None:
        return _override
    chosen = os.environ.get(BACKEND_VARIABLE, "").strip()
    if chosen:
        return _check_backend(chosen)
    arviz_version = _version("arviz")
    if arviz_version is not None:
        return "1" if int(arviz_version.split(".")[0]) >= 1 else "0"
    if _version("arviz-base") is not None:
        return "1"
    raise ImportError("bnpjax needs ArviZ: pip install arviz (or arviz-base for the 1.x line)")


def package_versions() -> dict[str, str]:
    """Versions of bnpjax and the libraries a result depends on."""
    out = {}
    for name in ("bnpjax", "jax", "jaxlib", "numpyro", "arviz", "numpy"):
        out[f"{name}_version"] = _version(name) or "unknown"
    if backend() == "1":
        out["arviz_base_version"] = _version("arviz-base") or "unknown"
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


#: the thread :func:`prepare_backend` started, until :func:`backend_ready` has joined it
_backend_import: threading.Thread | None = None


def _import_backend() -> None:
    try:
        if backend() == "1":
            import arviz_base  # noqa: F401
        else:
            import arviz  # noqa: F401
    except Exception:  # left for the conversion, in the caller's thread, to report
        pass


def prepare_backend() -> None:
    """Start importing the modules :func:`to_inference_data` will need, in a background
    thread: ArviZ 0.x takes 1-2 s to import (with xarray, pandas, matplotlib and SciPy's
    statistics). :func:`bnpjax.sample` calls it as soon as its first chunk is dispatched.
    Imported in the calling thread, the import outlasted a short first chunk and the devices
    waited for it (the M3F demo's sampling: 8.2-8.6 s, against 7.0-7.2 s with ArviZ
    imported before the run); in a thread it overlaps the chunks that follow, because the
    caller only waits for the devices, with the lock released. Everything that needs the
    backend, and every compilation (whose lowering may import modules of its own), first
    waits for the import (:func:`backend_ready`), so that no two threads import at once.
    Nothing happens when the backend is already imported; a backend that cannot be
    imported is left for the conversion to report."""
    global _backend_import
    module = "arviz_base" if backend() == "1" else "arviz"
    if _backend_import is not None or module in sys.modules:
        return
    _hide_arviz_notice()
    _backend_import = threading.Thread(
        target=_import_backend, name="bnpjax-import-arviz", daemon=True
    )
    _backend_import.start()


def backend_ready() -> None:
    """Wait until the import :func:`prepare_backend` started has finished (at once when it
    started none)."""
    global _backend_import
    thread = _backend_import
    if thread is not None and thread is not threading.current_thread():
        thread.join()
        _backend_import = None


def _from_dict_0(groups, dims, coords, attrs):
    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = az.from_dict(**groups, dims=dims, coords=coords, attrs=attrs)
    # from_dict writes attrs on the root (and on observed_data only): copy them onto every
    # group, as on the 1.x path, so that ``idata.posterior.attrs`` holds them too
    for name in idata.groups():
        idata[name].attrs.update(attrs)
    return idata


def _from_dict_1(groups, dims, coords, attrs):
    backend_ready()
    try:
        import arviz_base
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the ArviZ 1.x backend needs arviz-base: pip install arviz-base "
            f"(or set {BACKEND_VARIABLE}=0)"
        ) from error
    per_group = {name: dict(attrs) for name in groups}
    per_group["/"] = dict(attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return arviz_base.from_dict(groups, dims=dims, coords=coords, attrs=per_group)


def groups_to_inference_data(
    groups: dict[str, dict[str, Any]],
    *,
    dims: dict | None = None,
    coords: dict | None = None,
    attrs: dict[str, Any] | None = None,
):
    """Build ArviZ data from ``{group: {variable: array}}``.

    Parameters
    ----------
    groups : dict
        Variables per group; draw groups lead with ``(chain, draw)``, the ``*_data`` groups
        have no sample axes. Empty groups are left out; booleans are stored as int8;
        non-finite log-likelihood values are kept.
    dims, coords : dict, optional
        Named dims per variable and coordinate values per dim (coords of dims that no present
        variable uses are dropped).
    attrs : dict, optional
        Attributes of the run, written on every group (and on the root of a DataTree);
        values that are not strings or numbers are stored as JSON.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        InferenceData on the ``"0"`` backend, a DataTree on ``"1"`` (see :func:`backend`).
    """
    attrs = {k: _attr_value(v) for k, v in (attrs or {}).items()}
    present = {g: {k: _storable(v) for k, v in d.items()} for g, d in groups.items() if d}
    dims = {k: list(v) for k, v in (dims or {}).items()}
    coords = {k: list(v) for k, v in (coords or {}).items()}
    # dims referring to variables that are absent are harmless; unused coords are not.
    used = {d for name, ds in dims.items() for d in ds if any(name in g for g in present.values())}
    coords = {k: v for k, v in coords.items() if k in used}
    build = _from_dict_1 if backend() == "1" else _from_dict_0
    return build(present, dims, coords, attrs)


def to_inference_data(result) -> Any:
    """Turn a :class:`bnpjax.infer.SamplingResult` into ArviZ data.

    Dims and coords come from the kernel's :class:`~bnpjax.infer.ArvizSpec`. ``attrs`` carry
    the seed, the kernel name and settings, the driver settings, timings (compile time apart
    from run time) and package versions.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        As :func:`groups_to_inference_data` (by the backend in use).
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


# --------------------------------------------------------------------------------------------
# reading either return type


def _is_datatree(data) -> bool:
    # a DataTree exists only once xarray is imported: never import it (0.5 s) to say no
    xarray = sys.modules.get("xarray")
    tree_type = getattr(xarray, "DataTree", None) if xarray is not None else None
    return tree_type is not None and isinstance(data, tree_type)


def _is_inference_data(data) -> bool:
    return type(data).__name__ == "InferenceData" and hasattr(data, "groups")


def group_names(data) -> list[str]:
    """Names of the groups of an InferenceData, a DataTree or a run's trace dict."""
    if _is_datatree(data):
        return list(data.children)
    if _is_inference_data(data):
        return list(data.groups())
    if isinstance(data, dict):
        return list(data)
    raise TypeError(f"expected InferenceData, DataTree or a trace dict, got {type(data).__name__}")


def group(data, name: str):
    """Group ``name`` of ``data`` (an :class:`xarray.Dataset` for InferenceData and DataTree,
    the dict of arrays for a trace), or None when ``data`` has no such group."""
    return _group(data, name)


def _group(data, name: str):
    if name not in group_names(data):
        return None
    if _is_datatree(data):
        return data[name].to_dataset()
    return data[name]


def pooled_draws(draws, group: str, name: str) -> np.ndarray:
    """Variable ``name`` of ``group`` with the draws of every chain on one leading axis.

    Parameters
    ----------
    draws : InferenceData, DataTree, dict or list of them
        The result of :func:`bnpjax.sample` (either ArviZ line), the ``trace`` of
        :func:`bnpjax.infer.run`, or a list of them (pooled in order).
    group, name : str
        The group and variable.

    Returns
    -------
    numpy.ndarray
        Shape ``(chain * draw, ...)``.

    Raises
    ------
    ValueError
        When ``draws`` is none of these or lacks the variable.
    """
    runs = list(draws) if isinstance(draws, list | tuple) else [draws]
    if not runs:
        raise ValueError("draws is empty")
    values = []
    for run in runs:
        if not (_is_datatree(run) or _is_inference_data(run) or isinstance(run, dict)) or (
            "posterior" not in group_names(run)
        ):
            raise ValueError(
                "draws must be the result of bnpjax.sample (InferenceData or DataTree), "
                "a run's trace, or a list of them"
            )
        table = _group(run, group)
        if table is None or name not in table:
            raise ValueError(f"draws: {group} lacks {name!r}")
        value = np.asarray(table[name])
        values.append(value.reshape(-1, *value.shape[2:]))
    return np.concatenate(values)


# --------------------------------------------------------------------------------------------
# combining runs


def _pad_dataset(ds, dim: str, index, fill_value):
    """``ds`` with dimension ``dim`` extended to the coordinate values ``index`` (which start
    with ``ds``'s own), new entries ``fill_value`` in the variables' own dtype."""
    import xarray

    extra = len(index) - ds.sizes[dim]
    variables = {}
    for var_name, array in ds.data_vars.items():
        if dim in array.dims:
            widths = [(0, extra if d == dim else 0) for d in array.dims]
            fill = np.asarray(fill_value).astype(array.dtype)
            padded = np.pad(array.values, widths, constant_values=fill)
            variables[var_name] = xarray.Variable(array.dims, padded, array.attrs)
        else:
            variables[var_name] = array.variable
    coords = {}
    for coord_name, coord in ds.coords.items():
        if coord_name == dim:
            coords[coord_name] = (dim, np.asarray(index))
        elif dim in coord.dims:
            raise ValueError(f"cannot pad {dim!r}: coordinate {coord_name!r} runs along it")
        else:
            coords[coord_name] = coord.variable
    return xarray.Dataset(variables, coords=coords, attrs=ds.attrs)


def _padded_group(datasets: list, concat_dim: str, fill_value) -> list:
    """Pad every dim but chain and draw to its largest size across ``datasets``."""
    other = next(d for d in _SAMPLE_DIMS if d != concat_dim)
    sizes = {ds.sizes.get(other) for ds in datasets}
    if len(sizes) > 1:
        raise ValueError(f"runs concatenated along {concat_dim!r} need equal {other!r} sizes")
    dims = {d for ds in datasets for d in ds.dims if d not in _SAMPLE_DIMS}
    for dim in sorted(dims, key=str):
        lengths = [ds.sizes.get(dim, 0) for ds in datasets]
        if len(set(lengths)) == 1:
            continue
        widest = datasets[int(np.argmax(lengths))]
        index = widest[dim].values
        for ds in datasets:
            if dim in ds.dims and not np.array_equal(ds[dim].values, index[: ds.sizes[dim]]):
                raise ValueError(f"cannot pad {dim!r}: the runs' coordinates differ")
        datasets = [
            _pad_dataset(ds, dim, index, fill_value) if dim in ds.dims else ds for ds in datasets
        ]
    return datasets


def concat(*runs, dim: str = "chain", fill_value=0):
    """Combine runs whose feature buffers may have grown to different capacities.

    ``az.concat`` (and ``xarray.concat``) pad a dimension whose length differs between runs
    with NaN, which turns integer and int8 (active mask) arrays into floats. This function
    first pads every dimension other than ``chain`` and ``draw`` to its largest length with
    ``fill_value`` (0, the inactive value of bnpjax's buffers: the driver pads the draws of
    one run the same way when its buffer grows), keeping each variable's dtype, then
    concatenates the draw groups along ``dim``.

    Parameters
    ----------
    *runs : InferenceData or DataTree (or one list of them)
        Results of :func:`bnpjax.sample`, all of the same type, with the same draw groups and
        equal data groups (``observed_data``, ``constant_data``, taken from the first run).
    dim : {"chain", "draw"}
        The dimension to concatenate along (``"chain"``: independent runs side by side, their
        ``draw`` sizes must agree; ``"draw"``: a continuation, ``chain`` sizes must agree).
        Its coordinate is renumbered from 0.
    fill_value : scalar
        Padding value, cast to each variable's dtype (0 gives False for booleans).

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        The type of the inputs, with the attributes of the first run (``capacity``: the
        largest of the runs').
    """
    import xarray

    if len(runs) == 1 and isinstance(runs[0], list | tuple):
        runs = tuple(runs[0])
    if not runs:
        raise ValueError("concat needs at least one run")
    if dim not in _SAMPLE_DIMS:
        raise ValueError(f"dim must be 'chain' or 'draw', got {dim!r}")
    trees = [_is_datatree(run) for run in runs]
    if not (all(trees) or all(_is_inference_data(run) for run in runs)):
        raise TypeError("concat takes runs that are all InferenceData or all DataTree")

    names = group_names(runs[0])
    for other in runs[1:]:
        if set(group_names(other)) != set(names):
            raise ValueError(
                f"every run must have the same groups: {sorted(names)} against "
                f"{sorted(group_names(other))}"
            )
    out = {}
    for name in names:
        datasets = [_group(run, name) for run in runs]
        if dim not in datasets[0].dims:
            if not all(ds.equals(datasets[0]) for ds in datasets[1:]):
                raise ValueError(f"the runs' {name!r} groups differ: runs on different data?")
            out[name] = datasets[0]
            continue
        datasets = _padded_group(datasets, dim, fill_value)
        joined = xarray.concat(
            datasets, dim=dim, join="exact", data_vars="minimal", combine_attrs="override"
        )
        out[name] = joined.assign_coords({dim: np.arange(joined.sizes[dim])})

    attrs = dict(runs[0].attrs)
    capacities = [run.attrs.get("capacity") for run in runs]
    if all(isinstance(c, int | np.integer) for c in capacities):
        attrs["capacity"] = int(max(capacities))
    if all(trees):
        tree = xarray.DataTree.from_dict(out)
        tree.attrs = attrs
        return tree
    az = import_arviz()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return az.InferenceData(attrs=attrs, **out)
