"""The persistent compilation cache: on by default in the user's cache folder, moved or turned
off by BNPJAX_CACHE_DIR, never overriding a JAX setting, and used by a second process."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bnpjax import compilation_cache

_PROGRAM = """
import jax, jax.numpy as jnp, bnpjax, sys
from bnpjax.compilation_cache import cache_dir
print(cache_dir())
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
f = jax.jit(lambda x: jnp.cumsum(jnp.sin(x) ** 2) @ x)
f(jnp.ones(37)).block_until_ready()
"""


def _run(env_extra, tmp_path):
    chosen = ("JAX_COMPILATION_CACHE_DIR", "BNPJAX_CACHE_DIR", "XDG_CACHE_HOME")
    env = {k: v for k, v in os.environ.items() if k not in chosen}
    env.update(env_extra, JAX_PLATFORMS="cpu", HOME=str(tmp_path / "home"))
    out = subprocess.run(
        [sys.executable, "-c", _PROGRAM], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def test_default_folder_second_process_reads_it_and_the_switches(tmp_path):
    folder = _run({}, tmp_path)
    assert folder == str(tmp_path / "home" / ".cache" / "bnpjax" / "xla")
    written = sorted(os.listdir(folder))
    assert written, "the first process wrote no compiled program"
    _run({}, tmp_path)  # same program: found, nothing new written
    assert sorted(os.listdir(folder)) == written

    moved = tmp_path / "elsewhere"
    assert _run({"BNPJAX_CACHE_DIR": str(moved)}, tmp_path) == str(moved)
    assert _run({"BNPJAX_CACHE_DIR": "off"}, tmp_path) == "None"
    mine = tmp_path / "mine"
    assert _run({"JAX_COMPILATION_CACHE_DIR": str(mine)}, tmp_path) == str(mine)


def test_a_file_is_not_a_cache_folder(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="path must be a folder"):
        compilation_cache.set_compilation_cache(tmp_path / "file")


def test_cpu_programs_compile_at_llvm_level_1_unless_told_otherwise(monkeypatch):
    from bnpjax.infer import programs

    classic = {"xla_cpu_use_fusion_emitters": False}
    monkeypatch.delenv(compilation_cache.OPT_LEVEL_VARIABLE, raising=False)
    monkeypatch.setenv("XLA_FLAGS", "")
    assert programs.compiler_options() == {"xla_backend_optimization_level": 1, **classic}
    monkeypatch.setenv(compilation_cache.OPT_LEVEL_VARIABLE, "3")
    assert programs.compiler_options() == {"xla_backend_optimization_level": 3, **classic}
    monkeypatch.setenv(compilation_cache.OPT_LEVEL_VARIABLE, "default")
    assert programs.compiler_options() is None
    monkeypatch.setenv(compilation_cache.OPT_LEVEL_VARIABLE, "fast")
    with pytest.raises(ValueError, match=compilation_cache.OPT_LEVEL_VARIABLE):
        programs.compiler_options()
    # the user's XLA flags win, each for its own option (the test suite sets the level)
    monkeypatch.delenv(compilation_cache.OPT_LEVEL_VARIABLE)
    monkeypatch.setenv("XLA_FLAGS", "--xla_backend_optimization_level=2")
    assert programs.compiler_options() == classic
    monkeypatch.setenv(
        "XLA_FLAGS", "--xla_backend_optimization_level=2 --xla_cpu_use_fusion_emitters=true"
    )
    assert programs.compiler_options() is None


def test_an_option_the_installed_xla_does_not_know_is_dropped(monkeypatch):
    """A later jaxlib may retire the emitter switch: the fit compiles without it and the
    option is not passed again, instead of every fit failing."""
    from bnpjax.infer import programs

    monkeypatch.setattr(programs, "_FUSION_EMITTERS_OPTION", "xla_cpu_no_such_option_here")
    monkeypatch.setattr(programs, "_UNKNOWN_OPTIONS", set())
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.delenv(compilation_cache.OPT_LEVEL_VARIABLE, raising=False)
    assert "xla_cpu_no_such_option_here" in programs.compiler_options()
    lowered = jax.jit(lambda x: 2 * x).lower(jnp.ones(3))
    assert np.allclose(programs.compile_lowered(lowered)(jnp.ones(3)), 2.0)
    assert programs._UNKNOWN_OPTIONS == {"xla_cpu_no_such_option_here"}
    assert programs.compiler_options() == {"xla_backend_optimization_level": 1}
    # the same through the jit of the programs outside the driver
    monkeypatch.setattr(programs, "_UNKNOWN_OPTIONS", set())
    assert np.allclose(programs.jit(lambda x: 3 * x)(jnp.ones(3)), 3.0)
    assert programs._UNKNOWN_OPTIONS == {"xla_cpu_no_such_option_here"}
    # any other compile error still surfaces
    monkeypatch.setattr(
        programs, "compiler_options", lambda extra=(): {"xla_backend_optimization_level": "x"}
    )
    with pytest.raises(Exception):  # noqa: B017 - jaxlib's error type varies by release
        programs.compile_lowered(lowered)


def test_a_kernels_own_options_reach_xla_and_key_its_programs(monkeypatch):
    """``SamplingAlgorithm.compiler_options`` are added to the driver's (a user's XLA flag
    wins), compiled in (an option XLA refuses is reported by name: it got there), and part of
    the program cache's key (other options: another program; the same: none compiled)."""
    import bnpjax
    from bnpjax.infer import programs
    from bnpjax.models import fm, m3f
    from bnpjax.models import linear_regression as lr

    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.delenv(compilation_cache.OPT_LEVEL_VARIABLE, raising=False)
    monkeypatch.setattr(programs, "_UNKNOWN_OPTIONS", set())
    name, value = programs.WITHOUT_YNN_FUSIONS[0]
    assert programs.compiler_options(programs.WITHOUT_YNN_FUSIONS)[name] == value
    monkeypatch.setenv("XLA_FLAGS", f"--{name}=dot")
    assert name not in programs.compiler_options(programs.WITHOUT_YNN_FUSIONS)
    monkeypatch.setenv("XLA_FLAGS", "")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    algorithm = lr.gibbs(lr.make_data(X, X.sum(1)))
    options = dict(num_warmup=5, progress_bar=False)
    bnpjax.sample(algorithm, jax.random.key(0), 5, **options)
    before = programs.compile_count()
    bnpjax.sample(algorithm, jax.random.key(1), 5, **options)
    assert programs.compile_count() == before
    odd = algorithm._replace(compiler_options=(("xla_cpu_no_such_option_for_a_kernel", 1),))
    bnpjax.sample(odd, jax.random.key(1), 5, **options)
    assert programs.compile_count() > before
    assert programs._UNKNOWN_OPTIONS == {"xla_cpu_no_such_option_for_a_kernel"}
    # the kernels measured faster without YNNPACK's fusions ask for that
    ratings = np.arange(12)
    m3f_data = m3f.make_data(ratings % 4, ratings % 3, ratings % 5 + 1, 4, 3, 5)
    assert m3f.gibbs(m3f_data, rank=2).compiler_options == programs.WITHOUT_YNN_FUSIONS
    fm_data = fm.make_data(np.eye(12)[:, :5], ratings.astype(float))
    assert fm.gibbs(fm_data, rank=2).compiler_options == programs.WITHOUT_YNN_FUSIONS


