"""Property-based fuzzing of the command line's options (issue 28): ``bnpjax fit <model>``
with a valid data file and one option set to a random string either reaches sampling or
exits with status 2 and one line ``bnpjax: error: ...`` that names the option. Sampling is
replaced by a sentinel, so no example compiles anything."""

import argparse
import re

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bnpjax.cli import main  # noqa: E402
from bnpjax.cli.parser import build_parser  # noqa: E402
from bnpjax.cli.registry import load_all  # noqa: E402

#: a small valid data file per model, and its data option
FILES = {
    "linreg": ("--data", "data.csv", "a,y\n1,2\n2,3\n3,5\n4,4\n5,7\n"),
    "ibp": ("--data", "data.csv", "0.1,1.2,0.3\n1.1,0.2,0.9\n0.0,1.0,1.1\n1.2,1.1,0.1\n"),
    "fm": ("--train", "train.csv", "user,item,rating\n0,0,5\n1,1,4\n0,1,3\n1,0,2\n2,1,4\n"),
    "ilfm": ("--data", "edges.txt", "0 1\n1 2\n2 0\n2 3\n"),
    "wmmsb": ("--data", "edges.tsv", "a\tb\t3\nb\tc\t1\nc\ta\t2\nc\td\t5\n"),
    "m3f": ("--data", "ratings.csv", "user,item,rating\n0,0,5\n1,1,4\n0,1,3\n1,0,2\n2,1,4\n"),
}
#: options that name files (fuzzed elsewhere: tests/cli/test_inputs.py)
PATHS = {"--data", "--train", "--test", "--out", "--checkpoint", "--target"}
#: strings a user may type: numbers of every kind, out of range, malformed
VALUES = [
    "0", "-1", "1", "2", "3", "2.5", "1e-3", "nan", "inf", "-inf", "1e39", "-0",
    str(2**70), "abc", "", " 3", "0x10", "1_000", "two", "1,5",
]  # fmt: skip

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


class _Reached(BaseException):
    """Raised where the command would start sampling: the inputs were all accepted (a
    BaseException, so that the command's own error handling cannot swallow it)."""


@pytest.fixture
def stop_at_sampling(monkeypatch):
    def reached(*args, **kwargs):
        raise _Reached

    for name in ("linreg", "ibp", "fm", "ilfm", "m3f"):
        monkeypatch.setattr(f"bnpjax.cli.{name}.sample", reached)
    monkeypatch.setattr("bnpjax.infer.variational.fit_run", reached)


def _options():
    """(model, option string, dest) of every value-taking option of ``fit``."""
    parser = build_parser(load_all())
    fit = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    models = next(
        a for a in fit.choices["fit"]._actions if isinstance(a, argparse._SubParsersAction)
    )
    out = []
    for model, sub in sorted(models.choices.items()):
        for action in sub._actions:
            if not action.option_strings or action.nargs == 0:
                continue
            option = action.option_strings[-1]
            if option in PATHS:
                continue
            out.append((model, option, action.dest))
    return out


OPTIONS = _options()


def _run(tmp_path, model, extra):
    option, name, text = FILES[model]
    path = tmp_path / name
    path.write_text(text)
    argv = ["fit", model, option, str(path), "--out", str(tmp_path / "o.nc"), "--no-progress"]
    try:
        return main([*argv, *extra])
    except _Reached:
        return None


@pytest.mark.parametrize("model", sorted(FILES))
def test_the_valid_files_reach_sampling(model, tmp_path, stop_at_sampling):
    assert {m for m, *_ in OPTIONS} == set(FILES), "a model without a valid file here"
    assert _run(tmp_path, model, []) is None


@FUZZ
@given(pick=st.integers(0, len(OPTIONS) - 1), value=st.sampled_from(VALUES))
def test_an_option_is_taken_or_refused_in_one_line_naming_it(
    pick, value, tmp_path, stop_at_sampling, capsys
):
    model, option, dest = OPTIONS[pick]
    capsys.readouterr()
    rc = _run(tmp_path, model, [option, value])
    err = capsys.readouterr().err
    if rc is None:  # accepted: sampling would start
        return
    assert rc == 2, f"fit {model} {option} {value!r}: exit {rc}: {err}"
    assert err.startswith("bnpjax: error: ") and len(err.strip().splitlines()) == 1, err
    names = {option, option.lstrip("-"), dest, dest.replace("_", "-")}
    named = any(re.search(rf"(?<![\w]){re.escape(n)}\b", err) for n in names)
    assert named, f"fit {model} {option} {value!r}: the error names no option: {err}"


def test_m3f_rank_is_named_as_the_option(tmp_path, stop_at_sampling, capsys):
    # the library's "rank must be ..." named no option of the command
    assert _run(tmp_path, "m3f", ["--rank", "0"]) == 2
    assert capsys.readouterr().err.startswith("bnpjax: error: --rank must be at least 1")


@pytest.mark.parametrize(
    ("model", "option", "value"),
    [  # found by enumerating every option with every value above (2026-11-26)
        ("ilfm", "--num-entities", str(2**70)),  # the size error named --data
        ("ilfm", "--init-features", "-1"),  # named the library's num_init_features
        ("ilfm", "--init-features", "1000"),  # past --capacity: named num_init_features
        ("m3f", "--margin", "1e39"),  # a NumPy overflow warning printed before the error
        ("wmmsb", "--rank", str(2**70)),  # "Maximum allowed dimension exceeded"
    ],
)
def test_the_cases_the_enumeration_found(model, option, value, tmp_path, stop_at_sampling, capsys):
    import jax

    # 1e39 is out of range only for float32, the precision a user's run computes in
    jax.config.update("jax_enable_x64", False)
    try:
        assert _run(tmp_path, model, [option, value]) == 2
    finally:
        jax.config.update("jax_enable_x64", True)
    err = capsys.readouterr().err
    assert err.startswith("bnpjax: error: ") and len(err.strip().splitlines()) == 1, err
    assert option in err or option.lstrip("-") in err or (option == "--rank" and "--K" in err)
