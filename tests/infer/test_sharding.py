"""Runs over several devices (bnpjax.infer.sharding): chains and rows split over four forced
host devices give the draws of a one-device run, reuse their programs, grow, checkpoint and
resume. The checks run in a fresh process (tests/infer/sharding_worker.py) because XLA fixes
the number of host devices at start-up."""

import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest
from jax.sharding import Mesh
from tiers import LONG, long_only

from bnpjax.infer import make_mesh
from bnpjax.infer.sharding import resolve_devices, usable_cores

WORKER = pathlib.Path(__file__).with_name("sharding_worker.py")


# the worker's --long adds the row-parallel IBP sampler over a 2 x 2 mesh, M3F's ratings and
# WMMSB's pairs split over the devices: about four more core-minutes with an empty compilation
# cache on the 2-core CI machine, so they run in the long tier (rows split over devices stay
# checked in every run, with the factorization machine's)
@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    path = tmp_path_factory.mktemp("sharded") / "run.npz"
    done = subprocess.run(
        [sys.executable, str(WORKER), str(path)] + (["--long"] if LONG else []),
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_chains_spread_over_devices_give_the_one_device_draws(four_devices):
    chains = four_devices["chains"]
    assert four_devices["devices"] == 4 and chains["num_devices"] == 4
    assert chains["layout"].startswith("P('chain'")
    assert chains["resizes"] >= 1  # the buffer grew while sharded
    assert chains["recompiles"] == 0  # a second fit of the same shapes reuses the programs
    # each device runs its own chains' start and chunks, meeting the others once per chunk
    assert chains["collectives_in_loops"] == 0


def test_chains_that_do_not_divide_the_devices_use_a_divisor(four_devices):
    assert four_devices["odd_chains"]["num_devices"] == 3


def test_rows_split_over_devices(four_devices):
    # the design's rows over a (1, 4) mesh: the same draws as on one device
    assert four_devices["fm_rows"]["max_rel_diff"] < 1e-4


@long_only("four core-minutes")
def test_rows_of_every_model_split_over_devices(four_devices):
    assert four_devices["ibp_rows"]["layout"] == "P('chain', 'data')"
    assert four_devices["m3f_ratings"]["layout"].startswith("P('chain'")
    assert four_devices["wmmsb_pairs"]["max_rel_diff"] < 1e-4  # a variational fit


def test_a_sharded_run_resumes_from_its_checkpoint(four_devices):
    assert four_devices["resume"]["layout"].startswith("P('chain'")


def test_one_device_is_the_plain_run():
    assert resolve_devices(None, 4) is None or jax.local_device_count() > 1
    assert resolve_devices(jax.devices()[:1], 4) is None


@pytest.mark.parametrize(
    "devices, match",
    [
        ("gpu", "devices must be None"),
        ([], "must not be empty"),
        ([jax.devices()[0]] * 2, "twice"),
        (Mesh(np.array(jax.devices()[:1]), ("rows",)), "axes must be named"),
    ],
)
def test_bad_devices_are_refused(devices, match):
    with pytest.raises(ValueError, match=match):
        resolve_devices(devices, 4)


def test_make_mesh_checks_its_sizes():
    with pytest.raises(ValueError, match="num_chain_shards"):
        make_mesh(0)
    with pytest.raises(ValueError, match="mesh needs"):
        make_mesh(jax.device_count() + 1)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def test_two_processes_fit_one_fm_together(tmp_path):
    """jax.distributed over localhost with CPU collectives: two processes run the chains of
    one FM fit, one chain each, and get the one-process draws (to rounding)."""
    worker = pathlib.Path(__file__).with_name("processes_worker.py")
    out = tmp_path / "two.npz"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    # the free port is picked here and bound by the coordinator later: on a busy machine
    # another process can take it in between, so a bind failure tries another port
    for _attempt in range(3):
        port = str(_free_port())
        procs = [
            subprocess.Popen(
                [sys.executable, str(worker), str(i), "2", port, str(out)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        errors = [p.communicate(timeout=600)[1] for p in procs]
        if not any("address already in use" in e.lower() for e in errors):
            break
    if any(p.returncode for p in procs):
        if any("gloo" in e.lower() and "not" in e.lower() for e in errors):
            pytest.skip(f"this platform lacks JAX's gloo CPU collectives: {errors[0][-300:]}")
        raise AssertionError(errors[0][-3000:] + errors[1][-3000:])
    single = tmp_path / "one.npz"
    done = subprocess.run(
        [sys.executable, str(worker), "0", "1", "0", str(single)], env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    two, one = np.load(out), np.load(single)
    assert sorted(two.files) == sorted(one.files)
    for name in one.files:
        np.testing.assert_allclose(two[name], one[name], rtol=1e-4, atol=1e-4, err_msg=name)


def _fresh(code: str, **env_vars) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("BNPJAX_CPU_DEVICES", "NPROC")}
    env["XLA_FLAGS"] = " ".join(
        f for f in env.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f
    )
    env.update(env_vars)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )


def test_use_cpu_cores_splits_the_cpu_before_jax_starts():
    done = _fresh(
        "import warnings, jax\n"
        "from bnpjax.infer import use_cpu_cores\n"
        "print(use_cpu_cores(3), len(jax.devices('cpu')))\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    print(use_cpu_cores(2), [str(x.message) for x in w])\n"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    first, late = done.stdout.strip().splitlines()
    assert first == "3 3"
    assert late.startswith("3 ") and "already running" in late  # too late: said, unchanged


def test_batched_lapack_calls_on_every_device_finish():
    """Each device's program factorizes a large batch (jaxlib's QR hands the batch's pieces to
    XLA's CPU thread pool and waits) on one device per core: with the default pool, one
    thread per core, every thread waited and the run stopped at 0 % CPU (the M3F row draws
    on two devices); use_cpu_cores widens the pool, and leaves a size the user chose."""
    cores = usable_cores()
    count = max(2, cores)
    code = (
        "import os, jax, jax.numpy as jnp\nfrom bnpjax.infer import use_cpu_cores\n"
        f"n = use_cpu_cores({count})\n"
        "step = lambda i, x: x + 1e-3 * jnp.tanh(jnp.sum(jnp.linalg.qr(x, mode='r')))\n"
        "f = jax.pmap(lambda x: jax.lax.fori_loop(0, 100, step, x))\n"
        "x = jax.random.normal(jax.random.key(0), (n, 4096, 30, 6))\n"
        "print(n, os.environ.get('NPROC'), bool(jnp.isfinite(f(x)).all()))"
    )
    done = _fresh(code)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [str(count), str(cores + count), "True"]
    chosen = _fresh("import os\nfrom bnpjax.infer import use_cpu_cores\n"
                    "use_cpu_cores(2)\nprint(os.environ['NPROC'])", NPROC="7")  # fmt: skip
    assert chosen.stdout.split() == ["7"], chosen.stderr[-3000:]


def test_xla_flags_win_over_use_cpu_cores():
    done = _fresh(
        "import os, jax\nfrom bnpjax.infer import use_cpu_cores\n"
        "print(use_cpu_cores(3, quiet=True), len(jax.devices('cpu')), os.environ['NPROC'])",
        XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # the pool is widened for the 2 devices XLA_FLAGS forces (widen_cpu_thread_pool)
    assert done.stdout.split() == ["2", "2", str(usable_cores() + 2)]


def test_the_command_runs_chains_on_the_cores(tmp_path):
    """``bnpjax`` splits the CPU (here into 2 devices by BNPJAX_CPU_DEVICES) and the driver
    spreads the chains over them; without the variable only the models that set CPU_CORES
    split; a bad value is one line naming the variable."""
    code = (
        "import sys, jax\nfrom bnpjax.cli import main\n"
        "status = main(sys.argv[1:])\nprint('devices', len(jax.devices('cpu')))\n"
        "sys.exit(status)"
    )
    args = ["demo", "linreg", "--num-samples", "20", "--num-warmup", "10", "--num-chains", "2",
            "--out-dir", str(tmp_path)]  # fmt: skip
    done = _fresh(code.replace("sys.argv[1:]", repr(args)), BNPJAX_CPU_DEVICES="2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "devices 2"
    import xarray as xr

    with xr.open_dataset(tmp_path / "bnpjax_demo_linreg.nc", group="posterior") as posterior:
        assert int(posterior.attrs["num_devices"]) == 2  # the run's chains were split
    plain = _fresh(code.replace("sys.argv[1:]", repr(args)))
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert plain.stdout.strip().splitlines()[-1] == "devices 1"  # linreg does not set CPU_CORES
    from bnpjax.cli import load

    assert all(load(name).CPU_CORES for name in ("ilfm", "fm", "ibp", "m3f"))
    # the ILFM's tempered chains take two devices per core, the others one
    from bnpjax.cli import _cpu_devices
    from bnpjax.infer.sharding import usable_cores

    assert _cpu_devices(load("ilfm")) == 2 * usable_cores()
    assert _cpu_devices(load("fm")) == usable_cores()
    bad = _fresh(code.replace("sys.argv[1:]", repr(args)), BNPJAX_CPU_DEVICES="two")
    assert bad.returncode == 2 and "BNPJAX_CPU_DEVICES" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
