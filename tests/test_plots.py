"""bnpjax.plots: every figure draws from plain arrays, has a title and labelled axes, marks
the truth and the held-out entries it is given, and saves."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from bnpjax import plots


def _saves(fig, tmp_path, name):
    fig.savefig(tmp_path / name)
    plt.close(fig)
    assert (tmp_path / name).stat().st_size > 0


def test_figures(tmp_path):
    from bnpjax.datasets import BARS_FEATURES, planted_network, planted_relations

    rng = np.random.default_rng(0)
    fig = plots.plot_features({"true": BARS_FEATURES, "fit": BARS_FEATURES[:3]})
    assert fig.axes[0].get_ylabel() == "true" and fig.axes[-1].get_label() == "<colorbar>"
    _saves(fig, tmp_path, "features.png")
    sim = planted_relations(0, num_entities=8, num_relations=1)
    fig = plots.plot_links(sim["Y"][0], rng.random((8, 8)), heldout=sim["heldout"][0],
                           truth=sim["probabilities"][0])  # fmt: skip
    titles = [ax.get_title() for ax in fig.axes]
    assert {"observed links", "true P(link)", "posterior P(link)"} <= set(titles)
    assert sum(ax.get_label() == "<colorbar>" for ax in fig.axes) == 3
    ringed = [c for ax in fig.axes for c in ax.collections if c.get_label() == "held out"]
    assert len(ringed) == 2 and len(ringed[0].get_offsets()) == sim["heldout"][0].sum()
    _saves(fig, tmp_path, "links.png")
    fig = plots.plot_links(rng.random((5, 5)) < 0.5, rng.random((5, 5)), labels=list("abcde"))
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list("abcde")
    _saves(fig, tmp_path, "bare.png")
    net = planted_network(0, num_nodes=30, num_blocks=3)
    theta = np.eye(3)[net["blocks"]][:, [2, 0, 1]]  # the classes, permuted
    fig = plots.plot_memberships(theta, np.eye(3)[[2, 0, 1]][:, [2, 0, 1]],
                                 true_blocks=net["blocks"], true_rates=net["rates"])  # fmt: skip
    shown = fig.axes[0].images[0].get_array()
    np.testing.assert_array_equal(shown, np.eye(3))  # classes put in the order of the blocks
    _saves(fig, tmp_path, "blocks.png")
    _saves(plots.plot_memberships(theta, rng.random((3, 3))), tmp_path, "blocks_bare.png")
    fig = plots.plot_memberships(theta, np.diag([0.01, 1.0, 100.0]), log_rates=True)
    assert fig.axes[0].images[0].norm.vmin == 0.01  # the smallest positive rate, not 0
    _saves(fig, tmp_path, "blocks_log.png")


def test_plot_trace_and_thresholds(tmp_path):
    import arviz as az

    rng = np.random.default_rng(0)
    idata = az.from_dict(
        posterior={"x": rng.normal(size=(2, 50)), "v": rng.normal(size=(2, 50, 3))}
    )
    fig = plots.plot_trace(idata, ["x", "v"], truth={"x": 0.0, "v": [0, 1, 2]}, title="t")
    assert fig._suptitle.get_text() == "t"
    truth_lines = [
        line for ax in fig.axes for line in ax.get_lines() if line.get_color() == plots.TRUTH_COLOR
    ]
    assert len(truth_lines) == 2 * (1 + 3)  # density and trace, per element
    assert fig.axes[-1].get_xlabel() and fig.axes[0].get_ylabel() == "density"
    (legend,) = fig.legends  # the chains' line styles and the truth, below the panels
    assert [t.get_text() for t in legend.get_texts()] == ["chain 0", "chain 1", "truth"]
    _saves(fig, tmp_path, "trace.png")
    theta = np.sort(rng.normal(size=(2, 20, 7, 4)), axis=-1)
    fig = plots.plot_thresholds(az.from_dict(posterior={"theta": theta}))
    (ax,) = fig.axes
    assert len(ax.collections) == 4 and len(ax.get_lines()) == 4  # one set of bars per threshold
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    _saves(fig, tmp_path, "thresholds.png")
    fig = plots.plot_thresholds(az.from_dict(posterior={"theta": theta}), max_users=3)
    assert len(fig.axes[0].get_lines()[0].get_xdata()) == 3  # 3 of the 7 users
    assert "3 of 7 users" in fig.axes[0].get_xlabel()
