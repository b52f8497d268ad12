"""Figures for fitted models: one function per figure, each returning a matplotlib Figure.

Every figure has a title, labelled axes and a colour bar where colour carries a value; the
truth is drawn where the caller knows it (``truth=...``), and held-out entries are marked.
The functions draw with :mod:`matplotlib.pyplot` and leave saving and closing to the caller
(``fig.savefig(path)``, ``plt.close(fig)``); pick a backend first where there is no display
(``matplotlib.use("Agg")``), as the ``bnpjax`` command does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["plot_features", "plot_links", "plot_memberships", "plot_thresholds", "plot_trace"]

#: the colour of the truth (lines, markers) in every figure
TRUTH_COLOR = "crimson"
#: the colour of held-out entries
HELDOUT_COLOR = "darkorange"


def plot_trace(
    idata,
    var_names: Sequence[str] | None = None,
    *,
    truth: Mapping[str, object] | None = None,
    title: str | None = None,
):
    """Marginal density and trace of each variable (ArviZ's ``plot_trace``, compact: the
    elements of a vector share a panel), with the true values where they are known.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit's output, e.g. from :func:`bnpjax.sample`.
    var_names : sequence of str, optional
        The posterior variables to draw (default: all).
    truth : mapping of str to float or array, optional
        True values by variable name, drawn as dashed lines (vertical on the density, across
        the trace); a vector draws one line per element.
    title : str, optional
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    from matplotlib.lines import Line2D

    from bnpjax.infer.arviz_adapter import import_arviz

    # ArviZ draws traces at alpha 0.35, which leaves a chain stuck at one value next to
    # invisible; its chains differ by line style, named in the legend below
    axes = np.atleast_2d(
        import_arviz().plot_trace(
            idata, var_names=var_names, compact=True, trace_kwargs={"alpha": 0.7}
        )
    )
    fig = axes[0, 0].figure
    truth = dict(truth or {})
    for row in axes:
        density, trace = row[0], row[1]
        name = density.get_title().split("\n")[0]
        density.set_ylabel("density")
        trace.set_ylabel("value")
        trace.margins(y=0.1)  # a constant trace at the edge of the panel is hard to see
        if name in truth:
            for value in np.ravel(truth[name]):
                density.axvline(value, color=TRUTH_COLOR, ls="--", lw=1.5)
                trace.axhline(value, color=TRUTH_COLOR, ls="--", lw=1.5)
    axes[-1, 0].set_xlabel("value")
    axes[-1, 1].set_xlabel("draw (chains overlaid)")
    handles = []
    num_chains = idata.posterior.sizes.get("chain", 1)
    if num_chains > 1:
        styles = ["solid", "dotted", "dashed", "dashdot"]  # ArviZ's, in its order
        handles += [
            Line2D([], [], color="gray", ls=styles[c % 4], label=f"chain {c}")
            for c in range(min(num_chains, 4))
        ]
    if truth:
        handles.append(Line2D([], [], color=TRUTH_COLOR, ls="--", label="truth"))
    if title:
        fig.suptitle(title)
    if handles:  # below the panels, where it hides no trace
        fig.legend(handles=handles, loc="lower center", fontsize="small", ncols=len(handles))
        fig.tight_layout(rect=(0, 0.4 / fig.get_figheight(), 1, 1))
    else:
        fig.tight_layout()
    return fig


