"""WMMSB-bg on a weighted network (the UC Irvine message counts, ``fb_uc``), by CVB0.

10% of the links and as many pairs without a link are held out (unobserved, never zeros); a
held-out pair's score is the posterior predictive probability of at least one message, and
AUC-ROC compares the held-out pairs with messages against those without. CVB0 is a
variational algorithm: ``bnpjax.fit`` runs it and returns InferenceData whose posterior holds
draws of the memberships ``theta`` and block rates ``phi`` from the CVB0 approximation, which
``wmmsb.predict`` turns into held-out link probabilities."""

import jax
import numpy as np

import bnpjax
from bnpjax.datasets import load_network
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb


def main():
    net = load_network("fb_uc")
    N = net.num_nodes
    rng = np.random.default_rng(0)

    def key(a, b):
        return (a, b) if net.directed else (min(a, b), max(a, b))

    linked_keys = {key(a, b) for a, b in zip(net.src, net.dst, strict=True)}
    # held out: 10% of the links and as many pairs without a link (the thesis' protocol)
    held_links = rng.random(len(net.src)) < 0.1
    held = [key(a, b) for a, b in zip(net.src[held_links], net.dst[held_links], strict=True)]
    held_zeros = set()
    while len(held_zeros) < len(held):
        a, b = (int(v) for v in rng.integers(0, N, 2))
        if a != b and key(a, b) not in linked_keys:
            held_zeros.add(key(a, b))
    held = np.array(held + sorted(held_zeros))  # (M, 2) held-out pairs
    train = ~held_links
    data = wmmsb.make_network(
        N,
        net.src[train],
        net.dst[train],
        net.weight[train],
        directed=net.directed,
        unobserved=held,
    )
    rank = 10
    hyper = wmmsb.make_hyper(rank, likelihood="bg")
    idata = bnpjax.fit(wmmsb.cvb0(data, hyper, likelihood="bg"), jax.random.key(0), 100)
    draws = wmmsb.predict(idata, data, (held[:, 0], held[:, 1]), hyper=hyper, likelihood="bg")
    p_link = draws.mean(axis=(0, 1))  # posterior predictive P(at least one message)
    linked = np.array([key(a, b) in linked_keys for a, b in held])
    print(f"{N} nodes, {len(net.src)} links; {len(held)} held-out pairs, {linked.sum()} with links")
    print(f"held-out AUC of P(link) {roc_auc(linked, p_link):.4f} (rank {rank}, 100 CVB0 passes)")


if __name__ == "__main__":
    main()
