"""Data: synthetic generators (seeded, no download) and loaders for real data sets.

Real data are read from a local folder: the ``data_home`` argument, else ``$BNPJAX_DATA``, else
``../shared/data`` beside a source checkout. Nothing is bundled with the package.
"""

from bnpjax.datasets.home import DataNotFoundError, get_data_home
from bnpjax.datasets.movielens import MovieLens, movielens
from bnpjax.datasets.networks import NETWORKS, Network, load_network, read_edge_list
from bnpjax.datasets.relational import Relational, kinship, nations, umls
from bnpjax.datasets.synthetic import (
    BARS_FEATURES,
    bars,
    factorization_ratings,
    linear_regression,
    ordinal_ratings,
    planted_network,
    planted_relations,
)

__all__ = [
    "BARS_FEATURES",
    "NETWORKS",
    "DataNotFoundError",
    "MovieLens",
    "Network",
    "Relational",
    "bars",
    "factorization_ratings",
    "get_data_home",
    "kinship",
    "linear_regression",
    "load_network",
    "movielens",
    "nations",
    "ordinal_ratings",
    "planted_network",
    "planted_relations",
    "read_edge_list",
    "umls",
]
