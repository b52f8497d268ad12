"""Property-based input fuzzing (issue 28): every ``make_data``, ``make_hyper`` and IBP prior
function either raises a ``ValueError`` naming one of its arguments or returns finite arrays.

Inputs: random shapes and dtypes (float, int, bool, complex, text), NaN and infinities,
values beyond float32 and empty or degenerate arrays. Validation runs on the host before
anything is traced, so no example compiles a sampler; the prior functions draw their shapes
from a small set so that their few eager programs are compiled once. Each property runs in
float64 and in float32. Examples are bounded to keep the file within seconds.
"""

import inspect
import re
import warnings

import jax
import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from bnpjax.models import fm, ibp_lg, ilfm, m3f, wmmsb  # noqa: E402
from bnpjax.models import linear_regression as lr  # noqa: E402
from bnpjax.priors import ibp  # noqa: E402

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # the x64 switch below holds no example state
    ],
)


@pytest.fixture(autouse=True, params=["float64", "float32"])
def precision(request):
    """Every property in float64 (the suite's default) and in float32 (the users'): a value
    in range for one may be out of range for the other."""
    jax.config.update("jax_enable_x64", request.param == "float64")
    try:
        yield request.param
    finally:
        jax.config.update("jax_enable_x64", True)


SPECIAL = [np.nan, np.inf, -np.inf, 1e39, -1e39, 0.0, 1.0, -1.0, 0.5, 2.0, 3.0]
NUMBERS = st.one_of(
    st.sampled_from(SPECIAL), st.floats(-1e3, 1e3, allow_nan=False), st.integers(-3, 5)
)


def _arrays(shape):
    """Arrays of ``shape`` of a random dtype, with special values mixed in."""
    floats = hnp.arrays(np.float64, shape, elements=st.sampled_from(SPECIAL) | st.floats(-5, 5))
    small = hnp.arrays(np.float64, shape, elements=st.sampled_from([0.0, 1.0, 2.0, np.nan]))
    return st.one_of(
        floats,
        small,
        hnp.arrays(np.int64, shape, elements=st.integers(-2, 3)),
        hnp.arrays(np.bool_, shape),
        small.map(lambda a: a + 0j),
        small.map(lambda a: a.astype(object)),
        small.map(lambda a: np.where(np.isnan(a), "a", a.astype(str))),
    )


def _shape(max_side=5, min_dims=1, max_dims=3):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=0, max_side=max_side)


def _finite(result) -> bool:
    leaves = jax.tree_util.tree_leaves(result)
    return all(
        np.all(np.isfinite(np.asarray(x))) for x in leaves if np.asarray(x).dtype.kind in "fc"
    )