def _after_import(program, **extra):
    """The last line ``program`` prints in a fresh process that imports bnpjax, with none of
    bnpjax's XLA settings inherited from this one."""
    own = ("XLA_FLAGS", compilation_cache.OPT_LEVEL_VARIABLE, compilation_cache.SMALL_LOOP_VARIABLE)
    env = {k: v for k, v in os.environ.items() if k not in own}
    env.update(extra, JAX_PLATFORMS="cpu", BNPJAX_CACHE_DIR="off")
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return out.stdout.strip().splitlines()[-1]


def _flags_after_import(**extra):
    return _after_import("import os, bnpjax; print(os.environ.get('XLA_FLAGS'))", **extra)


SMALL_LOOPS = (
    "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold="
    f"{compilation_cache.CPU_SMALL_LOOP_BYTES}"
)


def test_import_sets_llvm_level_1_for_the_cpu_unless_told_otherwise():
    assert _flags_after_import() == f"--xla_backend_optimization_level=1 {SMALL_LOOPS}"
    assert _flags_after_import(BNPJAX_XLA_CPU_OPT_LEVEL="default") == SMALL_LOOPS
    mine = "--xla_backend_optimization_level=2"
    assert _flags_after_import(XLA_FLAGS=mine) == f"{mine} {SMALL_LOOPS}"


