"""``reproduce attention``: paper B's synthetic experiments and theory checks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..._tensor import resolve_device
from ...geometry.attention import selection as gs
from ...io import ensure_dir, write_npz
from ...results import Check, FigureSpec, RunResult, Section, Table
from ...training.history import History
from ..base import Group, Preset, RunContext, raise_if_failed, register_group, register_preset, register_trainer
from ..claims import cite
from .checks import (
    SYNTHETIC_THRESHOLDS,
    lemma41_checks,
    pattern_checks,
    stage_one_checks,
    stage_two_checks,
)
from .config import FIG2, STAGE2_GD, STAGE2_LEMMA44, STAGE2_NGD, AttentionConfig, Lemma41Config, StageTwoConfig, _fig2
from .figure3 import classifier_section, figure_checks
from .imdb_grade import LEVEL_SOURCE, LEVELS, at_paper_settings
from .runs import (
    StageTwoRun,
    correlations,
    lemma41_sweep,
    level_means,
    run_stage_two,
    theorem_gap_facts,
    token_table,
    train_classifier,
)


def fig2_pattern_rows(run: str, table: dict[str, np.ndarray], setting: str) -> list[tuple]:
    """Fig. 2's statements (Sec. 5 of paper B) beside one run's values (first seed), each with a verdict: the
    correlations against the report's calibrated pattern levels (SYNTHETIC_THRESHOLDS), the orderings exactly."""
    seed = int(table["seed"].min())
    corr = correlations(table)[seed]
    keys, mean_v, mean_p = level_means(table, seed)
    ordered_v = bool(np.all(np.diff(mean_v[keys != 0]) > 0))
    by_level = np.array([mean_p[np.abs(keys) == k].mean() for k in range(int(np.abs(keys).max()) + 1)])
    ordered_p = bool(np.all(np.diff(by_level) > 0))
    m = table["seed"] == seed
    irrelevant = table["level"][m] == 0
    abs_v = np.abs(table["e_dot_v"][m])
    level = SYNTHETIC_THRESHOLDS

    def verdict(ok: bool, what: str) -> str:
        return (f"agrees ({what})" if ok else f"differs ({what} fails)") + f"; {setting}"

    label = f"{run} ({'v trained, the paper' if 'fixed' not in run else 'v fixed, the theory'})"
    ratio = float(np.median(abs_v[irrelevant]) / np.median(abs_v[~irrelevant]))
    return [
        (f"{label}: <E_s, v> increases with PD(s), the polarities separated", "yes (right panel)",
         f"Pearson {corr['pearson_v_pd']:.3f}, Spearman {corr['spearman_v_pd']:.3f}; level means "
         f"{'ordered' if ordered_v else 'not ordered'}",
         verdict(corr["pearson_v_pd"] >= level["pearson_v_pd"] and ordered_v,
                 f"Pearson >= {level['pearson_v_pd']:g} and the 2K signed level means increasing")),
        (f"{label}: <E_s, p> increases with |PD(s)|, higher for more important levels", "yes (left panel)",
         f"Pearson {corr['pearson_p_abs_pd']:.3f}, Spearman {corr['spearman_p_abs_pd']:.3f}; level means "
         f"{'ordered' if ordered_p else 'not ordered'}",
         verdict(corr["pearson_p_abs_pd"] >= level["pearson_p_abs_pd"] and ordered_p,
                 f"Pearson >= {level['pearson_p_abs_pd']:g} and the means of levels 0..K increasing")),
        (f"{label}: the irrelevant tokens form a cloud around zero", "yes (caption)",
         f"median |<E_s, v>|: irrelevant / relevant = {ratio:.3f}",
         verdict(ratio < 0.5, "the irrelevant median below half the relevant one")),
    ]


def selection_table(r: StageTwoRun, run: str) -> Table:
    """Per run: the final selection S_X(p_T) and the max-margin problem (12) for it (status, size, certificate)."""
    seeds = sorted({row["seed"] for row in r.history.rows()})
    rows = []
    for seed, o in zip(seeds, r.own, strict=True):
        svm = o.svm
        rows.append((seed, int(o.selected.sum()), svm.status, svm.message or "-", svm.n_ineq, svm.n_eq,
                     svm.certified, o.cosine, o.normalized_margin, o.max_margin))
    return Table(f"{run}: final selection S_X(p_T) and its max-margin problem (12)",
                 ("seed", "selected positions", "status", "message", "inequalities", "ties", "certified",
                  "cos(p_T, p̂)", "normalized margin", "max margin 1/||p̂||"), tuple(rows))


