"""The ``bnpjax`` command (also ``python -m bnpjax``).

::

    bnpjax --version
    bnpjax demo [MODEL]                  # end-to-end run on generated data
    bnpjax fit MODEL --data PATH [--out bnpjax_fit_MODEL.nc] [options]
    bnpjax fit fm --train ratings.csv --test ratings_test.csv --rank 10
    bnpjax fit ilfm --data edges.tsv [--undirected] [--mode single] [--init cluster]

Each model's demo and fit live in a module of their own (``bnpjax.cli.<model>``), listed in
:data:`bnpjax.cli.registry.MODELS`; the parser is built from that registry. Every
``--help`` shows the defaults. Errors in arguments or data files print one line on stderr,
``bnpjax: error: ...``, and exit with status 2, without traceback; the output path is checked
before the fit. A reader of the output that goes away (``bnpjax demo | head``) ends the
command quietly with status 1.
"""

from __future__ import annotations

import sys
import warnings

from bnpjax.cli.output import UsageError, check_writable, report_error
from bnpjax.cli.parser import build_parser, check_checkpoint, check_sampling
from bnpjax.cli.registry import MODELS, load, load_all

__all__ = ["MODELS", "UsageError", "command", "main"]

_SAMPLING = ("num_samples", "num_warmup", "num_chains")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Convergence warnings as one plain line (not the source line that raised them)."""
    from bnpjax.infer.diagnostics import ConvergenceWarning

    if issubclass(category, ConvergenceWarning):
        print(f"bnpjax: warning: {' '.join(str(message).split())}", file=file or sys.stderr)
    else:
        _SHOW_WARNING(message, category, filename, lineno, file, line)


_SHOW_WARNING = warnings.showwarning


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``bnpjax`` command; returns the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _main(argv)


def command() -> None:
    """The ``bnpjax`` console script (and ``python -m bnpjax``): :func:`main`, then the end of
    the process once its output is flushed and the exit handlers have run.

    A normal interpreter exit then tears down SciPy, xarray, pandas, matplotlib and JAX's
    runtime module by module: 0.3-0.4 s after a demo on a 2-core CPU, when every file the
    command wrote is already closed. ``main`` itself returns, for use from Python."""
    import atexit
    import os

    status = main()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away after main returned: the rest is lost
        status = status or 1
    os._exit(status)


def _reader_gone(stream) -> bool:
    """Whether ``stream`` is a pipe whose reader has closed it (a broken pipe elsewhere, such
    as standard error or a named pipe given as a file, is an error to report)."""
    import select

    try:
        poll, fd = select.poll(), stream.fileno()
    except (AttributeError, OSError, ValueError):  # no poll (Windows), or no descriptor
        return False
    poll.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))


def _use_cores(commands) -> None:
    """Chains on several cores: ``BNPJAX_CPU_DEVICES`` CPU devices when set, else
    :func:`_cpu_devices` for the models whose module sets ``CPU_CORES`` (checked and measured
    faster split: ``benchmarks/cpu_devices.py`` and the demos; a single variational fit, as
    WMMSB's demo, or a model with one chain gains nothing and stays on one device); nothing
    when JAX already runs (``main`` called from Python) or ``XLA_FLAGS`` chose
    (:func:`bnpjax.infer.use_cpu_cores`)."""
    import os

    from bnpjax.infer.sharding import CPU_DEVICES_VARIABLE, use_cpu_cores

    chosen = os.environ.get(CPU_DEVICES_VARIABLE, "").strip()
    if chosen and not (chosen.isdigit() and int(chosen) >= 1):
        raise UsageError(f"{CPU_DEVICES_VARIABLE} must be a whole number >= 1, got {chosen!r}")
    if chosen or getattr(commands, "CPU_CORES", False):
        use_cpu_cores(int(chosen) if chosen else _cpu_devices(commands), quiet=True)


def _cpu_devices(commands) -> int:
    """The CPU devices for a model that sets ``CPU_CORES``: one per core, or
    ``CPU_DEVICES_PER_CORE`` per core where its module sets that (the ILFM's tempered chains:
    a device's sweep is a long chain of tiny operations, and two devices on a core run one's
    operations in the other's gaps; the driver then splits the chains over as many devices as
    divide their number)."""
    from bnpjax.infer.sharding import usable_cores

    return usable_cores() * getattr(commands, "CPU_DEVICES_PER_CORE", 1)


def _main(argv: list[str]) -> int:
    try:
        parser = build_parser(load_all())
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 0
        check_sampling(args)
        if args.command == "demo":
            commands = load(args.model)
            _use_cores(commands)
            for name, value in zip(_SAMPLING, commands.DEMO_DEFAULTS, strict=True):
                if getattr(args, name) is None:
                    setattr(args, name, value)
            check_writable(args.out_dir, "--out-dir", folder=True)
            return commands.demo(args)
        if args.model is None:
            raise UsageError(f"fit: choose a model: {', '.join(sorted(MODELS))}")
        check_writable(args.out, "--out")
        commands = load(args.model)
        _use_cores(commands)
        check_checkpoint(args, supported=getattr(commands, "CHECKPOINTS", True))
        return commands.fit(args)
    except BrokenPipeError as err:
        if _reader_gone(sys.stdout):  # ``bnpjax ... | head``: nobody reads the rest
            return 1
        return report_error(str(err))
    except (UsageError, ValueError, OSError) as err:
        return report_error(str(err))
    except FloatingPointError as err:  # a chain turned non-finite: nothing is written
        print(" ".join(f"bnpjax: failed: {err}".split()), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bnpjax: interrupted", file=sys.stderr)
        return 130
