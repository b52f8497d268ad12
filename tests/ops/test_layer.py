"""Layer rule of bnpjax.ops: runtime imports are jax/numpy/stdlib only, every public name is
exported and documented, random functions take the key first."""

import jax

jax.config.update("jax_enable_x64", True)

import ast  # noqa: E402
import inspect  # noqa: E402
import pathlib  # noqa: E402

import bnpjax.ops as ops  # noqa: E402

OPS_DIR = pathlib.Path(ops.__file__).parent
ALLOWED_TOP_LEVEL = {"__future__", "collections", "dataclasses", "functools", "math", "typing"}
ALLOWED_TOP_LEVEL |= {"jax", "numpy"}


def module_level_imports(tree):
    """Imports executed at import time (function bodies, i.e. lazy imports, are skipped)."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module


def test_runtime_imports_are_jax_numpy_or_ops():
    for path in sorted(OPS_DIR.glob("*.py")):
        for name in module_level_imports(ast.parse(path.read_text())):
            top = name.split(".")[0]
            ok = top in ALLOWED_TOP_LEVEL or name.startswith("bnpjax.ops")
            assert ok, f"{path.name} imports {name}"


def test_public_names_exported_and_documented():
    exported = set(ops.__all__)
    for path in sorted(OPS_DIR.glob("[!_]*.py")):
        module = __import__(f"bnpjax.ops.{path.stem}", fromlist=["__all__"])
        assert module.__doc__, path.name
        assert set(module.__all__) <= exported, path.name
    for name in ops.__all__:
        obj = getattr(ops, name)
        assert inspect.getdoc(obj) and len(inspect.getdoc(obj)) > 40, name


def test_random_functions_take_key_first():
    for name in ops.__all__:
        if name.startswith("sample_"):
            params = list(inspect.signature(getattr(ops, name)).parameters)
            assert params[0] == "key", name
