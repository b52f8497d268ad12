"""Metrics against scipy / hand computations, data home resolution, synthetic generator."""

import numpy as np
import pytest

from bnpjax import metrics
from bnpjax.datasets import DataNotFoundError, get_data_home, linear_regression


def test_auc_matches_pairwise_definition():
    rng = np.random.default_rng(0)
    y = rng.random(200) < 0.3
    s = rng.normal(size=200) + y
    s[:20] = np.round(s[:20])  # ties count one half
    pos, neg = s[y], s[~y]
    pairwise = np.mean((pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :]))
    assert metrics.roc_auc(y, s) == pytest.approx(pairwise, rel=1e-12)
    with pytest.raises(ValueError, match="both"):
        metrics.roc_auc(np.ones(3), np.ones(3))


def test_errors_and_log_mean_exp():
    assert metrics.rmse([1, 2], [1, 4]) == pytest.approx(np.sqrt(2))
    assert metrics.mae([1, 2], [1, 4]) == pytest.approx(1.0)
    assert metrics.nmae([1, 2], [1, 4], low=1, high=5) == pytest.approx(0.25)
    x = np.array([[-1000.0, 2.0], [-1001.0, 3.0]])
    expected = np.log(np.mean(np.exp(x - x.max(0)), 0)) + x.max(0)
    np.testing.assert_allclose(metrics.log_mean_exp(x, axis=0), expected)
    with pytest.raises(ValueError, match="differ"):
        metrics.rmse([1, 2], [1])


def test_data_home(tmp_path, monkeypatch):
    assert get_data_home(tmp_path) == tmp_path
    monkeypatch.setenv("BNPJAX_DATA", str(tmp_path))
    assert get_data_home() == tmp_path
    with pytest.raises(DataNotFoundError, match="BNPJAX_DATA"):
        get_data_home(tmp_path / "missing")


def test_synthetic_regression_is_seeded():
    a, b = linear_regression(3, missing_fraction=0.2), linear_regression(3, missing_fraction=0.2)
    np.testing.assert_array_equal(a["X"], b["X"])
    assert np.isnan(a["y"][~a["mask"]]).all() and 0 < (~a["mask"]).sum() < 40


def test_movielens_loader_reads_the_local_copy():
    from bnpjax.datasets import movielens

    try:
        ml100k = movielens("ml-100k", download=False)
    except DataNotFoundError as err:
        pytest.skip(f"MovieLens not available here: {err}")
    assert ml100k.ratings.shape == (100_000, 4)
    train, test = ml100k.splits["u1"]
    assert len(train) == 80_000 and len(test) == 20_000
    assert set(np.unique(ml100k.ratings[:, 2])) == {1, 2, 3, 4, 5}
    assert ml100k.items["genres"].shape == (1682, 19) and len(ml100k.users["age"]) == 943
    ml1m = movielens("ml-1m", download=False)
    if "PARTIAL" in ml1m.note:  # users 1-2999 only (ml-1m-partial-users1-2999/PROVENANCE.md)
        assert len(ml1m.ratings) == 487_650
    else:
        assert len(ml1m.ratings) == 1_000_209
    assert ml1m.ratings.shape[1] == 4 and ml1m.items["genres"].shape[1] == 18
    with pytest.raises(ValueError, match="name"):
        movielens("ml-20m")


def test_movielens_missing_folder_is_a_clear_error(tmp_path):
    from bnpjax.datasets import movielens

    with pytest.raises(DataNotFoundError, match="download=False"):
        movielens("ml-100k", data_home=tmp_path, download=False)


def test_data_home_found_from_the_working_directory(tmp_path, monkeypatch):
    """An installed package (CI's fresh venv) finds ../shared/data from the repository root."""
    import bnpjax.datasets.home as home

    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "repo").mkdir()
    monkeypatch.delenv("BNPJAX_DATA", raising=False)
    monkeypatch.chdir(tmp_path / "repo")
    monkeypatch.setattr(home, "__file__", str(tmp_path / "site" / "bnpjax" / "datasets" / "h.py"))
    assert home.get_data_home() == (tmp_path / "shared" / "data").resolve()
