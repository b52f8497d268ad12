"""Temporary stand-ins for the ``bnpjax.infer`` API of issue 21 until it lands on main."""
# ruff: noqa
from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

try:
    from bnpjax.infer.checks import (
        check_integer,
        deprecated_alias,
        is_positive_finite,
        renamed_arguments,
    )
except ImportError:
    from bnpjax._checks import check_integer, is_positive_finite

    def renamed_arguments(**renames):
        def decorate(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                for old, new in renames.items():
                    if old in kwargs:
                        warnings.warn(
                            f"{fn.__name__}: {old}= is deprecated, use {new}=",
                            FutureWarning,
                            stacklevel=2,
                        )
                        kwargs[new] = kwargs.pop(old)
                return fn(*args, **kwargs)

            return wrapper

        return decorate

    def deprecated_alias(fn, old_name):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            warnings.warn(
                f"{old_name} is deprecated, use {fn.__name__}", FutureWarning, stacklevel=2
            )
            return fn(*args, **kwargs)

        wrapper.__name__ = old_name
        return wrapper


try:
    from bnpjax.infer import VariationalAlgorithm
except ImportError:
    from bnpjax.infer.base import ArvizSpec

    class VariationalAlgorithm(NamedTuple):
        init: Callable
        step: Callable
        sample: Callable | None = None
        trace: Callable | None = None
        spec: Any = ArvizSpec()


try:
    from bnpjax.infer.predictive import map_draws
except ImportError:

    def map_draws(fn, draws, *, batch_size=None):
        leaves = jax.tree_util.tree_leaves(draws)
        c, d = leaves[0].shape[:2]
        flat = jax.tree_util.tree_map(lambda x: jax.numpy.reshape(x, (c * d, *x.shape[2:])), draws)
        out = jax.lax.map(fn, flat, batch_size=batch_size)
        return jax.tree_util.tree_map(lambda x: x.reshape((c, d, *x.shape[1:])), out)
