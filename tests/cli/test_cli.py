"""The command line: version, demo, fit, and one-line errors with exit status 2."""

import io
import os
import subprocess
import sys

import numpy as np
import pytest
from tiers import long_only

from bnpjax.cli import main


def test_version_through_python_m():
    out = subprocess.run(
        [sys.executable, "-m", "bnpjax", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("bnpjax ")


def _block_buffered_env() -> dict:
    """The environment without PYTHONUNBUFFERED: a child's piped output is then
    block-buffered, as a user's is, and only a flush gets it out."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


_COMMAND = """
import atexit, sys
from bnpjax.cli import command
atexit.register(print, "exit handler ran")
sys.argv = ["bnpjax", *sys.argv[1:]]
command()
print("not reached")
"""


@pytest.mark.parametrize(
    ("argv", "status", "stream", "text"),
    [
        ([], 0, "stdout", "usage: bnpjax"),
        (["fit", "linreg", "--data", "no_such_file.csv"], 2, "stderr", "no_such_file.csv"),
    ],
)
def test_command_ends_the_process_with_mains_status_and_flushed_output(
    argv, status, stream, text, tmp_path
):
    # the console script ends the process itself: its piped (block-buffered) output, the
    # exit handlers and main's status must all survive that
    out = subprocess.run(
        [sys.executable, "-c", _COMMAND, *argv],
        capture_output=True, text=True, cwd=tmp_path, env=_block_buffered_env(),
    )  # fmt: skip
    assert out.returncode == status, out.stderr
    assert text in getattr(out, stream)
    assert "exit handler ran" in out.stdout and "not reached" not in out.stdout


_PRINTS_MORE_THAN_A_PIPE_HOLDS = """
import sys
from bnpjax.cli import command, registry

def demo(args):  # far more than a pipe's buffer, so that a closed pipe must be met
    for i in range(1_000_000):
        print(f"bnpjax demo line {i}")
    return 0

registry.load("linreg").demo = demo
sys.argv = ["bnpjax", "demo", "linreg", "--no-progress", "--out-dir", sys.argv[1]]
command()
"""


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    # `bnpjax demo | head -1`: the pipe closes while the command still has lines to print
    proc = subprocess.Popen(
        [sys.executable, "-c", _PRINTS_MORE_THAN_A_PIPE_HOLDS, str(tmp_path)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_block_buffered_env(),
    )  # fmt: skip
    assert proc.stdout.readline().startswith("bnpjax demo")
    proc.stdout.close()
    status, err = proc.wait(timeout=300), proc.stderr.read()
    assert status == 1 and err == "", err


def test_only_a_closed_reader_of_standard_output_ends_the_command_quietly():
    # any other broken pipe (standard error, a named pipe given as a file) is an error
    from bnpjax.cli import _reader_gone

    read, write = os.pipe()
    with os.fdopen(write, "w") as stream:
        assert not _reader_gone(stream)
        os.close(read)
        assert _reader_gone(stream)
    assert not _reader_gone(io.StringIO())


def test_demo_writes_inference_data_and_plot(tmp_path, capsys):
    rc = main(
        [
            "demo",
            "--out-dir",
            str(tmp_path),
            "--num-samples",
            "200",
            "--num-warmup",
            "50",
            "--no-progress",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "r_hat" in out and "ess_bulk" in out and "exact_mean" in out
    assert (tmp_path / "bnpjax_demo_linreg.nc").stat().st_size > 0
    assert (tmp_path / "bnpjax_demo_linreg_trace.png").stat().st_size > 0


def test_fit_linreg_from_csv(tmp_path, capsys):
    import arviz as az

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    y = X @ [1.0, -1.0] + 0.1 * rng.normal(size=50)
    lines = ["a,b,y"] + [f"{r[0]},{r[1]},{t}" for r, t in zip(X, y, strict=True)]
    lines[5] = f"{X[3, 0]},{X[3, 1]},"  # a missing target: left out, not read as zero
    path = tmp_path / "table.csv"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "fit.nc"
    rc = main(
        [
            "fit",
            "linreg",
            "--data",
            str(path),
            "--out",
            str(out),
            "--num-samples",
            "200",
            "--num-warmup",
            "50",
            "--num-chains",
            "2",
            "--no-progress",
        ]
    )
    assert rc == 0
    idata = az.from_netcdf(str(out))
    assert list(idata.posterior["beta"].coords["coef"].values) == ["intercept", "a", "b"]
    assert idata.observed_data["y"].size == 49
    beta = idata.posterior["beta"].mean(("chain", "draw"))
    np.testing.assert_allclose(beta, [0, 1, -1], atol=0.1)
    assert "1 rows with a missing target" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["fit", "linreg", "--data", "does-not-exist.csv"], "no such file"),
        (["demo", "no-such-model"], "invalid choice"),
        (["demo", "--num-samples", "0"], "--num-samples must be at least 1"),
        (["fit"], "choose a model"),
        (["--bogus"], "unrecognized arguments"),
    ],
)
def test_errors_are_one_line_with_status_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


def test_bad_data_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("a,y\n1,2\nfoo,bar,baz\n")
    assert main(["fit", "linreg", "--data", str(path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "line 3 has 3 fields" in err
    path.write_text("a,y\n1,nan\n2,nan\n")
    assert main(["fit", "linreg", "--data", str(path), "--no-progress"]) == 2
    assert "mask" in capsys.readouterr().err


@long_only(
    "both IBP samplers of the demo compile: 164 s with an empty compilation cache on the "
    "2-core CI machine; the samplers have their own tests"
)
def test_demo_ibp_smoke(tmp_path, capsys):
    rc = main(
        [
            "demo",
            "ibp",
            "--out-dir",
            str(tmp_path),
            "--num-samples",
            "30",
            "--num-warmup",
            "30",
            "--num-chains",
            "1",
            "--no-progress",
        ]
    )
    assert rc == 0
    out = capsys.readouterr().out
    assert "posterior of K+" in out and "matched features" in out
    for name in (
        "bnpjax_demo_ibp_collapsed.nc",
        "bnpjax_demo_ibp_parallel.nc",
        "bnpjax_demo_ibp_features.png",
    ):
        assert (tmp_path / name).stat().st_size > 0


def test_fit_ibp_from_csv(tmp_path, capsys):
    import arviz as az

    from bnpjax.datasets import bars

    X = bars(0, num_obs=30, missing_fraction=0.05)["X"]
    path = tmp_path / "images.csv"
    rows = [",".join(f"p{j}" for j in range(36))]
    rows += [",".join("" if np.isnan(v) else f"{v:.4f}" for v in row) for row in X]
    path.write_text("\n".join(rows) + "\n")
    out = tmp_path / "ibp.nc"
    rc = main(
        [
            "fit",
            "ibp",
            "--data",
            str(path),
            "--out",
            str(out),
            "--num-samples",
            "20",
            "--num-warmup",
            "20",
            "--num-chains",
            "1",
            "--sampler",
            "parallel",
            "--no-progress",
        ]
    )
    assert rc == 0
    assert "posterior mode of K+" in capsys.readouterr().out
    assert az.from_netcdf(str(out)).posterior["num_features"].shape == (1, 20)


def test_demo_and_fit_fm(tmp_path, capsys):
    import arviz as az

    argv = ["--num-samples", "20", "--num-warmup", "20", "--num-chains", "1", "--no-progress"]
    assert main(["demo", "fm", "--out-dir", str(tmp_path), *argv]) == 0
    assert "noiseless signal" in capsys.readouterr().out
    assert (tmp_path / "bnpjax_demo_fm.nc").stat().st_size > 0
    rng = np.random.default_rng(0)
    table = np.stack([rng.integers(0, 30, 400), rng.integers(0, 20, 400), rng.integers(1, 6, 400)])
    lines = ["user,item,rating"] + [",".join(map(str, row)) for row in table.T]
    (tmp_path / "train.csv").write_text("\n".join(lines[:301]) + "\n")
    (tmp_path / "test.csv").write_text("\n".join([lines[0], *lines[301:]]) + "\n")
    out = tmp_path / "fm.nc"
    rc = main(
        ["fit", "fm", "--train", str(tmp_path / "train.csv"), "--test", str(tmp_path / "test.csv"),
         "--rank", "2", "--out", str(out), *argv]
    )  # fmt: skip
    assert rc == 0
    assert "test RMSE" in capsys.readouterr().out
    idata = az.from_netcdf(str(out))
    assert idata.sample_stats["yhat_test"].shape == (1, 20, 100)
    (tmp_path / "bad.csv").write_text("user,item,rating\n1.5,2,3\n")
    assert main(["fit", "fm", "--data", str(tmp_path / "bad.csv"), *argv]) == 2
    err = capsys.readouterr().err  # the option's name as documented (--train is its alias)
    assert err.startswith("bnpjax: error: --data:"), err
    assert "line 2, column 'user': 1.5 is not an id" in err


def test_demo_and_fit_ilfm(tmp_path, capsys):
    import arviz as az

    argv = ["--num-samples", "20", "--num-warmup", "20", "--num-chains", "1", "--no-progress"]
    assert main(["demo", "ilfm", "--out-dir", str(tmp_path), *argv]) == 0
    assert "held-out AUC" in capsys.readouterr().out
    assert (tmp_path / "bnpjax_demo_ilfm_links.png").stat().st_size > 0
    # two relations among 12 entities, as 'source target relation' rows
    rng = np.random.default_rng(0)
    edges = np.stack([rng.integers(0, 12, 40), rng.integers(0, 12, 40), rng.integers(0, 2, 40)])
    edges = edges[:, edges[0] != edges[1]]
    (tmp_path / "edges.tsv").write_text("\n".join("\t".join(map(str, e)) for e in edges.T))
    out = tmp_path / "ilfm.nc"
    scale = ["--ridge", "--sigma-w-prior", "2,2", "--mass", "fisher"]
    rc = main(["fit", "ilfm", "--data", str(tmp_path / "edges.tsv"), "--out", str(out), *argv,
               *scale])  # fmt: skip
    assert rc == 0
    printed = capsys.readouterr().out
    assert "12 entities, 2 relations" in printed and "sigma_w" in printed
    posterior = az.from_netcdf(str(out)).posterior
    assert posterior["F"].shape[:3] == (1, 20, 12) and posterior["sigma_w"].shape == (1, 20)
    assert main(["fit", "ilfm", "--data", str(tmp_path / "edges.tsv"), "--sigma-w-prior", "2"]) == 2
    assert "--sigma-w-prior must be SHAPE,SCALE" in capsys.readouterr().err
    (tmp_path / "bad.tsv").write_text("0\t1\n2\t-1\n")
    assert main(["fit", "ilfm", "--data", str(tmp_path / "bad.tsv"), *argv]) == 2
    assert "line 2, column 'c2': -1 is not an id" in capsys.readouterr().err


def test_demo_and_fit_wmmsb(tmp_path, capsys):
    argv = ["--num-samples", "30", "--no-progress"]
    assert main(["demo", "wmmsb", "--out-dir", str(tmp_path), *argv]) == 0
    assert "held-out AUC-ROC" in capsys.readouterr().out
    assert (tmp_path / "bnpjax_demo_wmmsb.nc").stat().st_size > 0
    assert (tmp_path / "bnpjax_demo_wmmsb.png").stat().st_size > 0
    edges = tmp_path / "edges.tsv"
    edges.write_text("# source target count\na\tb\t3\nb\tc\t1\nc\ta\t2\nc\td\t5\n")
    out = tmp_path / "net.nc"
    rc = main(["fit", "wmmsb", "--data", str(edges), "--K", "2", "--out", str(out), *argv])
    assert rc == 0 and out.stat().st_size > 0
    edges.write_text("a\tb\t-2\n")
    assert main(["fit", "wmmsb", "--data", str(edges), *argv]) == 2
    assert "weights" in capsys.readouterr().err
