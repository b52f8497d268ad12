"""Run rows of the Geweke table in one precision, in a process of its own.

``python tests/geweke_cases/_worker.py float32 [--broken] [--only NAME ...] [--sizes k=v ...]``
prints one JSON line per row: the row's name, the precision, whether it was the broken twin,
``max_abs_z``, ``threshold``, ``passed``, the worst statistic and the seconds it took.

The precision is fixed before JAX is imported, so every array of the rows (the case modules
build their data at import) is in that precision, as a user's float32 run is: the suite's
conftest turns x64 on for the whole test process, which a block of ``float_precision`` cannot
undo for arrays built before it. ``tests/test_geweke_float32.py`` runs this script.
"""

import argparse
import importlib
import json
import os
import pathlib
import sys
import time


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("precision", choices=["float32", "float64"])
    parser.add_argument("--broken", action="store_true", help="run the rows' broken twins")
    parser.add_argument("--with-twins", action="store_true", help="each row, then its twin")
    parser.add_argument("--only", nargs="*", default=None, help="row names (default: all)")
    parser.add_argument(
        "--sizes", nargs="*", default=[], help="override simulator sizes, e.g. num_marginal=2000"
    )
    args = parser.parse_args(argv)

    os.environ["JAX_ENABLE_X64"] = "1" if args.precision == "float64" else "0"
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # the suite's compiler setting (tests/conftest.py): level 1 compiles faster, same semantics
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_backend_optimization_level" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_backend_optimization_level=1").strip()
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

    import jax
    import numpy as np

    from bnpjax.testing import run_geweke_case

    expected = np.dtype(args.precision)
    assert jax.numpy.result_type(float) == expected, jax.numpy.result_type(float)
    sizes = {k: int(v) for k, v in (item.split("=") for item in args.sizes)}
    names = set(args.only) if args.only is not None else None
    case_dir = pathlib.Path(__file__).parent
    for path in sorted(case_dir.glob("[!_]*.py")):
        module = importlib.import_module(f"geweke_cases.{path.stem}")
        for case in module.CASES:
            if names is not None and case.name not in names:
                continue
            twins = [args.broken] if not args.with_twins else [False, True]
            if case.broken_factory is None:
                twins = [t for t in twins if not t]
            floats = [
                leaf.dtype
                for leaf in jax.tree_util.tree_leaves(case.data)
                if hasattr(leaf, "dtype") and np.issubdtype(leaf.dtype, np.floating)
            ]
            assert all(d == expected for d in floats), (case.name, floats)
            for broken in twins:
                _run(case._replace(**sizes), broken, args.precision, run_geweke_case)


def _run(case, broken, precision, run_geweke_case):
    """Run one row (or its twin) and print its JSON line."""
    import numpy as np

    start = time.perf_counter()
    try:
        result = run_geweke_case(case, broken=broken)
    except Exception as error:  # a row that cannot run is a finding, not a crash
        result = None
        line = dict(name=case.name, error=f"{type(error).__name__}: {error}")
    else:
        worst = max(result.z, key=lambda k: abs(result.z[k]))
        line = dict(
            name=case.name,
            max_abs_z=round(result.max_abs_z, 3),
            threshold=round(result.threshold, 3),
            passed=bool(result.passed),
            worst=worst,
            nonfinite=[k for k, v in result.z.items() if not np.isfinite(v)],
            too_few_draws=result.too_few_draws,
        )
    line.update(precision=precision, broken=broken, seconds=round(time.perf_counter() - start, 1))
    print(json.dumps(line), flush=True)
    if os.environ.get("GEWEKE_WORKER_VERBOSE") and result is not None:
        print(f"{case.name} ({precision}{', broken twin' if broken else ''})", file=sys.stderr)
        print(result, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
