"""The documentation's code: every Python block in docs/ parses, and every name it imports
from bnpjax exists (a renamed function breaks this test, not a reader's first try)."""

import ast
import importlib
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def _blocks():
    for page in sorted(DOCS.rglob("*.md")):
        if "_build" in page.parts:
            continue
        for i, match in enumerate(BLOCK.finditer(page.read_text())):
            yield pytest.param(match.group(1), id=f"{page.relative_to(DOCS)}:{i}")


@pytest.mark.parametrize("code", list(_blocks()))
def test_block_parses_and_its_bnpjax_imports_exist(code):
    tree = ast.parse(code)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bnpjax"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    importlib.import_module(f"{node.module}.{alias.name}")  # a submodule
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bnpjax"):
                    importlib.import_module(alias.name)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "bnpjax"
        ):
            assert hasattr(importlib.import_module("bnpjax"), node.attr), f"bnpjax.{node.attr}"
