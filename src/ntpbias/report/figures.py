"""Matplotlib helpers: one paper-ready style, PNG + SVG output, and seed bands.

Every figure function takes saved results (metrics tables, arrays) and never retrains.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..io import atomic_path, ensure_dir  # noqa: E402
from ..results import Figure  # noqa: E402

STYLE = {
    "figure.dpi": 110,
    "savefig.dpi": 160,
    "font.size": 9,
    "axes.titlesize": 9,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",
    "svg.hashsalt": "ntpbias",
}


def new_figure(nrows: int = 1, ncols: int = 1, *, width: float = 3.2, height: float = 2.6, **kwargs):
    """A figure with ``nrows x ncols`` axes of ``width x height`` inches each, in the report style."""
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kwargs)
    return fig, axes


def styled():
    """A context in which new figures get the report style (for layouts :func:`new_figure` does not cover)."""
    return plt.rc_context(STYLE)


def save_to(fig, paths) -> None:
    """Write ``fig`` to each path (format from the suffix: png, svg or pdf) atomically; close the figure."""
    with plt.rc_context(STYLE):
        if fig.get_layout_engine() is None:
            fig.tight_layout()
        for path in map(Path, paths):
            ext = path.suffix.lstrip(".").lower()
            with atomic_path(path) as tmp:
                fig.savefig(tmp, format=ext, metadata={"Date": None} if ext == "svg" else None)
    plt.close(fig)


def save(fig, run_dir: str | Path, fig_id: str, title: str, caption: str) -> Figure:
    """Write ``figures/<fig_id>.png`` and ``.svg`` under ``run_dir`` atomically; close the figure."""
    folder = ensure_dir(Path(run_dir) / "figures")
    save_to(fig, [folder / f"{fig_id}.png", folder / f"{fig_id}.svg"])
    return Figure(fig_id, title, caption, f"figures/{fig_id}.png", f"figures/{fig_id}.svg")


def band(ax, x: np.ndarray, values: np.ndarray, *, label: str | None = None, color=None, logy: bool = False,
         **kwargs) -> None:
    """Plot the mean over seeds (columns of ``values``, shape (n_x, n_seeds)) with a min-max band when n_seeds > 1.

    On a log-y axis the mean is geometric.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    finite = np.isfinite(values).any(axis=1) & (np.all(values > 0, axis=1) if logy else True)
    x, values = np.asarray(x)[finite], values[finite]  # a diverged run's non-finite tail is not drawn
    if not len(x):
        return
    center = np.exp(np.nanmean(np.log(np.clip(values, 1e-300, None)), axis=1)) if logy else np.nanmean(values, axis=1)
    (line,) = ax.plot(x, center, label=label, color=color, **kwargs)
    if values.shape[1] > 1:
        ax.fill_between(x, np.nanmin(values, axis=1), np.nanmax(values, axis=1), color=line.get_color(), alpha=0.2,
                        linewidth=0)
    if logy:
        ax.set_yscale("log")
