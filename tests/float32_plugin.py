"""``python -m pytest -p float32_plugin ...`` (with ``tests/`` on ``PYTHONPATH``): run the
selected tests in float32, the precision users get by default.

tests/conftest.py turns x64 on when it is imported; this hook runs after it (pytest calls
``pytest_configure`` once the initial conftests are loaded) and turns it off again, before
any test module is imported, so module-level data are float32 too.
``tests/test_geweke_float32.py`` runs the recovery tests of every model this way.
"""

import jax


def pytest_configure(config):
    jax.config.update("jax_enable_x64", False)


def pytest_report_header(config):
    return "float32_plugin: jax_enable_x64 off (float32)"


def pytest_runtest_setup(item):
    # a test module that turned x64 back on would run in float64 and prove nothing here
    if jax.config.jax_enable_x64:
        raise RuntimeError(f"{item.nodeid} turned x64 on: it does not run in float32")
