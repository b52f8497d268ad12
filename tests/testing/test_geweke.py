"""The Geweke harness refuses bad settings (the kernels' cases are in tests/geweke_cases)."""

import jax
import pytest

from bnpjax.testing import geweke_test


def test_geweke_rejects_bad_settings():
    with pytest.raises(ValueError, match="num_successive"):
        geweke_test(
            jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, num_successive=1
        )
    with pytest.raises(ValueError, match="level"):
        geweke_test(jax.random.key(0), prior_sample=None, data_sample=None, kernel=None, level=1.5)
