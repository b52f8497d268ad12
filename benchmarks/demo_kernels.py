"""The data and kernels of the ``bnpjax demo`` commands, for the benchmark scripts that time
them outside the command (``cpu_devices.py``, ``cpu_library_fusions.py``, ``thinned_runs.py``):
one place, so that the scripts follow the demos' settings."""

from __future__ import annotations


def bars_data():
    """The IBP demo's 'bars' images (seed 0) as ``ibp_lg`` data."""
    from bnpjax.datasets import bars
    from bnpjax.models import ibp_lg

    sim = bars(0)
    return ibp_lg.make_data(sim["X"], sim["mask"])


def ilfm_kernel():
    """The ILFM demo's planted network (seed 0, held-out pairs masked) and its tempered
    sampler (the command's leapfrog steps, merge-split moves and temperatures)."""
    from bnpjax.cli import ilfm as demo
    from bnpjax.datasets import planted_relations
    from bnpjax.models import ilfm

    sim = planted_relations(0, num_entities=40, num_relations=3)
    data = ilfm.make_data(sim["Y"], mask=~sim["heldout"])
    return ilfm.gibbs(data, capacity=8, init_strategy="cluster", num_init_features=2,
                      num_leapfrog=demo.DEMO_LEAPFROG, merge_split=demo.DEMO_MERGE_SPLIT,
                      temperatures=demo.DEMO_TEMPERATURES)  # fmt: skip


def m3f_data():
    """The M3F demo's training ratings (150 users x 120 items, 5 levels, seed 0) and its
    hyperparameters (C = 0.3, margin 1)."""
    from bnpjax.datasets import ordinal_ratings
    from bnpjax.models import m3f

    sim = ordinal_ratings(0, num_users=150, num_items=120, rank=3, num_levels=5)
    train = ~sim["test"]
    data = m3f.make_data(sim["users"][train], sim["items"][train], sim["levels"][train],
                         150, 120, 5, margin=1.0)  # fmt: skip
    return data, m3f.make_hyper(5, C=0.3, margin=1.0)


def fm_data(train_only: bool = False):
    """The FM demo's generated ratings (200 users x 150 items, rank 3, seed 0) as a one-hot
    design; ``train_only``: without the demo's test rows."""
    from bnpjax.cli.fm import _ratings_design
    from bnpjax.datasets import factorization_ratings
    from bnpjax.models import fm

    sim = factorization_ratings(0, num_users=200, num_items=150, rank=3)
    X, y = _ratings_design(sim["users"], sim["items"], 200, 150), sim["y"]
    return fm.make_data(X[~sim["test"]], y[~sim["test"]]) if train_only else fm.make_data(X, y)
