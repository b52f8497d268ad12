"""``bnpjax fit`` on tiny files: the intercept of linreg, a headerless file, 1-based ids, a
held-out metric for every FM task."""

import numpy as np
import pytest

from bnpjax.cli import main

SHORT = ["--num-chains", "1", "--no-progress"]


def test_linreg_headerless_file_with_an_intercept(tmp_path, capsys):
    import arviz as az

    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 2))
    y = 0.3 + X @ [1.0, -0.5] + 0.2 * rng.normal(size=60)
    path = tmp_path / "bare.csv"
    path.write_text("".join(f"{a:.5f},{b:.5f},{t:.5f}\n" for (a, b), t in zip(X, y, strict=True)))
    out = tmp_path / "with.nc"
    sampling = ["--num-samples", "400", "--num-warmup", "50", *SHORT]
    assert main(["fit", "linreg", "--data", str(path), "--out", str(out), *sampling]) == 0
    assert "'c3' on 2 columns with an intercept" in capsys.readouterr().out
    idata = az.from_netcdf(str(out))
    assert idata.observed_data["y"].size == 60  # the first row is data, not a header
    beta = idata.posterior["beta"]
    assert list(beta.coords["coef"].values) == ["intercept", "c1", "c2"]
    # the truth within 4 posterior sd (conjugate model: the draws are exact)
    z = (beta.mean(("chain", "draw")) - [0.3, 1.0, -0.5]) / beta.std(("chain", "draw"))
    assert np.all(np.abs(z) < 4), z.values
    out = tmp_path / "without.nc"
    argv = ["fit", "linreg", "--data", str(path), "--out", str(out), "--no-intercept"]
    assert main([*argv, *sampling]) == 0
    assert list(az.from_netcdf(str(out)).posterior["beta"].coords["coef"].values) == ["c1", "c2"]


def _ratings(tmp_path, rng, levels, *, start):
    """Train and test CSVs of 10 users x 8 items, ids counting from ``start``."""
    users, items = np.meshgrid(np.arange(10), np.arange(8), indexing="ij")
    users, items = users.ravel(), items.ravel()
    y = rng.choice(levels, size=users.size)
    rows = [f"{u + start},{i + start},{t}" for u, i, t in zip(users, items, y, strict=True)]
    order = rng.permutation(len(rows))
    train, test = tmp_path / "train.csv", tmp_path / "test.csv"
    train.write_text("\n".join(["user,item,y"] + [rows[k] for k in order[:60]]) + "\n")
    test.write_text("\n".join(["user,item,y"] + [rows[k] for k in order[60:]]) + "\n")
    return ["--train", str(train), "--test", str(test)]


@pytest.mark.parametrize(
    ("task", "levels", "start", "metric"),
    [
        ("ordinal", [1, 2, 3, 4], 1, "test MAE: "),
        ("classification", [0, 1], 0, "test accuracy: "),
    ],
)
def test_fm_prints_a_test_metric_for_every_task(tmp_path, capsys, task, levels, start, metric):
    files = _ratings(tmp_path, np.random.default_rng(0), levels, start=start)
    ids = ["--one-based"] if start == 1 else []
    argv = [
        "fit",
        "fm",
        *files,
        *ids,
        "--task",
        task,
        "--rank",
        "2",
        "--out",
        str(tmp_path / "o.nc"),
    ]
    assert main([*argv, "--num-samples", "10", "--num-warmup", "5", *SHORT]) == 0
    out = capsys.readouterr().out
    assert metric in out and "(10 users, 8 items, 60 training rows)" in out, out


def test_fm_regression_on_targets_shifted_by_1e6_writes_finite_draws(tmp_path, capsys):
    """Issue 28: with targets shifted by 1e6, `bnpjax fit fm` and `bnpjax.sample` wrote
    all-NaN draws and exited 0. fm.make_data standardises the targets now, and the driver's
    guard stops a chain that turns non-finite (tests/infer/test_guard.py)."""
    import arviz as az
    import jax

    import bnpjax
    from bnpjax.models import fm

    rng = np.random.default_rng(0)
    files = _ratings(tmp_path, rng, np.round(1e6 + rng.normal(size=20), 3), start=0)
    out = tmp_path / "o.nc"
    argv = ["fit", "fm", *files, "--rank", "2", "--out", str(out)]
    assert main([*argv, "--num-samples", "10", "--num-warmup", "5", *SHORT]) == 0
    posterior = az.from_netcdf(str(out)).posterior
    for name in posterior.data_vars:
        assert np.all(np.isfinite(posterior[name].values)), name
    assert abs(float(posterior["b"].mean()) - 1e6) < 10  # the intercept, in the data's units
    X = np.zeros((40, 7))
    X[np.arange(40), np.arange(40) % 4] = 1.0
    X[np.arange(40), 4 + np.arange(40) % 3] = 1.0
    data = fm.make_data(X, 1e6 + rng.normal(size=40))
    idata = bnpjax.sample(fm.gibbs(data, rank=2), jax.random.key(0), 10, num_warmup=5,
                          progress_bar=False)  # fmt: skip
    for name in idata.posterior.data_vars:
        assert np.all(np.isfinite(idata.posterior[name].values)), name
