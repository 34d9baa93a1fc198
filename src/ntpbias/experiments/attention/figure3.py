"""Figs. 1 and 3 of paper B graded by what the figures show, from a run's saved per-token tables and histories.

The figures are scatter plots of <E_s, v> against PD(s) and of <E_s, p> against PD(s) after training; the paper
states no correlation value. What a reader sees in them, measured per seed (worst seed graded):

* ``v_bins``: <E_s, v> rises with PD: of the 9 steps between the means of <E_s, v> over the 10 PD deciles (equal
  token counts), how many go up (the figure: all of them);
* ``p_bins``: <E_s, p> rises with |PD|: the same over the |PD| deciles;
* ``sign_agreement``: tokens clearly of one class (|PD| > 0.3) lie on their side: the fraction with
  sign <E_s, v> = sign PD;
* ``irrelevant_spread``: the cloud of irrelevant tokens sits near zero: median |<E_s, v>| over |PD| < 0.1 divided
  by the median over |PD| > 0.3;
* the Pearson and Spearman correlations (:func:`~ntpbias.experiments.attention.runs.correlations`).

The decile orderings are the figures' own statements (``paper-number``; "trained until convergence": at other settings
than the paper's they say "consistent"/"inconsistent"); the other levels are calibrated at the same schedule on other
subsamples (``calibration/attention.py`` at quick scale, ``calibration/attention_imdb.py`` at the paper's schedule),
and a scale without a calibration grades none of them.
"""

from __future__ import annotations

import math

import numpy as np

from ...io import write_text
from ...results import Check, FigureSpec, check_at_least, check_at_most, with_control
from ...training.history import History
from ..claims import cite
from .runs import correlations, permuted_scores, read_token_table, token_table_csv

BINS = 10
#: |PD| above which a token counts as clearly of one class, and below which it counts as irrelevant
CLEAR, IRRELEVANT = 0.3, 0.1
CORRELATIONS = ("pearson_v_pd", "spearman_v_pd", "pearson_p_abs_pd", "spearman_p_abs_pd")
#: the negative control of the figures' statistics: the learned scores decoupled from the tokens (computable from a
#: run's saved per-token table, so a regraded run gets it too)
SCORES_PERMUTED = "the same per-token table with <E_s, v> and <E_s, p> permuted over the tokens (seed 0)"


def _rising_steps(x: np.ndarray, y: np.ndarray) -> int:
    """Of the BINS - 1 steps between the means of ``y`` over the BINS equal-count bins of ``x``, how many go up."""
    order = np.argsort(x, kind="stable")
    means = np.array([y[idx].mean() for idx in np.array_split(order, BINS)])  # 10 bins
    return int((np.diff(means) > 0).sum())