def test_import_lets_xla_run_small_loops_as_one_function_unless_told_otherwise():
    """The threshold reaches XLA: a loop whose body touches 8 kB compiles into one function
    (XLA marks its call ``xla_cpu_small_call``) with bnpjax's threshold, and not with XLA's
    own 1024 bytes; a user's size, or backend options of their own, win."""

    assert _flags_after_import(BNPJAX_XLA_CPU_SMALL_LOOP_BYTES="default") == (
        "--xla_backend_optimization_level=1"
    )
    assert _flags_after_import(BNPJAX_XLA_CPU_SMALL_LOOP_BYTES="4096").endswith(
        "xla_cpu_small_while_loop_byte_threshold=4096"
    )
    mine = "--xla_backend_extra_options=xla_cpu_fold_all_constants=true"
    assert _flags_after_import(XLA_FLAGS=mine) == f"{mine} --xla_backend_optimization_level=1"
    program = (
        "import bnpjax, jax, jax.numpy as jnp\n"
        "def f(x):\n"
        "    return jax.lax.fori_loop(0, 10, lambda i, x: jnp.sin(x) + i, x)\n"
        "text = jax.jit(f).lower(jnp.ones(2048)).compile().as_text()\n"
        "print('xla_cpu_small_call' in text)"
    )
    assert _after_import(program) == "True"
    assert _after_import(program, BNPJAX_XLA_CPU_SMALL_LOOP_BYTES="default") == "False"


def test_a_bad_small_loop_size_warns_and_leaves_xla_alone():
    program = (
        "import os, warnings\n"
        "warnings.simplefilter('error')\n"
        "try:\n"
        "    import bnpjax\n"
        "except RuntimeWarning as w:\n"
        "    print(w)"
    )
    message = _after_import(program, BNPJAX_XLA_CPU_SMALL_LOOP_BYTES="lots")
    assert compilation_cache.SMALL_LOOP_VARIABLE in message and "'lots'" in message
    assert _flags_after_import(BNPJAX_XLA_CPU_SMALL_LOOP_BYTES="lots") == (
        "--xla_backend_optimization_level=1"
    )


def _entry(folder, name, size, used):
    path = folder / f"{name}-cache"
    path.write_bytes(b"x" * size)
    os.utime(path, (used, used))
    return path


def test_trim_deletes_the_least_recently_used_entries_once_a_day(tmp_path):
    old, older, new = (_entry(tmp_path, n, 100, t) for n, t in (("a", 2e9), ("b", 1e9), ("c", 3e9)))
    # JAX's own access-time file (written when JAX bounds the folder) counts as a use
    atime = tmp_path / "b-atime"
    atime.write_bytes(int(4e18).to_bytes(8, "little"))
    other = tmp_path / "traced"
    other.mkdir()
    assert compilation_cache.trim_cache(tmp_path, 250, every=0) == 1
    assert not old.exists() and older.exists() and new.exists()  # a: the least recent use
    assert other.exists()  # only JAX's entries are touched
    _entry(tmp_path, "d", 100, 5e9)
    assert compilation_cache.trim_cache(tmp_path, 250) == 0  # trimmed less than a day ago
    assert compilation_cache.trim_cache(tmp_path, 250, every=0) == 1
    assert not new.exists() and older.exists() and atime.exists()


def test_jax_does_not_scan_the_folder_at_every_write(tmp_path):
    # JAX's own bound lists every entry at each write (trim_cache's docstring): left off
    before = jax.config.jax_compilation_cache_max_size
    folder = compilation_cache.cache_dir()
    try:
        compilation_cache.set_compilation_cache(tmp_path / "cache")
        assert jax.config.jax_compilation_cache_max_size == -1
        assert (tmp_path / "cache" / ".bnpjax-trimmed").exists()
    finally:
        compilation_cache.set_compilation_cache(folder)
        jax.config.update("jax_compilation_cache_max_size", before)


@pytest.mark.parametrize(
    ("arguments", "name"),
    [({"max_bytes": -1}, "max_bytes"), ({"max_bytes": 1.5}, "max_bytes"),
     ({"every": float("nan")}, "every"), ({"every": -1}, "every")],
)  # fmt: skip
def test_trim_refuses_bad_arguments_naming_them(tmp_path, arguments, name):
    with pytest.raises(ValueError, match=name):
        compilation_cache.trim_cache(tmp_path, **arguments)
    with pytest.raises(ValueError, match="folder"):
        compilation_cache.trim_cache(tmp_path / "missing")
