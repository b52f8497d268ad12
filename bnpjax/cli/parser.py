"""The argument parser, built from the registry, and the sampling options every command
shares (``--num-samples``, ``--num-warmup``, ``--num-chains``, ``--thin``, ``--seed``,
``--no-progress``), and the checkpoints of ``fit`` (``--checkpoint``, ``--resume``)."""

from __future__ import annotations

import argparse
from pathlib import Path

from bnpjax.cli.output import UsageError
from bnpjax.cli.registry import DEFAULT_DEMO, ModelCommands
from bnpjax.infer.checks import MAX_SEED

__all__ = [
    "CliParser",
    "HelpFormatter",
    "add_checkpoint_arguments",
    "add_sampling_arguments",
    "build_parser",
    "check_checkpoint",
    "check_sampling",
    "sample",
]


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, except where the default is None (the help
    says in words what happens then) or a flag's False."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


class CliParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` that shows defaults in ``--help`` and raises :class:`UsageError`
    (one line, exit status 2) instead of printing the usage and exiting."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        command = self.prog.removeprefix("bnpjax").strip()
        raise UsageError(f"{command}: {message}" if command else message)


_SAMPLING_HELP = {
    "num_samples": "kept draws per chain",
    "num_warmup": "warmup steps per chain (not kept)",
    "num_chains": "independent chains, run together",
}


def add_sampling_arguments(parser, *, samples=1000, warmup=500, chains=4, demo_defaults=None):
    """The shared sampling options. With ``demo_defaults`` (model name -> the demo's
    ``(num_samples, num_warmup, num_chains)``) unset values stay None, to be filled from the
    model's ``DEMO_DEFAULTS``, and the help lists them."""
    defaults = {"num_samples": samples, "num_warmup": warmup, "num_chains": chains}
    for i, (name, text) in enumerate(_SAMPLING_HELP.items()):
        default = defaults[name]
        if demo_defaults is not None:
            each = ", ".join(f"{model} {values[i]}" for model, values in demo_defaults.items())
            text, default = f"{text} (default: the demo's own: {each})", None
        option = "--" + name.replace("_", "-")
        parser.add_argument(option, type=int, default=default, help=text)
    parser.add_argument("--thin", type=int, default=1, help="keep every k-th draw")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random key")
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


def add_checkpoint_arguments(parser) -> None:
    """``--checkpoint PATH`` and ``--resume`` of ``bnpjax fit MODEL``."""
    parser.add_argument(
        "--checkpoint",
        default=None,
        metavar="PATH",
        help="save the chains' state and the draws so far to PATH (.npz, with a PATH.draws "
        "folder) after every chunk of the run; without it nothing is saved until the end",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run saved at --checkpoint (same --data, model options and sampling "
        "options); the output holds the whole chain, as an uninterrupted run would",
    )


def check_checkpoint(args, *, supported: bool = True) -> None:
    """Refuse checkpoint options that cannot work, before anything is read or compiled."""
    path = getattr(args, "checkpoint", None)
    if getattr(args, "resume", False) and path is None:
        raise UsageError("--resume needs --checkpoint PATH: the file of the run to continue")
    if path is None:
        return
    if not supported:
        raise UsageError(f"--checkpoint: fit {args.model} is a variational fit; it has none")
    from bnpjax.infer.checkpoint import check_checkpoint_path

    try:
        check_checkpoint_path(path)
    except ValueError as err:
        raise UsageError(f"--checkpoint: {err}") from None
    if args.resume and not Path(path).is_file():
        raise UsageError(f"--resume: no checkpoint at {path} (run once without --resume)")


def sample(algorithm, args):
    """Run ``algorithm`` with the command's sampling options; returns the InferenceData. With
    ``--checkpoint`` the run saves itself after every chunk; with ``--resume`` it continues the
    saved run, whose draws start the output."""
    import jax

    import bnpjax

    path = getattr(args, "checkpoint", None)
    if getattr(args, "resume", False):
        return _resume(algorithm, args, path)
    return bnpjax.sample(
        algorithm,
        jax.random.key(args.seed),
        args.num_samples,
        num_warmup=args.num_warmup,
        num_chains=args.num_chains,
        thin=args.thin,
        progress_bar=not args.no_progress,
        checkpoint_path=path,
    )


def _resume(algorithm, args, path):
    import jax
    import numpy as np

    from bnpjax.infer import load_checkpoint, resume

    try:
        checkpoint = load_checkpoint(path, algorithm)
    except ValueError as err:
        message = str(err).replace("allow_other_data=True", "a new run without --resume")
        raise UsageError(f"--resume: {message}") from None
    saved = {
        "--num-samples": checkpoint.num_draws + checkpoint.num_samples_left,
        "--num-chains": checkpoint.num_chains,
        "--thin": checkpoint.thin,
    }
    given = {"--num-samples": args.num_samples, "--num-chains": args.num_chains,
             "--thin": args.thin}  # fmt: skip
    same_key = np.array_equal(
        jax.random.key_data(checkpoint.key), jax.random.key_data(jax.random.key(args.seed))
    )
    wrong = [f"{k} {given[k]} (the run used {v})" for k, v in saved.items() if given[k] != v]
    if not same_key:
        wrong.append(f"--seed {args.seed} (not the run's)")
    if wrong:
        raise UsageError(f"--resume: give the options of the saved run: {', '.join(wrong)}")
    if checkpoint.num_samples_left == 0:
        raise UsageError(
            f"--resume: the run saved at {path} had made all its draws; rerun without --resume "
            "to write them again"
        )
    return resume(checkpoint, progress_bar=not args.no_progress, checkpoint_path=path)


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
        help="; ".join(f"{name}: {module.DEMO_HELP}" for name, module in models.items()),
    )
    demo.add_argument("--out-dir", default=".", help="where to write the .nc and .png files")
    add_sampling_arguments(
        demo, demo_defaults={name: module.DEMO_DEFAULTS for name, module in models.items()}
    )

    fit = commands.add_parser("fit", help="fit a model to a data file")
    subparsers = fit.add_subparsers(dest="model", parser_class=CliParser)
    for name, module in models.items():
        sub = subparsers.add_parser(name, help=module.FIT_HELP)
        sub.add_argument("--data", *module.DATA_ALIASES, required=True, help=module.DATA_HELP)
        sub.add_argument(
            "--out",
            default=f"bnpjax_fit_{name}.nc",
            help="where to write the InferenceData (netCDF); checked before the fit",
        )
        module.add_fit_arguments(sub)
        add_sampling_arguments(sub)
        add_checkpoint_arguments(sub)
    return parser
