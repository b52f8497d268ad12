"""Kemp's multi-relational data sets (Kemp et al. 2006, AAAI; used by Miller, Griffiths &
Jordan 2009 for the LFRM): Alyawarra kinship, Dimensionality of Nations, UMLS.

Read from ``<data_home>/relational/<name>/`` (``data_home``: the argument, ``$BNPJAX_DATA`` or
``../shared/data``); each folder's PROVENANCE.md gives the source and format. Every loader
returns a :class:`Relational` with ``Y`` of shape (R, N, N) in {0, 1} (``Y[r, i, j] = 1`` iff
relation r holds from i to j) and ``mask`` (R, N, N), True where the entry is observed. The
diagonal is unobserved (IRM/LFRM practice: the .mat files code self-relations differently),
and so are the entries the nations data leave missing (NaN in the file).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from bnpjax.datasets.home import DataNotFoundError, get_data_home

__all__ = ["Relational", "kinship", "nations", "umls"]


class Relational(NamedTuple):
    """One multi-relational data set (module docstring): its ``name``, links ``Y`` and
    observation ``mask`` (R, N, N), the ``entities`` (N names) and ``relations`` (R names),
    and optional entity ``attributes``."""

    name: str
    Y: np.ndarray  # (R, N, N) float in {0, 1}; unobserved entries are 0 and masked
    mask: np.ndarray  # (R, N, N) bool
    entities: list[str]
    relations: list[str]
    #: (N, E) entity attributes where the data set has them (nations: 111 country attributes,
    #: 0/1 with NaN where unknown; kinship: 14 coded person attributes), else None
    attributes: np.ndarray | None = None


def _load_mat(name: str, file: str, data_home):
    from scipy.io import loadmat

    path = get_data_home(data_home) / "relational" / name / file
    if not path.exists():
        raise DataNotFoundError(f"{path} not found")
    return loadmat(str(path))


def _strings(array) -> list[str]:
    return [str(np.squeeze(a)) for a in np.ravel(array)]


def _assemble(name, tensor, entities, relations, attributes=None) -> Relational:
    """(N, N, R) array with NaN for missing -> (R, N, N) targets and mask, diagonal masked."""
    tensor = np.moveaxis(np.asarray(tensor, float), 2, 0)
    mask = np.isfinite(tensor)
    N = tensor.shape[1]
    mask[:, np.arange(N), np.arange(N)] = False
    Y = np.where(mask, np.nan_to_num(tensor), 0.0)
    attributes = None if attributes is None else np.asarray(attributes, float)
    return Relational(name, Y, mask, entities, relations, attributes)


def kinship(data_home: str | os.PathLike | None = None) -> Relational:
    """Alyawarra kinship: 104 people x 104 people x 26 kinship terms (10,686 off-diagonal
    ones)."""
    mat = _load_mat("kinship", "alyawarradata.mat", data_home)
    Rs = mat["Rs"]
    entities = [f"person{i}" for i in range(Rs.shape[0])]
    relations = [f"term{r}" for r in range(Rs.shape[2])]
    return _assemble("kinship", Rs, entities, relations, mat.get("features"))


def nations(data_home: str | os.PathLike | None = None) -> Relational:
    """Dimensionality of Nations: 14 countries x 14 countries x 56 binary relations (435
    missing off-diagonal entries, masked)."""
    mat = _load_mat("nations", "dnations.mat", data_home)
    return _assemble(
        "nations", mat["R"], _strings(mat["countrynames"]), _strings(mat["relnnames"]), mat["A"]
    )


def umls(data_home: str | os.PathLike | None = None) -> Relational:
    """UMLS semantic network: 135 concepts x 135 concepts x 49 relations (6,529 off-diagonal
    ones)."""
    mat = _load_mat("umls", "uml.mat", data_home)
    return _assemble("umls", mat["Rs"], _strings(mat["names"]), _strings(mat["relnames"]))
