"""Checks of runs over several devices, run by tests/infer/test_sharding.py in a fresh
process with forced host devices (XLA reads the device count once, at start-up).

``python sharding_worker.py PATH`` runs the chains, the rows of a factorization machine and a
resumed checkpoint; ``--long`` adds the row-parallel IBP sampler over a 2 x 2 mesh, M3F's
ratings and WMMSB's pairs (each compiles its own programs twice, one device and the mesh:
about four core-minutes with an empty compilation cache)."""

import json
import re
import sys

import jax
import numpy as np

import bnpjax
from bnpjax.datasets import bars, planted_network
from bnpjax.infer import make_mesh, programs
from bnpjax.infer.driver import run
from bnpjax.models import fm, ibp_lg, linear_regression, m3f, wmmsb

DISCRETE = ("Z", "num_features")


def compare(one, many) -> dict:
    """Discrete draws equal, continuous ones equal to rounding (see bnpjax.infer.sharding)."""
    worst = 0.0
    for group, variables in one.trace.items():
        for name, a in variables.items():
            b = many.trace[group][name]
            assert a.shape == b.shape, (group, name, a.shape, b.shape)
            if not np.issubdtype(a.dtype, np.floating) or name in DISCRETE:
                assert np.array_equal(a, b), f"{group}/{name} differs"
            else:
                scale = np.maximum(np.abs(a), 1.0)
                worst = max(worst, float(np.max(np.abs(a - b) / scale)))
    assert worst < 1e-4, worst
    return {"max_rel_diff": worst}


def collectives_in_loops() -> int:
    """Cross-device collectives outside the entry computation of the compiled programs that
    run chains apart (one per device): each would make the devices meet at every iteration
    of a loop, as the capacity flags once did at every draw."""
    count = 0
    for key, program in programs._COMPILED.items():
        if key[0] in ("init", "chunk") and key[1][-1] is True:
            for computation in re.split(r"\n\n+", program.as_text()):
                if not computation.startswith("ENTRY"):
                    count += len(
                        re.findall(r" all-(?:reduce|gather|to-all)(?:-start)?\(", computation)
                    )
    return count


def layout(result) -> str:
    return str(jax.tree_util.tree_leaves(result.final_state)[0].sharding.spec)


def main():
    out = {"devices": jax.device_count()}
    key = jax.random.key(0)
    kw = dict(progress_bar=False, num_warmup=4, chunk_size=5)
    one_device = jax.devices()[:1]

    # chains over the devices, capacity growth included (capacity 2 < the 4 bars)
    X = bars(seed=0, num_obs=40)["X"]
    kernel = grown = ibp_lg.collapsed_gibbs(ibp_lg.make_data(X), capacity=2)
    one = run(kernel, key, 8, num_chains=4, devices=one_device, **kw)
    many = whole = run(kernel, key, 8, num_chains=4, **kw)
    out["chains"] = compare(one, many) | {
        "layout": layout(many),
        "resizes": many.settings["num_resizes"],
        "num_devices": many.settings["num_devices"],
        "collectives_in_loops": collectives_in_loops(),
    }
    before = bnpjax.infer.compile_count()
    run(kernel, jax.random.key(1), 8, num_chains=4, **kw)
    out["chains"]["recompiles"] = bnpjax.infer.compile_count() - before

    # 6 chains on 4 devices: split 3 ways (a chain is never split)
    lr = linear_regression.gibbs(
        linear_regression.make_data(np.asarray(X[:, :3]), np.asarray(X[:, 4]))
    )
    many = run(lr, key, 6, num_chains=6, **kw)
    out["odd_chains"] = compare(run(lr, key, 6, num_chains=6, devices=one_device, **kw), many)
    out["odd_chains"]["num_devices"] = many.settings["num_devices"]

    # FM with its targets split by row
    rng = np.random.default_rng(0)
    design = np.zeros((60, 9))
    design[np.arange(60), rng.integers(0, 4, 60)] = 1.0
    design[np.arange(60), 4 + rng.integers(0, 5, 60)] = 1.0
    y = rng.normal(size=60)
    kernel = fm.gibbs(fm.make_data(design, y), rank=2)
    one = run(kernel, key, 6, num_chains=2, devices=one_device, **kw)
    many = run(kernel, key, 6, num_chains=2, devices=make_mesh(1, 4), **kw)
    out["fm_rows"] = compare(one, many)

    # a sharded run checkpointed, then resumed over the devices: the whole chain comes back
    # (the chains' kernel: its programs, grown buffer included, are compiled already)
    path = sys.argv[1]
    run(grown, key, 4, num_chains=4, checkpoint_path=path, **kw)
    checkpoint = bnpjax.infer.load_checkpoint(path, grown)
    rest = bnpjax.infer.resume(checkpoint, 4, progress_bar=False, check_convergence=False)
    for name in ("Z", "alpha", "sigma_x"):
        assert np.array_equal(rest.posterior[name].values, whole.trace["posterior"][name]), name
    out["resume"] = {"layout": layout(whole)}
    if "--long" in sys.argv:
        out.update(long_checks(key, X, kw, one_device, rng))
    json.dump(out, sys.stdout)


def long_checks(key, X, kw, one_device, rng) -> dict:
    out = {}
    # data split by rows (2 chain groups x 2 row groups) for the row-parallel IBP sampler
    kernel = ibp_lg.parallel_gibbs(ibp_lg.make_data(X), capacity=8, init_sweeps=0)
    one = run(kernel, key, 6, num_chains=2, devices=one_device, **kw)
    many = run(kernel, key, 6, num_chains=2, devices=make_mesh(2, 2), **kw)
    out["ibp_rows"] = compare(one, many) | {"layout": layout(many)}

    # Gibbs M3F with its ratings (and their augmentation) split
    users, items = np.divmod(rng.choice(120, 80, replace=False), 10)
    data = m3f.make_data(users, items, rng.integers(1, 4, 80), 12, 10, 3)
    kernel = m3f.gibbs(data, rank=2)
    one = run(kernel, key, 6, num_chains=2, devices=one_device, **kw)
    many = run(kernel, key, 6, num_chains=2, devices=make_mesh(2, 2), **kw)
    out["m3f_ratings"] = compare(one, many) | {"layout": layout(many)}
    # WMMSB CVB0 (a variational fit) with its pairs split
    net = planted_network(0, num_nodes=40)
    data = wmmsb.make_data(net["Y"], mask=~net["heldout"])
    algorithm = wmmsb.cvb0(data, wmmsb.make_hyper(3), chunk=64)
    one = bnpjax.fit(algorithm, key, 5, progress_bar=False)
    many = bnpjax.fit(algorithm, key, 5, progress_bar=False, devices=make_mesh(1, 4))
    worst = 0.0
    for name, a in one.posterior.data_vars.items():
        b = many.posterior[name].values
        worst = max(worst, float(np.max(np.abs(a.values - b) / np.maximum(np.abs(a.values), 1))))
    assert worst < 1e-4, worst
    out["wmmsb_pairs"] = {"max_rel_diff": worst}
    return out


if __name__ == "__main__":
    main()
