"""Checkpoints: a run resumed from disk draws exactly what the uninterrupted run draws."""

from pathlib import Path

import jax
import numpy as np
import pytest

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer import load_checkpoint, resume, save_checkpoint
from bnpjax.models import ibp_lg, ilfm


def _ibp(capacity=32, **kwargs):
    # the collapsed sampler: checkpoints are the driver's, and its programs compile in about
    # half the row-parallel sampler's time (this module took 400 s with an empty cache)
    bars = synthetic.bars(1, num_obs=24)
    return ibp_lg.collapsed_gibbs(ibp_lg.make_data(bars["X"]), capacity=capacity, **kwargs)


def _assert_same(a, b, names):
    for name in names:
        np.testing.assert_array_equal(a.posterior[name].values, b.posterior[name].values)


def test_resumed_run_continues_the_same_chains(tmp_path):
    key = jax.random.key(3)
    algorithm = _ibp()
    whole = bnpjax.sample(algorithm, key, 10, num_warmup=2, num_chains=2, progress_bar=False)
    path = tmp_path / "fit.npz"
    first = bnpjax.sample(
        algorithm,
        key,
        4,
        num_warmup=2,
        num_chains=2,
        progress_bar=False,
        chunk_size=2,
        checkpoint_path=path,
    )
    ckpt = load_checkpoint(path, algorithm)
    assert ckpt.start_step == 6 and ckpt.num_chains == 2 and ckpt.num_warmup_left == 0
    assert ckpt.num_draws == 4 and ckpt.num_samples_left == 0
    # the resumed run returns the whole chain: the 4 saved draws, then 6 more
    rest = resume(ckpt, 6, progress_bar=False)
    for name in ("Z", "sigma_x", "alpha"):
        np.testing.assert_array_equal(rest.posterior[name].values, whole.posterior[name].values)
        saved = first.posterior[name].values
        np.testing.assert_array_equal(rest.posterior[name].values[:, :4], saved)


def test_checkpoint_keeps_a_grown_buffer(tmp_path):
    # a buffer of 2 and alpha = 4: the driver grows it; the checkpoint records the growth
    # and loading it into the small kernel resizes that kernel
    key = jax.random.key(5)
    small = _ibp(capacity=2, num_init_features=1, alpha=4.0, sample_alpha=False)
    whole = bnpjax.sample(small, key, 10, progress_bar=False)
    path = tmp_path / "grown.npz"
    first = bnpjax.infer.run(small, key, 5, progress_bar=False, checkpoint_path=path)
    assert first.algorithm.capacity > 2  # it grew
    ckpt = load_checkpoint(path, small)
    assert ckpt.algorithm.capacity == first.algorithm.capacity
    rest = resume(ckpt, 5, progress_bar=False)
    width = rest.posterior["Z"].shape[-1]
    np.testing.assert_array_equal(
        rest.posterior["Z"].values, whole.posterior["Z"].values[..., :width]
    )


class _Crash(Exception):
    pass


def test_checkpoint_taken_during_warmup_finishes_the_warmup(tmp_path, monkeypatch):
    # ILFM adapts its step size in warmup only: a run that crashed mid-warmup must resume by
    # finishing the warmup, and then draw what the uninterrupted run draws
    import bnpjax.infer.driver as driver_module

    rng = np.random.default_rng(0)
    Y = (rng.random((1, 8, 8)) < 0.3).astype(float)
    algorithm = ilfm.gibbs(ilfm.make_data(Y), capacity=8, num_leapfrog=3)
    key = jax.random.key(2)
    whole = bnpjax.sample(algorithm, key, 3, num_warmup=4, num_chains=2, progress_bar=False)

    real_save = driver_module.CheckpointWriter.save

    def save_then_crash(*args, **kwargs):
        real_save(*args, **kwargs)
        raise _Crash

    monkeypatch.setattr(driver_module.CheckpointWriter, "save", save_then_crash)
    path = tmp_path / "warm.npz"
    with pytest.raises(_Crash):
        bnpjax.infer.run(
            algorithm, key, 3, num_warmup=4, num_chains=2, progress_bar=False, chunk_size=2,
            checkpoint_path=path,
        )  # fmt: skip
    monkeypatch.undo()
    ckpt = load_checkpoint(path, algorithm)
    assert ckpt.start_step == 2 and ckpt.num_warmup_left == 2
    assert ckpt.num_draws == 0 and ckpt.num_samples_left == 3
    resumed = resume(ckpt, progress_bar=False)
    for name in ("F", "W", "alpha"):
        np.testing.assert_array_equal(resumed.posterior[name].values, whole.posterior[name].values)


