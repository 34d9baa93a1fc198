"""Figures of the NTP-separability phase transition, drawn from the saved per-trial rows only
(:func:`ntpbias.experiments.separability.read_trials`)."""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps

from ..experiments.separability import configurations, critical
from ..experiments.separability.runs import BANDS_UP_TO, transition_size
from ..experiments.separability.scaling import compare, pairs
from ..geometry.linear.subspace import counting_bound
from ..geometry.separability.thresholds import separability_threshold
from ..stats import cover_cdf, fraction_curve, median_ci, wilson
from .figures import new_figure
from .plots import plot

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


# ------------------------------------------------------------------------------------------------ figures
def _label(V: int, k: int) -> str:
    return f"V={V}, |S|={k}" + (" (one-hot)" if k == 1 else "")


def _curve(ax, d_star: np.ndarray, m: int, color, label: str, ls: str = "-", band: bool = True) -> None:
    d, frac = fraction_curve(d_star, m)
    ax.plot(d / m, frac, ls, color=color, label=label, drawstyle="steps-post")
    if band:
        lo, hi = wilson(np.round(frac * len(d_star)), len(d_star))
        ax.fill_between(d / m, lo, hi, color=color, alpha=0.18, step="post", linewidth=0)


@plot("separability.transition")
def transition_figure(rows: list[dict]):
    """Fraction separable (left) and compatible (right) against d/m, Wilson 95% bands, at the largest m that the
    most configurations share (every configuration's size at quick scale; m = 400 at paper scale)."""
    m_max = transition_size(rows)
    configs = [(V, k) for V, k, m in configurations(rows) if m == m_max]
    fig, axes = new_figure(1, 2, width=4.4, height=3.3)
    left, right = axes[0]
    few = len(configs) <= BANDS_UP_TO
    colors = COLORS if few else [colormaps["tab20"](i % 20) for i in range(len(configs))]
    for i, (V, k) in enumerate(configs):
        color = colors[i]
        d_sep = critical(rows, V, k, m_max)
        _curve(left, d_sep, m_max, color, f"{_label(V, k)} ({len(d_sep)})", band=few)
        if V == 2 and k == 1:
            d = np.arange(m_max + 1)
            left.plot(d / m_max, cover_cdf(m_max, d), ":", color="k", lw=1.2, drawstyle="steps-post",
                      label="Cover (exact, V=2 one-hot)")
        if k > 1:
            _curve(right, critical(rows, V, k, m_max, "d_comp"), m_max, color, _label(V, k), band=few)
            right.axvline(counting_bound(V, k), color=color, ls="--", lw=0.8)
    left.axvline(0.5, color="grey", lw=0.8, ls="--")
    for ax, title in ((left, "NTP-separable"), (right, "NTP_H-compatible")):
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.set(xlabel="d / m", ylabel="fraction of datasets", ylim=(-0.02, 1.02), xlim=(0, 1.05),
               title=f"{title}, m = {m_max}")
        if ax.get_legend_handles_labels()[1]:
            ax.legend(fontsize=7 if few else 5.5, loc="lower right")
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
        if len(shown) <= 6:
            ax.set_xticks(range(len(shown)), [f"V={V}\n|S|={k}" for V, k in shown])
        else:  # the paper-scale grid: compact labels
            ax.set_xticks(range(len(shown)), [f"{V}, {k}" for V, k in shown], rotation=90, fontsize=7)
            ax.set_xlabel("(V, |S_j|)")
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
    ax.legend(fontsize=7, loc="lower right")
    return fig


