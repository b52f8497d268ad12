"""bnpjax.plots: every figure draws from plain arrays and saves."""

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
    from bnpjax.datasets import BARS_FEATURES

    rng = np.random.default_rng(0)
    fig = plots.plot_features({"true": BARS_FEATURES, "fit": BARS_FEATURES[:3]})
    assert fig.axes[0].get_ylabel() == "true" and len(fig.axes) == 8
    _saves(fig, tmp_path, "features.png")
    _saves(plots.plot_links(rng.random((5, 5)) < 0.5, rng.random((5, 5))), tmp_path, "links.png")
    theta = rng.dirichlet(np.ones(3), size=10)
    _saves(plots.plot_memberships(theta, rng.random((3, 3))), tmp_path, "blocks.png")


def test_plot_trace(tmp_path):
    import arviz as az

    idata = az.from_dict(posterior={"x": np.random.default_rng(0).normal(size=(2, 50))})
    _saves(plots.plot_trace(idata, ["x"]), tmp_path, "trace.png")
