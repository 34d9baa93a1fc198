"""Figures of paper A (linear NTP), drawn from saved metrics and arrays only."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ..results import series
from .figures import band, new_figure, styled
from .plots import plot

COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22"]


def training_panels(axes, rows: list[dict], run: str, *, entropy: float, title: str = "") -> None:
    """The 2x2 panels of Figs. 1 (right), 4 and 5: CE vs the entropy H, ||W_k||, the two correlations with
    W^mm, and the relative distance of the F-component to W* (x-axis: iteration, log scale)."""
    (ax_loss, ax_norm), (ax_cos, ax_f) = axes
    steps, loss = series(rows, run, "loss")
    keep = steps >= 1
    x = steps[keep]
    band(ax_loss, x, loss[keep], label="CE(W_k)")
    ax_loss.axhline(entropy, color="k", ls="--", lw=1, label=f"entropy H = {entropy:.4f}")
    ax_loss.set_xscale("log")
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    band(ax_norm, x, series(rows, run, "norm")[1][keep], label="||W_k||")
    ax_norm.set_xscale("log")
    ax_norm.set_ylabel("||W_k||")
    if any("cos_mm" in r for r in rows if r.get("run") == run):
        band(ax_cos, x, series(rows, run, "cos_mm")[1][keep], label="cos(W_k, W^mm)")
        band(ax_cos, x, series(rows, run, "cos_mm_corrected")[1][keep], label="cos(W_k - W*, W^mm)")
        ax_cos.legend(loc="lower right")
    ax_cos.set_xscale("log")
    ax_cos.set_ylabel("correlation with W^mm")
    band(ax_f, x, series(rows, run, "F_error_rel")[1][keep], label="||P_F(W_k) - W*|| / ||W*||", logy=True)
    ax_f.set_xscale("log")
    ax_f.set_ylabel("||P_F(W_k) - W*|| / ||W*||")
    for ax in (ax_cos, ax_f):
        ax.set_xlabel("iteration k")
    if title:
        ax_loss.set_title(title)
        ax_norm.set_title(title)


@plot("linear.training")
def training_figure(rows: list[dict], run: str, *, entropy: float, title: str = ""):
    """A standalone 2x2 training figure."""
    fig, axes = new_figure(2, 2)
    training_panels(axes, rows, run, entropy=entropy, title=title)
    return fig


def geometry_2d(ax, H: np.ndarray, P: np.ndarray, W_mm: np.ndarray, contexts, vocab) -> None:
    """Fig. 1 (left): context embeddings with their supports, rows of W^mm (word embeddings) and their
    hyperplanes (lines through the origin orthogonal to each w_v)."""
    radius = 1.25 * max(np.abs(H).max(), np.abs(W_mm).max())
    ax.set_xlim(-radius, radius)
    ax.set_ylim(-radius, radius)
    ax.set_aspect("equal")
    t = np.linspace(-radius, radius, 2)
    for v, w in enumerate(W_mm):
        color = COLORS[v % len(COLORS)]
        if np.linalg.norm(w) > 1e-9:
            normal = np.array([-w[1], w[0]]) / np.linalg.norm(w)
            ax.plot(t * normal[0], t * normal[1], color=color, lw=0.8, ls=":", alpha=0.8)
        ax.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color, "lw": 1.4})
        ax.plot(*w, marker="*", color=color, ms=9, ls="none", label=f"w_{vocab[v]}")
    for j, h in enumerate(H):
        ax.plot(*h, "o", color="k", ms=7)
        support = ",".join(vocab[z] for z in np.nonzero(P[j] > 0)[0])
        ax.annotate(f"{contexts[j]}\n{{{support}}}", xy=h, xytext=(4, -14), textcoords="offset points", fontsize=8)
    ax.legend(loc="upper right", fontsize=7, ncol=2)
    ax.set_title("contexts h_j (black) and rows of W^mm")


@plot("linear.two_d")
def two_d_figure(H: np.ndarray, P: np.ndarray, W_mm: np.ndarray, contexts, vocab, rows: list[dict], run: str, *,
                 entropy: float):
    """Fig. 1: the 2D geometry (left) next to the 2x2 training panels of ``run`` (right)."""
    with styled():
        fig = plt.figure(figsize=(10.5, 5.2), layout="constrained")
        left, right = fig.subfigures(1, 2, width_ratios=[1, 1.3])
        geometry_2d(left.subplots(), H, P, W_mm, contexts, vocab)
        training_panels(right.subplots(2, 2), rows, run, entropy=entropy)
    return fig


def probability_heatmap(ax, P: np.ndarray, contexts, vocab) -> None:
    """Fig. 2 (left): the probability matrix P with off-support entries in black."""
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].copy()
    cmap.set_bad("black")
    im = ax.imshow(np.ma.masked_where(P <= 0, P), cmap=cmap, vmin=0, vmax=max(P.max(), 1e-12), aspect="auto")
    ax.set_xticks(range(P.shape[1]), [str(v) for v in vocab])
    ax.set_yticks(range(P.shape[0]), [str(c) for c in contexts])
    ax.set_xlabel("next token z")
    ax.set_ylabel("context")
    ax.grid(False)
    ax.figure.colorbar(im, ax=ax, fraction=0.046)
    ax.set_title("P (black: off-support)")


def word_vectors(ax, W: np.ndarray, vocab, title: str) -> None:
    """Rows of a V x 2 matrix drawn as arrows from the origin (Fig. 2, middle and right)."""
    radius = 1.25 * max(np.abs(W).max(), 1e-9)
    ax.set_xlim(-radius, radius)
    ax.set_ylim(-radius, radius)
    ax.set_aspect("equal")
    for v, w in enumerate(W):
        color = COLORS[v % len(COLORS)]
        ax.annotate("", xy=w, xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": color, "lw": 1.4})
        ax.annotate(str(vocab[v]), xy=w, xytext=(3, 3), textcoords="offset points", color=color, fontsize=8)
    ax.set_title(title)


@plot("linear.context_distributions")
def context_distributions(P: np.ndarray, picks: np.ndarray, vocab):
    """Fig. 3: bar plots of the next-token distributions of the picked contexts (x-axis: their support)."""
    n = len(picks)
    fig, axes = new_figure(2, (n + 1) // 2, width=2.0, height=1.8)
    for ax, j in zip(axes.flat, picks, strict=False):
        support = np.nonzero(P[j] > 0)[0]
        ax.bar(range(len(support)), P[j, support], color=COLORS[0])
        ax.set_xticks(range(len(support)), [str(vocab[z]) for z in support])
        ax.set_title(f"context {j}")
        ax.set_ylim(0, 1)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig


@plot("linear.regpath")
def regularization_path_figure(B: np.ndarray, cos: np.ndarray, f_err: np.ndarray, attained: np.ndarray):
    """cos(Ŵ_B, W^mm) and ||P_F(Ŵ_B) - W*||/||W*|| against the norm bound B (open markers: not attained)."""
    fig, axes = new_figure(1, 2)
    for ax, y, label in ((axes[0, 0], cos, "cos(Ŵ_B, W^mm)"), (axes[0, 1], f_err, "||P_F(Ŵ_B) - W*|| / ||W*||")):
        ax.plot(B, y, "-", color=COLORS[0])
        ax.plot(B[attained], y[attained], "o", color=COLORS[0], label="||Ŵ_B|| = B attained")
        if (~attained).any():
            ax.plot(B[~attained], y[~attained], "o", mfc="white", color=COLORS[3], label="not attained")
        ax.set_xlabel("norm bound B")
        ax.set_ylabel(label)
        ax.legend()
    axes[0, 1].set_yscale("log")
    return fig


@plot("linear.supports_vs_probabilities")
def supports_vs_probabilities(P: np.ndarray, W_mm: np.ndarray, W_star: np.ndarray, contexts, vocab):
    """Fig. 2: P as a heatmap, rows of W^mm, rows of W*."""
    fig, axes = new_figure(1, 3, width=3.0, height=2.8)
    probability_heatmap(axes[0, 0], P, contexts, vocab)
    word_vectors(axes[0, 1], W_mm, vocab, "rows of W^mm")
    word_vectors(axes[0, 2], W_star, vocab, "rows of W*")
    return fig


@plot("linear.optimizers")
def optimizers_figure(rows: list[dict], *, entropy: float):
    """Fig. 5: the training panels of normalized GD (left) and Adam (right)."""
    fig, axes = new_figure(2, 4)
    training_panels(axes[:, :2], rows, "fig5-ngd", entropy=entropy, title="normalized GD")
    training_panels(axes[:, 2:], rows, "fig5-adam", entropy=entropy, title="Adam")
    return fig


@plot("linear.spread")
def spread_figure(steps: np.ndarray, curves: dict[str, dict[str, np.ndarray]]):
    """One column per metric (CE - H, cos(W_k, W^mm), F-part error), one band per optimizer over datasets."""
    titles = {"loss_gap": "CE(W_k) - H", "cos_mm": "cos(W_k, W^mm)", "F_error_rel": "||P_F(W_k) - W*|| / ||W*||"}
    fig, axes = new_figure(1, len(titles), width=3.4)
    keep = steps >= 1
    for ax, (metric, title) in zip(axes[0], titles.items(), strict=True):
        for i, (name, values) in enumerate(curves.items()):
            band(ax, steps[keep], values[metric][keep], label=name, color=COLORS[i], logy=metric != "cos_mm")
        ax.set(xscale="log", xlabel="iteration k", title=title)
        ax.legend()
    return fig
