"""The registry: every model's command module has the face the parser and main rely on."""

import subprocess
import sys

import pytest

from bnpjax.cli import main
from bnpjax.cli.parser import build_parser
from bnpjax.cli.registry import DEFAULT_DEMO, MODELS, load, load_all


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_model_module_has_the_face(name):
    module = load(name)
    assert isinstance(module.DEMO_HELP, str) and isinstance(module.FIT_HELP, str)
    assert len(module.DEMO_DEFAULTS) == 3 and all(v >= 0 for v in module.DEMO_DEFAULTS)
    assert all(alias.startswith("--") for alias in module.DATA_ALIASES)
    for function in ("add_fit_arguments", "demo", "fit"):
        assert callable(getattr(module, function))


def test_parser_lists_every_model():
    parser = build_parser(load_all())
    assert DEFAULT_DEMO in MODELS
    for name in MODELS:
        args = parser.parse_args(["fit", name, "--data", "x"])
        assert (
            args.model == name and args.out == f"bnpjax_fit_{name}.nc" and args.num_samples == 1000
        )
    assert parser.parse_args(["fit", "fm", "--train", "x"]).data == "x"
    assert parser.parse_args(["demo"]).model == DEFAULT_DEMO


def test_no_command_prints_help(capsys):
    assert main([]) == 0
    assert "usage: bnpjax" in capsys.readouterr().out


def test_python_m_bnpjax_cli():
    out = subprocess.run(
        [sys.executable, "-m", "bnpjax.cli", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0 and out.stdout.startswith("bnpjax ")
