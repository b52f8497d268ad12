"""The validation layer (``bnpjax.infer.checks``) and the cases of issue 28 that were silently
accepted, turned into NaN or refused cryptically: each is refused with a ``ValueError`` naming
the argument, before anything is traced. None of these tests compiles a sampler except where
it says so."""

import jax
import numpy as np
import pytest

from bnpjax.infer import checks
from bnpjax.models import fm, ibp_lg, ilfm, wmmsb
from bnpjax.models import linear_regression as lr
from bnpjax.priors import ibp

KEY = jax.random.key(0)
RNG = np.random.default_rng(0)
X = RNG.normal(size=(8, 3))
Y = X @ np.ones(3)
LINKS = (RNG.random((6, 6)) < 0.4).astype(float)
COUNTS = np.triu(RNG.integers(0, 3, (6, 6)), 1)


@pytest.fixture
def float32_run():
    """The precision users get by default (the suite runs in float64)."""
    jax.config.update("jax_enable_x64", False)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", True)


# ---- the IBP prior functions -----------------------------------------------------------------


@pytest.mark.parametrize("alpha", [-1.0, 0.0, np.nan, np.inf])
def test_ibp_prior_functions_refuse_a_bad_alpha(alpha):
    Z = np.array([[1.0, 0.0], [1.0, 1.0]])
    for call in (
        lambda: ibp.sample_buffet(KEY, alpha, 5, 8),
        lambda: ibp.sample_stick_breaking(KEY, alpha, 5, 8),
        lambda: ibp.log_prob(Z, alpha),  # alpha=-1 gave NaN
        lambda: ibp.new_feature_log_prior(alpha, 5, 3),
    ):
        with pytest.raises(ValueError, match="alpha"):
            call()


@pytest.mark.parametrize("num_rows", [-1, 0, 2.5, True])
def test_ibp_prior_functions_refuse_a_bad_num_rows(num_rows):
    with pytest.raises(ValueError, match="num_rows"):
        ibp.sample_buffet(KEY, 1.0, num_rows, 8)
    with pytest.raises(ValueError, match="num_rows"):
        ibp.new_feature_log_prior(1.0, num_rows, 3)
    with pytest.raises(ValueError, match="num_rows"):
        ibp.alpha_posterior(2, num_rows, 1.0, 1.0)


@pytest.mark.parametrize("capacity", [0, -3, 2.0])
def test_sample_buffet_refuses_a_bad_capacity(capacity):
    with pytest.raises(ValueError, match="capacity"):
        ibp.sample_buffet(KEY, 1.0, 5, capacity)


def test_sample_buffet_with_a_small_capacity_reports_the_columns_needed():
    draw = ibp.sample_buffet(KEY, 30.0, 6, 2)
    assert draw.Z.shape == (6, 2) and int(draw.num_needed) > 2


@pytest.mark.parametrize(
    "Z", [[[2.0, 0.0], [1.0, 1.0]], [[-1.0, 0.0], [1.0, 1.0]], [[np.nan, 0.0], [1.0, 1.0]]]
)
def test_log_prob_refuses_a_matrix_that_is_not_binary(Z):
    with pytest.raises(ValueError, match="Z must be a binary matrix"):
        ibp.log_prob(np.array(Z), 1.0)


def test_new_feature_log_prior_refuses_a_negative_kappa():
    with pytest.raises(ValueError, match="kappa"):
        ibp.new_feature_log_prior(1.0, 5, -1)


@pytest.mark.parametrize("shape, rate", [(-3.0, 1.0), (1.0, -1.0), (np.nan, 1.0)])
def test_sample_alpha_refuses_a_bad_gamma_prior(shape, rate):
    with pytest.raises(ValueError, match=r"shape|rate"):
        ibp.sample_alpha(KEY, 2, 5, shape, rate)


# ---- arrays of real numbers ------------------------------------------------------------------


