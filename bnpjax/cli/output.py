"""What every command shares on its way out: the one error type and its one-line report,
the summary table, the written InferenceData and figures, the timing line."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = [
    "EXIT_USAGE",
    "UsageError",
    "report_error",
    "save_figure",
    "summary",
    "timing",
    "write_idata",
    "write_with_trace",
]

#: exit status of a bad argument or data file
EXIT_USAGE = 2


class UsageError(Exception):
    """A bad argument or input file: reported as one line, exit status 2."""


def report_error(message: str, *, prefix: str = "") -> int:
    """Print ``message`` on stderr as one line (whitespace collapsed); return exit status 2."""
    print(" ".join(f"{prefix}{message}".split()), file=sys.stderr)
    return EXIT_USAGE


def summary(idata, var_names: Sequence[str] | None = None):
    """ArviZ's summary (mean, sd, 94% HDI, bulk and tail ESS, R-hat) as a DataFrame whose
    ``to_string()`` ends with the convergence lines of these variables in plain words
    (:func:`bnpjax.infer.diagnostics.check_convergence`; also in ``attrs["convergence"]``)."""
    import pandas as pd

    from bnpjax.infer.arviz_adapter import import_arviz
    from bnpjax.infer.diagnostics import check_convergence

    class SummaryTable(pd.DataFrame):
        def to_string(self, *args, **kwargs):
            text = super().to_string(*args, **kwargs)
            lines = self.attrs.get("convergence", ())
            return text if text is None or not lines else "\n".join([text, *lines])

    table = import_arviz().summary(idata, var_names=var_names, kind="all", round_to=4)
    table = SummaryTable(
        table[["mean", "sd", "hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat"]]
    )
    table.attrs["convergence"] = check_convergence(idata, var_names, warn=False).lines()
    return table


def write_idata(idata, path: str | Path) -> Path:
    """Write an InferenceData (or an xarray Dataset) to netCDF, creating the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    idata.to_netcdf(str(path))
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


def write_with_trace(idata, stem: Path, var_names=None) -> tuple[Path, Path]:
    """``stem.nc`` and the trace plot ``stem_trace.png`` of ``var_names``."""
    from bnpjax.plots import plot_trace

    nc = write_idata(idata, stem.with_suffix(".nc"))
    png = save_figure(stem.parent / f"{stem.name}_trace.png", plot_trace, idata, var_names)
    return nc, png


def timing(idata, digits: int = 2) -> str:
    """'compile X s, sampling Y s' from the attributes :func:`bnpjax.sample` records."""
    attrs = idata.attrs
    sampling = attrs.get("warmup_s", 0.0) + attrs.get("sampling_s", 0.0)
    return f"compile {attrs.get('compile_s', 0.0):.{digits}f} s, sampling {sampling:.{digits}f} s"
