"""Calibration of paper B's pattern levels on other data than the graded (``reproduce attention`` grades the K-level
sample of Fig. 2 with data seed 0; ``reproduce attention-imdb`` grades the IMDB subsample of data seed 0 at quick scale
and every review at paper scale).

* ``python calibration/attention.py`` (quick schedule, a few minutes on one core): the quick-scale joint-training
  presets with v trained (the paper's setting) and v fixed (the theory's variant) on K-level data seeds 1..4 and on
  3000-review IMDB subsamples, data seeds 1..3, both models; writes ``attention.json``.
* ``python calibration/attention.py --paper`` (the paper's schedule, about 40 CPU minutes): model (1) at the paper's
  settings (d = 2048, AdamW lr 0.01, 500 epochs, decays at 100 and 200, the paper's preprocessing) and model (17) at
  the CPU setting of ``reproduce attention-imdb --scale paper``, each on 3000-review subsamples, data seeds 1..3, v
  trained and v fixed; writes ``attention_imdb.json``.

Each run records the statistics of Figs. 1-3 (:func:`ntpbias.experiments.attention.figure3.statistics`); the JSON holds
every run and the worst value per (data, model). The levels in :mod:`ntpbias.experiments.attention.checks` (K-level
correlations) and :data:`ntpbias.experiments.attention.imdb_grade.LEVELS` (real text) are set from the worst values.
"""

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

import ntpbias as nb
from ntpbias.experiments.attention.figure3 import statistics
from ntpbias.experiments.attention.imdb import IMDB_ONE_LAYER, IMDB_TWO_LAYER, cpu_reduced
from ntpbias.experiments.attention.runs import read_token_table

SUBSAMPLE = 3000
QUICK = {"k_level": ("attention-fig2", range(1, 5)), "imdb_one_layer": ("attention-imdb-one-layer", range(1, 4)),
         "imdb_two_layer": ("attention-imdb-two-layer", range(1, 4))}
PAPER = {"imdb_one_layer": IMDB_ONE_LAYER, "imdb_two_layer": cpu_reduced(IMDB_TWO_LAYER)}
PAPER_SEEDS = range(1, 4)


def _record(run) -> dict:
    table = read_token_table(run.out / "tokens-train.csv")
    stats = next(iter(statistics(table).values()))
    return {**stats, "loss": float(run.history["loss"][-1, 0])}


def _worst(runs) -> dict:
    keys = [k for k in next(iter(runs)) if k != "loss"]
    return {**{k: (max if k == "irrelevant_spread" else min)(r[k] for r in runs) for k in keys},
            "loss_max": max(r["loss"] for r in runs)}


def main(paper: bool) -> None:
    torch.set_num_threads(1)
    out: dict = {"runs": {}, "worst": {}}
    plan = PAPER if paper else QUICK
    with tempfile.TemporaryDirectory() as tmp:
        for name, what in plan.items():
            worst_runs = []
            for train_v in (True, False):
                key = f"{name}/{'v_trained' if train_v else 'v_fixed'}"
                for s in (PAPER_SEEDS if paper else what[1]):
                    where = Path(tmp) / f"{key}-{s}".replace("/", "-")
                    changes = {"data.seed": s, "seed": s, "model.train_v": train_v}
                    if paper:
                        cfg = replace(what, data=replace(what.data, subsample=SUBSAMPLE))
                        run = nb.train(cfg, out=where, set=changes)
                    else:
                        run = nb.train(what[0], out=where, scale="quick", set=changes)
                    out["runs"].setdefault(key, {})[s] = _record(run)
                    worst_runs.append(out["runs"][key][s])
                    print(key, s, out["runs"][key][s], flush=True)
            out["worst"][name] = _worst(worst_runs)
    path = Path(__file__).with_name("attention_imdb.json" if paper else "attention.json")
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out["worst"], indent=1))


if __name__ == "__main__":
    main("--paper" in sys.argv[1:])
