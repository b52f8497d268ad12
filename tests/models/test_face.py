"""Every model package has the same face (data, one module per algorithm with BlackJAX's
levels, predict, the Geweke protocol), and no module of the package has grown into a
god-file."""

import importlib
import inspect
import pathlib
import pkgutil

import pytest

import bnpjax
import bnpjax.models

MODELS = ["linear_regression", "ibp_lg", "ilfm", "wmmsb", "m3f", "fm"]
MAX_MODULE_LINES = 650


def _params(fn):
    return list(inspect.signature(fn).parameters.values())


def _algorithm_modules(package):
    out = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if hasattr(module, "build_step"):
            out.append(module)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_package_face(name):
    package = importlib.import_module(f"bnpjax.models.{name}")
    assert hasattr(package, "__path__"), f"{name} must be a package"
    assert package.__doc__ and "References" in package.__doc__, f"{name}: docstring"
    for exported in package.__all__:
        assert hasattr(package, exported), f"{name}.__all__ names missing {exported}"

    data = importlib.import_module(f"bnpjax.models.{name}.data")
    assert callable(data.make_data) and callable(data.make_hyper), name
    assert any(k.endswith("Data") for k in vars(data)), f"{name}.data defines no *Data"
    assert any(k.endswith("Hyper") for k in vars(data)), f"{name}.data defines no *Hyper"
    for face in ("make_data", "make_hyper"):
        assert face in package.__all__, f"{name}.__all__ lacks {face}"

    predict = importlib.import_module(f"bnpjax.models.{name}.predict")
    p = [q.name for q in _params(predict.predict)[:3]]
    assert p == ["draws", "data", "test"], f"{name}.predict.predict{p}"
    ll = _params(predict.log_likelihood)
    assert [q.name for q in ll[:3]] == ["draws", "data", "test"], f"{name}.log_likelihood"
    assert ll[2].default is None, f"{name}.log_likelihood: test defaults to None"

    geweke = importlib.import_module(f"bnpjax.models.{name}.geweke")
    expected = {
        "prior_sample": ["key", "data", "hyper"],
        "data_sample": ["key", "state", "data", "hyper"],
        "refresh": ["data", "state"],
    }
    for hook, names in expected.items():
        params = _params(getattr(geweke, hook))
        assert [q.name for q in params[: len(names)]] == names, f"{name}.geweke.{hook}"
        rest = params[len(names) :]
        assert all(q.kind in (q.KEYWORD_ONLY, q.VAR_KEYWORD) for q in rest), (
            f"{name}.geweke.{hook}: settings must be keywords"
        )

    algorithms = _algorithm_modules(package)
    assert algorithms, f"{name} has no algorithm module (init, build_step, factory)"
    for module in algorithms:
        short = module.__name__.rsplit(".", 1)[1]
        assert callable(getattr(module, "init", None)), f"{module.__name__}.init"
        factory = getattr(module, short, None)
        assert callable(factory), f"{module.__name__} lacks its factory {short}()"
        params = [q.name for q in _params(factory)[:2]]
        assert params == ["data", "hyper"], f"{module.__name__}.{short}{params}"
        assert _params(factory)[1].default is None, f"{module.__name__}: hyper optional"
        assert short in package.__all__, f"{name}.__all__ lacks {short}"
        # the package's name for the factory hides the module: its levels ride on the factory
        exported = getattr(package, short)
        assert exported.init is module.init, f"{name}.{short}.init"
        assert exported.build_step is module.build_step, f"{name}.{short}.build_step"


def test_no_god_files():
    root = pathlib.Path(bnpjax.__file__).parent
    long = {
        str(p.relative_to(root)): n
        for p in root.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


def test_docstrings_point_at_no_file_outside_the_package():
    # papers are cited; the project's source texts and design notes do not ship
    root = pathlib.Path(bnpjax.__file__).parent
    patterns = ("shared/seeds", "shared/design", "seeds/", "seed 00", ".txt``")
    bad = {
        str(p.relative_to(root)): [x for x in patterns if x in p.read_text()]
        for p in root.rglob("*.py")
    }
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, f"modules pointing at files outside the package: {bad}"