def bin_means(table: dict[str, np.ndarray], seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean PD and mean <E_s, v> over the BINS PD deciles of one seed (the figure's trend line)."""
    m = table["seed"] == seed
    pd, zv = table["pd"][m], table["e_dot_v"][m]
    order = np.argsort(pd, kind="stable")
    parts = np.array_split(order, BINS)
    return np.array([pd[i].mean() for i in parts]), np.array([zv[i].mean() for i in parts])


def statistics(table: dict[str, np.ndarray]) -> dict[int, dict[str, float]]:
    """Per seed: the statistics of the module docstring."""
    corr = correlations(table)
    out = {}
    for seed in np.unique(table["seed"]).tolist():
        m = table["seed"] == seed
        pd, zp, zv = table["pd"][m], table["e_dot_p"][m], table["e_dot_v"][m]
        clear, irrelevant = np.abs(pd) > CLEAR, np.abs(pd) < IRRELEVANT
        spread = (float(np.median(np.abs(zv[irrelevant])) / np.median(np.abs(zv[clear])))
                  if clear.any() and irrelevant.any() else math.nan)
        out[seed] = {"v_bins": _rising_steps(pd, zv), "p_bins": _rising_steps(np.abs(pd), zp),
                     "sign_agreement": float(np.mean(np.sign(zv[clear]) == np.sign(pd[clear]))) if clear.any()
                     else math.nan,
                     "irrelevant_spread": spread, **corr[seed]}
    return out


def worst(stats: dict[int, dict[str, float]]) -> dict[str, float]:
    """The worst seed's value of every statistic (the largest spread, the smallest of the others)."""
    keys = next(iter(stats.values()))
    return {k: (max if k == "irrelevant_spread" else min)(s[k] for s in stats.values()) for k in keys}


def figure_checks(run: str, table: dict[str, np.ndarray], history: History, *, model: str, converged: bool,
                  setting: str, levels: dict[str, float] | None, level_source: str,
                  control: tuple[str, dict[str, np.ndarray]] | None = None) -> list[Check]:
    """Figs. 1/3's statements for one run (worst seed), plus the loss decreasing (sanity).

    ``converged``: the run used the paper's settings (its "trained until convergence"); ``levels``: the calibrated
    levels of ``sign_agreement``, ``irrelevant_spread`` and the correlations at this run's scale (None: not calibrated
    at this schedule, those checks are left out); ``level_source``: where they were calibrated; ``control``: (in
    words, a per-token table) on which every graded check is computed again and must fail (default: the table with
    the scores permuted over the tokens, :func:`~ntpbias.experiments.attention.runs.permuted_scores`).
    """
    if control is None:
        control = (SCORES_PERMUTED, permuted_scores(table))
    w, on_control = worst(statistics(table)), worst(statistics(control[1]))
    fig = "Fig. 1" if model == "two_layer" else "Fig. 3"
    v_claim, p_claim = ("B:fig1-v", "B:fig1-p") if model == "two_layer" else ("B:fig3", "B:fig3")
    shape = {"kind": "paper-number", "premise": f"trained until convergence at the paper's settings ({setting})",
             "premise_met": converged, "threshold_source": f"the ordering {fig} of paper B shows"}
    calibrated = {"kind": "calibrated", "threshold_source": level_source}

    def controlled(build) -> Check:
        return with_control(build(w), control[0], build(on_control))

    def rising(x: dict, key: str, score: str, axis: str, claim: str, counts: str) -> Check:
        return Check(f"{run}: {fig} {score} rises with {axis}", f"the means of {score} over the {axis} deciles "
                     "increase", f"{x[key]}/{BINS - 1} steps up", f"{BINS - 1}/{BINS - 1}", x[key] == BINS - 1,
                     f"{fig} of paper B", **cite(claim), **shape,
                     metric=f"of the {BINS - 1} steps between the means of {score} over the {BINS} {axis} deciles"
                            f"{counts}, how many go up (worst seed)")

    def v_bins(x: dict) -> Check:
        return rising(x, "v_bins", "<E_s, v>", "PD", v_claim, " (equal token counts)")

    def p_bins(x: dict) -> Check:
        return rising(x, "p_bins", "<E_s, p>", "|PD|", p_claim, "")

    out = [
        controlled(v_bins), controlled(p_bins),
        check_at_most(f"{run}: loss decreased", "training lowers the loss below its initial value",
                      max(history.at()["loss"]), min(history.at(0)["loss"]), f"{fig} of paper B", kind="sanity",
                      threshold_source="the initial loss", metric="final training loss (worst seed)"),
    ]
    if levels is None:
        return out
    out.append(controlled(lambda x: check_at_least(
        f"{run}: sign agreement (|PD| > {CLEAR:g})", "tokens clearly of one class have <E_s, v> of the class's sign",
        x["sign_agreement"], levels["sign_agreement"], f"{fig} of paper B", **cite(v_claim),
        metric=f"fraction of tokens with |PD| > {CLEAR:g} whose <E_s, v> has the sign of PD (worst seed)",
        **calibrated)))
    out.append(controlled(lambda x: check_at_most(
        f"{run}: irrelevant tokens near zero", "the cloud of irrelevant tokens sits near zero",
        x["irrelevant_spread"], levels["irrelevant_spread"], f"{fig} of paper B", **cite("B:fig2-irrelevant"),
        metric=f"median |<E_s, v>| over |PD| < {IRRELEVANT:g} divided by the median over |PD| > {CLEAR:g} (worst "
               "seed)", **calibrated)))
    for key in CORRELATIONS:
        what = "<E_s, v> with PD" if key.endswith("v_pd") else "<E_s, p> with |PD|"
        name = key.split("_")[0].capitalize()
        out.append(controlled(lambda x, key=key, what=what, name=name: check_at_least(
            f"{run}: {key}", f"{what}: {name} correlation", x[key], levels[key], f"{fig} of paper B",
            **cite(v_claim if key.endswith("v_pd") else p_claim),
            metric=f"{name} correlation of {what} over the tokens (worst seed)", **calibrated)))
    return out


def fade(history: History) -> dict[str, float]:
    """The correlation Pearson(<E_s, v>, PD) over the epochs (seed mean): its peak, the epoch of the peak, and its
    final value (the recipe's fade: the training loss keeps falling while the correlation weakens)."""
    corr = history["pearson_v_pd"].mean(1)
    epochs = history["epoch"][:, 0]
    i = int(np.nanargmax(corr))
    return {"peak": float(corr[i]), "peak_epoch": float(epochs[i]), "final": float(corr[-1]),
            "final_epoch": float(epochs[-1]), "final_loss": float(history["loss"][-1].mean())}


def classifier_section(out, fig_id: str, title: str, runs: list[tuple[str, str, History, dict]], *,
                       color_by: str, caption: str) -> FigureSpec:
    """Write each run's per-token CSV (``tokens-<run>.csv``) and return the scatter figure drawn from them."""
    panels = []
    for run, label, _, table in runs:
        path = out / f"tokens-{run}.csv"
        write_text(path, token_table_csv(table))
        saved = read_token_table(path)
        panels.append((label, saved, correlations(saved)[int(saved["seed"].min())]))
    return FigureSpec(fig_id, title, caption, "attention.embeddings", {"panels": panels, "color_by": color_by})
