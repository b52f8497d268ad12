"""Bayesian factorization machines with myFM's interface: ``FMRegressor``, ``FMClassifier``,
``FMOrdinal``.

A thin estimator layer over the kernel :func:`bnpjax.models.fm.gibbs` and the driver
:func:`bnpjax.infer.run`, importable as ``bnpjax.fm``. Argument names follow myFM on purpose
(``rank``, ``init_stdev``, ``alpha_0``, ``beta_0``, ``gamma_0``, ``mu_0``, ``reg_0``,
``fit_w0``, ``fit_linear``; ``fit(X, y, X_test, y_test, n_iter, n_kept_samples,
group_shapes)``), so switching is a change of import::

    from bnpjax.fm import FMRegressor
    model = FMRegressor(rank=10, random_state=0).fit(X_train, y_train, n_iter=200,
                                                      n_kept_samples=150)
    y_hat = model.predict(X_test)           # posterior mean over the kept samples
    idata = model.to_inference_data()       # arviz.InferenceData

The first ``n_iter - n_kept_samples`` sweeps are burn-in; the rest are kept. Predictions
average over the kept samples: the posterior-mean ``hat y`` (regression), the posterior
predictive ``P(y = 1)`` (probit classification) and ``P(y = k)`` (ordered probit).

References
----------
Rendle, S. (2012). Factorization machines with libFM. ACM TIST 3(3), 57.

Ohtsuki, T. (2020). myFM: a Python implementation of Bayesian factorization machines.
https://github.com/tohtsky/myFM
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from scipy.special import ndtr  # on the host, in float64

from bnpjax.infer import run, to_inference_data
from bnpjax.infer.checks import check_integer, check_start_scale, key_from_random_state
from bnpjax.infer.diagnostics import check_convergence
from bnpjax.infer.programs import jit
from bnpjax.models.fm.conditionals import _predict_coo
from bnpjax.models.fm.data import check_targets, make_data, make_hyper
from bnpjax.models.fm.gibbs import gibbs
from bnpjax.models.fm.layout import RelationBlock, relation_design, relation_widths, to_coo

__all__ = ["FMClassifier", "FMOrdinal", "FMRegressor", "RelationBlock"]


class _BayesianFM:
    likelihood = "gaussian"

    def __init__(
        self,
        rank: int = 10,
        init_stdev: float = 0.1,
        random_state: int = 0,
        alpha_0: float = 1.0,
        beta_0: float = 1.0,
        gamma_0: float = 1.0,
        mu_0: float = 0.0,
        reg_0: float = 1.0,
        fit_w0: bool = True,
        fit_linear: bool = True,
        progress_bar: bool = False,
        bucket_shapes: bool = True,
    ):
        self.rank = rank
        self.init_stdev = init_stdev
        self.random_state = random_state
        self.hyper = dict(alpha_0=alpha_0, beta_0=beta_0, gamma_0=gamma_0, mu_0=mu_0, reg_0=reg_0)
        self.fit_w0 = fit_w0
        self.fit_linear = fit_linear
        self.progress_bar = progress_bar
        self.bucket_shapes = bucket_shapes

    # labels <-> internal targets (overridden by the classifiers)
    def _encode(self, y):
        return check_targets(y, np.shape(y)[0], self.likelihood)

    def fit(
        self,
        X,
        y,
        X_rel=(),
        X_test=None,
        y_test=None,
        X_rel_test=(),
        n_iter: int = 100,
        n_kept_samples: int | None = None,
        group_shapes=None,
    ):
        """Run ``n_iter`` Gibbs sweeps and keep the last ``n_kept_samples`` (all by default).

        ``X`` (n, p): ``scipy.sparse`` or dense (it may have no columns when ``X_rel`` carries
        the features); ``X_rel``: relation blocks (:class:`RelationBlock`; myFM's work too),
        whose columns follow those of ``X``; ``group_shapes``: sizes of consecutive column
        groups (over ``X``, then the blocks) with their own hyperparameters. With ``X_test``
        (and ``X_rel_test``) the test predictions of every kept sample are recorded
        (``sample_stats.yhat_test``; with ``y_test``, the running test RMSE or accuracy is in
        ``self.test_history_``). The argument order is myFM's. ``self.convergence_`` holds
        the chain's diagnostics (:func:`bnpjax.infer.diagnostics.check_convergence`), which
        warn when the kept samples are too few effective draws."""
        n_iter = check_integer(n_iter, "n_iter", 1)
        n_kept = n_iter if n_kept_samples is None else n_kept_samples
        n_kept = check_integer(n_kept, "n_kept_samples", 1)
        if n_kept > n_iter:
            raise ValueError(f"n_kept_samples must be an integer in 1..n_iter, got {n_kept!r}")
        check_integer(self.rank, "rank", 0)
        check_start_scale(self.init_stdev, "init_stdev")
        if y_test is not None and X_test is None:
            raise ValueError("y_test needs X_test: it is scored against the predictions for X_test")
        targets = self._encode(y)
        data = make_data(
            X, targets, likelihood=self.likelihood, group_shapes=group_shapes, X_rel=X_rel,
            bucket_shapes=self.bucket_shapes,
        )  # fmt: skip
        self.n_features_ = int(data.group.shape[0])
        self.relation_widths_ = relation_widths(X_rel or ())
        self.n_columns_ = self.n_features_ - sum(self.relation_widths_)
        test = None
        num_test = 0
        if X_test is not None:
            rows, cols, values, shape = self._coo(X_test, "X_test")
            relations = self._relations(X_rel_test, shape[0], "X_rel_test")
            test, num_test = (rows, cols, values, relations), shape[0]
            if y_test is not None and np.shape(y_test) != (num_test,):
                raise ValueError(f"y_test must have shape ({num_test},), got {np.shape(y_test)}")
            if y_test is not None:  # the levels of an ordinal model are its own labels
                kind = "gaussian" if self.likelihood == "ordinal" else self.likelihood
                check_targets(y_test, num_test, kind, name="y_test")
        algorithm = gibbs(
            data,
            make_hyper(**self.hyper),
            rank=self.rank,
            likelihood=self.likelihood,
            init_scale=self.init_stdev,
            fit_w0=self.fit_w0,
            fit_linear=self.fit_linear,
            num_levels=getattr(self, "num_levels_", None),
            test=test,
            num_test=num_test,
        )
        self.result_ = run(
            algorithm,
            key_from_random_state(self.random_state),
            n_kept,
            num_warmup=n_iter - n_kept,
            progress_bar=self.progress_bar,
        )
        posterior = self.result_.trace["posterior"]
        self.samples_ = {k: np.asarray(v[0]) for k, v in posterior.items()}
        for name, values in self.samples_.items():
            finite = np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
            if not finite.all():
                # predictions from such draws would be silently wrong (NaN probabilities)
                raise FloatingPointError(
                    f"the chain's {name} is non-finite from kept draw {int(np.argmin(finite))} "
                    f"({values.dtype}); the targets are standardised before sampling, so their "
                    "units are not the cause: look for extreme values in X (rescale its "
                    "columns) or refit with another random_state"
                )
        self.timings_ = dict(self.result_.timings)
        # one chain: ESS of lp, b, noise and the group hyperparameters (R-hat needs chains)
        self.convergence_ = check_convergence(self.result_, stacklevel=3)
        if X_test is not None and y_test is not None:
            self.test_history_ = self._test_history(
                np.asarray(self.result_.trace["sample_stats"]["yhat_test"][0]), y_test
            )
        return self

    def _coo(self, X, name):
        allow = bool(getattr(self, "relation_widths_", ()))
        rows, cols, values, shape = to_coo(X, name, allow_no_columns=allow)
        if hasattr(self, "n_columns_") and shape[1] != self.n_columns_:
            raise ValueError(
                f"{name} has {shape[1]} columns but the model was fitted on {self.n_columns_}"
            )
        return rows, cols, values, shape

    def _relations(self, X_rel, num_rows, name):
        """Relation blocks for prediction, checked against the blocks of the fit."""
        X_rel = tuple(X_rel or ())
        widths = relation_widths(X_rel)
        if widths != self.relation_widths_:
            raise ValueError(
                f"{name} has blocks of widths {widths} but the model was fitted on "
                f"{self.relation_widths_}"
            )
        relations, offset = [], self.n_columns_
        for position, (block, width) in enumerate(zip(X_rel, widths, strict=True)):
            relations.append(relation_design(block, num_rows, offset=offset, position=position))
            offset += width
        return tuple(relations)

    def _check_fitted(self):
        if not hasattr(self, "samples_"):
            raise ValueError("call fit(X, y) before predicting")

    def predict_latent(self, X, X_rel=(), chunk: int | None = None) -> np.ndarray:
        """``hat y`` of every kept sample on the rows of ``X`` (and relation blocks
        ``X_rel``): (n_kept_samples, n), float64. ``chunk`` draws are evaluated at once (default: as
        many as keep the (draws, nnz, rank) intermediate near 64 MB, at most 32)."""
        self._check_fitted()
        rows, cols, values, shape = self._coo(X, "X")
        relations = self._relations(X_rel, shape[0], "X_rel")
        dtype = jnp.result_type(float)
        rows, cols = jnp.asarray(rows, jnp.int32), jnp.asarray(cols, jnp.int32)
        values = jnp.asarray(values, dtype)
        s = self.samples_
        out = []
        if chunk is None:
            per_draw = 4 * max(1, len(values)) * max(1, s["V"].shape[-1])
            chunk = int(min(32, max(1, 2**26 // per_draw)))
        for start in range(0, s["w"].shape[0], chunk):
            part = slice(start, start + chunk)
            zero = jnp.zeros_like(s["b"][part])
            # the intercept is added on the host in float64: targets far from 0 (1e6 + y)
            # keep in the predictions what float32 keeps of them in the draws
            rest = _predict_draws(rows, cols, values, shape[0], zero, s["w"][part],
                                  s["V"][part], relations)  # fmt: skip
            out.append(np.asarray(rest, np.float64) + np.asarray(s["b"][part], np.float64)[:, None])
        return np.concatenate(out)

    def to_inference_data(self):
        """The fit as :class:`arviz.InferenceData` (b, w, V, hyperparameters, noise;
        ``lp`` and training ``rmse`` per draw in ``sample_stats``)."""
        self._check_fitted()
        return to_inference_data(self.result_)


@jit(static_argnames="num_rows")
def _predict_draws(rows, cols, values, num_rows, b, w, V, relations):
    return jax.vmap(
        lambda b_, w_, V_: _predict_coo(rows, cols, values, num_rows, b_, w_, V_, relations)
    )(b, w, V)


class FMRegressor(_BayesianFM):
    """Bayesian FM regression (Gaussian noise), Gibbs sampling; see the module docstring."""

    likelihood = "gaussian"

    def predict(self, X, X_rel=()) -> np.ndarray:
        """Posterior-mean prediction over the kept samples (float64)."""
        return self.predict_latent(X, X_rel).mean(axis=0)

    def _test_history(self, yhat, y_test):
        running = np.cumsum(yhat, axis=0) / np.arange(1, yhat.shape[0] + 1)[:, None]
        return np.sqrt(np.mean((running - np.asarray(y_test, float)) ** 2, axis=1))


class FMClassifier(_BayesianFM):
    """Bayesian FM binary classification by probit (Albert-Chib augmentation). Labels 0/1."""

    likelihood = "probit"

    def predict_proba(self, X, X_rel=()) -> np.ndarray:
        """Posterior predictive ``P(y = 1 | x)``: the mean over kept samples of
        ``Phi(hat y)``."""
        return np.asarray(ndtr(self.predict_latent(X, X_rel))).mean(axis=0)

    def predict(self, X, X_rel=()) -> np.ndarray:
        """Class labels 0/1 (int64): 1 where the posterior predictive ``P(y = 1 | x)`` of
        :meth:`predict_proba` exceeds 0.5, the Bayes decision under 0-1 loss."""
        return (self.predict_proba(X, X_rel) > 0.5).astype(np.int64)

    def _test_history(self, yhat, y_test):
        p = np.cumsum(np.asarray(ndtr(yhat)), axis=0) / np.arange(1, yhat.shape[0] + 1)[:, None]
        return np.mean((p > 0.5) == np.asarray(y_test), axis=1)


class FMOrdinal(_BayesianFM):
    """Bayesian FM ordinal regression by ordered probit with sampled cutpoints. Labels are
    consecutive integers (e.g. ratings 1..5); predictions use the same labels."""

    likelihood = "ordinal"

    def _encode(self, y):
        y = np.asarray(y)
        if y.ndim != 1 or not np.issubdtype(y.dtype, np.number):
            raise ValueError("y must be a 1-D array of integer levels")
        if not np.all(np.isfinite(y)) or not np.all(y == np.round(y)):
            raise ValueError("y must hold integer levels (no NaN, no fractions)")
        levels = np.unique(y.astype(np.int64))
        if levels.size < 2 or not np.array_equal(levels, np.arange(levels[0], levels[-1] + 1)):
            raise ValueError(
                f"y must hold consecutive integer levels with at least two of them, got "
                f"{levels.tolist()[:20]}"
            )
        self.classes_ = levels
        self.num_levels_ = int(levels.size)
        return check_targets(y.astype(np.int64) - levels[0], y.shape[0], "ordinal")

    def predict_proba(self, X, X_rel=()) -> np.ndarray:
        """Posterior predictive ``P(y = level | x)`` (n, L), averaged over kept samples."""
        yhat = self.predict_latent(X, X_rel)  # (S, n)
        cut = self.samples_["cutpoints"]  # (S, L-1)
        upper = np.concatenate([cut, np.full((cut.shape[0], 1), math.inf)], axis=1)
        cdf = np.asarray(ndtr(upper[:, None, :] - yhat[:, :, None]))  # (S, n, L)
        probs = np.diff(cdf, axis=2, prepend=0.0)
        return probs.mean(axis=0)

    def predict(self, X, X_rel=()) -> np.ndarray:
        """The most probable level."""
        return self.classes_[np.argmax(self.predict_proba(X, X_rel), axis=1)]

    def _test_history(self, yhat, y_test):
        return np.full(yhat.shape[0], np.nan)
