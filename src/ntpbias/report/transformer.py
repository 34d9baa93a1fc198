"""Figures of paper C (one-layer transformer, Algorithm 1), drawn from saved metrics and arrays only.

Theory curves (bounds) are passed in as arrays ``(steps (n,), values (n, n_seeds))`` computed by the experiment
from the saved constants, so a figure never recomputes a theory object and never retrains.
"""

from __future__ import annotations

import numpy as np

from ..results import series
from .figures import band, new_figure
from .plots import plot

Curve = tuple[np.ndarray, np.ndarray]  # (steps (n,), values (n, n_seeds))
COLORS = {"measured": "#1f77b4", "upper": "#d62728", "lower": "#2ca02c", "lower2": "#9467bd", "floor": "k"}


def _plot(ax, rows, run: str, metric: str, *, start: int = 0, logy: bool = False, label: str | None = None,
          color=None, **kwargs) -> None:
    steps, values = series(rows, run, metric)
    keep = steps >= start
    if keep.any():
        band(ax, steps[keep], values[keep], label=label, color=color, logy=logy, **kwargs)


def _curve(ax, curve: Curve | None, *, label: str, color: str, start: int = 0, ls: str = "--") -> None:
    if curve is None:
        return
    steps, values = curve
    keep = steps >= start
    band(ax, steps[keep], values[keep], label=label, color=color, ls=ls, lw=1)


@plot("transformer.figure2")
def figure2(rows: list[dict], prefix: str, bounds: dict[str, Curve]):
    """Fig. 2 of paper C: stage 1 (L_0, cos(W_ov, W_ov*), ||W_ov||) over stage 2 (L with its floor L*,
    cos(W_kq, W_kq*), ||W_kq||); x-axis: iteration of the stage. Non-vacuous bounds from ``bounds`` are dashed:
    ``L0_exact``/``L0_stated`` (Prop. 1's loss bound with rate 1 and 1/4), ``ov_upper``/``ov_lower`` (Prop. 1),
    ``kq_upper``/``kq_lower_thm1``/``kq_lower_lemma6`` (Theorem 1 / Lemma 6)."""
    fig, axes = new_figure(2, 3, width=3.3, height=2.6)
    s1, s2 = f"{prefix}stage1", f"{prefix}stage2"
    ax = axes[0, 0]
    _plot(ax, rows, s1, "loss_L0", logy=True, label="L_0(W_ov^(t))", color=COLORS["measured"])
    _curve(ax, bounds.get("L0_exact"), label="|V|(|V|-1) e^{-tη₀/||W*||}", color=COLORS["upper"], start=2)
    _curve(ax, bounds.get("L0_stated"), label="|V|(|V|-1) e^{-tη₀/(4||W*||)} (Prop. 1)", color=COLORS["lower2"],
           start=2)
    ax.set_title("stage 1: loss L_0")
    ax = axes[0, 1]
    _plot(ax, rows, s1, "cos_ov", start=1, label="cos(W_ov^(t), W_ov*)", color=COLORS["measured"])
    ax.set_title("stage 1: direction")
    _pad_ylim(ax)
    ax = axes[0, 2]
    _plot(ax, rows, s1, "norm_ov", label="||W_ov^(t)||", color=COLORS["measured"])
    _curve(ax, bounds.get("ov_upper"), label="t η₀", color=COLORS["upper"])
    _curve(ax, bounds.get("ov_lower"), label="t η₀/(2||W_ov*||)", color=COLORS["lower"])
    ax.set_title("stage 1: norm")
    ax = axes[1, 0]
    _plot(ax, rows, s2, "loss", logy=True, label="L(θ^(t))", color=COLORS["measured"])
    _plot(ax, rows, s2, "loss_floor", logy=True, label="L* (floor)", color=COLORS["floor"], ls="--", lw=1)
    ax.set_title("stage 2: loss")
    ax = axes[1, 1]
    _plot(ax, rows, s2, "cos_kq", start=1, label="cos(W_kq^(t), W_kq*)", color=COLORS["measured"])
    ax.set_title("stage 2: direction")
    _pad_ylim(ax)
    ax = axes[1, 2]
    _plot(ax, rows, s2, "norm_kq", label="||W_kq^(t)||", color=COLORS["measured"])
    _curve(ax, bounds.get("kq_upper"), label="t η", color=COLORS["upper"])
    _curve(ax, bounds.get("kq_lower_thm1"), label="t η/(2||W_kq*||) (Thm 1)", color=COLORS["lower"])
    _curve(ax, bounds.get("kq_lower_lemma6"), label="t η/(2 L_max ||W_kq*||) (Lemma 6)", color=COLORS["lower2"])
    ax.set_title("stage 2: norm")
    for ax in axes.flat:
        _legend(ax)
    for ax in axes[1]:
        ax.set_xlabel("iteration t")
    return fig