def test_complex_data_is_refused():
    with pytest.raises(ValueError, match="X must be real"):
        lr.make_data(X + 1j, Y)
    with pytest.raises(ValueError, match="y must be real"):
        lr.make_data(X, Y + 0j)
    with pytest.raises(ValueError, match="X must be real"):
        ibp_lg.make_data(X + 1j)
    with pytest.raises(ValueError, match="Y must be real"):
        ilfm.make_data(LINKS + 0j)
    with pytest.raises(ValueError, match="covariates must be real"):
        ilfm.make_data(LINKS, covariates=np.ones((6, 6)) * (1 + 1j))
    with pytest.raises(ValueError, match="X must be real"):
        fm.make_data(X + 1j, Y)


def test_text_is_refused_naming_the_argument_and_the_entry():
    with pytest.raises(ValueError, match="X must hold numbers; 'a' is not one"):
        lr.make_data([["1", "a"], ["2", "3"]], [1.0, 2.0])


def test_linear_regression_refuses_zero_feature_columns():
    with pytest.raises(ValueError, match="one feature column"):
        lr.make_data(np.zeros((8, 0)), Y)


def test_values_beyond_float32_are_refused_naming_argument_and_dtype(float32_run):
    big = 1e39  # finite in float64, inf in float32: every draw would be NaN
    cases = [
        ("X", lambda: lr.make_data(X * big, Y)),
        ("y", lambda: lr.make_data(X, Y * big)),
        ("X", lambda: ibp_lg.make_data(X * big)),
        ("covariates", lambda: ilfm.make_data(LINKS, covariates=np.full((6, 6), big))),
        ("Y", lambda: wmmsb.make_data(COUNTS * big)),
        ("y", lambda: fm.make_data(X, Y * big)),
        ("X", lambda: fm.make_data(X * big, Y)),
    ]
    for name, call in cases:
        with pytest.raises(ValueError, match=rf"^{name} holds .*float32"):
            call()
    # the same values are in range in float64 (the check follows the run's dtype)
    checks.check_dtype_range(np.array([big]), "X", np.float64)


def test_fm_refuses_an_all_zero_design():
    with pytest.raises(ValueError, match="X has no nonzero entry"):
        fm.make_data(np.zeros((8, 3)), Y)  # was an IndexError inside the layout


# ---- hyperparameters that do not fit the data or the kernel ---------------------------------


def test_linear_regression_refuses_a_prior_of_the_wrong_width():
    with pytest.raises(ValueError, match="make_hyper\\(3"):
        lr.gibbs(lr.make_data(X, Y), lr.make_hyper(5))


def test_wmmsb_refuses_a_bernoulli_hyper_with_the_negative_binomial_kernel():
    data = wmmsb.make_data(COUNTS)
    hyper = wmmsb.make_hyper(3, likelihood="bernoulli")  # p = 1: no NB law
    with pytest.raises(ValueError, match="likelihood='nb'"):
        wmmsb.cvb0(data, hyper)
    with pytest.raises(ValueError, match="likelihood='nb'"):
        wmmsb.collapsed_gibbs(data, hyper)


# ---- seeds, random states, states, memory ------------------------------------------------------


def test_key_from_random_state_follows_scikit_learn():
    np.random.seed(3)  # noqa: NPY002 - the global state scikit-learn reads
    first = jax.random.key_data(checks.key_from_random_state(None))
    np.random.seed(3)  # noqa: NPY002 - the global state scikit-learn reads
    assert np.array_equal(first, jax.random.key_data(checks.key_from_random_state(None)))
    a = checks.key_from_random_state(np.random.RandomState(0))
    b = checks.key_from_random_state(np.random.RandomState(0))
    assert np.array_equal(jax.random.key_data(a), jax.random.key_data(b))
    checks.key_from_random_state(np.random.default_rng(0))
    checks.key_from_random_state(np.int64(5))
    checks.key_from_random_state(KEY)
    for bad in (-1, 2**70, 1.5, "0"):
        with pytest.raises(ValueError, match="random_state"):
            checks.key_from_random_state(bad)


