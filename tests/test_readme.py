"""Every Python snippet of the README runs as written (in order, each in a fresh namespace), so
the first code a new user copies cannot rot. Snippets that read a real data set skip where the
data are absent."""

import pathlib
import re

import matplotlib
import pytest

from bnpjax.datasets import DataNotFoundError

matplotlib.use("Agg")

README = pathlib.Path(__file__).parents[1] / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_is_short_and_has_snippets():
    assert len(README.read_text().splitlines()) < 200
    assert len(SNIPPETS) >= 3


@pytest.mark.parametrize("index", range(len(SNIPPETS)))
def test_snippet_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code = SNIPPETS[index]
    try:
        exec(compile(code, f"README.md snippet {index}", "exec"), {"__name__": "__readme__"})
    except DataNotFoundError as err:
        pytest.skip(f"snippet {index} needs a data set that is absent here: {err}")
