"""Figures and statistics of the NTP-separability phase transition, drawn from the saved per-trial table only.

``trials.csv`` has one row per dataset: ``V, k, m, trial, d_sep, d_comp`` (critical dimensions), ``solves``,
``certified``, compatibility residuals, ``scanned``, ``consistent``, ``seconds``
(:mod:`ntpbias.experiments.separability`).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import math
from pathlib import Path

import numpy as np
from scipy import stats

from .figures import new_figure, save

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]
INT_COLUMNS = ("V", "k", "m", "trial", "d_sep", "d_comp", "solves", "certified")
BOOL_COLUMNS = ("scanned", "consistent")


# ------------------------------------------------------------------------------------------------ the saved table
def trials_csv(results) -> str:
    """CSV text of per-trial results (dataclass instances)."""
    rows = [dataclasses.asdict(r) for r in results]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()} for r in rows)
    return buf.getvalue()


def read_trials(path: str | Path) -> list[dict]:
    """Rows of a trials.csv with typed values."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        for k, v in r.items():
            r[k] = int(v) if k in INT_COLUMNS else (v == "True") if k in BOOL_COLUMNS else float(v)
    return rows


def configurations(rows: list[dict]) -> list[tuple[int, int, int]]:
    """The (V, k, m) present, in first-seen order."""
    return list(dict.fromkeys((r["V"], r["k"], r["m"]) for r in rows))


def critical(rows: list[dict], V: int, k: int, m: int, which: str = "d_sep") -> np.ndarray:
    return np.array([r[which] for r in rows if (r["V"], r["k"], r["m"]) == (V, k, m)])


# ------------------------------------------------------------------------------------------------ statistics
def fraction_curve(d_star: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """(d = 0..m, fraction of trials with d* <= d): the probability of the property at each d.

    >>> fraction_curve(np.array([1, 2, 2]), 3)[1].tolist()
    [0.0, 0.3333333333333333, 1.0, 1.0]
    """
    d = np.arange(m + 1)
    return d, (np.asarray(d_star)[None, :] <= d[:, None]).mean(axis=1)


def wilson(successes: np.ndarray, n: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial proportion, vectorized over ``successes``."""
    z = stats.norm.ppf(0.5 + level / 2)
    p = np.asarray(successes, dtype=float) / n
    center = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return np.clip(center - half, 0, 1), np.clip(center + half, 0, 1)


def median_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    """(median, low, high): a distribution-free interval for the median from order statistics.

    [x_(i), x_(j)] with i, j binomial(n, 1/2) quantiles covers the median with probability at least ``level``
    for a continuous distribution (and is conservative for discrete ones).
    """
    x = np.sort(np.asarray(values, dtype=float))
    n, alpha = len(x), 1 - level
    i = int(stats.binom.ppf(alpha / 2, n, 0.5))
    j = int(stats.binom.isf(alpha / 2, n, 0.5))
    return float(np.median(x)), float(x[max(i - 1, 0)]), float(x[min(j, n - 1)])


def cover_cdf(m: int, d: np.ndarray) -> np.ndarray:
    """Cover (1965): P(m Gaussian points with random labels are homogeneously separable in R^d) = P(d* <= d).

    C(m, d) / 2^m with C(m, d) = 2 Σ_{i<d} binom(m-1, i), i.e. P(Bin(m-1, 1/2) <= d-1) (0 at d = 0).

    >>> float(cover_cdf(3, np.array(2)))  # 3 points in the plane: 6 of the 8 labelings are separable
    0.75
    """
    d = np.asarray(d)
    return np.where(d >= 1, stats.binom.cdf(d - 1, m - 1, 0.5), 0.0)


def counting_bound(V: int, k: int) -> float:
    """(k - 1)/(V - 1): compatibility needs dim F = m (k-1) <= (V-1) d."""
    return (k - 1) / (V - 1)


# ------------------------------------------------------------------------------------------------ figures
def _label(V: int, k: int) -> str:
    return f"V={V}, |S|={k}" + (" (one-hot)" if k == 1 else "")


def _curve(ax, d_star: np.ndarray, m: int, color, label: str, ls: str = "-") -> None:
    d, frac = fraction_curve(d_star, m)
    lo, hi = wilson(np.round(frac * len(d_star)), len(d_star))
    ax.plot(d / m, frac, ls, color=color, label=label, drawstyle="steps-post")
    ax.fill_between(d / m, lo, hi, color=color, alpha=0.18, step="post", linewidth=0)


def transition_figure(out, rows: list[dict]):
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
    return save(fig, out, "separability-transition", "NTP-separability and compatibility against d/m",
                f"Fraction of random datasets (Gaussian embeddings, uniformly random supports, m = {m_max}) that are "
                "NTP-separable (left) and NTP_H-compatible (right) as d/m varies, with Wilson 95% bands. Dotted: "
                "Cover's exact law for one-hot binary labels (threshold d/m -> 1/2, grey dashed). Lemma 1 of paper "
                "A guarantees both at d/m >= 1 (grey).")


def thresholds_figure(out, rows: list[dict]):
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
    return save(fig, out, "separability-thresholds", "Empirical thresholds",
                "Median critical ratio d*/m (the d/m at which half the datasets are separable, resp. compatible) "
                "with distribution-free 95% intervals, per (V, |S_j|) and number of contexts m. Dotted: Cover's "
                "asymptotic 1/2 for one-hot binary labels; dashed: the counting bound (k-1)/(V-1) for compatibility.")


def cover_figure(out, rows: list[dict]):
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
    return save(fig, out, "separability-cover", "One-hot binary: Cover's theorem",
                "For V = 2 and |S_j| = 1 NTP-separability is homogeneous linear separability of m Gaussian points "
                "with random labels; the measured fraction follows Cover's exact finite-m law (dotted) and its "
                "threshold tends to d/m = 1/2.")


def dkw_bound(n: int, alpha: float = 1e-3) -> float:
    """Dvoretzky-Kiefer-Wolfowitz: P(sup_d |F_n(d) - F(d)| > ε) <= 2 exp(-2 n ε²) = ``alpha``."""
    return math.sqrt(math.log(2 / alpha) / (2 * n))
