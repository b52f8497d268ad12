"""Reading the data files of ``bnpjax fit``: numeric CSV/TSV tables, with or without a header
row, every bad cell reported with its line and column; ids that count from 0 or from 1."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bnpjax.cli.output import UsageError

__all__ = ["Table", "add_header_argument", "add_id_arguments", "read_table", "zero_based"]

#: cells read as missing (NaN), compared in lower case
MISSING = frozenset({"", "nan", "na", "n/a", "null", "none"})


def add_header_argument(parser) -> None:
    """``--no-header``: the first row is data even where it is not numeric."""
    parser.add_argument(
        "--no-header",
        action="store_true",
        help="the first row is data (default: a first row that is not all numbers is the "
        "header; headerless columns are named c1, c2, ...)",
    )


def add_id_arguments(parser, what: str = "user and item ids") -> None:
    """``--one-based`` / ``--zero-based``: how the ids of a ratings or edge file count."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--one-based",
        action="store_true",
        help=f"{what} count from 1 (R, MATLAB, MovieLens files); they are shifted to 0",
    )
    group.add_argument(
        "--zero-based",
        action="store_true",
        help=f"{what} count from 0 even though no id 0 occurs (default: ids with no 0 are "
        "refused as probably 1-based)",
    )


@dataclass(frozen=True)
class Table:
    """A numeric table read by :func:`read_table`.

    ``values`` is a float array (rows, columns) with NaN where a cell is empty or missing;
    ``lines`` the file's line number of every row, for messages."""

    path: str
    option: str
    columns: list[str]
    values: np.ndarray
    lines: np.ndarray
    header: bool

    def index(self, column: str, option: str) -> int:
        """The position of ``column``, a name or a 1-based number; raises naming ``option``."""
        if column in self.columns:
            return self.columns.index(column)
        if column.isdigit() and 1 <= int(column) <= len(self.columns):
            return int(column) - 1
        raise UsageError(f"{option}: no column {column!r} in {self.path} (has {self.columns})")

    def cell(self, row: int, col: int) -> str:
        """``'path' line L, column 'name'``: where a cell is, in the words of a message."""
        return f"{self.path} line {self.lines[row]}, column {self.columns[col]!r}"

    def require(self, ok, cols, problem: str) -> None:
        """Raise :class:`UsageError` at the first cell of ``cols`` where ``ok`` (same shape as
        ``values[:, cols]``) is False, naming its line, column, value and ``problem``."""
        cols = list(np.atleast_1d(cols))
        bad = np.argwhere(~np.asarray(ok, bool).reshape(len(self.values), len(cols)))
        if bad.size:
            row, k = bad[0]
            value = self.values[row, cols[k]]
            shown = "an empty cell" if np.isnan(value) else f"{value:g}"
            raise UsageError(f"{self.option}: {self.cell(row, cols[k])}: {shown} {problem}")

    def require_present(self, cols, problem: str = "where a value is needed") -> None:
        """Refuse missing cells in ``cols``."""
        self.require(np.isfinite(self.values[:, cols]), cols, problem)

    def require_integers(self, cols, low: int, problem: str) -> None:
        """Refuse cells of ``cols`` that are missing, not integers, or below ``low``."""
        values = self.values[:, cols]
        ok = np.isfinite(values) & (values == np.round(values)) & (values >= low)
        self.require(ok, cols, problem)


def _number(cell: str) -> float | None:
    """The cell's number, NaN for a missing cell, None when it is not a number."""
    text = cell.strip().strip('"').strip("'")
    if text.lower() in MISSING:
        return np.nan
    try:
        return float(text)
    except ValueError:
        return None


def read_table(path: str, option: str = "--data", *, header: bool | None = None) -> Table:
    """A numeric table: comma-separated, tab-separated (``.tsv`` / ``.tab``, or a first line
    with tabs and no commas) or, with neither, separated by spaces. Blank lines and lines
    starting with ``#`` are skipped.

    Parameters
    ----------
    path : str
        The file.
    option : str
        The option that named it, for messages.
    header : bool, optional
        Whether the first row names the columns (default: detected, a first row with a cell
        that is neither a number nor empty is a header).

    Returns
    -------
    Table

    Raises
    ------
    UsageError
        Naming ``option``, the line and the column of the first cell that is not a number
        (empty cells and ``NaN`` / ``NA`` are missing values), infinite, or a row with
        another number of fields than the first.
    """
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{option}: no such file: {path}")
    try:
        text = file.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"{option}: cannot read {path}: {err}") from err
    rows = [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if not rows:
        raise UsageError(f"{option}: {path} holds no rows")
    first = rows[0][1]
    if file.suffix in {".tsv", ".tab"} or ("\t" in first and "," not in first):
        delimiter = "\t"
    else:  # commas, or else runs of spaces
        delimiter = "," if "," in first else None
    cells = [[c.strip() for c in line.split(delimiter)] for _, line in rows]
    if header is None:
        header = any(_number(c) is None for c in cells[0])
    names = cells[0] if header else [f"c{j + 1}" for j in range(len(cells[0]))]
    body, lines = (cells[1:], [n for n, _ in rows[1:]]) if header else (cells, [n for n, _ in rows])
    if not body:
        raise UsageError(f"{option}: {path} has a header but no rows")
    values = np.empty((len(body), len(names)))
    for i, (number, row) in enumerate(zip(lines, body, strict=True)):
        if len(row) != len(names):
            raise UsageError(
                f"{option}: {path} line {number} has {len(row)} fields, the first row {len(names)}"
            )
        for j, cell in enumerate(row):
            value = _number(cell)
            where = f"{option}: {path} line {number}, column {names[j]!r}"
            if value is None:
                hint = " (a header row? leave out --no-header)" if not header and i == 0 else ""
                raise UsageError(f"{where}: {cell!r} is not a number{hint}")
            if np.isinf(value):
                raise UsageError(f"{where}: {cell!r} is not a finite number")
            values[i, j] = value
    return Table(path, option, names, values, np.asarray(lines), bool(header))


def zero_based(tables, cols, args) -> list[np.ndarray]:
    """The id columns ``cols`` of every table as 0-based integers.

    The ids must be non-negative integers (checked cell by cell). With ``args.one_based`` they
    count from 1 and are shifted; with ``args.zero_based`` they are kept; otherwise an id
    column in which no 0 occurs (in any table) is refused as probably 1-based, since its id 0
    would be an entity without data.
    """
    low = 1 if args.one_based else 0
    problem = "is not an id counting from 1 (--one-based)" if low else "is not an id (0, 1, ...)"
    for table in tables:
        table.require_integers(cols, low, problem)
    ids = [table.values[:, cols].astype(np.int64) for table in tables]
    if args.one_based:
        return [i - 1 for i in ids]
    smallest = np.min([i.min(0) for i in ids], axis=0)
    if not args.zero_based and np.any(smallest >= 1):
        names = [repr(tables[0].columns[c]) for c, m in zip(cols, smallest, strict=True) if m]
        raise UsageError(
            f"{tables[0].option}: the ids in column{'s' * (len(names) > 1)} "
            f"{' and '.join(names)} never take the value 0, so they look "
            "1-based; pass --one-based to count ids from 1, or --zero-based to keep id 0 as an "
            "entity without data"
        )
    return ids