def test_check_seed_range():
    assert checks.check_seed(2**63 - 1) == 2**63 - 1
    jax.random.key(2**63 - 1)  # the largest seed jax.random.key takes
    for bad in (2**63, 2**70, -1, True, 1.0):
        with pytest.raises(ValueError, match="seed"):
            checks.check_seed(bad)


def test_check_allocation_names_the_size():
    with pytest.raises(ValueError, match=r"shape \(1, 1000001, 1000001\) \(7.28 TiB\)"):
        checks.check_allocation((1, 1_000_001, 1_000_001), np.float64, "--data")
    checks.check_allocation((10, 10), np.float64, "small")


def test_nonfinite_leaves_names_the_fields():
    state = {"a": np.zeros(3), "b": np.array([1.0, np.nan]), "k": np.arange(2)}
    assert checks.nonfinite_leaves(state) == ["['b']"]
    with pytest.raises(ValueError, match=r"initial_state has NaN .*\['b'\]"):
        checks.check_finite_tree(state, "initial_state")


# ---- the command line and the estimators -------------------------------------------------------


def test_cli_refuses_a_seed_jax_cannot_take(capsys):
    from bnpjax.cli import main

    assert main(["demo", "linreg", "--seed", str(2**70)]) == 2
    assert "--seed must be an integer in [0, 2**63)" in capsys.readouterr().err


def test_cli_fit_fm_refuses_ordinal_levels_with_gaps(tmp_path, capsys):
    from bnpjax.cli import main

    rows = ["user,item,rating"] + [
        f"{u},{i},{1 + 2 * ((u + i) % 2)}" for u in range(4) for i in range(3)
    ]
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n")
    argv = ["fit", "fm", "--train", str(tmp_path / "r.csv"), "--task", "ordinal", "--no-progress"]
    assert main(argv) == 2
    assert "levels [1.0, 3.0], with gaps (never [2])" in capsys.readouterr().err


def test_cli_fit_ilfm_refuses_a_dense_array_beyond_memory_naming_its_size(tmp_path, capsys):
    from bnpjax.cli import main

    (tmp_path / "edges.tsv").write_text("source\ttarget\n0\t1\n1\t0\n2\t1000000\n")
    assert main(["fit", "ilfm", "--data", str(tmp_path / "edges.tsv"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "shape (1, 1000001, 1000001)" in err and "TiB" in err


def test_fm_regressor_takes_scikit_learn_random_states_and_numpy_integers():
    from bnpjax.fm import FMRegressor

    # compiles the FM sampler once (the three fits share the program)
    for random_state in (None, np.random.RandomState(0), np.random.default_rng(1)):
        model = FMRegressor(rank=2, random_state=random_state)
        model.fit(X, Y, n_iter=np.int64(3), n_kept_samples=np.int32(2))
        assert model.samples_["w"].shape == (2, 3)


# ---- vague messages made actionable: each says what to do ----------------------------------


@pytest.mark.parametrize(
    ("call", "advice"),
    [
        (
            lambda: lr.make_data(X, np.where(np.arange(8) == 2, np.nan, Y)),
            r"mask=np\.isfinite\(y\)",
        ),
        (lambda: lr.make_data(X, Y, np.ones(8, int)), r"got int64 of shape \(8,\) \(True where"),
        (lambda: lr.make_data(np.where(X > 1, np.nan, X), Y), "drop or impute them"),
        (lambda: lr.make_hyper(2, precision=[[1, 2], [2, 1]]), "smallest eigenvalue is -1"),
        (lambda: ibp_lg.make_data(X, np.ones(X.shape, int)), r"e\.g\. np\.isfinite\(X\)"),
        (lambda: ibp_lg.make_data(X, np.zeros(X.shape, bool)), "drop those rows"),
        (lambda: ilfm.make_data(2 * LINKS), r"got 2\.0; .*threshold weighted links"),
        (
            lambda: fm.make_data(X, np.arange(8) % 3, likelihood="probit"),
            r"got \[0\.0, 1\.0, 2\.0\]",
        ),
    ],
)
def test_messages_say_what_to_do(call, advice):
    with pytest.raises(ValueError, match=advice):
        call()