@plot("transformer.stage2")
def stage2_diagnostics(rows: list[dict], prefix: str, bounds: dict[str, Curve]):
    """Stage-2 panels beyond Fig. 2: L - L* (log), cos(W_kq, -∇L) (docs/paper-c-transformer.md#decisions's reading of
    panel 4), attention on the optimal tokens with Theorem 2's lower bound (``attn_thm2``) and 1/L_max
    (``attn_lemma5``), and cos(∇L, W_kq*) under Lemma 6's upper bound (``lemma6``)."""
    fig, axes = new_figure(1, 4, width=3.0, height=2.6)
    run = f"{prefix}stage2"
    ax = axes[0, 0]
    _plot(ax, rows, run, "loss_excess", logy=True, label="L(θ^(t)) - L*", color=COLORS["measured"])
    ax.set_title("excess loss (Theorem 2)")
    ax = axes[0, 1]
    _plot(ax, rows, run, "cos_neg_grad_kq", start=1, label="cos(W_kq^(t), -∇L)", color=COLORS["measured"])
    ax.set_title("iterate vs descent direction")
    _pad_ylim(ax)
    ax = axes[0, 2]
    _plot(ax, rows, run, "attn_opt_min", label="min_n φ_+^(n)", color=COLORS["measured"])
    _plot(ax, rows, run, "attn_opt_mean", label="mean_n φ_+^(n)", color=COLORS["lower2"])
    _curve(ax, bounds.get("attn_lemma5"), label="1/L_max (Lemma 5)", color=COLORS["lower"], ls=":")
    _curve(ax, bounds.get("attn_thm2"), label="1/(1 + L_max e^{-C₁t}) (Thm 2)", color=COLORS["upper"])
    ax.set_ylim(0, 1.02)
    ax.set_title("attention on optimal tokens")
    ax = axes[0, 3]
    _plot(ax, rows, run, "cos_grad_kq_star", label="cos(∇L, W_kq*)", color=COLORS["measured"])
    _curve(ax, bounds.get("lemma6"), label="-min φ_+/(2||W_kq*||) (Lemma 6)", color=COLORS["upper"])
    ax.set_title("gradient alignment")
    for ax in axes.flat:
        _legend(ax)
        ax.set_xlabel("iteration t (stage 2)")
    return fig


@plot("transformer.example1")
def example1_figure(rows: list[dict], prefix: str, reference: dict[int, float], A: np.ndarray,
                    A_star: np.ndarray, vocab, t0: int | None = None):
    """Example 1: 1 - cos(W_kq^(t), W_kq*) on log-log axes with reference values of an independent implementation
    (markers) and Lemma 7's t_0 (from which Theorem 1's rate is graded), and the final W_kq^(T) next to W_kq*, both in
    the token basis (rows: key token, columns: query token) and divided by their norms."""
    fig, axes = new_figure(1, 3, width=3.2, height=2.8)
    ax = axes[0, 0]
    steps, cos = series(rows, f"{prefix}stage2", "cos_kq")
    keep = steps >= 1
    if keep.any():
        band(ax, steps[keep], 1 - cos[keep], label="1 - cos(W_kq^(t), W_kq*)", color=COLORS["measured"], logy=True)
    t = np.array(sorted(reference))
    ax.plot(t, [1 - reference[k] for k in t], "o", mfc="none", color=COLORS["upper"],
            label="reference (independent implementation)")
    if t0:
        ax.axvline(t0, color=COLORS["floor"], ls=":", lw=1, label=f"Lemma 7's t_0 = {t0:,}")
    ax.set_xscale("log")
    ax.set_xlabel("iteration t (stage 2)")
    ax.legend(fontsize=6, loc="lower left")
    ax.set_title("Example 1: direction")
    for ax, M, title in ((axes[0, 1], A, "W_kq^(T)/||W_kq^(T)||"), (axes[0, 2], A_star, "W_kq*/||W_kq*||")):
        M = M / max(np.linalg.norm(M), 1e-300)
        lim = max(np.abs(M).max(), 1e-12)
        im = ax.imshow(M, cmap="RdBu_r", vmin=-lim, vmax=lim)
        ax.set_xticks(range(len(vocab)), vocab)
        ax.set_yticks(range(len(vocab)), vocab)
        ax.set_xlabel("query token")
        ax.set_ylabel("key token")
        ax.grid(False)
        for (i, j), v in np.ndenumerate(M):
            ax.text(j, i, f"{v:+.2f}", ha="center", va="center", fontsize=7)
        ax.figure.colorbar(im, ax=ax, fraction=0.046)
        ax.set_title(title)
    return fig


@plot("transformer.ablation")
def ablation_figure(rows: list[dict], runs: dict[str, str], joint: str | None):
    """cos with W_ov* (stage 1) and W_kq* (stage 2) and the stage-2 loss for two-stage runs under different
    embeddings (``runs``: label -> run prefix), plus the one-stage joint run ``joint`` (its own step axis)."""
    fig, axes = new_figure(1, 3, width=3.3, height=2.6)
    for label, prefix in runs.items():
        _plot(axes[0, 0], rows, f"{prefix}stage1", "cos_ov", start=1, label=label)
        _plot(axes[0, 1], rows, f"{prefix}stage2", "cos_kq", start=1, label=label)
        _plot(axes[0, 2], rows, f"{prefix}stage2", "loss", logy=True, label=label)
    if joint is not None:
        _plot(axes[0, 0], rows, joint, "cos_ov", start=1, label="joint (one stage)", ls="-.")
        _plot(axes[0, 1], rows, joint, "cos_kq", start=1, label="joint (one stage)", ls="-.")
        _plot(axes[0, 2], rows, joint, "loss", logy=True, label="joint (one stage)", ls="-.")
    for ax, title in zip(axes[0], ("cos(W_ov, W_ov*)", "cos(W_kq, W_kq*)", "loss L(θ)"), strict=True):
        ax.set_title(title)
        ax.set_xlabel("iteration of the stage (joint: of the run)")
        _legend(ax)
    for ax in axes[0, :2]:
        _pad_ylim(ax)
    return fig


def _legend(ax) -> None:
    """A small legend, only when something was drawn (panels of metrics a run lacks stay empty)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def _pad_ylim(ax) -> None:
    """Cosine panels: keep 1 visible with a little headroom (a flat line at 1 otherwise fills the axis)."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(min(lo, 1 - 1e-3), max(hi, 1) + 0.02 * max(1 - lo, 1e-3))
