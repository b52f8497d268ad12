"""Figures for fitted models: one function per figure, each returning a matplotlib Figure.

The functions draw with :mod:`matplotlib.pyplot` and leave saving and closing to the caller
(``fig.savefig(path)``, ``plt.close(fig)``); pick a backend first where there is no display
(``matplotlib.use("Agg")``), as the ``bnpjax`` command does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_features", "plot_links", "plot_memberships", "plot_trace"]


def plot_trace(idata, var_names: Sequence[str] | None = None):
    """Trace and marginal density of each variable (ArviZ's ``plot_trace``, compact).

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit's output, e.g. from :func:`bnpjax.sample`.
    var_names : sequence of str, optional
        The posterior variables to draw (default: all).

    Returns
    -------
    matplotlib.figure.Figure
    """
    from bnpjax.infer.arviz_adapter import import_arviz

    axes = import_arviz().plot_trace(idata, var_names=var_names, compact=True)
    fig = np.ravel(axes)[0].figure
    fig.tight_layout()
    return fig


def plot_features(
    panels: Mapping[str, np.ndarray],
    *,
    image_shape: tuple[int, int] = (6, 6),
    num_columns: int = 4,
    vmin: float = -0.2,
    vmax: float = 1.2,
    title: str = "bars: true and recovered features (matched up to permutation)",
):
    """Latent features drawn as images: one row per panel, one column per feature.

    Parameters
    ----------
    panels : mapping of str to array of shape (num_features, prod(image_shape))
        Row label -> features (e.g. ``{"true": A, "collapsed": A_hat}``); the first
        ``num_columns`` features of each are drawn.
    image_shape : (int, int)
        The shape of one feature as an image (6x6 for :func:`bnpjax.datasets.bars`).
    num_columns : int
        Features per row.
    vmin, vmax : float
        The grey scale's range.
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    num_rows = len(panels)
    fig, axes = plt.subplots(
        num_rows, num_columns, figsize=(1.5 * num_columns, 1.6 * num_rows), squeeze=False
    )
    for r, (label, features) in enumerate(panels.items()):
        for c in range(num_columns):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c < len(features):
                ax.imshow(np.reshape(features[c], image_shape), cmap="gray", vmin=vmin, vmax=vmax)
            if c == 0:
                ax.set_ylabel(label)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_links(
    links: np.ndarray,
    probabilities: np.ndarray,
    *,
    titles: tuple[str, str] = ("links, relation 0", "posterior P(link)"),
):
    """An observed link matrix beside the posterior link probabilities.

    Parameters
    ----------
    links : array of shape (N, N)
        Observed links of one relation (0/1; NaN for unobserved pairs is drawn blank).
    probabilities : array of shape (N, N)
        Posterior link probabilities of the same relation, e.g. from
        ``bnpjax.models.ilfm.posterior_link_probabilities``.
    titles : (str, str)
        The two panels' titles.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(8, 4))
    for ax, matrix, title in zip(axes, (links, probabilities), titles, strict=True):
        ax.imshow(matrix, cmap="Greys", vmin=0, vmax=1)
        ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_memberships(theta: np.ndarray, block_rate: np.ndarray):
    """A blockmodel fit: the block rates beside the node memberships sorted by class.

    Parameters
    ----------
    theta : array of shape (num_nodes, num_classes)
        Mixed memberships (rows sum to one).
    block_rate : array of shape (num_classes, num_classes)
        Posterior mean rates between classes.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    theta = np.asarray(theta)
    order = np.lexsort((-theta.max(1), theta.argmax(1)))
    fig, axes = plt.subplots(1, 2, figsize=(9, 4))
    axes[0].imshow(np.asarray(block_rate), cmap="viridis")
    axes[0].set_title("posterior mean block rates")
    axes[1].imshow(theta[order], aspect="auto", interpolation="nearest")
    axes[1].set_title("memberships (nodes sorted by class)")
    fig.tight_layout()
    return fig