def plot_thresholds(
    idata,
    var_name: str = "theta",
    *,
    interval: float = 0.9,
    max_users: int = 60,
    title: str = "user thresholds: posterior mean and interval",
):
    """Per-user ordinal thresholds (M3F's ``theta``) as posterior intervals: a point (the
    mean) and a bar (the interval) per user and threshold, users on the x axis sorted by
    their mean threshold, instead of one trace per user and threshold.

    Parameters
    ----------
    idata : arviz.InferenceData
        A fit whose posterior holds ``var_name`` of shape (chain, draw, user, threshold).
    var_name : str
        The thresholds' variable.
    interval : float
        The central posterior probability of each bar.
    max_users : int
        With more users than this, evenly spaced ones in the sorted order are drawn (a
        thousand intervals side by side read as noise); the x axis says which.
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    theta = np.asarray(idata.posterior[var_name].values)
    theta = theta.reshape(-1, *theta.shape[2:])  # (draws, users, thresholds)
    mean = theta.mean(0)
    tail = (1 - interval) / 2
    low, high = np.quantile(theta, [tail, 1 - tail], axis=0)
    order = np.argsort(mean.mean(1))
    num_users, num_thresholds = mean.shape
    shown = np.unique(np.linspace(0, num_users - 1, min(num_users, max_users)).round().astype(int))
    users = order[shown]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    colors = plt.cm.viridis(np.linspace(0.1, 0.9, num_thresholds))
    for level in range(num_thresholds):
        m = mean[users, level]
        bars = np.stack([m - low[users, level], high[users, level] - m])
        offset = (level - (num_thresholds - 1) / 2) * 0.12  # side by side where they overlap
        label = f"between levels {level + 1} and {level + 2}"
        ax.errorbar(np.arange(len(users)) + offset, m, yerr=bars, fmt="o", ms=3, lw=1,
                    color=colors[level], label=label)  # fmt: skip
    ax.set_xticks([])
    if len(users) < num_users:
        which = f"{len(users)} of {num_users} users, evenly spaced"
    else:
        which = f"{num_users} users"
    ax.set_xlabel(f"user, sorted by mean threshold ({which})")
    ax.set_ylabel(f"threshold {var_name} (score units)")
    ax.set_title(
        f"{title}\n(points: means; bars: {interval:.0%} intervals; {theta.shape[0]} draws)"
    )
    ax.legend(fontsize="small", loc="upper left")
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
        num_rows, num_columns, figsize=(1.5 * num_columns + 0.8, 1.6 * num_rows), squeeze=False
    )
    image = None
    for r, (label, features) in enumerate(panels.items()):
        for c in range(num_columns):
            ax = axes[r, c]
            ax.set_xticks([])
            ax.set_yticks([])
            if c >= len(features):
                ax.axis("off")  # a panel with fewer features: no empty frame
            else:
                image = ax.imshow(
                    np.reshape(features[c], image_shape), cmap="gray", vmin=vmin, vmax=vmax
                )
            if c == 0:
                ax.set_ylabel(label)
            if r == num_rows - 1:
                ax.set_xlabel(f"feature {c + 1}")
    fig.suptitle(title)
    fig.tight_layout()
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="feature weight (pixel value)")
    return fig


def plot_links(
    links: np.ndarray,
    probabilities: np.ndarray,
    *,
    heldout: np.ndarray | None = None,
    truth: np.ndarray | None = None,
    labels: Sequence[str] | None = None,
    title: str = "link prediction",
):
    """Observed links beside the posterior link probabilities (and the true ones where they
    are known), with the held-out pairs marked.

    Parameters
    ----------
    links : array of shape (N, N)
        Links of one relation (0/1; NaN for unobserved pairs is drawn blank).
    probabilities : array of shape (N, N)
        Posterior link probabilities of the same relation, e.g. from
        :func:`bnpjax.models.ilfm.predict`.
    heldout : array of bool, shape (N, N), optional
        The pairs the fit did not see: coloured on the links panel, ringed on the others.
    truth : array of shape (N, N), optional
        The true link probabilities, drawn as a middle panel.
    labels : sequence of str, optional
        The N entities' names, written along both axes (default: their indices).
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    links = np.asarray(links, float)
    panels = [("posterior P(link)", np.asarray(probabilities, float))]
    if truth is not None:
        panels.insert(0, ("true P(link)", np.asarray(truth, float)))
    fig, axes = plt.subplots(1, 1 + len(panels), figsize=(4.6 * (1 + len(panels)), 4.4))
    held = np.zeros(links.shape, bool) if heldout is None else np.asarray(heldout, bool)
    # links panel: 0 white, 1 black, held-out 0 / 1 in two shades of the held-out colour
    shown = np.where(held, 2 + np.nan_to_num(links), links)
    names = ["no link", "link", "held out,\nno link", "held out,\nlink"]
    count = 4 if held.any() else 2
    cmap = ListedColormap(["white", "black", "navajowhite", HELDOUT_COLOR][:count])
    image = axes[0].imshow(shown, cmap=cmap, vmin=-0.5, vmax=count - 0.5, interpolation="nearest")
    bar = fig.colorbar(image, ax=axes[0], shrink=0.8, ticks=range(count))
    bar.ax.set_yticklabels(names[:count], fontsize="small")
    axes[0].set_title("observed links")
    rows, cols = np.nonzero(held)
    for ax, (name, matrix) in zip(axes[1:], panels, strict=True):
        image = ax.imshow(matrix, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        fig.colorbar(image, ax=ax, shrink=0.8, label="P(link)")
        if held.any():
            ring = float(np.clip((150 / links.shape[0]) ** 2, 6, 60))  # bigger on small matrices
            ax.scatter(cols, rows, s=ring, marker="o", facecolors="none", edgecolors=HELDOUT_COLOR,
                       linewidths=0.6, label="held out")  # fmt: skip
        ax.set_title(name)
    for ax in axes:
        ax.set_xlabel("entity j (target)")
        ax.set_ylabel("entity i (source)")
        if labels is not None:
            ticks = np.arange(len(labels))
            ax.set_xticks(ticks, labels, rotation=90, fontsize="small")
            ax.set_yticks(ticks, labels, fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def _match_classes(theta: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """An order of the fitted classes that puts the class sharing most membership with true
    block ``b`` at position ``b`` (Hungarian assignment; unmatched classes go last)."""
    from scipy.optimize import linear_sum_assignment

    overlap = np.stack([theta[blocks == b].sum(0) for b in range(int(blocks.max()) + 1)])
    rows, cols = linear_sum_assignment(-overlap)
    matched = cols[np.argsort(rows)]
    return np.concatenate([matched, np.setdiff1d(np.arange(theta.shape[1]), matched)])


def plot_memberships(
    theta: np.ndarray,
    block_rate: np.ndarray,
    *,
    true_blocks: np.ndarray | None = None,
    true_rates: np.ndarray | None = None,
    log_rates: bool = False,
    title: str = "blockmodel fit",
):
    """A blockmodel fit: the block rates beside the node memberships sorted by class, with the
    true blocks (and rates) where they are known.

    Parameters
    ----------
    theta : array of shape (num_nodes, num_classes)
        Mixed memberships (rows sum to one).
    block_rate : array of shape (num_classes, num_classes)
        Posterior mean rates between classes (expected weight per pair).
    true_blocks : array of int, shape (num_nodes,), optional
        Every node's planted block: drawn as a strip beside the memberships, and used to put
        the fitted classes in the order of the blocks they match.
    true_rates : array of shape (num_blocks, num_blocks), optional
        The planted rates, drawn as a panel of their own.
    log_rates : bool
        Colour the rates on a log scale: on real networks one or two dense blocks can have
        rates a hundred times the others', which a linear scale paints all alike.
    title : str
        The figure's title.

    Returns
    -------
    matplotlib.figure.Figure
    """
    import matplotlib.pyplot as plt

    theta = np.asarray(theta, float)
    block_rate = np.asarray(block_rate, float)
    if true_blocks is not None:
        true_blocks = np.asarray(true_blocks, int)
        order = _match_classes(theta, true_blocks)
        theta, block_rate = theta[:, order], block_rate[np.ix_(order, order)]
    nodes = np.lexsort((-theta.max(1), theta.argmax(1)))
    num_rates = 1 if true_rates is None else 2
    strip = true_blocks is not None
    ratios = [1.0] * num_rates + ([0.08] if strip else []) + [1.0]
    fig, axes = plt.subplots(
        1, len(ratios), figsize=(4.4 * (num_rates + 1) + 0.6 * strip, 4.4),
        gridspec_kw={"width_ratios": ratios},
    )  # fmt: skip
    rate_panels = [(axes[0], block_rate, "posterior mean block rates")]
    if true_rates is not None:
        rate_panels.append((axes[1], np.asarray(true_rates, float), "true block rates"))
    vmax = max(float(np.max(m)) for _, m, _ in rate_panels)
    scale = {"vmin": 0, "vmax": vmax}
    if log_rates:
        from matplotlib.colors import LogNorm

        smallest = min(float(np.min(m[m > 0], initial=vmax)) for _, m, _ in rate_panels)
        scale = {"norm": LogNorm(vmin=max(smallest, vmax * 1e-6), vmax=vmax)}
    label = "expected weight per pair" + (" (log scale)" if log_rates else "")
    for ax, matrix, name in rate_panels:
        image = ax.imshow(matrix, cmap="viridis", **scale)
        fig.colorbar(image, ax=ax, shrink=0.8, label=label)
        ax.set_title(name)
        ax.set_xticks(range(matrix.shape[1]))
        ax.set_yticks(range(matrix.shape[0]))
        ax.set_xlabel("class" if matrix is block_rate else "block")
        ax.set_ylabel("class" if matrix is block_rate else "block")
    ax = axes[-1]
    image = ax.imshow(theta[nodes], aspect="auto", interpolation="nearest", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, shrink=0.8, label="membership")
    ax.set_title("memberships (nodes sorted by class)")
    ax.set_xticks(range(theta.shape[1]))
    ax.set_xlabel("class")
    if strip:
        axes[-2].imshow(true_blocks[nodes, None], aspect="auto", interpolation="nearest",
                        cmap="tab10", vmin=0, vmax=9)  # fmt: skip
        axes[-2].set_xticks([])
        axes[-2].set_title("true\nblock", fontsize="small")
        axes[-2].set_ylabel("node")
        ax.set_yticks([])
    else:
        ax.set_ylabel("node")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
