"""Figures of the log-bilinear model (docs/ufm.md), drawn from saved metric rows and arrays only."""

from __future__ import annotations

import numpy as np

from ..results import series
from .figures import band, new_figure
from .plots import plot

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _lams(rows: list[dict], run: str) -> np.ndarray:
    steps = sorted({r["step"] for r in rows if r.get("run") == run})
    lam = {r["step"]: r["lam"] for r in rows if r.get("run") == run}
    return np.array([lam[s] for s in steps])


@plot("ufm.path")
def path_figure(rows: list[dict], run: str, train_rows: list[dict] | None = None, train_run: str = ""):
    """Four panels against λ (decreasing to the right): finite part, growing part, Gram alignment, and collapse (or,
    with ``train_rows``, the decomposition over the iterations of the training run ``train_run``)."""
    fig, axes = new_figure(1, 4, width=3.1, height=2.8)
    ax_f, ax_c, ax_g, ax_a = axes[0]
    lam = _lams(rows, run)

    def s(metric):
        return series(rows, run, metric)[1]

    band(ax_f, lam, s("F_error_rel"), label="||P_F(L) - L*|| / ||L*||", logy=True)
    band(ax_c, lam, s("cos_perp_mm"), label="cos(P_⊥ L, L^mm)")
    band(ax_c, lam, s("cos_mm"), label="cos(L, L^mm)")
    for metric, label, color in (("cos_word_gram", "words", COLORS[0]), ("cos_context_gram", "contexts", COLORS[1])):
        band(ax_g, lam, s(metric), label=f"{label} vs L^mm", color=color)
        if any(metric + "_S" in r for r in rows if r.get("run") == run):
            band(ax_g, lam, s(metric + "_S"), label=f"{label} vs S̃", color=color, ls="--")
    panels = [(ax_f, "finite-part error"), (ax_c, "cosine"), (ax_g, "Gram cosine")]
    if train_rows:
        for metric, label, color in (("F_error_rel", "finite-part error", COLORS[0]),
                                     ("cos_perp_mm", "cos(P_⊥ L_k, L^mm)", COLORS[1]),
                                     ("dist_opt", "||L_k - L_λ|| / ||L_λ||", COLORS[2])):
            steps, vals = series(train_rows, train_run, metric)
            keep = steps >= 1
            band(ax_a, steps[keep], vals[keep], label=label, color=color)
        ax_a.set(xscale="log", yscale="log", xlabel="iteration k", title=f"training ({train_run})")
        ax_a.legend(fontsize=7)
    else:
        band(ax_a, lam, s("within_angle"), label="within set (raw)", color=COLORS[3])
        band(ax_a, lam, s("sub_within_angle"), label="within set (subspace)", color=COLORS[2])
        band(ax_a, lam, s("between_angle"), label="between sets", color=COLORS[7])
        ax_a.set_title("collapse of shared supports")
        panels.append((ax_a, "angle (°)"))
    for ax, ylabel in panels:
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set(xlabel="λ", ylabel=ylabel)
        ax.legend(fontsize=7)
    ax_f.set_title("finite part -> L*")
    ax_c.set_title("growing part -> L^mm")
    ax_g.set_title("Gram alignment")
    return fig


@plot("ufm.training")
def training_figure(rows: list[dict], runs: list[str]):
    """Six panels over iterations for each run: CE - H, distance to the optimum, finite part, growing part, Grams,
    collapse."""
    fig, axes = new_figure(2, 3, width=3.1, height=2.5)
    panels = (("loss_gap", "CE - H", True), ("dist_opt", "||L_k - L_λ|| / ||L_λ||", True),
              ("F_error_rel", "finite-part error", True), ("cos_perp_mm", "cos(P_⊥ L_k, L^mm)", False),
              ("cos_context_gram", "cos Gram (contexts) vs L^mm", False),
              ("sub_collapse_ratio", "subspace collapse ratio", True))
    for ax, (metric, label, logy) in zip(axes.flat, panels, strict=True):
        for i, run in enumerate(runs):
            steps, vals = series(rows, run, metric)
            if not len(steps):
                continue
            keep = steps >= 1
            band(ax, steps[keep], vals[keep], label=run, color=COLORS[i % len(COLORS)], logy=logy)
        ax.set_xscale("log")
        ax.set(xlabel="iteration k", ylabel=label)
    axes[0, 0].legend(fontsize=7)
    return fig


