"""WMMSB-bg on a weighted network (the UC Irvine message counts, ``fb_uc``), by CVB0.

10% of the node pairs are held out (unobserved, never zeros); a held-out pair's score is the
posterior predictive probability of at least one message, and AUC-ROC compares the held-out
pairs with messages against those without."""

import jax
import numpy as np

from bnpjax.datasets import load_network
from bnpjax.infer import run
from bnpjax.metrics import roc_auc
from bnpjax.models import wmmsb


def main():
    net = load_network("fb_uc")
    N = net.n_nodes
    rng = np.random.default_rng(0)
    src, dst = rng.integers(0, N, (2, 4 * N))
    pairs = np.stack([src, dst], 1)[src != dst]
    if not net.directed:
        pairs = np.sort(pairs, axis=1)  # one orientation per undirected pair
    held = np.unique(pairs, axis=0)  # (M, 2) held-out pairs

    def key(a, b):
        return (a, b) if net.directed else (min(a, b), max(a, b))

    held_keys = {key(a, b) for a, b in held}
    train = np.array([key(a, b) not in held_keys for a, b in zip(net.src, net.dst, strict=True)])
    data = wmmsb.make_network(
        N,
        net.src[train],
        net.dst[train],
        net.weight[train],
        directed=net.directed,
        unobserved=held,
    )
    K = 10
    hyper = wmmsb.make_hyper(K, likelihood="bg")
    result = run(wmmsb.cvb0(data, hyper, likelihood="bg"), jax.random.key(0), 100)
    s = jax.tree_util.tree_map(lambda x: x[0], result.final_state)
    p_link = np.asarray(
        wmmsb.link_probability(
            held[:, 0], held[:, 1], s.n_node, s.n_y, s.n_phi, s.r, s.p, hyper, "bg"
        )
    )
    linked_keys = {key(a, b) for a, b in zip(net.src, net.dst, strict=True)}
    linked = np.array([key(a, b) in linked_keys for a, b in held])
    print(f"{N} nodes, {len(net.src)} links; {len(held)} held-out pairs, {linked.sum()} with links")
    print(f"held-out AUC of P(link) {roc_auc(linked, p_link):.4f} (K = {K}, 100 CVB0 passes)")


if __name__ == "__main__":
    main()
