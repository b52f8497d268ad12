"""Traced programs kept on disk (bnpjax.infer.traced_programs): a second process loads what the
first traced and draws the same; the key changes with everything tracing depends on, and is
refused where something cannot be fingerprinted; a damaged file is traced again."""

import importlib
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnpjax.infer import traced_programs

_PROGRAM = """
import jax, numpy as np, bnpjax
from bnpjax.infer import traced_programs
from bnpjax.models import linear_regression as lr
data = lr.make_data(np.linspace(-1, 1, 24)[:, None] ** np.arange(2), np.linspace(0, 2, 24))
idata = bnpjax.sample(lr.gibbs(data), jax.random.key(3), 20, num_warmup=5, num_chains=2,
                      progress_bar=False)
stats = traced_programs.stats()
print(stats["stored"], stats["loaded"], repr(float(idata.posterior["beta"].values.sum())))
"""


def _run(tmp_path, **env_extra):
    chosen = ("JAX_COMPILATION_CACHE_DIR", "BNPJAX_CACHE_DIR", traced_programs.ENABLE_VARIABLE)
    env = {k: v for k, v in os.environ.items() if k not in chosen}
    env.update(env_extra, JAX_PLATFORMS="cpu", BNPJAX_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    stored, loaded, draws = out.stdout.strip().splitlines()[-1].split()
    return int(stored), int(loaded), draws


def test_a_second_process_loads_the_traced_programs_and_draws_the_same(tmp_path):
    stored, loaded, draws = _run(tmp_path)
    assert stored == 2 and loaded == 0  # the init and the chunk
    files = sorted(os.listdir(tmp_path / "cache" / "traced"))
    assert len(files) == 2
    assert _run(tmp_path) == (0, 2, draws)
    assert sorted(os.listdir(tmp_path / "cache" / "traced")) == files
    # chains split over two devices (one program per device, pinned output shardings): other
    # programs, stored and loaded the same way, and the same draws
    two = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    assert _run(tmp_path, **two) == (2, 0, draws)
    assert _run(tmp_path, **two) == (0, 2, draws)
    # the switch of this layer alone, and a damaged file: traced again, the same draws
    assert _run(tmp_path, **{traced_programs.ENABLE_VARIABLE: "off"}) == (0, 0, draws)
    for name in files:
        (tmp_path / "cache" / "traced" / name).write_bytes(b"bnpjax-traced-program-1\nnot it")
    assert _run(tmp_path) == (2, 0, draws)
    # what the key must see, changed between processes: stored anew, never loaded
    stored, loaded, draws64 = _run(tmp_path, JAX_ENABLE_X64="1")
    assert (stored, loaded) == (2, 0) and draws64 != draws


def _key(fn, *, shape=(3,), dtype=jnp.float32, setting=1):
    return traced_programs.program_key("chunk", (fn, setting), (jnp.zeros(shape, dtype),))


def test_the_key_follows_code_settings_globals_and_arguments(monkeypatch):
    scale = importlib.import_module("bnpjax.models.m3f.scale")
    gibbs = importlib.import_module("bnpjax.models.m3f.gibbs")
    base = _key(gibbs._step)
    assert base is not None and base == _key(gibbs._step)
    assert _key(scale._rw_log_scales) != base
    assert _key(gibbs._step, setting=2) != base
    assert _key(gibbs._step, shape=(4,)) != base
    assert _key(gibbs._step, dtype=jnp.int32) != base
    # a constant read by a function the step calls, through its module
    monkeypatch.setattr(scale, "SCALE_STEPS", (0.1, 0.2))
    assert _key(gibbs._step) not in (None, base)
    monkeypatch.undo()
    assert _key(gibbs._step) == base
    # a function replaced by another of bnpjax's changes the key; by one of the user's, there
    # is no key (it could change between processes unseen)
    monkeypatch.setattr(scale, "_scale_items", scale._scale_users)
    assert _key(gibbs._step) not in (None, base)
    monkeypatch.setattr(scale, "_scale_items", lambda *a, **k: None)
    assert _key(gibbs._step) is None
    monkeypatch.undo()
    # a library function replaced through its module is seen too
    monkeypatch.setattr(jax.random, "uniform", lambda *a, **k: None)
    assert _key(gibbs._step) is None


def test_no_key_for_what_cannot_be_fingerprinted():
    def mine(x):
        return x

    assert _key(mine) is None
    assert _key(object()) is None
    # the user's values are fingerprinted by value: arrays by their bytes
    assert _key(np.arange(3)) != _key(np.arange(1, 4))


def test_the_key_holds_64_bit_mode():
    gibbs = importlib.import_module("bnpjax.models.m3f.gibbs")
    before = _key(gibbs._step)
    with jax.enable_x64(not jax.config.jax_enable_x64):
        assert _key(gibbs._step) != before


@pytest.mark.parametrize("size", [3])
def test_the_folder_is_capped(tmp_path, monkeypatch, size):
    for i in range(size):
        path = tmp_path / f"{i}.exported"
        path.write_bytes(b"x" * 100)
        os.utime(path, (i, i))
    monkeypatch.setattr(traced_programs, "MAX_BYTES", 250)
    traced_programs._evict(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["1.exported", "2.exported"]


def _in_bnpjax(source):
    """A function as if defined in a bnpjax module (walked by its code)."""
    namespace = {"__name__": "bnpjax.fake_module"}
    exec(source, namespace)
    return namespace["f"]


def test_the_key_sees_the_code_itself():
    first = _in_bnpjax("def f(s):\n    return s.alpha - s.beta\n")
    second = _in_bnpjax("def f(s):\n    return s.beta - s.alpha\n")
    assert None not in (_key(first), _key(second)) and _key(first) != _key(second)
    assert _key(_in_bnpjax("def f(x):\n    return max(x)\n")) != _key(
        _in_bnpjax("def f(x):\n    return min(x)\n")
    )
    # a library's closure made at run time says nothing by its name: refused
    assert _key(jax.vmap(jnp.sum, in_axes=0)) is None
    assert _key(jnp.sum) is not None


_PREDICTION = """
import numpy as np, scipy.sparse as sp
from bnpjax.fm import FMRegressor
from bnpjax.infer import traced_programs
rng = np.random.default_rng(0)
X = sp.csr_matrix((rng.random((30, 6)) < 0.4).astype(float))
y = rng.normal(size=30)
model = FMRegressor(rank=2, random_state=0).fit(X, y, n_iter=6, n_kept_samples=3)
after_fit = dict(traced_programs.stats())
predicted = model.predict(X)
stats = traced_programs.stats()
print(stats["stored"] - after_fit["stored"], stats["loaded"] - after_fit["loaded"],
      repr(float(predicted.sum())))
"""


def test_a_prediction_program_is_loaded_by_a_second_process(tmp_path):
    """Programs outside the driver (bnpjax.infer.programs.jit: predictions, variational
    chunks) are stored and loaded the same way: the FM's prediction, with a static row count
    passed by position."""
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR",)}
    env.update(JAX_PLATFORMS="cpu", BNPJAX_CACHE_DIR=str(tmp_path / "cache"))
    env.pop(traced_programs.ENABLE_VARIABLE, None)

    def run():
        out = subprocess.run(
            [sys.executable, "-c", _PREDICTION], env=env, capture_output=True, text=True,
            check=True,
        )  # fmt: skip
        stored, loaded, total = out.stdout.strip().splitlines()[-1].split()
        return int(stored), int(loaded), total

    stored, loaded, total = run()
    assert stored >= 1 and loaded == 0
    assert run() == (0, stored, total)


def test_programs_jit_takes_static_arguments_either_way_and_runs_inside_a_trace():
    from bnpjax.infer.programs import jit

    @jit(static_argnames="n")
    def scaled(x, n, offset=0.0):
        return x * n + offset

    x = jnp.arange(3.0)
    np.testing.assert_array_equal(scaled(x, 2), 2 * x)
    np.testing.assert_array_equal(scaled(x, n=2), 2 * x)
    np.testing.assert_array_equal(scaled(x, 3, offset=1.0), 3 * x + 1)
    assert scaled._cache_size() == 3  # by position and by name differ, as in jax.jit
    # called inside another traced function it is traced into it
    np.testing.assert_array_equal(jax.jit(lambda v: scaled(v, 4))(x), 4 * x)
    np.testing.assert_array_equal(jax.grad(lambda v: scaled(v, 5).sum())(x), np.full(3, 5.0))


def _reference_kernels():
    import pathlib

    folder = pathlib.Path(__file__).parents[1] / "reference"
    for path in sorted(folder.glob("[!_]*.py")):
        for name, build in importlib.import_module(f"reference.{path.stem}").CASES.items():
            yield pytest.param(build, id=name)


@pytest.mark.parametrize("build", list(_reference_kernels()))
def test_every_models_kernel_has_a_key(build):
    """Every sampler of the package can be stored: its kernel functions fingerprint (a
    function that reads numpy and ``jax.random`` together once led the key to numpy's
    ``random.random``, and the FM's programs were traced again in every process)."""
    from bnpjax.infer import SamplingAlgorithm, driver, programs

    algorithm, _ = build()
    if not isinstance(algorithm, SamplingAlgorithm):
        pytest.skip("a variational fit: its programs are not the driver's")
    dynamic, static = programs._partition(driver._kernel_functions(algorithm))
    assert traced_programs.program_key("chunk", (static,), (dynamic,)) is not None
