"""What every command shares on its way out: the one error type and its one-line report,
the summary table, the written InferenceData and figures, the timing line."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "EXIT_USAGE",
    "PREFIX",
    "UsageError",
    "check_writable",
    "report_error",
    "save_figure",
    "summary",
    "timing",
    "write_idata",
    "write_with_trace",
]

#: exit status of a bad argument or data file
EXIT_USAGE = 2
#: the start of every error line
PREFIX = "bnpjax: error: "


class UsageError(Exception):
    """A bad argument or input file: reported as one line, exit status 2."""


def report_error(message: str) -> int:
    """Print ``bnpjax: error: message`` on stderr as one line (whitespace collapsed); return
    exit status 2."""
    print(" ".join(f"{PREFIX}{message}".split()), file=sys.stderr)
    return EXIT_USAGE


def check_writable(path: str | Path, option: str, *, folder: bool = False) -> Path:
    """Check before a fit that ``path`` (a file, or a folder with ``folder``) can be written:
    its nearest existing folder must be a folder we can create files in. Raises
    :class:`UsageError` naming ``option``; creates nothing."""
    path = Path(path)
    if path.is_dir() and not folder:
        raise UsageError(f"{option}: {path} is a folder; give a file name ending in .nc")
    if path.exists() and folder and not path.is_dir():
        raise UsageError(f"{option}: {path} is a file, not a folder")
    existing = path if folder else path.parent
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option}: cannot create {path}: {existing} is a file, not a folder")
    try:  # os.access says yes to root even on a read-only file system: try a file
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        reason = err.strerror or type(err).__name__
        raise UsageError(f"{option}: cannot write to {existing} ({reason})") from err
    if path.is_file() and not os.access(path, os.W_OK):
        raise UsageError(f"{option}: {path} exists and is read-only")
    return path


def summary(idata, var_names: Sequence[str] | None = None):
    """ArviZ's summary (mean, sd, 94% HDI, bulk and tail ESS, R-hat) as a DataFrame whose
    ``to_string()`` ends with the convergence lines of these variables in plain words
    (:func:`bnpjax.infer.diagnostics.check_convergence`; also in ``attrs["convergence"]``)."""
    import pandas as pd

    from bnpjax.infer.arviz_adapter import backend, import_arviz
    from bnpjax.infer.diagnostics import check_convergence

    class SummaryTable(pd.DataFrame):
        def to_string(self, *args, **kwargs):
            text = super().to_string(*args, **kwargs)
            lines = self.attrs.get("convergence", ())
            return text if text is None or not lines else "\n".join([text, *lines])

    columns = ["mean", "sd", "hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat"]
    if backend() == "1":  # the ArviZ 1.x line: arviz_stats, its own names for the interval
        import arviz_stats

        table = arviz_stats.summary(
            idata, var_names=var_names, kind="all", ci_kind="hdi", ci_prob=0.94, round_to=4
        ).rename(columns={"hdi94_lb": "hdi_3%", "hdi94_ub": "hdi_97%"})
    else:
        table = import_arviz().summary(idata, var_names=var_names, kind="all", round_to=4)
    table = SummaryTable(table[columns])
    table.attrs["convergence"] = check_convergence(idata, var_names, warn=False).lines()
    return table


def _encodings(dataset) -> dict:
    """netCDF encodings of ``dataset``'s variables: zlib on integer and boolean ones only.

    Feature indicators, counts and predicted levels shrink many times under zlib, float32
    draws by about a sixth, at about 30 MB/s on one core: ArviZ's default (zlib on every
    variable) spent 3.1 of the M3F demo's 15.6 s writing its 93 MB (0.3 s without zlib on
    its floats)."""
    return {
        name: {"zlib": True} if var.dtype.kind in "biu" else {"zlib": False}
        for name, var in dataset.variables.items()
    }


def _with_encodings(dataset):
    dataset = dataset.copy(deep=False)  # new variables over the same arrays: the caller's
    for name, encoding in _encodings(dataset).items():  # encodings stay as they were
        dataset[name].encoding = encoding
    return dataset


def write_idata(idata, path: str | Path) -> Path:
    """Write an InferenceData, a DataTree or an xarray Dataset to netCDF, creating the
    folder; integer and boolean variables compressed, floating-point ones not
    (:func:`_encodings`; other encodings a variable carries, such as packing or units, are
    not written, as with ArviZ's own compression). Read it back with ``arviz.from_netcdf``
    (or ``xarray.open_datatree``, ``xarray.open_dataset``)."""
    import copy
    from importlib.util import find_spec

    from bnpjax.infer.arviz_adapter import _is_datatree, _is_inference_data

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if find_spec("h5netcdf") is None and find_spec("netCDF4") is None:
        idata.to_netcdf(str(path))  # no HDF5 writer: the format's own default, uncompressed
    elif _is_inference_data(idata):
        # a shallow copy whose groups are replaced (InferenceData.map(inplace=False) would
        # deep-copy every draw first)
        out = copy.copy(idata)
        out.map(_with_encodings, inplace=True)
        out.to_netcdf(str(path), compress=False)
    elif _is_datatree(idata):
        # each node is written without the coordinates it inherits, so its encodings too
        encoding = {
            node.path: _encodings(node.to_dataset(inherit=node is idata)) for node in idata.subtree
        }
        idata.to_netcdf(str(path), encoding={k: v for k, v in encoding.items() if v})
    else:
        idata.to_netcdf(str(path), encoding=_encodings(idata))
    return path


def save_figure(path: str | Path, plot: Callable, *args, **kwargs) -> Path:
    """Draw ``plot(*args, **kwargs)`` (a :mod:`bnpjax.plots` function) off screen, save the
    figure to ``path`` and close it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plot(*args, **kwargs)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def write_with_trace(
    idata, stem: Path, var_names=None, *, truth=None, title=None
) -> tuple[Path, Path]:
    """``stem.nc`` and the trace plot ``stem_trace.png`` of ``var_names`` (with the ``truth``
    and ``title`` of :func:`bnpjax.plots.plot_trace`)."""
    from bnpjax.plots import plot_trace

    nc = write_idata(idata, stem.with_suffix(".nc"))
    png = save_figure(
        stem.parent / f"{stem.name}_trace.png",
        plot_trace,
        idata,
        var_names,
        truth=truth,
        title=title,
    )
    return nc, png


def timing(idata, digits: int = 2) -> str:
    """'compile X s, sampling Y s' from the attributes :func:`bnpjax.sample` records."""
    attrs = idata.attrs
    sampling = attrs.get("warmup_s", 0.0) + attrs.get("sampling_s", 0.0)
    return f"compile {attrs.get('compile_s', 0.0):.{digits}f} s, sampling {sampling:.{digits}f} s"
