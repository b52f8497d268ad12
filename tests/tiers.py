"""The suite's two tiers (docs: the testing guide, "Two tiers"): every commit runs the default
tier; ``BNPJAX_LONG_TESTS=1`` adds the tests that repeat a check of the default tier at a
higher cost. One spelling of that switch for every test module."""

import os

import pytest

#: the long tier is on
LONG = os.environ.get("BNPJAX_LONG_TESTS") == "1"


def long_only(why: str):
    """A mark that skips a test outside the long tier; ``why`` says what it costs."""
    return pytest.mark.skipif(not LONG, reason=f"{why}; BNPJAX_LONG_TESTS=1 runs it")