@plot("ufm.modes")
def modes_figure(steps: np.ndarray, strengths: np.ndarray, final: np.ndarray, times: np.ndarray, sigma: np.ndarray):
    """Mode strengths over training (normalized by their final values) and the half-times against 1/σ."""
    import matplotlib as mpl

    fig, axes = new_figure(1, 2, width=3.8, height=3.0)
    left, right = axes[0]
    cmap = mpl.colormaps["viridis"]
    steps = np.asarray(steps)
    keep = steps >= 1
    for i in range(len(sigma)):
        if final[i] > 0:
            left.plot(steps[keep], strengths[i][keep] / final[i], color=cmap(1 - i / max(len(sigma) - 1, 1)), lw=1.2,
                      label=f"σ_{i + 1} = {sigma[i]:.3g}" if i < 6 else None)
    left.set(xscale="log", xlabel="iteration k", ylabel="u_i^T L_k v_i / final", title="modes of D0 = -∇CE(0)")
    left.axhline(0.5, color="grey", lw=0.8, ls=":")
    left.legend(fontsize=6)
    inv = 1 / np.asarray(sigma)
    for b in range(times.shape[1]):
        right.plot(inv, times[:, b], "o", ms=4, color=COLORS[b % len(COLORS)], label=f"seed {b}" if b < 3 else None)
    if np.isfinite(times[0, 0]):
        right.plot(inv, times[0, 0] * sigma[0] * inv, "k--", lw=1, label="t_1 σ_1 / σ_i")
    right.set(xlabel="1 / σ_i", ylabel="t_i (half of final strength)", xscale="log", yscale="log",
              title="learned in the order of σ_i")
    right.legend(fontsize=7)
    return fig


@plot("ufm.geometry")
def geometry_figure(S_tilde: np.ndarray, L_mm: np.ndarray, L: np.ndarray, HHt: np.ndarray, predicted: np.ndarray):
    """Heatmaps: S̃, L^mm, the learned logits, the learned context Gram and its predicted limit."""
    fig, axes = new_figure(1, 5, width=2.4, height=2.5)
    for ax, (title, A) in zip(axes[0], (("S̃", S_tilde), ("L^mm", L_mm), ("learned L_λ", L),
                                        ("learned H H^T", HHt), ("(L^mm^T L^mm)^{1/2}", predicted)), strict=True):
        A = np.asarray(A, dtype=float)
        scale = np.abs(A).max() or 1.0
        ax.imshow(A / scale, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_title(title)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    axes[0, 0].set_ylabel("tokens (rows) / contexts")
    return fig


@plot("ufm.support")
def support_figure(rows: list[dict]):
    """Singular values of S̃ and L^mm per dataset."""
    fig, axes = new_figure(1, len(rows), width=3.0, height=2.6)
    for ax, r in zip(axes[0], rows, strict=True):
        k = max(len(r["sigma_S"]), int((np.asarray(r["sigma_mm"]) > 1e-8).sum()))
        ax.plot(np.arange(1, len(r["sigma_S"]) + 1), r["sigma_S"], "o-", label="S̃", ms=4)
        ax.plot(np.arange(1, k + 1), np.asarray(r["sigma_mm"])[:k], "x--", label="L^mm", ms=5)
        ax.set(xlabel="i", ylabel="σ_i", title=r["name"])
        ax.legend(fontsize=7)
    return fig
