"""Figures of the norms study (docs/optimizers.md), drawn from saved metrics only."""

from __future__ import annotations

import numpy as np

from ..results import series
from .figures import band, new_figure
from .plots import plot

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf"]
STYLES = ["-", "--", "-.", ":"]


@plot("optimizers.margins")
def margins_figure(rows: list[dict], runs: list[str], labels: dict[str, str], norms: list[str], entropy: float):
    """One panel per norm: the margin ratio of P_⊥(W_k) in that norm against steps, one curve per run; a last panel
    with CE(W_k) - H (log scale)."""
    panels = len(norms) + 1
    cols = 3
    fig, axes = new_figure((panels + cols - 1) // cols, cols, width=3.3, height=2.7)
    flat = axes.reshape(-1)
    for i, norm in enumerate(norms):
        ax = flat[i]
        for j, run in enumerate(runs):
            steps, values = series(rows, run, f"margin_ratio_{norm}")
            keep = steps >= 1
            if keep.any():
                band(ax, steps[keep], values[keep], color=COLORS[j % len(COLORS)], ls=STYLES[j // len(COLORS) % 4],
                     lw=1.2, label=labels.get(run, run))
        ax.axhline(1.0, color="k", lw=0.8, ls="--")
        ax.set(xscale="log", xlabel="step k", ylabel="margin / maximum", title=f"{norm} norm")
        lo = min(0.0, *(float(np.nanmin(series(rows, r, f"margin_ratio_{norm}")[1][-1:])) for r in runs))
        ax.set_ylim(max(lo, -0.5), 1.05)
    ax = flat[len(norms)]
    for j, run in enumerate(runs):
        steps, values = series(rows, run, "loss_gap")
        keep = (steps >= 1) & np.all(values > 0, axis=1)
        if keep.any():
            band(ax, steps[keep], values[keep], color=COLORS[j % len(COLORS)], ls=STYLES[j // len(COLORS) % 4],
                 lw=1.2, logy=True, label=labels.get(run, run))
    ax.set(xscale="log", xlabel="step k", ylabel="CE(W_k) - H", title=f"excess loss (H = {entropy:.4g})")
    for extra in flat[panels:]:
        extra.axis("off")
    handles, names = flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="lower center", ncol=min(5, len(names)), fontsize=7, frameon=False,
                   bbox_to_anchor=(0.5, -0.02))
        fig.subplots_adjust(bottom=0.2)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig
