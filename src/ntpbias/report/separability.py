"""Figures of the NTP-separability phase transition, drawn from the saved per-trial rows only
(:func:`ntpbias.experiments.separability.read_trials`)."""

from __future__ import annotations

import numpy as np

from ..experiments.separability import configurations, critical
from ..geometry.subspace import counting_bound
from ..stats import cover_cdf, fraction_curve, median_ci, wilson
from .figures import new_figure
from .plots import plot

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


# ------------------------------------------------------------------------------------------------ figures
def _label(V: int, k: int) -> str:
    return f"V={V}, |S|={k}" + (" (one-hot)" if k == 1 else "")


def _curve(ax, d_star: np.ndarray, m: int, color, label: str, ls: str = "-") -> None:
    d, frac = fraction_curve(d_star, m)
    lo, hi = wilson(np.round(frac * len(d_star)), len(d_star))
    ax.plot(d / m, frac, ls, color=color, label=label, drawstyle="steps-post")
    ax.fill_between(d / m, lo, hi, color=color, alpha=0.18, step="post", linewidth=0)


@plot("separability.transition")
def transition_figure(rows: list[dict]):
    """Fraction separable (left) and compatible (right) against d/m at the largest m, Wilson 95% bands."""
    m_max = max(r["m"] for r in rows)
    configs = [(V, k) for V, k, m in configurations(rows) if m == m_max]
    fig, axes = new_figure(1, 2, width=4.4, height=3.3)
    left, right = axes[0]
    for i, (V, k) in enumerate(configs):
        color = COLORS[i % len(COLORS)]
        d_sep = critical(rows, V, k, m_max)
        _curve(left, d_sep, m_max, color, f"{_label(V, k)} ({len(d_sep)})")
        if V == 2 and k == 1:
            d = np.arange(m_max + 1)
            left.plot(d / m_max, cover_cdf(m_max, d), ":", color="k", lw=1.2, drawstyle="steps-post",
                      label="Cover (exact, V=2 one-hot)")
        if k > 1:
            _curve(right, critical(rows, V, k, m_max, "d_comp"), m_max, color, _label(V, k))
            right.axvline(counting_bound(V, k), color=color, ls="--", lw=0.8)
    left.axvline(0.5, color="grey", lw=0.8, ls="--")
    for ax, title in ((left, "NTP-separable"), (right, "NTP_H-compatible")):
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.set(xlabel="d / m", ylabel="fraction of datasets", ylim=(-0.02, 1.02), xlim=(0, 1.05),
               title=f"{title}, m = {m_max}")
        if ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=7, loc="lower right")
    return fig


@plot("separability.thresholds")
def thresholds_figure(rows: list[dict]):
    """Median critical ratios d*/m with 95% intervals per (V, |S_j|) (x) and m (markers: finite-size trend)."""
    fig, axes = new_figure(1, 2, width=4.4, height=3.3)
    pairs = list(dict.fromkeys((V, k) for V, k, _ in configurations(rows)))
    ms = sorted({m for _, _, m in configurations(rows)})
    offsets = np.linspace(-0.2, 0.2, len(ms)) if len(ms) > 1 else np.zeros(1)
    for ax, which, title in ((axes[0, 0], "d_sep", "NTP-separability"), (axes[0, 1], "d_comp", "NTP_H-compatibility")):
        shown = [(V, k) for V, k in pairs if which == "d_sep" or k > 1]
        for x, (V, k) in enumerate(shown):
            for j, m in enumerate(ms):
                d_star = critical(rows, V, k, m, which)
                if not len(d_star):
                    continue
                med, lo, hi = median_ci(d_star / m)
                ax.errorbar([x + offsets[j]], [med], yerr=[[med - lo], [hi - med]], marker="os^Dv"[j % 5], ms=4,
                            capsize=3, color=COLORS[j % len(COLORS)], label=f"m = {m}" if x == 0 else None)
            if which == "d_comp":
                ax.hlines(counting_bound(V, k), x - 0.35, x + 0.35, color="grey", ls="--", lw=0.9,
                          label="(k-1)/(V-1)" if x == 0 else None)
            elif (V, k) == (2, 1):
                ax.hlines(0.5, x - 0.35, x + 0.35, color="k", ls=":", lw=1.2, label="Cover: 1/2")
        ax.set_xticks(range(len(shown)), [f"V={V}\n|S|={k}" for V, k in shown])
        ax.set(ylabel="median critical d / m", title=f"threshold of {title}", ylim=(0, 1.05),
               xlim=(-0.6, len(shown) - 0.4))
        ax.legend(fontsize=7, loc="upper left")
    return fig


@plot("separability.cover")
def cover_figure(rows: list[dict]):
    """One-hot binary: empirical CDF of d* against Cover's exact law, per m."""
    fig, axes = new_figure(1, 1, width=4.6, height=3.3)
    ax = axes[0, 0]
    ms = sorted({m for V, k, m in configurations(rows) if (V, k) == (2, 1)})
    for i, m in enumerate(ms):
        color = COLORS[i % len(COLORS)]
        d_star = critical(rows, 2, 1, m)
        _curve(ax, d_star, m, color, f"measured, m = {m} ({len(d_star)} datasets)")
        d = np.arange(m + 1)
        ax.plot(d / m, cover_cdf(m, d), ":", color="k", lw=1.2, drawstyle="steps-post",
                label="Cover: P(Bin(m-1, 1/2) <= d-1)" if i == 0 else None)
    ax.axvline(0.5, color="grey", ls="--", lw=0.8)
    ax.set(xlabel="d / m", ylabel="fraction separable", title="one-hot binary labels (V = 2, |S_j| = 1)",
           ylim=(-0.02, 1.02))
    ax.legend(fontsize=7)
    return fig
