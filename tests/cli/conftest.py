"""Every CLI test fails on a FutureWarning: the commands use the library's current names,
never a deprecated alias (ArviZ's own notice of its refactor aside)."""

import warnings

import pytest


@pytest.fixture(autouse=True)
def _no_future_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FutureWarning)
        yield
    deprecated = [
        f"{w.filename}:{w.lineno}: {w.message}"
        for w in caught
        if issubclass(w.category, FutureWarning)
        and "ArviZ is undergoing a major refactor" not in str(w.message)
    ]
    assert not deprecated, "the command raised FutureWarning:\n" + "\n".join(deprecated)
