"""``reproduce lm``: the planted control with its graded checks, and Shakespeare with its findings
(docs/lm.md#what-the-runs-show)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ...geometry.linear.loss import smoothness_bound
from ...io import ensure_dir, write_json, write_npz
from ...results import FigureSpec, RunResult, Section, Table
from ...training.history import History
from ...training.optimizers import OptimizerConfig
from ..base import RunContext, raise_if_failed
from ..catalog import GROUPS
from ..linear.checks import run_checks
from ..linear.config import LinearConfig, LinearDataConfig, LinearModelConfig, LinearTrainConfig
from ..linear.runs import reference, train_run
from .analysis import LMAnalysis, RunModels, analyze_models, text_contexts
from .checks import frozen_checks, model_checks, support_check
from .config import PLANTED_CHAIN, SHAKESPEARE, LMConfig, scaled
from .runs import prepare, train_model

FIGURES = GROUPS["lm"].figures
#: GD steps of the frozen-feature run, by scale
FROZEN_STEPS = {"smoke": 300, "quick": 20_000, "paper": 100_000}


@dataclass
class PlantedControl:
    """One planted control: the model's training, its analysis at T = 1, and the frozen-feature run."""

    cfg: LMConfig
    history: History
    analysis: LMAnalysis
    frozen_cfg: LinearConfig
    frozen: History
    frozen_facts: dict
    facts: dict
    checks: list


def planted_control(cfg: LMConfig, ctx: RunContext, folder: Path) -> PlantedControl:
    """Train the decoder on the planted chain of ``cfg`` into ``folder``, measure every checkpoint on the chain's text
    at context length 1, and run GD on a linear decoder over the final features (docs/lm.md#the-planted-control)."""
    ctx.say(f"planted chain {cfg.data.seed}: training")
    history, _, facts = train_model(cfg, ctx, f"planted-{cfg.data.seed}", folder)
    raise_if_failed(history)
    models = RunModels(folder)
    ctx.say(f"planted chain {cfg.data.seed}: geometry at every checkpoint")
    text = text_contexts(models, cfg.data.read_lines(), 1, source=f"planted chain {cfg.data.seed}")
    result = analyze_models(models, text, figure_prefix="lm-planted", say=ctx.say)
    result.data.save(folder / "ntp_data.npz", W=result.W)
    lr = 1 / (2 * smoothness_bound(result.data))
    frozen_cfg = LinearConfig(data=LinearDataConfig(source="file", path=str(folder / "ntp_data.npz")),
                              model=LinearModelConfig(init="zeros"), optimizer=OptimizerConfig(name="gd", lr=lr),
                              train=LinearTrainConfig(steps=FROZEN_STEPS[ctx.scale], log_points=60))
    ctx.say(f"planted chain {cfg.data.seed}: GD on the final features (η = 1/(2L) = {lr:.3g})")
    ref, frozen_facts = reference(result.data)
    frozen = train_run(frozen_cfg, result.data, ref, ctx, f"frozen-{cfg.data.seed}")
    raise_if_failed(frozen)
    checks = [support_check(result.data, cfg.data.planted()[1]),
              *(replace(c, name=f"planted: {c.name}") for c in result.section.checks)]
    if ref.W_mm is not None:  # paper A's statements, where their premises hold (theorem_premise decides)
        kinds = ("theorem", "sanity") if ctx.scale != "smoke" else ("sanity",)
        checks += [replace(c, name=c.name.replace(f"frozen-{cfg.data.seed}", "frozen features"))
                   for c in run_checks(f"frozen-{cfg.data.seed}", frozen_cfg, frozen, result.data, ref)
                   if c.kind in kinds]
    return PlantedControl(cfg, history, result, frozen_cfg, frozen, frozen_facts, facts, checks)