def test_checkpoint_bad_input(tmp_path):
    algorithm = _ibp()
    result = bnpjax.infer.run(algorithm, jax.random.key(0), 2, progress_bar=False)
    path = save_checkpoint(
        tmp_path / "a.npz", result.algorithm, result.final_state, result.num_steps,
        jax.random.key(0),
    )  # fmt: skip
    with pytest.raises(ValueError, match="kernel"):
        load_checkpoint(path, ibp_lg.parallel_gibbs(ibp_lg.make_data(np.zeros((24, 36)))))
    other = ibp_lg.collapsed_gibbs(ibp_lg.make_data(np.zeros((10, 36))), capacity=32)
    with pytest.raises(ValueError, match="the checkpoint's state"):
        load_checkpoint(path, other)
    with pytest.raises(ValueError, match=r"\.npz"):
        save_checkpoint(tmp_path / "a.bin", algorithm, result.final_state, 2, jax.random.key(0))
    with pytest.raises(ValueError, match="leading chain axis"):
        save_checkpoint(tmp_path / "b.npz", algorithm, {"x": np.float64(1.0)}, 2, 0)
    np.savez(tmp_path / "c.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="not a bnpjax checkpoint"):
        load_checkpoint(tmp_path / "c.npz", algorithm)
    with pytest.raises(ValueError, match="from the checkpoint"):
        resume(load_checkpoint(path, algorithm), 2, start_step=0)


# ---- issue 28: nothing lost, nothing unreadable accepted ---------------------------------------

_KILLED_RUN = """
import sys, time
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
import bnpjax
from bnpjax.infer.checkpoint import CheckpointWriter
from bnpjax.models import linear_regression as lr

real_save = CheckpointWriter.save

def slow_save(self, *args, **kwargs):  # room to be killed between chunks
    real_save(self, *args, **kwargs)
    print("saved", flush=True)
    time.sleep(0.3)

CheckpointWriter.save = slow_save
rng = np.random.default_rng(0)
X = rng.normal(size=(30, 2))
algorithm = lr.gibbs(lr.make_data(X, X @ [1.0, -1.0] + rng.normal(size=30)))
bnpjax.sample(algorithm, jax.random.key(4), 40, num_warmup=4, num_chains=2, chunk_size=2,
              progress_bar=False, checkpoint_path=sys.argv[1])
print("finished", flush=True)
"""


def _regression():
    from bnpjax.models import linear_regression as lr

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    return lr.gibbs(lr.make_data(X, X @ [1.0, -1.0] + rng.normal(size=30)))


def test_a_run_killed_with_sigkill_resumes_to_the_whole_chain(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    path = tmp_path / "killed.npz"
    script = tmp_path / "run.py"
    script.write_text(_KILLED_RUN)
    root = str(Path(bnpjax.__file__).parents[1])  # this checkout's bnpjax, not an installed one
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        saves = 0
        while saves < 6:  # 2 warmup chunks, then at least 4 chunks of draws
            line = proc.stdout.readline()
            assert line, "the run ended before it could be killed"
            saves += line.strip() == "saved"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    algorithm = _regression()
    ckpt = load_checkpoint(path, algorithm)
    assert 8 <= ckpt.num_draws < 40 and ckpt.num_samples_left == 40 - ckpt.num_draws
    resumed = resume(ckpt, progress_bar=False)
    whole = bnpjax.sample(
        algorithm, jax.random.key(4), 40, num_warmup=4, num_chains=2, progress_bar=False
    )
    for name in ("beta", "tau"):
        np.testing.assert_array_equal(resumed.posterior[name].values, whole.posterior[name].values)


def test_checkpoint_path_is_checked_before_anything_compiles(tmp_path):
    compiled = bnpjax.infer.compile_count()
    algorithm = _ibp()
    for bad, message in [
        (tmp_path / "fit.bin", r"must end in \.npz"),
        (tmp_path / "file.txt" / "fit.npz", "is not a folder"),
        (tmp_path, r"must end in \.npz"),
    ]:
        (tmp_path / "file.txt").write_text("x")
        with pytest.raises(ValueError, match=message):
            bnpjax.infer.run(algorithm, jax.random.key(0), 2, checkpoint_path=bad)
    assert bnpjax.infer.compile_count() == compiled
    from bnpjax.infer.checkpoint import check_checkpoint_path

    created = check_checkpoint_path(tmp_path / "new" / "deeper" / "fit.npz")
    assert created.parent.is_dir()


def _toy_checkpoint(tmp_path, data=(1.0, 2.0), name="toy.npz"):
    """A checkpoint of a tiny kernel with bound data, written without running anything."""
    import jax.numpy as jnp

    from bnpjax.infer import SamplingAlgorithm
    from bnpjax.infer.base import ArvizSpec, bind

    def init(data, key):
        return {"x": jnp.zeros(()) + data.sum()}

    def step(data, key, state):
        return state, {}

    algorithm = SamplingAlgorithm(
        init=bind(init, jnp.asarray(data)),
        step=bind(step, jnp.asarray(data)),
        spec=ArvizSpec(name="toy"),
    )
    state = jax.vmap(algorithm.init)(jax.random.split(jax.random.key(0), 2))
    draws = {"posterior": {"x": np.arange(6.0).reshape(2, 3)}}
    path = save_checkpoint(
        tmp_path / name, algorithm, state, 3, jax.random.key(1), draws=draws, num_samples_left=2
    )
    return path, algorithm, state


def test_checkpoint_keeps_the_draws_and_refuses_other_data(tmp_path):
    path, algorithm, _ = _toy_checkpoint(tmp_path)
    ckpt = load_checkpoint(path, algorithm)
    np.testing.assert_array_equal(ckpt.draws["posterior"]["x"], np.arange(6.0).reshape(2, 3))
    assert ckpt.num_draws == 3 and ckpt.num_samples_left == 2
    _, other, _ = _toy_checkpoint(tmp_path, data=(1.0, 5.0), name="other.npz")
    with pytest.raises(ValueError, match=r"other data or settings.*allow_other_data"):
        load_checkpoint(path, other)  # same kernel, same shapes, other data
    assert load_checkpoint(path, other, allow_other_data=True).num_draws == 3


def _rewrite(path, **changes):
    import json

    with np.load(path) as archive:
        arrays = dict(archive)
    meta = json.loads(str(arrays["meta"]))
    meta.update(changes.pop("meta", {}))
    arrays.update(changes, meta=np.asarray(json.dumps(meta)))
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("truncate", "cannot be read"),
        ("bitflip", "cannot be read"),
        ("empty", "cannot be read"),
        ("garbage", "cannot be read"),
        ({"meta": {"num_steps": -5}}, "num_steps is -5"),
        ({"meta": {"num_steps": 10**12}}, "num_steps is 1000000000000"),
        ({"meta": {"warmup_end": -1}}, "warmup_end is -1"),
        ({"meta": {"num_chains": 0}}, "num_chains is 0"),
        ({"leaf_0": np.array([np.nan, 1.0])}, "NaN or infinite values in"),
        ("draw_file", "draw file .* is damaged"),
        ("no_draw_file", "draw file .* is missing"),
    ],
)
def test_damaged_checkpoints_are_refused_saying_what_is_wrong(tmp_path, damage, message):
    path, algorithm, _ = _toy_checkpoint(tmp_path)
    raw = path.read_bytes()
    folder = path.with_suffix(".draws")
    if damage == "truncate":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "bitflip":
        flipped = bytearray(raw)
        position = raw.index(b"leaf_0.npy") + 10 + 128 + 3  # inside the stored state array
        flipped[position] ^= 0x10
        path.write_bytes(bytes(flipped))
    elif damage == "empty":
        path.write_bytes(b"")
    elif damage == "garbage":
        path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    elif damage == "draw_file":
        chunk = next(folder.glob("*.npz"))
        chunk.write_bytes(chunk.read_bytes()[:-10] + b"0123456789")
    elif damage == "no_draw_file":
        next(folder.glob("*.npz")).unlink()
    else:
        _rewrite(path, **damage)
    with pytest.raises(ValueError, match=message):
        load_checkpoint(path, algorithm)