# ------------------------------------------------------------------------------------------------ the large-m study
def _by_V(rows: list[dict]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for V, k in pairs(rows):
        out.setdefault(V, []).append(k)
    return out


@plot("separability.phase")
def phase_figure(rows: list[dict]):
    """Extrapolated thresholds against |S_j|/V per V (95% bars), largest-m medians, predicted curves; compatibility
    against the counting bound."""
    fig, axes = new_figure(1, 2, width=4.6, height=3.6)
    left, right = axes[0]
    for i, (V, ks) in enumerate(sorted(_by_V(rows).items())):
        color = COLORS[i % len(COLORS)]
        kk = np.arange(1, V)
        left.plot(kk / V, [separability_threshold(V, int(k)) for k in kk], "-", marker=".", ms=3, color=color, lw=1.0,
                  alpha=0.8)
        right.plot(kk / V, [counting_bound(V, int(k)) for k in kk], "--", marker=".", ms=3, color=color, lw=0.9,
                   alpha=0.8)
        for ax, which in ((left, "d_sep"), (right, "d_comp")):
            for k in ks:
                if which == "d_comp" and k == 1:
                    continue
                c = compare(rows, V, k, which)
                last = c.points[-1]
                ax.errorbar([k / V + 0.006], [last.median], yerr=[[last.median - last.low], [last.high - last.median]],
                            fmt="o", mfc="none", ms=4, color=color, capsize=2, lw=0.8)
                if c.fit is not None:
                    ax.errorbar([k / V], [c.fit.t_inf], yerr=[[1.96 * c.fit.se], [1.96 * c.fit.se]], fmt="s", ms=4,
                                color=color, capsize=3, label=f"V = {V}" if ax is left and k == ks[0] else None)
    left.plot([], [], "k-", lw=1.0, label="predicted δ*(V, k)")
    left.plot([], [], "ks", ms=4, label="measured, m -> ∞")
    left.plot([], [], "ko", mfc="none", ms=4, label="median d*/m, largest m")
    right.plot([], [], "k--", lw=0.9, label="counting bound (k-1)/(V-1)")
    left.set(xlabel="$|S_j|\\,/\\,V$", ylabel="threshold d / m", title="NTP-separability", xlim=(0, 1), ylim=(0, 1.02))
    right.set(xlabel="$|S_j|\\,/\\,V$", ylabel="threshold d / m", title="NTP_H-compatibility", xlim=(0, 1),
              ylim=(0, 1.02))
    for ax in (left, right):
        ax.legend(fontsize=6.5, loc="upper left")
    return fig


@plot("separability.extrapolation")
def extrapolation_figure(rows: list[dict]):
    """Per V: medians against 1/m with the fit in 1/m and the prediction at 1/m = 0 (star); residuals of both forms
    (filled: t_∞ + a/m; open, shifted right: t_∞ + a/sqrt(m)); open circles: sizes at the ceiling d* = m."""
    groups = sorted(_by_V(rows).items())
    fig, axes = new_figure(2, len(groups), width=2.8, height=2.6, gridspec_kw={"height_ratios": [2.2, 1]})
    for col, (V, ks) in enumerate(groups):
        top, bottom = axes[0, col], axes[1, col]
        for i, k in enumerate(ks):
            color = COLORS[i % len(COLORS)]
            c = compare(rows, V, k)
            x = np.array([1 / p.m for p in c.points])
            med = np.array([p.median for p in c.points])
            err = np.array([[p.median - p.low for p in c.points], [p.high - p.median for p in c.points]])
            top.errorbar(x, med, yerr=err, fmt="o", ms=3, color=color, capsize=2, lw=0.8, label=f"|S| = {k}")
            ceiling = [p.at_ceiling for p in c.points]
            if any(ceiling):  # d* = m for half the datasets: a lower bound, left out of the fit
                top.plot(x[ceiling], med[ceiling], "o", ms=5, mfc="white", color=color)
            top.plot([0], [c.prediction], "*", ms=8, color=color, mec="k", mew=0.4)
            for fit, marker in ((c.fit, "o"), (c.alternative, "s")):
                if fit is None:
                    continue
                if marker == "o":
                    xx = np.linspace(0, 1 / fit.m.min(), 50)
                    top.plot(xx, fit.t_inf + fit.slope * xx, "-", color=color, lw=0.9)
                shift = 0.0 if marker == "o" else 0.0004  # the alternative's residuals a little to the right
                bottom.plot(1 / fit.m + shift, fit.residuals, marker, ms=3.5, color=color,
                            mfc=color if marker == "o" else "none", lw=0)
        bottom.axhline(0, color="grey", lw=0.8)
        for y in (-1.96, 1.96):
            bottom.axhline(y, color="grey", lw=0.6, ls=":")
        if col == 0:  # what the markers mean, once
            top.plot([], [], "k*", ms=8, label="predicted δ*(V, k)")
            bottom.plot([], [], "ko", ms=3.5, lw=0, label="fit t_∞ + a/m")
            bottom.plot([], [], "ks", ms=3.5, mfc="none", lw=0, label="fit t_∞ + a/sqrt(m)")
            bottom.legend(fontsize=6, loc="lower left")
        top.set(title=f"V = {V}", xlim=(-0.001, None), ylabel="median d*/m" if col == 0 else None)
        bottom.set(xlabel="1 / m", xlim=top.get_xlim(), ylabel="residual / se" if col == 0 else None)
        top.legend(fontsize=6, loc="best")
    return fig
