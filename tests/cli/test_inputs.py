"""The command line's face without a fit: help texts and defaults, the data files (header
detection, bad cells by line and column, 1-based ids), the output path checked before the
fit, one error prefix. Nothing here runs a sampler."""

import argparse

import numpy as np
import pytest

from bnpjax.cli import main
from bnpjax.cli.inputs import read_table, zero_based
from bnpjax.cli.output import UsageError
from bnpjax.cli.parser import build_parser
from bnpjax.cli.registry import MODELS, load_all


def _subparsers(parser):
    """Every (sub)parser of the command, depth first."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _subparsers(sub)


def test_every_option_has_help_and_shows_its_default():
    for parser in _subparsers(build_parser(load_all())):
        text = parser.format_help()
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            assert action.help, f"{parser.prog} {action.option_strings or action.dest}: no help"
            if action.default not in (None, False, argparse.SUPPRESS):
                shown = f"(default: {action.default})"
                assert shown in " ".join(text.split()), f"{parser.prog} {action.dest}: {shown}"


def test_fit_output_is_named_after_the_model(capsys):
    parser = build_parser(load_all())
    names = {parser.parse_args(["fit", m, "--data", "x"]).out for m in MODELS}
    assert names == {f"bnpjax_fit_{m}.nc" for m in MODELS}
    with pytest.raises(SystemExit):
        parser.parse_args(["fit", "fm", "--help"])
    assert "(default: bnpjax_fit_fm.nc)" in capsys.readouterr().out


def _write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_header_is_detected_and_a_headerless_file_keeps_its_first_row(tmp_path):
    named = read_table(_write(tmp_path, "a.csv", "x,y\n1,2\n3,4\n"))
    assert named.header and named.columns == ["x", "y"] and named.values.shape == (2, 2)
    bare = read_table(_write(tmp_path, "b.csv", "1,2\n3,4\n5,\n"))
    assert not bare.header and bare.columns == ["c1", "c2"]
    np.testing.assert_array_equal(bare.values[:, 0], [1, 3, 5])
    assert np.isnan(bare.values[2, 1])  # an empty cell is missing
    spaced = read_table(_write(tmp_path, "c.txt", "# source target\n0 1\n1  2\n"))
    np.testing.assert_array_equal(spaced.values, [[0, 1], [1, 2]])
    assert list(spaced.lines) == [2, 3]
    with pytest.raises(UsageError, match=r"line 1, column 'c1': 'x' is not a number.*header"):
        read_table(str(tmp_path / "a.csv"), header=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n3,foo\n", r"bad.csv line 3, column 'b': 'foo' is not a number"),
        ("a\tb\n1\t2\ninf\t3\n", r"line 3, column 'a': 'inf' is not a finite number"),
        ("a,b\n1,2\n3,4,5\n", r"line 3 has 3 fields, the first row 2"),
        ("a,b\n", r"has a header but no rows"),
    ],
)
def test_bad_cells_are_named_by_line_and_column(tmp_path, text, message):
    suffix = ".tsv" if "\t" in text else ".csv"
    with pytest.raises(UsageError, match=message):
        read_table(_write(tmp_path, f"bad{suffix}", text))


def test_one_based_ids_are_detected_shifted_or_kept(tmp_path):
    table = read_table(_write(tmp_path, "r.csv", "user,item,rating\n1,1,5\n2,3,4\n"))
    flags = dict(one_based=False, zero_based=False)
    with pytest.raises(
        UsageError, match=r"columns 'user' and 'item' never take the value 0.*--one-based"
    ):
        zero_based([table], [0, 1], argparse.Namespace(**flags))
    (ids,) = zero_based([table], [0, 1], argparse.Namespace(**{**flags, "one_based": True}))
    np.testing.assert_array_equal(ids, [[0, 0], [1, 2]])
    (ids,) = zero_based([table], [0, 1], argparse.Namespace(**{**flags, "zero_based": True}))
    np.testing.assert_array_equal(ids, [[1, 1], [2, 3]])
    zero = read_table(_write(tmp_path, "z.csv", "user,item,rating\n0,1,5\n2,0,4\n1.5,0,3\n"))
    with pytest.raises(UsageError, match=r"line 4, column 'user': 1.5 is not an id"):
        zero_based([zero], [0, 1], argparse.Namespace(**flags))


@pytest.mark.parametrize(
    ("model", "text", "message"),
    [
        ("fm", "user,item,rating\n1,1,5\n2,2,4\n", "look 1-based; pass --one-based"),
        ("m3f", "user,item,rating\n1,1,5\n2,2,4\n", "look 1-based; pass --one-based"),
        ("m3f", "user,item,rating\n0,0,5\n1,1,2.5\n", "line 3, column 'rating': 2.5 is not"),
        ("ilfm", "1 2\n2 3\n", "look 1-based; pass --one-based"),
        ("fm", "user,item,rating\n0,0,5\n1,1,\n", "line 3, column 'rating': an empty cell"),
        ("linreg", "a,y\n1,2\n,3\n", "line 3, column 'a': an empty cell is a missing feature"),
    ],
)
def test_fit_refuses_bad_files_before_sampling(tmp_path, capsys, no_sampling, model, text, message):
    data = _write(tmp_path, "data.csv" if "," in text else "edges.txt", text)
    assert main(["fit", model, "--data", data, "--out", str(tmp_path / "o.nc")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bnpjax: error: ") and message in err, err
    assert len(err.strip().splitlines()) == 1


@pytest.fixture
def no_sampling(monkeypatch):
    """Fail the test if a command starts sampling."""

    def refuse(*args, **kwargs):
        raise AssertionError("sampled before the inputs were checked")

    for name in ("linreg", "ibp", "fm", "ilfm", "m3f"):
        monkeypatch.setattr(f"bnpjax.cli.{name}.sample", refuse)


def test_output_path_is_checked_before_the_fit(tmp_path, capsys, no_sampling):
    data = _write(tmp_path, "d.csv", "a,y\n1,2\n2,3\n")
    blocker = _write(tmp_path, "file", "")
    cases = [
        (str(tmp_path / "file" / "out.nc"), "is a file, not a folder"),
        (str(tmp_path), "is a folder"),
    ]
    for out, message in cases:
        assert main(["fit", "linreg", "--data", data, "--out", out]) == 2
        err = capsys.readouterr().err
        assert err.startswith("bnpjax: error: --out: ") and message in err, err
    assert main(["demo", "--out-dir", blocker]) == 2
    assert "bnpjax: error: --out-dir: " in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["--bogus"],
        ["fit"],
        ["fit", "linreg"],
        ["fit", "fm", "--data", "x.csv", "--rank", "two"],
        ["demo", "--num-chains", "0"],
        ["fit", "linreg", "--data", "does-not-exist.csv"],
    ],
)
def test_one_error_prefix(argv, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("bnpjax: error: ") and err.count("bnpjax: error:") == 1, err