def _either(call, names):
    """The property: ``call()`` returns finite arrays or raises a ValueError naming one of
    ``names``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = call()
        except ValueError as err:
            named = any(re.search(rf"(?<![\w-]){name}\b", str(err)) for name in names)
            assert named, f"the error names no argument of {names}: {err}"
            return
    assert _finite(result), f"non-finite output from accepted input: {result}"


# ---- make_data --------------------------------------------------------------------------------


@FUZZ
@given(X=_shape(max_dims=3).flatmap(_arrays), y=_shape(max_dims=2).flatmap(_arrays))
def test_linear_regression_make_data(X, y):
    _either(lambda: lr.make_data(X, y), ["X", "y", "mask"])


@FUZZ
@given(X=_shape(max_dims=3).flatmap(_arrays), use_mask=st.booleans())
def test_ibp_lg_make_data(X, use_mask):
    mask = (np.arange(X.size).reshape(X.shape) % 3 != 0) if use_mask else None
    _either(lambda: ibp_lg.make_data(X, mask), ["X", "mask"])


@FUZZ
@given(
    Y=st.sampled_from([(2, 2), (4, 4), (2, 4, 4), (3, 3, 2)]).flatmap(_arrays),
    covariates=st.none() | st.sampled_from([(4, 4), (2, 4, 4)]).flatmap(_arrays),
)
def test_ilfm_make_data(Y, covariates):
    _either(lambda: ilfm.make_data(Y, covariates=covariates), ["Y", "mask", "covariates"])


@FUZZ
@given(Y=st.sampled_from([(2, 2), (4, 4), (3, 4), (4,)]).flatmap(_arrays))
def test_wmmsb_make_data(Y):
    _either(lambda: wmmsb.make_data(Y), ["Y", "mask", "directed"])


@FUZZ
@given(X=_shape(max_dims=2).flatmap(_arrays), y=_shape(max_dims=1).flatmap(_arrays))
def test_fm_make_data(X, y):
    _either(lambda: fm.make_data(X, y), ["X", "y"])


@FUZZ
@given(
    dense=hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=5),
        elements=st.sampled_from([0.0, 0.0, 1.0, -2.0, 0.5, np.nan, 1e39]),
    ),
    split=st.floats(0.1, 0.9),
    fmt=st.sampled_from(["coo", "csr", "csc"]),
)
def test_fm_make_data_takes_sparse_designs_with_explicit_zeros_and_duplicates(dense, split, fmt):
    """A sparse design with every stored value split into two duplicate entries and explicit
    zeros added is the dense design: the same data, or the same ValueError naming ``X``."""
    import scipy.sparse as sp

    y = np.arange(dense.shape[0], dtype=float)
    rows, cols = np.nonzero(dense != 0)
    values = dense[rows, cols]
    zr, zc = np.nonzero(dense == 0)
    parts = (values * split, values * (1 - split), np.zeros(len(zr)))
    with np.errstate(invalid="ignore", over="ignore"):
        matrix = sp.coo_matrix(
            (np.concatenate(parts), (np.concatenate([rows, rows, zr]),
                                     np.concatenate([cols, cols, zc]))),
            shape=dense.shape,
        ).asformat(fmt)  # fmt: skip
    outcomes = []
    for X in (dense, matrix):
        try:
            outcomes.append(fm.make_data(X, y))
        except ValueError as err:
            assert re.search(r"(?<![\w-])X\b", str(err)), err
            outcomes.append(None)
    want, got = outcomes
    assert (want is None) == (got is None)
    if want is not None:
        for a, b in zip(
            jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got), strict=True
        ):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


@FUZZ
@given(
    users=hnp.arrays(np.float64, 6, elements=st.sampled_from([0.0, 1.0, 2.0, -1.0, 2.5, np.nan])),
    ratings=hnp.arrays(np.float64, 6, elements=st.sampled_from([1.0, 2.0, 3.0, 0.0, np.nan])),
    num_levels=st.integers(-1, 4),
)
def test_m3f_make_data(users, ratings, num_levels):
    items = np.arange(6) % 3
    _either(
        lambda: m3f.make_data(users, items, ratings, 3, 3, num_levels),
        ["users", "items", "ratings", "num_users", "num_items", "num_levels"],
    )


# ---- make_hyper -------------------------------------------------------------------------------


@FUZZ
@given(p=st.integers(-1, 3), mean=NUMBERS, precision=NUMBERS, a=NUMBERS, b=NUMBERS)
def test_linear_regression_make_hyper(p, mean, precision, a, b):
    _either(
        lambda: lr.make_hyper(p, mean=mean, precision=precision, a=a, b=b),
        ["num_features", "mean", "precision", "a", "b"],
    )


@FUZZ
@given(values=st.lists(NUMBERS, min_size=6, max_size=6))
def test_ibp_lg_make_hyper(values):
    names = ("alpha_prior", "sigma_x_prior", "sigma_a_prior")
    pairs = {name: (values[2 * i], values[2 * i + 1]) for i, name in enumerate(names)}
    _either(lambda: ibp_lg.make_hyper(**pairs), names)


@FUZZ
@given(values=st.lists(NUMBERS, min_size=5, max_size=5))
def test_ilfm_make_hyper(values):
    _either(
        lambda: ilfm.make_hyper(tuple(values[:2]), *values[2:]),
        ["alpha_prior", "sigma_w", "sigma_s", "sigma_beta"],
    )


@FUZZ
@given(
    rank=st.integers(-1, 3),
    likelihood=st.sampled_from(["nb", "bg", "bernoulli", "poisson"]),
    values=st.lists(NUMBERS, min_size=6, max_size=6),
)
def test_wmmsb_make_hyper(rank, likelihood, values):
    names = ("r", "p", "r0", "c0", "c", "eps")
    _either(
        lambda: wmmsb.make_hyper(
            rank, likelihood=likelihood, **dict(zip(names, values, strict=True))
        ),
        ["rank", "likelihood", "alpha", *names],
    )


@FUZZ
@given(values=st.lists(NUMBERS, min_size=6, max_size=6))
def test_fm_make_hyper(values):
    names = ("alpha_0", "beta_0", "gamma_0", "mu_0", "reg_0", "cutpoint_scale")
    _either(lambda: fm.make_hyper(*values), names)


@FUZZ
@given(num_levels=st.integers(-1, 5), C=NUMBERS, margin=NUMBERS, sigma_u=NUMBERS)
def test_m3f_make_hyper(num_levels, C, margin, sigma_u):
    _either(
        lambda: m3f.make_hyper(num_levels, C=C, margin=margin, sigma_u=sigma_u),
        ["num_levels", "C", "margin", "sigma_u"],
    )


# ---- the IBP prior functions ------------------------------------------------------------------


ROWS = st.sampled_from([-1, 0, 2, 3, 2.5, True])


@settings(FUZZ, max_examples=25)
@given(alpha=NUMBERS, num_rows=ROWS, capacity=st.sampled_from([0, 3, 4, 2.0]))
def test_sample_buffet(alpha, num_rows, capacity):
    key = jax.random.key(0)
    _either(
        lambda: ibp.sample_buffet(key, alpha, num_rows, capacity), ["alpha", "num_rows", "capacity"]
    )


@settings(FUZZ, max_examples=25)
@given(Z=st.sampled_from([(3, 2), (3, 3)]).flatmap(_arrays), alpha=NUMBERS)
def test_log_prob(Z, alpha):
    _either(lambda: ibp.log_prob(Z, alpha), ["Z", "alpha"])


@settings(FUZZ, max_examples=25)
@given(alpha=NUMBERS, num_rows=ROWS, kappa=st.sampled_from([-1, 0, 2, 1.5]))
def test_new_feature_log_prior(alpha, num_rows, kappa):
    _either(
        lambda: ibp.new_feature_log_prior(alpha, num_rows, kappa), ["alpha", "num_rows", "kappa"]
    )


@settings(FUZZ, max_examples=25)
@given(num_rows=ROWS, shape=NUMBERS, rate=NUMBERS)
def test_alpha_posterior(num_rows, shape, rate):
    _either(lambda: ibp.alpha_posterior(2, num_rows, shape, rate), ["num_rows", "shape", "rate"])


# ---- the samplers' factories ------------------------------------------------------------------


def _factory_cases():
    """Each sampler factory with small valid data (built once, on the host) and its numeric
    and boolean keyword settings."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    ratings = np.array([1, 2, 3, 1, 2, 3])
    m3f_data = m3f.make_data(np.arange(6) % 3, np.arange(6) % 2, ratings, 3, 2, 3)
    fm_data = fm.make_data(np.eye(6, 4), X[:, 0])
    ilfm_data = ilfm.make_data((rng.random((5, 5)) < 0.4).astype(float))
    out = []
    for module, name, data in [
        (ibp_lg, "collapsed_gibbs", ibp_lg.make_data(X)),
        (ibp_lg, "parallel_gibbs", ibp_lg.make_data(X)),
        (ibp_lg, "split_merge", ibp_lg.make_data(X)),
        (fm, "gibbs", fm_data),
        (ilfm, "gibbs", ilfm_data),
        (m3f, "gibbs", m3f_data),
        (m3f, "ipm3f_gibbs", m3f_data),
    ]:
        factory = getattr(module, name)
        params = inspect.signature(factory).parameters.values()
        numeric = [p for p in params if isinstance(p.default, int | float | bool)]
        names = [p.name for p in numeric if p.kind == p.KEYWORD_ONLY]
        out.append((f"{module.__name__.rsplit('.', 1)[-1]}.{name}", factory, data, names))
    return out


