"""``bnpjax demo wmmsb`` and ``bnpjax fit wmmsb``: the weighted mixed-membership stochastic
blockmodel (``bnpjax.models.wmmsb``) fitted by CVB0; ``--num-samples`` counts CVB0 passes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from bnpjax.cli.inputs import add_header_argument
from bnpjax.cli.output import UsageError, save_figure, write_idata
from bnpjax.infer.checks import check_allocation

#: a variational fit: ``--checkpoint`` and ``--resume`` are refused
CHECKPOINTS = False
DEMO_HELP = "weighted MMSB (CVB0) on a planted count network"
FIT_HELP = "weighted MMSB by CVB0 on an edge list (source target [count]); --num-samples = passes"
DEMO_DEFAULTS = (150, 0, 1)
DATA_ALIASES = ()
DATA_HELP = "edge list: rows 'source target [count]', any node labels, '#' comments"


def _cvb0(network, args, heldout=None):
    """CVB0 fit of a :class:`bnpjax.datasets.Network` through :func:`bnpjax.infer.fit_run`.

    Returns the final state, the hyperparameters, the fit's InferenceData (draws of the
    memberships and block rates from the variational posterior, node labels as coords, the
    last pass's training log-likelihood in ``attrs``), the posterior mean memberships and
    block rates, and the training log-likelihood per pass."""
    import jax

    from bnpjax.infer.variational import fit_run, fit_to_inference_data
    from bnpjax.models import wmmsb

    weight = network.weight if args.likelihood != "bernoulli" else np.ones_like(network.weight)
    data = wmmsb.make_network(
        network.num_nodes,
        network.src,
        network.dst,
        weight,
        directed=network.directed,
        unobserved=heldout,
        likelihood=args.likelihood,
        zeros="dense",
    )
    hyper = wmmsb.make_hyper(args.K, likelihood=args.likelihood)
    algorithm = wmmsb.cvb0(
        data, hyper, likelihood=args.likelihood, store_gamma=False, pointwise_log_likelihood=False
    )
    result = fit_run(
        algorithm,
        jax.random.key(args.seed),
        args.num_samples,
        num_draws=100,
        progress_bar=not args.no_progress,
    )
    idata = fit_to_inference_data(result)
    idata.posterior = idata.posterior.assign_coords(node=list(network.labels))
    st = jax.device_get(result.state)
    theta = np.asarray(wmmsb.membership_means(st.n_node, hyper))
    block = np.asarray(wmmsb.block_means(st.n_y, st.n_phi, st.r, st.p, args.likelihood))
    return st, hyper, idata, theta, block, result.history["loglik"]


#: a CVB0 fit has settled when its training log-likelihood per pair moved less than this over
#: the last ``SETTLE_PASSES`` passes (relative to its change over the whole fit)
SETTLE_FRACTION = 0.01
SETTLE_PASSES = 10


def _fit_convergence(loglik) -> str:
    """The diagnostic of a variational fit, which is not a Markov chain (no R-hat, no ESS):
    how much its training log-likelihood per pair still moved over its last passes."""
    if loglik.size <= SETTLE_PASSES:
        return f"convergence: only {loglik.size} passes, too few to judge"
    last = abs(float(loglik[-1] - loglik[-1 - SETTLE_PASSES]))
    whole = max(abs(float(loglik[-1] - loglik[0])), 1e-12)
    verdict = (
        "OK (settled)"
        if last <= SETTLE_FRACTION * whole
        else "NOT SETTLED: run more passes (--num-samples)"
    )
    return (
        f"convergence (CVB0, {loglik.size} passes): training log-likelihood per pair "
        f"{float(loglik[-1]):.4f}, moved {last:.2e} over the last {SETTLE_PASSES} passes, "
        f"{last / whole:.1%} of its change over the fit - {verdict}"
    )


def demo(args) -> int:
    from bnpjax.datasets import Network, planted_network
    from bnpjax.metrics import roc_auc
    from bnpjax.models import wmmsb
    from bnpjax.plots import plot_memberships

    start = time.perf_counter()
    N, K = 300, 4
    sim = planted_network(args.seed, num_nodes=N, num_blocks=K)
    Y, test = sim["Y"], sim["heldout"]
    ii, jj = np.nonzero(Y * ~test)
    net = Network("planted", N, ii, jj, Y[ii, jj], False, [str(i) for i in range(N)])
    print("bnpjax demo: weighted MMSB (WMMSB-bg, CVB0) on a planted 4-block count network")
    print(f"data: {N} nodes, {int((Y > 0).sum())} weighted links, 10% of the pairs held out")
    args.K, args.likelihood = K, "bg"
    ti, tj = np.nonzero(test)
    state, hyper, idata, theta, block, loglik = _cvb0(net, args, heldout=np.stack([ti, tj], 1))
    score = wmmsb.expected_link_probability(state, hyper, ti, tj, likelihood="bg")
    print(f"held-out AUC-ROC: {roc_auc(Y[ti, tj] > 0, np.asarray(score)):.3f}")
    print(_fit_convergence(np.asarray(loglik)))
    out = Path(args.out_dir)
    nc = write_idata(idata, out / "bnpjax_demo_wmmsb.nc")
    png = save_figure(
        out / "bnpjax_demo_wmmsb.png",
        plot_memberships,
        theta,
        block,
        true_blocks=sim["blocks"],
        true_rates=sim["rates"],
        title=f"WMMSB (CVB0) on a planted {K}-block network",
    )
    print(f"total {time.perf_counter() - start:.1f} s")
    print(f"wrote {nc} and {png}")
    return 0


def add_fit_arguments(parser) -> None:
    parser.add_argument("--K", "--rank", type=int, default=10, help="number of classes")
    parser.add_argument(
        "--likelihood",
        choices=["bg", "nb", "bernoulli"],
        default="bg",
        help="bg: beta-geometric counts; nb: negative binomial counts; bernoulli: links only "
        "(counts ignored)",
    )
    parser.add_argument("--directed", action="store_true", help="edges are directed")
    add_header_argument(parser)


def fit(args) -> int:
    from bnpjax.datasets import read_edge_list
    from bnpjax.plots import plot_memberships

    if args.K < 1:
        raise UsageError("--K must be at least 1")
    header = False if args.no_header else None  # None: a first row of names is a header
    network = read_edge_list(args.data, directed=args.directed, header=header)
    # the memberships' statistics are (nodes, K) and the blocks' (K, K): refuse before allocating
    check_allocation((network.num_nodes + args.K, args.K), np.float64, "--K", copies=4)
    _, _, idata, theta, block, loglik = _cvb0(network, args)
    out = write_idata(idata, args.out)
    png = save_figure(
        out.with_suffix(".png"),
        plot_memberships,
        theta,
        block,
        title=f"WMMSB (CVB0, K = {args.K}) on {network.name}",
    )
    print(f"final mean training log-likelihood per pair: {float(loglik[-1]):.4f}")
    print(f"wrote {out} and {png} ({network.num_nodes} nodes)")
    return 0
