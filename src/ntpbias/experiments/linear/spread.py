"""Figs. 4-5 over many random datasets (issue: the paper shows one draw): the band of the training curves of GD, NGD
and Adam over datasets the calibration never saw, and where the graded dataset (data seed 0) lies in it."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...results import FigureSpec, Table
from ..base import RunContext, raise_if_failed
from .config import FIG4, FIG5_ADAM, FIG5_NGD, scaled
from .runs import data_for, prepare, reference, train_run

#: datasets per scale; their data seeds start at SPREAD_SEED0 (outside the calibration seeds 1-8 and the graded 0)
SPREAD_DATASETS = {"smoke": 2, "quick": 4, "paper": 20}
SPREAD_SEED0 = 100
OPTIMIZERS = (("gd", FIG4), ("ngd", FIG5_NGD), ("adam", FIG5_ADAM))
METRICS = ("loss_gap", "cos_mm", "F_error_rel")


def run_spread(ctx: RunContext, graded: dict[str, dict]) -> tuple[list, FigureSpec, Table]:
    """Train the three optimizers of Figs. 4-5 on ``SPREAD_DATASETS[ctx.scale]`` fresh datasets; return the histories,
    the band figure and a table of final values (median and range over datasets, the graded run's value and its
    rank). ``graded``: the final values of the data-seed-0 runs by optimizer (``history.at()``), when trained."""
    seeds = range(SPREAD_SEED0, SPREAD_SEED0 + SPREAD_DATASETS[ctx.scale])
    histories, curves, rows = [], {}, []
    for s in seeds:
        base = prepare(scaled(replace(FIG4, data=replace(FIG4.data, seed=s)), ctx.scale), ctx)
        data = data_for(base)
        ref, _ = reference(data, base.model.solver)
        for name, preset in OPTIMIZERS:
            cfg = prepare(scaled(replace(preset, data=base.data), ctx.scale), ctx)
            ctx.say(f"spread: {name} on data seed {s}")
            history = train_run(cfg, data, ref, ctx, f"spread-{name}-{s}")
            raise_if_failed(history)
            histories.append(history)
            curves.setdefault(name, []).append(history)
    steps = histories[0].steps
    data = {name: {m: np.concatenate([h[m][:, :1] for h in hs], axis=1) for m in METRICS}
            for name, hs in curves.items()}
    for name, _ in OPTIMIZERS:
        for m in METRICS:
            final = data[name][m][-1]
            ours = graded.get(name, {}).get(m)
            mine = None if ours is None else min(ours)
            rank = "" if mine is None else f"{int(np.sum(final <= mine))} of {len(final)} at or below"
            rows.append((name, m, float(np.median(final)), float(final.min()), float(final.max()), mine, rank))
    table = Table(f"Figs. 4-5 over {len(seeds)} fresh datasets (data seeds {seeds.start}-{seeds.stop - 1}): final "
                  "values", ("optimizer", "metric", "median", "min", "max", "data seed 0", "rank of data seed 0"),
                  tuple(rows))
    fig = FigureSpec("linear-spread", f"Figs. 4-5 over {len(seeds)} datasets",
                     "Mean (geometric on log axes) and min-max band over fresh random datasets (Figs. 4-5's "
                     "generator) of CE - H, cos(W_k, W^mm) and the F-part error, for GD (η = 0.5), normalized GD "
                     "and Adam (η = 0.01): the paper shows a single draw.", "linear.spread",
                     {"steps": steps, "curves": data})
    return histories, fig, table
