"""Where real data sets live on this machine."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["DataNotFoundError", "get_data_home"]


class DataNotFoundError(FileNotFoundError):
    """A real data set is not present locally (tests skip on it, with this message)."""


def get_data_home(data_home: str | os.PathLike | None = None) -> Path:
    """The folder holding real data sets.

    Order: the ``data_home`` argument, the ``BNPJAX_DATA`` environment variable, then
    ``shared/data`` beside the source checkout (``<repo>/../shared/data``), the layout of the
    project's CI; when the package is installed (not run from a checkout) the checkout is
    found from the working directory instead (``./../shared/data``, for commands run from the
    repository root). Raises :class:`DataNotFoundError` naming where it looked.
    """
    candidates = []
    if data_home is not None:
        candidates.append(Path(data_home))
    elif os.environ.get("BNPJAX_DATA"):
        candidates.append(Path(os.environ["BNPJAX_DATA"]))
    else:
        repo = Path(__file__).resolve().parents[2]
        candidates.append(repo.parent / "shared" / "data")
        candidates.append(Path.cwd().resolve().parent / "shared" / "data")
    for path in candidates:
        if path.is_dir():
            return path
    raise DataNotFoundError(
        f"no data folder at {' or '.join(map(str, candidates))}; "
        "pass data_home=... or set BNPJAX_DATA"
    )
