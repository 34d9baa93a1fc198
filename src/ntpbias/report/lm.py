"""Figures of the language model's NTP geometry (docs/lm.md), drawn from saved rows and arrays only."""

from __future__ import annotations

import numpy as np

from ..results import series
from .figures import band, new_figure
from .plots import plot

#: singular values below this fraction of the largest are zero (round-off) and not drawn
SPECTRUM_FLOOR = 1e-9
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


@plot("lm.training")
def training_figure(rows: list[dict], run: str):
    """The training loss against the step (log-log), one band over seeds."""
    fig, axes = new_figure(1, 1, width=3.6, height=2.6)
    ax = axes[0, 0]
    steps, loss = series(rows, run, "loss")
    keep = steps >= 1
    band(ax, steps[keep], loss[keep], label="training windows")
    ax.set(xscale="log", xlabel="step", ylabel="cross-entropy (nats)", title="training loss")
    return fig


def _curve(rows: list[dict], key: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values) of a quantity over checkpoints, undefined values (None) as NaN, step 0 at 0.5 (log axis)."""
    steps = np.array([max(r["step"], 0.5) for r in rows], dtype=float)
    vals = np.array([np.nan if r.get(key) is None else float(r[key]) for r in rows], dtype=float)
    return steps, vals


@plot("lm.curves")
def curves_figure(rows: list[dict], baseline: dict | None = None):
    """Six panels against the training step (docs/lm.md#what-is-measured): CE - H, the finite part, the growing part's
    alignments, the margin, the Gram alignments and the collapse angles; undefined values are left out. ``baseline``
    (the add-0.1 smoothed counts' values) is drawn as dotted horizontal lines in the colour of its quantity."""
    baseline = baseline or {}
    fig, axes = new_figure(2, 3, width=3.1, height=2.5)
    panels = (
        ("CE - H (nats)", True, (("loss_gap", "CE - H"),)),
        ("finite part", True, (("finite_rel_error", "||P_F(L_c) - L*|| / ||L*||"),
                               ("finite_rel_error_weighted", "the same, π p-weighted"),
                               ("F_error_rel", "||P_F(W) - W*|| / ||W*||"))),
        ("growing part: cosine", False, (("cos_perp_mm", "cos(P_⊥ W_c, W^mm)"), ("logit_cos_perp_mm",
                                                                                "cos(P_⊥ L_c, L^mm)"),
                                         ("logit_cos_perp_S", "cos(P_⊥ L_c, S̃)"))),
        ("margin (symlog)", False, (("margin_ratio", "margin x ||W^mm||"), ("separated_fraction",
                                                                             "separated contexts"),
                                    ("prefix_mass", "separable prefix (mass)"))),
        ("Gram cosine", False, (("cos_word_gram", "words vs L^mm"), ("cos_context_gram", "contexts vs L^mm"),
                                ("cos_word_gram_S", "words vs S̃"), ("cos_context_gram_S", "contexts vs S̃"))),
        ("angle (°)", False, (("within_angle", "within set"), ("sub_within_angle", "within set (subspace)"),
                              ("between_angle", "between sets"))),
    )
    for ax, (ylabel, logy, lines) in zip(axes.flat, panels, strict=True):
        drawn = False
        for i, (key, label) in enumerate(lines):
            steps, vals = _curve(rows, key)
            ok = np.isfinite(vals) & ((vals > 0) if logy else True)
            if ok.any():
                ax.plot(steps[ok], vals[ok], marker=".", color=COLORS[i], label=label)
                drawn = True
                if baseline.get(key) is not None:
                    ax.axhline(baseline[key], color=COLORS[i], ls=":", lw=1)
        ax.set(xscale="log", xlabel="step", ylabel=ylabel)
        if logy and drawn:
            ax.set_yscale("log")
        if ylabel.startswith("margin"):  # a far-from-separating start (ratio -10^2) beside fractions in [0, 1]
            ax.set_yscale("symlog", linthresh=1.0)
        if drawn:
            ax.legend(fontsize=6)
        else:
            why = "no support set holds two contexts" if ylabel.startswith("angle") else "non-separable H"
            ax.text(0.5, 0.5, f"undefined at every checkpoint\n({why})", ha="center", va="center",
                    transform=ax.transAxes, fontsize=7)
    return fig


@plot("lm.spectra")
def spectra_figure(steps, spectra_logits, S_tilde_singular_values, L_mm_singular_values=None):
    """Normalized singular values of the centred logits per checkpoint, against L^mm's and S̃'s."""
    fig, axes = new_figure(1, 1, width=4.0, height=2.8)
    ax = axes[0, 0]
    spectra = np.asarray(spectra_logits, dtype=float)
    n, k = spectra.shape

    def shown(values):
        """σ_i / σ_1 down to the numerical rank (values below SPECTRUM_FLOOR are zero singular values)."""
        v = np.asarray(values, dtype=float)[:k]
        v = v[np.isfinite(v)]
        v = v / v[0] if len(v) and v[0] > 0 else v[:0]
        return v[v >= SPECTRUM_FLOOR]

    for i, s in enumerate(spectra):
        v = shown(s)
        shade = 0.85 - 0.75 * i / max(n - 1, 1)
        ax.plot(np.arange(1, len(v) + 1), v, color=str(shade), lw=1,
                label=f"logits, step {int(steps[i])}" if i in (0, n - 1) else None)
    for values, label, color, marker in ((L_mm_singular_values, "L^mm", COLORS[1], "s"),
                                         (S_tilde_singular_values, "S̃", COLORS[0], "o")):
        if values is not None:  # open squares for L^mm: where it equals S̃ both stay visible
            v = shown(values)
            ax.plot(np.arange(1, len(v) + 1), v, color=color, marker=marker, ms=6 if marker == "s" else 3,
                    mfc="none" if marker == "s" else color, ls="--", label=label)
    ax.set(yscale="log", xlabel="index i", ylabel="σ_i / σ_1", title="singular spectra (to the numerical rank)")
    ax.legend(fontsize=7)
    return fig


@plot("lm.collapse")
def collapse_figure(H, groups, predicted):
    """Cosines between the final features ordered by support set, beside the predicted context Gram's."""
    H, groups, predicted = (np.asarray(a) for a in (H, groups, predicted))
    order = np.argsort(groups, kind="stable")
    cuts = np.nonzero(np.diff(groups[order]))[0] + 0.5
    Hn = H[order] / np.maximum(np.linalg.norm(H[order], axis=1, keepdims=True), 1e-300)
    P = predicted[np.ix_(order, order)]
    d = np.sqrt(np.maximum(np.diag(P), 1e-300))
    fig, axes = new_figure(1, 2, width=3.3, height=3.2)
    for ax, M, title in ((axes[0, 0], Hn @ Hn.T, "cos(h_j, h_j'), the model"),
                         (axes[0, 1], P / d[:, None] / d[None, :], "predicted (L^mm)")):
        im = ax.imshow(M, cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
        if len(cuts) <= 40:
            for c in cuts:
                ax.axhline(c, color="k", lw=0.4)
                ax.axvline(c, color="k", lw=0.4)
        ax.set(title=title, xticks=[], yticks=[], xlabel="contexts by support set")
        ax.grid(False)
    fig.colorbar(im, ax=axes[0, 1], fraction=0.046, pad=0.04)
    return fig


#: axis labels of the quantities of ``lm.across``
ACROSS_LABELS = {"loss_gap": "CE - H (nats)", "finite_rel_error_weighted": "finite part error (π p-weighted)",
                 "logit_perp_share": "||P_⊥ L_c|| / ||L_c||", "logit_cos_perp_S": "cos(P_⊥ L_c, S̃)",
                 "cos_context_gram_S": "cos(H H^T, S̃ context Gram)",
                 "sub_collapse_mean_ratio": "subspace collapse (mean within / between)",
                 "separated_fraction": "separated share (non-trivial contexts)",
                 "prefix_mass": "separable prefix (mass)"}


@plot("lm.across")
def across_figure(summary: list[dict], keys: list[str]):
    """Each quantity against the context length T, one line per (V, d) with error bars over seeds, beside the
    add-1 (dotted) and unigram (dashed) baselines of the same contexts."""
    cols = 4
    rows = -(-len(keys) // cols)
    fig, axes = new_figure(rows, cols, width=2.8, height=2.3)
    settings = sorted({(e["V"], e["d"]) for e in summary})
    for ax, key in zip(axes.flat, keys, strict=False):
        for i, (V, d) in enumerate(settings):
            pts = sorted((e["T"], e[key], e[key + "_sd"]) for e in summary if (e["V"], e["d"]) == (V, d)
                         and e[key] is not None)
            if pts:
                T, mean, sd = zip(*pts, strict=True)
                ax.errorbar(T, mean, yerr=[0 if s is None else s for s in sd], marker="o", ms=3, capsize=2,
                            color=COLORS[i % len(COLORS)], label=f"V = {V}, d = {d}")
        for name, style in (("add_1", ":"), ("unigram", "--")):
            for i, V in enumerate(sorted({e["V"] for e in summary})):
                pts = sorted({(e["T"], e["baselines"][name].get(key)) for e in summary if e["V"] == V
                              and e["baselines"][name].get(key) is not None})
                if pts:
                    T, val = zip(*pts, strict=True)
                    ax.plot(T, val, ls=style, marker="x", ms=4, color="0.4", lw=1,
                            label=f"{name} (V = {V})" if i == 0 else None)
        ax.set(xlabel="context length T", title=ACROSS_LABELS.get(key, key))
        ax.title.set_fontsize(7)
        ax.set_xticks(sorted({e["T"] for e in summary}))
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=5)
    return fig
