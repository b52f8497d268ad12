"""``bnpjax fit ... --checkpoint PATH [--resume]``: a fit killed with SIGKILL and resumed
writes the whole chain, bit-identical to an uninterrupted run; checkpoint options that cannot
work are refused before anything is read or compiled."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import bnpjax
from bnpjax.cli import main
from bnpjax.testing import float_precision

# `bnpjax fit` in a subprocess, its checkpoint writer slowed so that the test can kill it
# between two chunks (nothing else is changed: the command is bnpjax.cli.main)
_KILLED_FIT = """
import sys, time
from bnpjax.infer.checkpoint import CheckpointWriter

real_save = CheckpointWriter.save

def slow_save(self, *args, **kwargs):
    real_save(self, *args, **kwargs)
    print("saved", flush=True)
    time.sleep(0.3)

CheckpointWriter.save = slow_save
from bnpjax.cli import main
sys.exit(main(sys.argv[1:]))
"""

_SAMPLING = ["--num-samples", "40", "--num-warmup", "4", "--num-chains", "2", "--seed", "5",
             "--no-progress"]  # fmt: skip


def _csv(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = X @ [1.0, -1.0] + 0.5 * rng.normal(size=30)
    path = tmp_path / "data.csv"
    np.savetxt(path, np.column_stack([X, y]), delimiter=",", header="x1,x2,y", comments="")
    return path


def _fit(data, out, *extra):
    return ["fit", "linreg", "--data", str(data), "--out", str(out), *_SAMPLING, *extra]


@pytest.fixture
def float32():
    """The command's own precision (the suite runs in float64; the subprocess does not)."""
    with float_precision("float32"):
        yield


def test_a_fit_killed_with_sigkill_resumes_to_the_whole_chain(tmp_path, capsys, float32):
    data, checkpoint = _csv(tmp_path), tmp_path / "run" / "fit.npz"
    root = str(Path(bnpjax.__file__).parents[1])  # this checkout's bnpjax
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    killed = _fit(data, tmp_path / "killed.nc", "--checkpoint", str(checkpoint))
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_FIT, *killed], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        saves = 0
        while saves < 4:  # warmup, then some chunks of draws
            line = proc.stdout.readline()
            assert line, "the fit ended before it could be killed"
            saves += line.strip() == "saved"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "killed.nc").exists()

    resumed, whole = tmp_path / "resumed.nc", tmp_path / "whole.nc"
    args = _fit(data, resumed, "--checkpoint", str(checkpoint), "--resume")
    assert main(args) == 0, capsys.readouterr().err
    assert main(_fit(data, whole)) == 0, capsys.readouterr().err
    capsys.readouterr()
    a, b = xr.open_dataset(resumed, group="posterior"), xr.open_dataset(whole, group="posterior")
    assert a.sizes["draw"] == 40
    for name in ("beta", "sigma", "tau"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
    # the finished run cannot be resumed again: its draws are all made
    assert main(args) == 2
    assert "had made all its draws" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--resume"], "--resume needs --checkpoint"),
        (["--checkpoint", "{tmp}/fit.bin"], r"must end in \.npz"),
        (["--checkpoint", "{tmp}/none.npz", "--resume"], "no checkpoint at"),
    ],
)
def test_checkpoint_options_that_cannot_work_are_refused(tmp_path, capsys, extra, message):
    extra = [e.format(tmp=tmp_path) for e in extra]
    compiled = bnpjax.infer.compile_count()
    assert main(_fit(_csv(tmp_path), tmp_path / "out.nc", *extra)) == 2
    err = capsys.readouterr().err
    assert err.startswith("bnpjax: error:") and len(err.strip().splitlines()) == 1
    assert __import__("re").search(message, err), err
    assert bnpjax.infer.compile_count() == compiled


def test_a_variational_fit_refuses_checkpoints(tmp_path, capsys):
    edges = tmp_path / "edges.txt"
    edges.write_text("0 1\n1 2\n")
    rc = main(["fit", "wmmsb", "--data", str(edges), "--out", str(tmp_path / "w.nc"),
               "--checkpoint", str(tmp_path / "w.npz")])  # fmt: skip
    assert rc == 2
    assert "variational fit" in capsys.readouterr().err
