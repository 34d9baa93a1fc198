"""``reproduce optimizers``: which max-margin direction each optimizer finds, in every norm (docs/optimizers.md)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...errors import DataError
from ...geometry.linear.loss import smoothness_bound
from ...geometry.norms import NORMS
from ...io import ensure_dir
from ...results import RunResult, Section
from ...training.history import History
from ..base import RunContext, raise_if_failed
from ..catalog import GROUPS
from .checks import approach_table, f_bound_check, findings, mismatches, onehot_checks, sanity_checks
from .config import DATASET_TITLES, DATASETS, GROUP, MEMBERS, ROSTER, run_config
from .runs import dataset, final_table, margins_figure, norm_references, save_references, svm_table, train_run

FIGURES = GROUPS[GROUP].figures
LABELS = {m.name: m.label for m in ROSTER}


def run_group(ctx: RunContext) -> RunResult:
    """Train every optimizer of the roster on each dataset and measure it in every norm."""
    out = ensure_dir(ctx.out)
    section = Section(GROUP, "Beyond paper A: which max-margin direction each optimizer finds, in every norm",
                      description="Normalized steepest descent in a norm converges in direction to that norm's "
                                  "max-margin solution on separable one-hot data (Gunasekar et al. 2018; Fan, Schmidt "
                                  "& Thrampoulidis 2025): sign descent and Adam to the linf one, spectral descent and "
                                  "Muon to the spectral one. Here every optimizer is measured in the l2, linf, l1, "
                                  "spectral and nuclear norms against the NTP-SVM of each norm, on one-hot data (known "
                                  "results: theorem checks of which norm's maximum each optimizer's margin approaches, "
                                  "each controlled by the optimizers whose limit is another norm), paper A's Fig. 4 "
                                  "data and real text (NTP data with soft labels: findings, stated as conjectures).")
    histories: list[History] = []
    configs = {}
    summary: dict = {"scale": ctx.scale, "seeds": ctx.seeds, "final": {}}
    for name in DATASETS:
        if not ctx.wants(f"{GROUP}-{name}"):
            continue
        ctx.say(f"{name}: data and the NTP-SVM in each norm")
        try:
            data_cfg, data = dataset(name, ctx.scale, out, device=ctx.device)
        except DataError as exc:  # the corpus needs the text extra
            section.notes.append(f"{name}: skipped ({exc})")
            continue
        ref = norm_references(data, NORMS)
        save_references(out / "data" / f"{name}_geometry.npz", ref)
        section.tables.append(svm_table(DATASET_TITLES[name], ref))
        section.notes.extend(f"{name}: {note}" for note in ref.notes)
        section.facts[f"{name}: m / V / d / H"] = f"{data.m} / {data.V} / {data.d} / {data.entropy:.4g}"
        mine = []
        for member in MEMBERS:
            run = f"{name}-{member}"
            cfg = run_config(data_cfg, member, data.V, data.d, ctx.scale, smoothness_bound(data))
            cfg = replace(cfg, seeds=max(cfg.seeds, ctx.seeds), device=ctx.device)
            configs[run] = cfg
            ctx.say(f"training {run}")
            history = train_run(cfg, data, ref, ctx, run)
            raise_if_failed(history)
            histories.append(history)
            mine.append(history)
            section.seconds += history.seconds
        norms = [n for n in NORMS if n in ref.W_mm]
        labels = {f"{name}-{m}": LABELS[m] for m in MEMBERS}
        section.tables.append(final_table(f"Optimizer x norm at the last step: {DATASET_TITLES[name]} (margin ratio = "
                                          "normalized margin of P_⊥ W_k in the norm / its maximum)", mine, labels,
                                          norms))
        section.checks.extend(sanity_checks(name, mine, ref))
        if name == "onehot":
            section.tables.append(approach_table(DATASET_TITLES[name], mine, ref))
            section.checks.extend(onehot_checks(name, mine, configs, data, ref, data_cfg.seed))
            section.notes.extend(mismatches(name, mine, ref))
        else:
            section.tables.append(findings(name, mine, ref))
        section.checks.extend(f_bound_check(name, mine, data, ref))
        section.plots.append(margins_figure(f"{GROUP}-{name}", f"Margin ratio in each norm: {DATASET_TITLES[name]}",
                                            mine, labels, norms, data.entropy))
        summary["final"][name] = {h.run: {k: float(np.mean(v)) for k, v in h.at().items()} for h in mine}
    return RunResult(section, configs, histories, summary)

