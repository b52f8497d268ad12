"""Reading the data files of ``bnpjax fit``: numeric tables with a header row."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bnpjax.cli.output import UsageError

__all__ = ["read_table"]


def read_table(path: str, option: str = "--data") -> tuple[list[str], np.ndarray]:
    """A numeric CSV/TSV (tab-separated for ``.tsv`` / ``.tab``) with a header row.

    Empty cells and NaN become NaN (missing). Returns the column names and the values as a
    float array (rows, columns); raises :class:`UsageError` naming ``option`` otherwise.
    """
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{option}: no such file: {path}")
    delimiter = "\t" if file.suffix in {".tsv", ".tab"} else ","
    try:
        with file.open() as handle:
            header = handle.readline().strip().split(delimiter)
        values = np.genfromtxt(file, delimiter=delimiter, skip_header=1, dtype=float, ndmin=2)
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise UsageError(f"{option}: cannot read {path}: {err}") from err
    if values.size == 0 or values.shape[1] != len(header):
        raise UsageError(
            f"{option}: {path} needs a header and numeric rows of {len(header)} fields"
        )
    return [h.strip() for h in header], values