def run_group(ctx: RunContext) -> RunResult:
    """Reproduce the language-model experiments into ``ctx.out`` (a run directory)."""
    out = ensure_dir(ctx.out)
    data_dir = ensure_dir(out / "data")
    section = Section("lm", "Beyond paper A: the NTP geometry of a transformer language model",
                      description="A GPT-style decoder read as paper A's linear decoder on its own last hidden states "
                                  "and as the log-bilinear model (docs/lm.md): on a planted Markov chain whose "
                                  "next-token supports are known (graded), and on Shakespeare (findings).")
    configs, histories, rows = {}, [], []
    graded = ctx.scale != "smoke"
    if ctx.wants("lm-planted") or ctx.wants("lm-frozen"):
        cfg = prepare(scaled(PLANTED_CHAIN, ctx.scale), ctx)
        run = planted_control(cfg, ctx, out / "models" / "planted")
        configs.update({"planted": cfg, "frozen": run.frozen_cfg})
        histories += [run.history, run.frozen]
        rows += _geometry_rows(run.analysis.rows, "planted-geometry", cfg.seed)
        section.seconds += run.history.seconds + run.frozen.seconds
        section.facts.update({f"planted: {k}": v for k, v in {**run.facts, **run.analysis.section.facts}.items()})
        section.checks += run.checks
        if graded:
            section.checks += model_checks(run.analysis.rows, cfg.data.seed)
            section.checks += frozen_checks(run.frozen, cfg.data.seed)
        section.tables += [replace(t, title=f"Planted chain: {t.title.lower()}") for t in run.analysis.section.tables]
        section.tables.append(_frozen_table(run))
        if ctx.wants("lm-planted"):
            section.plots += run.analysis.section.plots
        if ctx.wants("lm-frozen"):
            section.plots.append(FigureSpec("lm-frozen", "GD on the model's final features (planted chain)",
                                            "Paper A's setting on the model's own features: the unembedding trained "
                                            "alone from W = 0 by GD with η = 1/(2L), features frozen at the last "
                                            "checkpoint. CE against the entropy, ||W||, cos with W^mm, F-part error.",
                                            "linear.training", {"rows": run.frozen.rows(), "run": run.frozen.run,
                                                                "entropy": run.analysis.data.entropy}))
        write_json(data_dir / "planted_analysis.json", run.analysis.record)
        write_npz(data_dir / "planted_geometry.npz", **run.analysis.arrays)
    if ctx.wants("lm-shakespeare"):
        cfg = prepare(scaled(SHAKESPEARE, ctx.scale), ctx)
        folder = out / "models" / "shakespeare"
        ctx.say("Shakespeare: training")
        history, _, facts = train_model(cfg, ctx, "shakespeare", folder)
        raise_if_failed(history)
        models = RunModels(folder)
        lines, limit = models.training_text()
        text = text_contexts(models, lines, 1, max_tokens=limit, source="shakespeare")
        result = analyze_models(models, text, figure_prefix="lm-shakespeare", say=ctx.say)
        configs["shakespeare"] = cfg
        histories.append(history)
        rows += _geometry_rows(result.rows, "shakespeare-geometry", cfg.seed)
        section.seconds += history.seconds
        section.facts.update({f"shakespeare: {k}": v for k, v in {**facts, **result.section.facts}.items()})
        section.checks += [replace(c, name=f"shakespeare: {c.name}") for c in result.section.checks]
        section.tables += [replace(t, title=f"Shakespeare: {t.title.lower()} (findings)")
                           for t in result.section.tables]
        section.notes += [f"Shakespeare: {n}" for n in result.section.notes]
        section.plots += result.section.plots
        write_json(data_dir / "shakespeare_analysis.json", result.record)
    if not graded:
        section.notes.append("smoke scale: nothing is graded beyond the certificates (the levels are for quick scale)")
    return RunResult(section, configs, histories, {"scale": ctx.scale, "seeds": ctx.seeds,
                                                   "figures": list(FIGURES if ctx.figures is None else ctx.figures)},
                     rows=rows)


def _geometry_rows(rows: list[dict], run: str, seed: int) -> list[dict]:
    """The analysis over checkpoints as metrics.csv rows (numbers only: undefined values left empty, the names of the
    methods that decided left out)."""
    return [{"run": run, "step": r["step"], "seed": seed,
             **{k: float(v) if v is not None else None for k, v in r.items() if k != "step" and not isinstance(v, str)}}
            for r in rows]


def _frozen_table(run: PlantedControl) -> Table:
    last = run.frozen.at()
    keys = ("loss_gap", "F_error_rel", "cos_mm", "cos_mm_corrected", "margin_perp", "norm")
    return Table(f"GD on the final features (η = {run.frozen_cfg.optimizer.lr:.3g}, {run.frozen.step} steps; planted "
                 "chain)", ("quantity", "value"), tuple((k, float(f"{last[k][0]:.4g}")) for k in keys)
                 + tuple((k, v if not isinstance(v, float) else float(f"{v:.4g}"))
                         for k, v in run.frozen_facts.items() if k in ("NTP_H-compatible", "NTP-separable", "||W^mm||",
                                                                        "1/(2L)")))


__all__ = ["FIGURES", "PlantedControl", "planted_control", "run_group"]
