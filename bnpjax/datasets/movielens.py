"""MovieLens ratings (GroupLens; Harper & Konstan 2015, ACM TiiS 5(4):19).

Read from ``<data_home>/movielens/<name>/`` (``data_home``: the argument, ``$BNPJAX_DATA`` or
``../shared/data``). When the folder is missing and ``download=True`` the release zip is fetched
from files.grouplens.org into it. The data's terms forbid redistribution: never commit them.

ML-1M: the full ``ratings.dat`` is read when present; otherwise the partial copy of the
ratings of users 1-2999 in ``movielens/ml-1m-partial-users1-2999/ratings.dat.gz`` (487,650
ratings), and ``MovieLens.note`` says so.
"""

from __future__ import annotations

import gzip
import io
import os
import urllib.request
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from bnpjax.datasets.home import DataNotFoundError, get_data_home

__all__ = ["MovieLens", "movielens"]

_URLS = {
    "ml-100k": "https://files.grouplens.org/datasets/movielens/ml-100k.zip",
    "ml-1m": "https://files.grouplens.org/datasets/movielens/ml-1m.zip",
}
_ML100K_GENRES = 19


class MovieLens(NamedTuple):
    """``ratings`` (n, 4) int64 columns user, item, rating, timestamp (ids as in the files,
    1-based); ``users`` and ``items``: side information as dicts of arrays indexed by
    ``id - 1``; ``splits``: for ml-100k ``{"u1": (train, test), ..., "ua", "ub"}`` rating
    arrays of the release's splits; ``note``: what was read."""

    name: str
    ratings: np.ndarray
    users: dict
    items: dict
    splits: dict
    note: str


def _read_table(path: Path, sep: str, encoding: str = "latin-1") -> list[list[str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding=encoding) as f:
        return [line.rstrip("\n").split(sep) for line in f if line.strip()]


def _ratings(path: Path, sep: str) -> np.ndarray:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        text = f.read().decode("latin-1")
    if sep != "\t":
        text = text.replace(sep, "\t")
    return np.loadtxt(io.StringIO(text), dtype=np.int64, delimiter="\t", ndmin=2)


def _download(name: str, root: Path) -> None:
    url = _URLS[name]
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            payload = response.read()
    except OSError as err:
        raise DataNotFoundError(
            f"{name} is not under {root} and downloading {url} failed: {err}"
        ) from err
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(io.BytesIO(payload)) as archive:
        archive.extractall(root)


def movielens(
    name: str = "ml-100k", data_home: str | os.PathLike | None = None, download: bool = True
) -> MovieLens:
    """Load MovieLens ``"ml-100k"`` or ``"ml-1m"`` (module docstring)."""
    if name not in _URLS:
        raise ValueError(f"name must be one of {sorted(_URLS)}, got {name!r}")
    try:
        root = get_data_home(data_home) / "movielens"
    except DataNotFoundError:
        if not download:
            raise
        root = Path(data_home or os.environ.get("BNPJAX_DATA") or ".") / "movielens"
    folder = root / name
    needed = folder / ("u.data" if name == "ml-100k" else "movies.dat")
    if not needed.exists():
        if not download:
            raise DataNotFoundError(f"{needed} not found (download=False)")
        _download(name, root)
    return _load_100k(folder) if name == "ml-100k" else _load_1m(root, folder)


def _load_100k(folder: Path) -> MovieLens:
    ratings = _ratings(folder / "u.data", "\t")
    splits = {}
    for split in ("u1", "u2", "u3", "u4", "u5", "ua", "ub"):
        base, test = folder / f"{split}.base", folder / f"{split}.test"
        if base.exists() and test.exists():
            splits[split] = (_ratings(base, "\t"), _ratings(test, "\t"))
    users_raw = _read_table(folder / "u.user", "|")
    occupations = sorted({row[3] for row in users_raw})
    users = {
        "age": np.array([int(r[1]) for r in users_raw]),
        "gender": np.array([r[2] for r in users_raw]),
        "occupation": np.array([occupations.index(r[3]) for r in users_raw]),
        "occupation_names": np.array(occupations),
        "zip": np.array([r[4] for r in users_raw]),
    }
    items_raw = _read_table(folder / "u.item", "|")
    items = {
        "title": np.array([r[1] for r in items_raw]),
        "release_date": np.array([r[2] for r in items_raw]),
        "genres": np.array([[int(g) for g in r[-_ML100K_GENRES:]] for r in items_raw]),
    }
    note = f"ml-100k from {folder}: {len(ratings)} ratings"
    return MovieLens("ml-100k", ratings, users, items, splits, note)


def _load_1m(root: Path, folder: Path) -> MovieLens:
    full = folder / "ratings.dat"
    partial = root / "ml-1m-partial-users1-2999" / "ratings.dat.gz"
    if full.exists():
        ratings, note = _ratings(full, "::"), f"ml-1m from {full}"
    elif partial.exists():
        ratings = _ratings(partial, "::")
        note = (
            f"ml-1m PARTIAL: the ratings of users 1-2999 only ({len(ratings)} of 1,000,209), "
            f"from {partial}; the full ratings.dat is not in {folder}"
        )
    else:
        raise DataNotFoundError(f"neither {full} nor {partial} exists")
    users_raw = _read_table(folder / "users.dat", "::")
    users = {
        "gender": np.array([r[1] for r in users_raw]),
        "age": np.array([int(r[2]) for r in users_raw]),
        "occupation": np.array([int(r[3]) for r in users_raw]),
        "zip": np.array([r[4] for r in users_raw]),
    }
    movies = _read_table(folder / "movies.dat", "::")
    genre_names = sorted({g for r in movies for g in r[2].split("|")})
    max_id = max(int(r[0]) for r in movies)
    genres = np.zeros((max_id, len(genre_names)), np.int64)
    titles = np.full(max_id, "", dtype=object)
    for r in movies:
        titles[int(r[0]) - 1] = r[1]
        for g in r[2].split("|"):
            genres[int(r[0]) - 1, genre_names.index(g)] = 1
    items = {"title": titles, "genres": genres, "genre_names": np.array(genre_names)}
    return MovieLens("ml-1m", ratings, users, items, {}, note)
