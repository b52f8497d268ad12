"""The argument parser, built from the registry, and the sampling options every command
shares (``--num-samples``, ``--num-warmup``, ``--num-chains``, ``--thin``, ``--seed``,
``--no-progress``)."""

from __future__ import annotations

import argparse

from bnpjax.cli.output import UsageError
from bnpjax.cli.registry import DEFAULT_DEMO, ModelCommands
from bnpjax.infer.checks import MAX_SEED

__all__ = ["CliParser", "add_sampling_arguments", "build_parser", "check_sampling", "sample"]


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that raises :class:`UsageError` (one line, exit status 2)
    instead of printing the usage and exiting."""

    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def add_sampling_arguments(parser, *, samples=1000, warmup=500, chains=4, model_defaults=False):
    """The shared sampling options; with ``model_defaults`` unset values stay None, to be
    filled from the model's ``DEMO_DEFAULTS``."""
    samples, warmup, chains = (None, None, None) if model_defaults else (samples, warmup, chains)
    parser.add_argument("--num-samples", type=int, default=samples, help="kept draws per chain")
    parser.add_argument("--num-warmup", type=int, default=warmup, help="warmup steps per chain")
    parser.add_argument("--num-chains", type=int, default=chains)
    parser.add_argument("--thin", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def check_sampling(args) -> None:
    """Refuse non-positive counts (None: a demo's own default) and seeds that
    ``jax.random.key`` does not take."""
    for name in ("num_samples", "num_chains", "thin"):
        value = getattr(args, name, None)
        if value is not None and value < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
    warmup = getattr(args, "num_warmup", None)
    if warmup is not None and warmup < 0:
        raise UsageError("--num-warmup must be non-negative")
    seed = getattr(args, "seed", None)
    if seed is not None and not 0 <= seed <= MAX_SEED:
        raise UsageError(f"--seed must be an integer in [0, 2**63), got {seed}")


def sample(algorithm, args):
    """Run ``algorithm`` with the command's sampling options; returns the InferenceData."""
    import jax

    import bnpjax

    return bnpjax.sample(
        algorithm,
        jax.random.key(args.seed),
        args.num_samples,
        num_warmup=args.num_warmup,
        num_chains=args.num_chains,
        thin=args.thin,
        progress_bar=not args.no_progress,
    )


def build_parser(models: dict[str, ModelCommands]) -> CliParser:
    """``bnpjax [--version] {demo [MODEL], fit MODEL --data PATH}`` for the given models."""
    from bnpjax import __version__

    parser = CliParser(prog="bnpjax", description="Exact compiled samplers on JAX.")
    parser.add_argument("--version", action="version", version=f"bnpjax {__version__}")
    commands = parser.add_subparsers(dest="command", parser_class=CliParser)

    demo = commands.add_parser("demo", help="run a model end to end on generated data")
    demo.add_argument(
        "model",
        nargs="?",
        default=DEFAULT_DEMO,
        choices=sorted(models),
        help=", ".join(f"{name}: {module.DEMO_HELP}" for name, module in models.items()),
    )
    demo.add_argument("--out-dir", default=".", help="where to write the .nc and .png files")
    add_sampling_arguments(demo, model_defaults=True)

    fit = commands.add_parser("fit", help="fit a model to a data file")
    subparsers = fit.add_subparsers(dest="model", parser_class=CliParser)
    for name, module in models.items():
        sub = subparsers.add_parser(name, help=module.FIT_HELP)
        sub.add_argument("--data", *module.DATA_ALIASES, required=True, help="input file")
        sub.add_argument("--out", default="result.nc", help="InferenceData output (.nc)")
        module.add_fit_arguments(sub)
        add_sampling_arguments(sub)
    return parser
