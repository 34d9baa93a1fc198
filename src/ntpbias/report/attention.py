"""Figures of paper B (attention with trained embeddings), drawn from saved tables, arrays and metric rows only.

* :func:`embedding_figure`: Figures 1-3, <E_s, p> and <E_s, v> against PD(s), one row per dataset;
* :func:`training_curves`: loss, accuracy and the figures' correlations over epochs;
* :func:`stage_two_figure`: stage 2 of the theory (cos with the max-margin direction, selection accuracy,
  ||p_t||, loss above its floor);
* :func:`lemma41_figure`: the one-step error against d and the shift <E¹_s - E⁰_s, v> against (η₀/2) α_s.

Per-token tables are read back from their CSV files (:func:`ntpbias.experiments.attention.read_token_table`).
"""

from __future__ import annotations

import numpy as np

from ..results import series
from .figures import band, new_figure
from .plots import plot


def _first_seed(table: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    m = table["seed"] == table["seed"].min()
    return {k: v[m] for k, v in table.items()}


def embedding_panels(ax_p, ax_v, table: dict[str, np.ndarray], corr: dict[str, float], *, color_by: str,
                     label: str = "") -> None:
    """One row of Figures 1-3 for the first seed of ``table``: <E_s, p> vs PD(s) (left), <E_s, v> vs PD(s) (right).

    ``color_by``: "level" (K-level data: grey = irrelevant, a colour per level k = 1..K) or "count" (log10 of the
    token's count). Each panel's title gives the Pearson and Spearman correlations of that seed, as the checks
    computed them (``corr``: :func:`ntpbias.experiments.attention.correlations` of the seed).
    """
    t = _first_seed(table)
    pd = t["pd"]
    for ax, y, ylabel, key in ((ax_p, t["e_dot_p"], "<E_s, p>", "p_abs_pd"), (ax_v, t["e_dot_v"], "<E_s, v>", "v_pd")):
        if color_by == "level":
            import matplotlib

            levels = t["level"]
            K = int(levels.max())
            cmap = matplotlib.colormaps["viridis"]
            irr = levels == 0
            ax.scatter(pd[irr], y[irr], s=5, color="0.6", alpha=0.6, label="irrelevant", rasterized=True)
            for k in range(1, K + 1):
                m = levels == k
                ax.scatter(pd[m], y[m], s=7, color=cmap((k - 1) / max(K - 1, 1)), label=f"k = {k}", rasterized=True)
        else:
            sc = ax.scatter(pd, y, s=5, c=np.log10(t["count"]), cmap="viridis", alpha=0.7, rasterized=True)
            ax.figure.colorbar(sc, ax=ax, fraction=0.046, label="log10 count")
        r, rho = corr[f"pearson_{key}"], corr[f"spearman_{key}"]
        against = "|PD|" if ax is ax_p else "PD"
        ax.set_title((f"{label}\n" if label else "") + f"{ylabel} vs {against}: Pearson {r:.3f}, Spearman {rho:.3f}",
                     fontsize=8)
        ax.set_xlabel("posterior difference PD(s)")
        ax.set_ylabel(ylabel)
    if color_by == "level":
        ax_v.legend(fontsize=6, markerscale=2, ncol=2, loc="upper left")


@plot("attention.embeddings")
def embedding_figure(panels: list[tuple[str, dict[str, np.ndarray], dict[str, float]]], *, color_by: str):
    """Figures 1-3: one row (two panels) per (label, per-token table, the first seed's correlations)."""
    fig, axes = new_figure(len(panels), 2, width=4.2, height=3.2)
    for row, (label, table, corr) in enumerate(panels):
        embedding_panels(axes[row, 0], axes[row, 1], table, corr, color_by=color_by, label=label)
    return fig


@plot("attention.training")
def training_curves(rows: list[dict], runs: list[str], labels: dict[str, str] | None = None):
    """Loss, accuracy and the two correlations against the epoch for classifier runs (mean and seed band)."""
    labels = labels or {}
    fig, axes = new_figure(1, 3, width=3.2, height=2.6)
    ax_loss, ax_acc, ax_corr = axes[0]
    for run in runs:
        name = labels.get(run, run)
        steps, loss = series(rows, run, "loss")
        epochs = series(rows, run, "epoch")[1][:, 0]
        band(ax_loss, epochs, loss, label=name, logy=True)
        band(ax_acc, epochs, series(rows, run, "class_accuracy")[1], label=name)
        band(ax_corr, epochs, series(rows, run, "pearson_v_pd")[1], label=f"{name}: <E,v> vs PD")
        band(ax_corr, epochs, series(rows, run, "pearson_p_abs_pd")[1], label=f"{name}: <E,p> vs |PD|", ls="--")
    ax_loss.set_ylabel("logistic loss")
    ax_acc.set_ylabel("training accuracy")
    ax_corr.set_ylabel("Pearson correlation")
    for ax in axes[0]:
        ax.set_xlabel("epoch")
        ax.legend(fontsize=6)
    return fig


@plot("attention.correlations")
def correlation_curves(rows: list[dict], runs: list[str], bins: dict[str, tuple[np.ndarray, np.ndarray]]):
    """Pearson(<E_s, v>, PD) and Pearson(<E_s, p>, |PD|) against the epoch for every run (mean and seed band), and the
    means of <E_s, v> over the PD deciles after training (first seed)."""
    fig, axes = new_figure(1, 3, width=3.2, height=2.6)
    ax_v, ax_p, ax_bins = axes[0]
    for run in runs:
        epochs = series(rows, run, "epoch")[1][:, 0]
        band(ax_v, epochs, series(rows, run, "pearson_v_pd")[1], label=run)
        band(ax_p, epochs, series(rows, run, "pearson_p_abs_pd")[1], label=run)
        pd, mean_v = bins[run]
        ax_bins.plot(pd, mean_v, marker="o", ms=3, label=run)
    ax_v.set_ylabel("Pearson(<E_s, v>, PD)")
    ax_p.set_ylabel("Pearson(<E_s, p>, |PD|)")
    for ax in (ax_v, ax_p):
        ax.set_xlabel("epoch")
        ax.set_xscale("symlog", linthresh=1)
    ax_bins.set_xlabel("PD (decile mean)")
    ax_bins.set_ylabel("mean <E_s, v> over the decile")
    ax_bins.axhline(0, color="grey", lw=0.5)
    for ax in axes[0]:
        ax.legend(fontsize=6)
    return fig


@plot("attention.stage_two")
def stage_two_figure(rows: list[dict], runs: dict[str, str]):
    """Stage 2: cos(p_t, p̂), selection accuracy, ||p_t|| and L(p_t) - floor against the iteration (log x)."""
    fig, axes = new_figure(2, 2)
    panels = (("cos_mm", "cos(p_t, p̂) (Lemma 4.5)", False), ("selection_accuracy", "selection accuracy", False),
              ("p_norm", "||p_t||", True), ("loss_above_floor", "L(p_t) - loss floor", True))
    for ax, (metric, ylabel, logy) in zip(axes.flat, panels, strict=True):
        for run, label in runs.items():
            steps, values = series(rows, run, metric)
            keep = steps >= 1
            if not keep.any():
                continue
            vals = values[keep]
            if logy:
                vals = np.where(vals > 0, vals, np.nan)
            band(ax, steps[keep], vals, label=label, logy=logy)
        ax.set_xscale("log")
        ax.set_xlabel("iteration t")
        ax.set_ylabel(ylabel)
    axes[0, 0].legend(fontsize=7)
    return fig


@plot("attention.lemma41")
def lemma41_figure(arrays: dict[str, np.ndarray]):
    """Left: one-step error / η₀ against d (seeds as a band) with the bound 11 d^{-1/4} and a d^{-1/2} reference.
    Right: <E¹_s - E⁰_s, v> against (η₀/2) α_s at the smallest and largest d, with y = x."""
    fig, axes = new_figure(1, 2, width=3.8, height=3.0)
    ax_err, ax_sc = axes[0]
    dims, eta0s, err = arrays["dims"], arrays["eta0s"], arrays["error"]
    for i, eta0 in enumerate(eta0s):
        band(ax_err, dims, err[i] / eta0, label=f"error / η₀ (η₀ = {eta0:g})", logy=True, marker="o", ms=3,
             ls="-" if i == 0 else ":")
    ax_err.plot(dims, 11 * dims ** -0.25, "k--", lw=1, label="bound 11 d^{-1/4}")
    ref = 3 * err[0].mean(1)[0] / eta0s[0] * (dims / dims[0]) ** -0.5  # offset above the data
    ax_err.plot(dims, ref, color="0.5", lw=1, label="∝ d^{-1/2}")
    ax_err.set_xscale("log")
    ax_err.set_xlabel("embedding dimension d")
    ax_err.set_ylabel("max{max_s ||err_s||, ||err_p||} / η₀")
    ax_err.legend(fontsize=7)
    lo = hi = 0.0
    for tag, label in (("small", f"d = {dims[0]:.0f}"), ("large", f"d = {dims[-1]:.0f}")):
        x, y = arrays[f"alpha_{tag}"], arrays[f"shift_{tag}"]
        ax_sc.scatter(x, y, s=8, alpha=0.7, label=label)
        lo, hi = min(lo, x.min(), y.min()), max(hi, x.max(), y.max())
    ax_sc.plot([lo, hi], [lo, hi], "k--", lw=1, label="y = x")
    ax_sc.set_xlabel("(η₀/2) α_s")
    ax_sc.set_ylabel("<E¹_s - E⁰_s, v>")
    ax_sc.legend(fontsize=7)
    return fig