def train_attention(cfg: AttentionConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` for an attention config: one run directory with the per-token CSV, scatter, checks."""
    out = ensure_dir(ctx.out)
    data = cfg.data.build()
    section = Section("train", f"Paper B: {cfg.model.kind.replace('_', '-')} model on {data.description}",
                      facts={**data.facts, "model": cfg.model.kind, "d": cfg.model.d, "epochs": cfg.train.epochs,
                             "optimizer": cfg.optimizer.name, "lr": cfg.optimizer.lr})
    ctx.say(f"training {cfg.model.kind} on {data.description}")
    history, problem = train_classifier(cfg, data, ctx, "train")
    section.seconds = history.seconds
    if history.status != "completed":
        section.notes.append(history.message)
        return RunResult(section, cfg, [history], {"status": history.status}, failure=history)
    table = token_table(data, problem, history)
    color = "level" if data.level is not None else "count"
    section.plots.append(classifier_section(
        out, "embeddings", "Learned embeddings against the posterior difference",
        [("train", data.description, history, table)], color_by=color,
        caption="Each point is a token s: <E_s, p> (left) and <E_s, v> (right) against PD(s) (eq. (18)). "
                "Per-token values: tokens-train.csv."))
    section.plots.append(FigureSpec("training", "Training", "Loss and accuracy on the whole data, and the two "
                                    "correlations, per epoch.", "attention.training",
                                    {"rows": history.rows(), "runs": ["train"]}))
    if cfg.data.is_text:  # Figs. 1/3 as the figures show them; levels only at the paper's settings
        paper = at_paper_settings(cfg)
        section.checks.extend(figure_checks("train", table, history, model=cfg.model.kind, converged=paper,
                                            setting=f"d = {cfg.model.d}, {cfg.train.epochs} epochs",
                                            levels=LEVELS.get("paper", {}).get(cfg.model.kind) if paper else None,
                                            level_source=LEVEL_SOURCE["paper"]))
    else:
        section.checks.extend(pattern_checks("train", table, history, data_seed=cfg.data.seed))
    return RunResult(section, cfg, [history],
                     {"status": history.status, "final": history.at(), "correlations": correlations(table)})


register_trainer("attention", AttentionConfig, train_attention)


def train_stage2(cfg: StageTwoConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` for a stage-2 config: metrics, the stage-2 figure, Theorem 4.3 checks."""
    out = ensure_dir(ctx.out)
    r = run_stage_two(cfg, ctx, "train")
    section = Section("train", f"Paper B stage 2 ({cfg.optimizer.name}) on {r.data.description}",
                      facts={**r.data.facts, "d": cfg.model.d, "η₀": cfg.stage1.eta0,
                             **theorem_gap_facts(cfg, r.data.ds)},
                      seconds=r.history.seconds)
    if r.assumption1:
        section.notes.append(f"the data violate Assumption 1 ({r.assumption1}); only the checks that do not need "
                             "it are run")
    section.plots.append(FigureSpec("stage2", "Stage 2", "cos with the max-margin direction, selection accuracy, "
                                    "||p_t|| and the loss above its floor.", "attention.stage_two",
                                    {"rows": r.history.rows(), "runs": {"train": cfg.optimizer.name}}))
    if r.history.status == "completed":
        section.checks.extend(stage_two_checks(r, "train"))
        section.tables.append(selection_table(r, "train"))
    else:
        section.notes.append(r.history.message)
    write_npz(out / "stage2.npz", p_final=r.history.params["p"],
              p_hat=None if r.references is None or not all(x.feasible for x in r.references)
              else torch.stack([x.p_hat for x in r.references]))
    return RunResult(section, cfg, [r.history], {"status": r.history.status, "final": r.history.at()},
                     failure=r.history)


register_trainer("attention-stage2", StageTwoConfig, train_stage2)


FIGURES = {
    "attention-fig2": "Fig. 2: one-layer model (AdamW, all parameters) on K-level data: <E_s, p>, <E_s, v> vs PD(s)",
    "attention-lemma41": "Lemma 4.1: one-step error vs d against 11 η₀ d^{-1/4}; <E¹_s - E⁰_s, v> vs (η₀/2) α_s",
    "attention-stage2": "Stage 2 (Thm 4.3, Lemmas 4.4-4.5): cos with the max-margin direction, selection accuracy",
}


def _lemma41_config(scale: str, seeds: int) -> Lemma41Config:
    base = Lemma41Config()
    if scale == "paper":
        return replace(base, dims=(256, 1024, 4096, 16384, 65536), seeds=max(5, seeds))
    if scale == "smoke":
        return replace(base, dims=(256, 1024), seeds=seeds)
    return replace(base, seeds=max(base.seeds, seeds))


def _stage2_configs(scale: str, seeds: int, device: str) -> dict[str, StageTwoConfig]:
    """Stage-2 runs: quick 3 seeds (GD 10^4 steps), paper 10 seeds (GD 10^5 steps), smoke 300 steps."""
    n = {"paper": 10, "quick": 3}.get(scale, 1)
    runs = {"stage2-ngd": replace(STAGE2_NGD, seeds=max(seeds, n), device=device),
            "stage2-gd": replace(STAGE2_GD, seeds=max(seeds, n), device=device),
            "stage2-lemma44": replace(STAGE2_LEMMA44, seeds=1 if scale != "paper" else 4, device=device)}
    if scale == "paper":
        runs["stage2-gd"] = replace(runs["stage2-gd"], train=replace(runs["stage2-gd"].train, steps=100_000,
                                                                     log_points=51))
    if scale == "smoke":
        runs = {k: replace(v, train=replace(v.train, steps=300, log_points=20)) for k, v in runs.items()}
        runs["stage2-lemma44"] = replace(runs["stage2-lemma44"], model=replace(runs["stage2-lemma44"].model, d=1024))
    return runs


def run_group(ctx: RunContext) -> RunResult:
    """Reproduce paper B's synthetic experiments and theory checks into ``ctx.out``."""
    out = ensure_dir(ctx.out)
    resolve_device(ctx.device)
    section = Section("attention", "Paper B: attention with trained embeddings selects important tokens",
                      description="Wu, Shevchenko, Oymak, Mondelli. One gradient step aligns each embedding with v "
                                  "in proportion to its average signed frequency α_s (Lemma 4.1); the <cls> "
                                  "embedding p then converges in direction to a max-margin solution that selects "
                                  "the important tokens (Thm 4.3, Lemma 4.5). Jointly trained models show the same "
                                  "picture (Figs. 1-3).")
    histories: list[History] = []
    configs: dict = {}

    if ctx.wants("attention-lemma41"):
        cfg = _lemma41_config(ctx.scale, ctx.seeds)
        configs["lemma41"] = cfg
        ctx.say("Lemma 4.1 sweep over d")
        arrays = lemma41_sweep(cfg, device=resolve_device(ctx.device))
        write_npz(out / "lemma41.npz", **arrays)
        with np.load(out / "lemma41.npz") as saved:
            arrays = dict(saved)
        section.checks.extend(lemma41_checks(arrays))
        section.facts["Lemma 4.1: condition (5) on d (δ = 0.01)"] = float(arrays["d_condition"])
        section.facts["Lemma 4.1: largest error / bound"] = float((arrays["error"] / arrays["bound"][:, :, None]).max())
        section.plots.append(FigureSpec("attention-lemma41", "One gradient step (Lemma 4.1)",
                                    "Left: the one-step error max{max_s ||err_s||, ||err_p||}/η₀ against d (seeds: "
                                    "band), the bound 11 d^{-1/4} of (7) and a d^{-1/2} reference. Right: the shift "
                                    "<E¹_s - E⁰_s, v> against its prediction (η₀/2) α_s (largest η₀) at the smallest "
                                    "and largest d, with the line y = x.", "attention.lemma41",
                                    {"arrays": arrays}))

    if ctx.wants("attention-stage2"):
        stage2 = _stage2_configs(ctx.scale, ctx.seeds, ctx.device)
        data = stage2["stage2-ngd"].data.build()
        section.facts.update({f"stage 2: {k}": v for k, v in theorem_gap_facts(stage2["stage2-ngd"], data.ds).items()})
        results = {}
        for run, cfg in stage2.items():
            configs[run] = cfg
            ctx.say(f"stage 2: {run}")
            r = run_stage_two(cfg, ctx, run, data=None if run == "stage2-lemma44" else data,
                              reference="one_irrelevant" if run == "stage2-lemma44" else "important")
            raise_if_failed(r.history)
            results[run] = r
            histories.append(r.history)
            section.seconds += r.history.seconds
            section.checks.extend(stage_two_checks(r, run))
        ngd = results["stage2-ngd"]
        section.tables.append(selection_table(ngd, "stage2-ngd"))
        section.checks.extend(stage_one_checks(ngd.config, ngd.data))
        gap = gs.lemma45_gap(ngd.stages[0].E1, data.ds, solver=ngd.config.model.solver,
                             samples=LEMMA45_SAMPLES[ctx.scale])
        section.checks.append(Check("Lemma 4.5: margin gap", "||p̂|| <= (1 - μ)||p̂'|| with μ > 0 for every selection "
                                    "p̂' that also ties one irrelevant token (the corrected direction)",
                                    gap.mu, "> 0", gap.mu > 0, "Lemma 4.5 of paper B", kind="theorem",
                                    **cite("B:lemma45-expect"), metric="μ = 1 - max ||p̂||/||p̂'|| over the "
                                    "alternative selections p̂' (the lemma's hypothesis, with the inequality in the "
                                    "direction its explanation gives)",
                                    premise="Assumption 1", premise_met=not ngd.assumption1,
                                    threshold_source=f"the lemma's condition μ > 0 over {gap.n_checked} of the "
                                                     f"{gap.n_possible:.3g} alternative selections: every one that "
                                                     f"adds one irrelevant token and {len(gap.sampled_norms)} random "
                                                     "ones that add several"))
        section.tables.append(Table("Stage 2: final values per run (worst seed)",
                                    ("run", "steps", "||p_t||", "cos(p_t, p̂)", "selection accuracy",
                                     "margin / max margin", "loss - floor"),
                                    tuple(_stage_two_row(run, r) for run, r in results.items())))
        section.tables.append(Table("Lemma 4.5's gap condition (seed 0)", ("quantity", "value"), (
            ("||p̂|| (only s*_X selected)", gap.norm), ("alternatives (X, irrelevant u)", len(gap.alternatives)),
            ("random alternatives (several irrelevant tokens)", len(gap.sampled_norms)),
            ("alternative selections in all", gap.n_possible),
            ("infeasible alternatives", gap.n_infeasible), ("max ||p̂|| / ||p̂'||", gap.ratio), ("μ", gap.mu))))
        write_npz(out / "stage2.npz", **{f"{run}_p_final": r.history.params["p"] for run, r in results.items()},
                  **{f"{run}_p_hat": torch.stack([x.p_hat for x in r.references])
                     for run, r in results.items() if r.references is not None})
        stage2_rows = [row for h in histories for row in h.rows()]
        section.plots.append(FigureSpec("attention-stage2", "Stage 2: p converges to the max-margin direction",
                                    "A1-base data (n = 16, T = 6, 4 + 4 relevant and 12 irrelevant tokens), d = 1024, "
                                    "η₀ = 200; mean and min-max band over seeds. Normalized GD follows the flow (9) "
                                    "up to a time change and reaches the direction of Lemma 4.5's p̂; plain GD is "
                                    "logarithmically slow in direction.", "attention.stage_two",
                                    {"rows": stage2_rows, "runs": {"stage2-ngd": "normalized GD (h = 0.5)",
                                                                   "stage2-gd": "GD (h = 1)"}}))

    if ctx.wants("attention-fig2"):
        base = replace(_fig2(ctx.scale), seeds=max(1, ctx.seeds), device=ctx.device)
        data = base.data.build()
        section.facts.update({f"Fig. 2 data: {k}": v for k, v in data.facts.items()})
        panels, corr_rows, fig2_histories = [], [], []
        for run, train_v, label in V_VARIANTS["fig2"]:
            cfg = replace(base, model=replace(base.model, train_v=train_v))
            configs[run] = cfg
            ctx.say(f"Figure 2: one-layer model on K-level data, {label}")
            history, problem = train_classifier(cfg, data, ctx, run)
            raise_if_failed(history)
            histories.append(history)
            fig2_histories.append(history)
            section.seconds += history.seconds
            table = token_table(data, problem, history)
            section.checks.extend(pattern_checks(run, table, history, data_seed=cfg.data.seed))
            corr = correlations(table)
            corr_rows += [(run, s, *c.values(), max(history.at()["loss"])) for s, c in corr.items()]
            panels.append((run, f"{data.description}, {label}", history, table))
        section.tables.append(Table("Fig. 2: correlations and final loss per run and seed",
                                    ("run", "seed", *next(iter(corr.values())), "final loss"), tuple(corr_rows)))
        section.plots.append(classifier_section(
            out, "attention-fig2", "Figure 2: one-layer model on K-level data", panels, color_by="level",
            caption=f"<E_s, p> (left) and <E_s, v> (right) against PD(s) after AdamW training (d = {base.model.d}, "
                    f"{base.train.epochs} epochs, lr {base.optimizer.lr:g}) of all parameters (top row, the paper's "
                    "setting) and with v fixed at a random unit vector (bottom row, the theory's setting); colour: "
                    "importance level k (grey: irrelevant tokens S~). Per-token values: tokens-<run>.csv."))
        why = "the paper's setting" if ctx.scale == "paper" else f"{ctx.scale} scale (minutes on a CPU)"
        same = "agrees" if ctx.scale == "paper" else "differs"
        header = ("quantity", "paper B", "ntpbias", "verdict and why")
        rows = [("embedding dimension d", FIG2.model.d, base.model.d, f"{same}: {why}"),
                ("epochs", FIG2.train.epochs, base.train.epochs, f"{same}: {why}"),
                ("AdamW learning rate", FIG2.optimizer.lr, base.optimizer.lr,
                 f"{same}: {why}" + ("" if ctx.scale == "paper" else ": fewer epochs, larger steps")),
                ("trained parameters", "all (E, p, v)", "all (E, p, v); v fixed in the theory variant", "agrees")]
        for run, _, _, table in panels:
            rows += fig2_pattern_rows(run, table, why)
        section.tables.append(Table("Paper vs ntpbias (Fig. 2)", header, tuple(rows)))
        section.plots.append(FigureSpec("attention-fig2-training", "Figure 2: training", "Loss and accuracy on the "
                                        "training data and the two correlations of the figure, per epoch, with v "
                                        "trained and with v fixed.", "attention.training",
                                        {"rows": [r for h in fig2_histories for r in h.rows()],
                                         "runs": [h.run for h in fig2_histories]}))
    return RunResult(section, configs, histories, {"scale": ctx.scale, "seeds": ctx.seeds,
                                                   "figures": list(FIGURES if ctx.figures is None else ctx.figures)})


#: random multi-token alternatives of Lemma 4.5's gap condition per scale (every one-token alternative is solved too)
LEMMA45_SAMPLES = {"smoke": 20, "quick": 200, "paper": 2000}
#: the joint-training runs of Figs. 1-3: v trained (Sec. 5 of paper B trains all parameters) and v fixed (the theory)
V_VARIANTS = {"fig2": (("fig2", True, "v trained"), ("fig2-v-fixed", False, "v fixed"))}


def _stage_two_row(run: str, r: StageTwoRun) -> tuple:
    last = r.history.at()
    worst = {k: (max if k == "loss_above_floor" else min)(last[k]) if k in last else float("nan")
             for k in ("p_norm", "cos_mm", "selection_accuracy", "margin_mm", "loss_above_floor")}
    return (run, r.history.step, *worst.values())


for _name, _desc, _make in (
    ("attention-fig2", "Fig. 2 of paper B: one-layer model, AdamW on K-level data (|S|=2048, K=8, T=256); "
     "paper: d=2048, lr 1e-4, 196 epochs (quick: d=256, lr 1e-3, 10 epochs)", _fig2),
    ("attention-stage2", "Paper B stage 2: normalized GD (h=0.5) on p with E fixed at E¹, A1-base data, "
     "d=1024, η₀=200", lambda s: STAGE2_NGD),
    ("attention-stage2-gd", "Paper B stage 2 by plain GD (h=1, 10^4 steps), A1-base data", lambda s: STAGE2_GD),
    ("attention-stage2-lemma44", "Paper B Lemma 4.4 case: one irrelevant token, d=16384, normalized GD",
     lambda s: STAGE2_LEMMA44),
):
    register_preset(Preset(_name, _desc, _make))

register_group(Group("attention", "Paper B: attention with trained embeddings (synthetic data and theory)",
                     FIGURES, run_group,
                     presets=("attention-fig2", "attention-stage2", "attention-stage2-gd", "attention-stage2-lemma44")))
