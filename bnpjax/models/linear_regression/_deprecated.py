"""Old entry points of ``bnpjax.models.linear_regression``, kept for one release."""

from __future__ import annotations

import warnings

from bnpjax.models.linear_regression import geweke


def _warn(old, new):
    warnings.warn(f"{old} is deprecated, use {new}", FutureWarning, stacklevel=3)


def prior_sample(key, prior):
    """Deprecated: ``linear_regression.geweke.prior_sample(key, data, hyper)``."""
    _warn("linear_regression.prior_sample(key, prior)", "geweke.prior_sample(key, data, hyper)")
    return geweke.prior_sample(key, None, prior)


def data_sample(key, state, data):
    """Deprecated: ``linear_regression.geweke.data_sample(key, state, data, hyper)``."""
    _warn("linear_regression.data_sample", "geweke.data_sample(key, state, data, hyper)")
    return geweke.data_sample(key, state, data)