_FACTORIES = None


def _factories():
    global _FACTORIES
    if _FACTORIES is None:
        _FACTORIES = _factory_cases()
    return _FACTORIES


BAD_SETTINGS = st.one_of(
    NUMBERS, st.sampled_from([None, "a", True, False, np.int64(3), np.float32(0.5), 2.5, -1, 0])
)


@FUZZ
@given(which=st.integers(0, 6), pick=st.integers(0, 20), value=BAD_SETTINGS)
def test_factories_take_a_setting_or_refuse_it_naming_it(which, pick, value):
    """One keyword setting of a sampler factory at a time, from numbers, special values,
    booleans, None and text: the factory builds its sampler (without compiling) or raises a
    ``ValueError`` naming that setting."""
    label, factory, data, names = _factories()[which]
    name = names[pick % len(names)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            factory(data, **{name: value})
        except ValueError as err:
            assert re.search(rf"(?<![\w-]){name}\b", str(err)), f"{label}({name}={value!r}): {err}"


# ---- the scikit-learn-style FM estimators ------------------------------------------------------


class _Reached(BaseException):
    """Raised where ``fit`` would start sampling (a BaseException, so that no error handling
    on the way can swallow it)."""


_ESTIMATOR_TARGETS = {
    "FMRegressor": np.array([0.5, -1.0, 2.0, 0.0, 1.5, 3.0]),
    "FMClassifier": np.array([0, 1, 1, 0, 1, 0]),
    "FMOrdinal": np.array([1, 2, 3, 1, 2, 3]),
}
_CONSTRUCTOR = ["rank", "init_stdev", "random_state", "alpha_0", "beta_0", "gamma_0", "mu_0",
                "reg_0", "fit_w0", "fit_linear"]  # fmt: skip
_FIT = ["n_iter", "n_kept_samples"]
ESTIMATOR_VALUES = [np.nan, np.inf, -np.inf, 1e39, -1e39, 0.0, 1.0, -1.0, 0.5, 2.0, 3.0, None,
                    "a", True, False, np.int64(3), np.float32(0.5), 2.5, -1, 0, 2**70, -(2**70),
                    np.random.RandomState(0), np.random.default_rng(0)]  # fmt: skip


def _fit_estimator(which, settings_, fit_settings, targets, monkeypatch):
    """``which(**settings_).fit(X, targets, **fit_settings)`` up to the start of sampling:
    True when it got there, the ValueError when it refused."""
    from bnpjax.models.fm import estimators

    def reached(*args, **kwargs):
        raise _Reached

    monkeypatch.setattr(estimators, "run", reached)
    X = np.eye(6, 4) + np.eye(6, 4, k=-2)
    fit_settings = {"n_iter": 3, **fit_settings}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            getattr(estimators, which)(**settings_).fit(X, targets, **fit_settings)
        except _Reached:
            return True
        except ValueError as err:
            return err
    raise AssertionError(f"{which}: fit neither sampled nor refused")


@pytest.mark.parametrize("which", sorted(_ESTIMATOR_TARGETS))
def test_estimators_fit_or_refuse_each_setting_naming_it(which, monkeypatch):
    """Every setting of ``FMRegressor`` / ``FMClassifier`` / ``FMOrdinal`` (constructor and
    ``fit``) with every value of a list of numbers, special values, booleans, None, text,
    huge integers and NumPy random states (all of them: the list is short, and a sample of
    it missed cases): ``fit`` reaches sampling (replaced by a sentinel, so nothing compiles)
    or raises a ``ValueError`` naming that setting."""
    for name in _CONSTRUCTOR + _FIT:
        for value in ESTIMATOR_VALUES:
            settings_ = {} if name in _FIT else {name: value}
            fit_settings = {name: value} if name in _FIT else {}
            out = _fit_estimator(which, settings_, fit_settings, _ESTIMATOR_TARGETS[which],
                                 monkeypatch)  # fmt: skip
            if out is not True:
                assert re.search(rf"(?<![\w-]){name}\b", str(out)), f"{name}={value!r}: {out}"


@FUZZ
@given(which=st.sampled_from(sorted(_ESTIMATOR_TARGETS)), y=_arrays((6,)))
def test_estimators_fit_or_refuse_targets_naming_them(which, y, monkeypatch):
    """Targets of random dtype with special values: sampling starts, or a ``ValueError``
    names ``y``."""
    out = _fit_estimator(which, {}, {}, y, monkeypatch)
    if out is not True:
        assert re.search(r"(?<![\w-])y\b", str(out)), f"y={y!r}: {out}"
