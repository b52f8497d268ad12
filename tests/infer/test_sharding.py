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

from bnpjax.infer import make_mesh
from bnpjax.infer.sharding import resolve_devices

WORKER = pathlib.Path(__file__).with_name("sharding_worker.py")


@pytest.fixture(scope="module")
def four_devices(tmp_path_factory):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (
        env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"
    ).strip()
    path = tmp_path_factory.mktemp("sharded") / "run.npz"
    done = subprocess.run(
        [sys.executable, str(WORKER), str(path)],
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


def test_chains_that_do_not_divide_the_devices_use_a_divisor(four_devices):
    assert four_devices["odd_chains"]["num_devices"] == 3


def test_rows_split_over_devices(four_devices):
    assert four_devices["ibp_rows"]["layout"] == "P('chain', 'data')"
    assert "fm_rows" in four_devices


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
