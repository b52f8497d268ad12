"""The models the command knows: name -> the module holding that model's demo and fit.

A model's module (see :class:`ModelCommands`) defines the help texts, the demo's sampling
defaults, ``add_fit_arguments(parser)``, ``demo(args)`` and ``fit(args)``; ``demo`` and
``fit`` return the exit status and raise :class:`bnpjax.cli.output.UsageError` for a bad
argument or data file. Register a model by adding its module to :data:`MODELS`.
"""

from __future__ import annotations

import argparse
from importlib import import_module
from typing import Protocol

__all__ = ["DEFAULT_DEMO", "MODELS", "ModelCommands", "load", "load_all"]


class ModelCommands(Protocol):
    """The face of a model's command module."""

    #: one line for ``bnpjax demo --help``
    DEMO_HELP: str
    #: one line for ``bnpjax fit --help``
    FIT_HELP: str
    #: the demo's (num_samples, num_warmup, num_chains) where the user gives none
    DEMO_DEFAULTS: tuple[int, int, int]
    #: extra spellings of ``--data`` (e.g. ``("--train",)``)
    DATA_ALIASES: tuple[str, ...]
    #: the help of ``--data``: what the file holds
    DATA_HELP: str

    def add_fit_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Add the model's own options to ``bnpjax fit MODEL``."""

    def demo(self, args: argparse.Namespace) -> int:
        """Generate data, fit, print and write the outputs; return the exit status."""

    def fit(self, args: argparse.Namespace) -> int:
        """Read ``args.data``, fit, write ``args.out``; return the exit status."""


#: model name -> module (imported on first use)
MODELS: dict[str, str] = {
    "linreg": "bnpjax.cli.linreg",
    "ibp": "bnpjax.cli.ibp",
    "fm": "bnpjax.cli.fm",
    "ilfm": "bnpjax.cli.ilfm",
    "wmmsb": "bnpjax.cli.wmmsb",
    "m3f": "bnpjax.cli.m3f",
}

#: the demo of ``bnpjax demo`` without a model
DEFAULT_DEMO = "linreg"


def load(name: str) -> ModelCommands:
    """The command module of model ``name``."""
    return import_module(MODELS[name])


def load_all() -> dict[str, ModelCommands]:
    """Every registered model's command module, in registration order."""
    return {name: load(name) for name in MODELS}
