"""Checkpoints: a run resumed from disk draws exactly what the uninterrupted run draws."""

import jax
import numpy as np
import pytest

import bnpjax
from bnpjax.datasets import synthetic
from bnpjax.infer import load_checkpoint, resume, save_checkpoint
from bnpjax.models import ibp_lg, ilfm


def _ibp(capacity=32, **kwargs):
    bars = synthetic.bars(1, num_obs=24)
    return ibp_lg.parallel_gibbs(ibp_lg.make_data(bars["X"]), capacity=capacity, **kwargs)


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
    rest = resume(ckpt, 6, progress_bar=False)
    for name in ("Z", "sigma_x", "alpha"):
        joined = np.concatenate([first.posterior[name].values, rest.posterior[name].values], 1)
        np.testing.assert_array_equal(joined, whole.posterior[name].values)


def test_checkpoint_keeps_a_grown_buffer(tmp_path):
    # a buffer of 1 and alpha = 10: the driver grows it; the checkpoint records the growth
    # and loading it into the small kernel resizes that kernel
    key = jax.random.key(5)
    small = _ibp(capacity=1, num_init_features=1, alpha=10.0, sample_alpha=False)
    whole = bnpjax.sample(small, key, 10, progress_bar=False)
    path = tmp_path / "grown.npz"
    first = bnpjax.infer.run(small, key, 5, progress_bar=False, checkpoint_path=path)
    assert first.algorithm.capacity > 1
    ckpt = load_checkpoint(path, small)
    assert ckpt.algorithm.capacity == first.algorithm.capacity
    rest = resume(ckpt, 5, progress_bar=False)
    width = rest.posterior["Z"].shape[-1]
    tail = whole.posterior["Z"].values[:, 5:, :, :width]
    np.testing.assert_array_equal(rest.posterior["Z"].values, tail)


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

    real_save = driver_module.save_checkpoint

    def save_then_crash(*args, **kwargs):
        real_save(*args, **kwargs)
        raise _Crash

    monkeypatch.setattr(driver_module, "save_checkpoint", save_then_crash)
    path = tmp_path / "warm.npz"
    with pytest.raises(_Crash):
        bnpjax.infer.run(
            algorithm, key, 3, num_warmup=4, num_chains=2, progress_bar=False, chunk_size=2,
            checkpoint_path=path,
        )  # fmt: skip
    monkeypatch.undo()
    ckpt = load_checkpoint(path, algorithm)
    assert ckpt.start_step == 2 and ckpt.num_warmup_left == 2
    resumed = resume(ckpt, 3, progress_bar=False)
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
        load_checkpoint(path, ibp_lg.collapsed_gibbs(ibp_lg.make_data(np.zeros((24, 36)))))
    other = ibp_lg.parallel_gibbs(ibp_lg.make_data(np.zeros((10, 36))), capacity=32)
    with pytest.raises(ValueError, match="state array"):
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
