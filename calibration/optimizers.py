"""Calibration of the norms study's finite-step levels on held-out one-hot datasets (``reproduce optimizers`` grades
data seed 0).

Trains every optimizer of the roster with a known limit (ntpbias.experiments.optimizers.config.ROSTER) at quick scale
(10^4 steps, initialization seed 0) on the one-hot data with data seeds 1..5, and records the final margin ratio of
P_⊥(W_k) in the optimizer's norm; writes them and the worst value per optimizer to ``optimizers.json`` next to this
file. The levels in :mod:`ntpbias.experiments.optimizers.checks` are the worst calibration value minus 0.02; the graded
dataset (data seed 0) is not among the calibration datasets.

The level-free checks of which norm's maximum each margin approaches (``onehot_checks``' theorem checks) are also
computed on every calibration dataset, with their negative controls: ``approach`` records, per data seed and optimizer,
the verdict, the measured leads and whether the control (the optimizers with another known limit) passed. They set no
level; they show how the verdicts of the graded dataset generalize.

Run: ``OMP_NUM_THREADS=1 python calibration/optimizers.py`` (about 10 minutes on one core).
"""

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from ntpbias.experiments import RunContext
from ntpbias.experiments.optimizers.checks import CALIBRATION_SEEDS, onehot_checks
from ntpbias.experiments.optimizers.config import MEMBERS, ONEHOT, run_config
from ntpbias.experiments.optimizers.runs import data_for, norm_references, train_run
from ntpbias.geometry.linear.loss import smoothness_bound
from ntpbias.geometry.norms import NORMS


def main() -> None:
    torch.set_num_threads(1)
    out: dict = {"data_seeds": list(CALIBRATION_SEEDS), "scale": "quick", "final_ratio": {}, "approach": {}}
    with tempfile.TemporaryDirectory() as tmp:
        ctx = RunContext(out=Path(tmp))
        for s in CALIBRATION_SEEDS:
            data_cfg = replace(ONEHOT, seed=s)
            data = data_for(data_cfg)
            ref = norm_references(data, NORMS)
            histories, configs = [], {}
            for member, m in MEMBERS.items():
                if m.norm is None:
                    continue
                cfg = run_config(data_cfg, member, data.V, data.d, "quick", smoothness_bound(data))
                history = train_run(cfg, data, ref, ctx, f"seed{s}-{member}")
                histories.append(history)
                configs[history.run] = cfg
                value = float(history.last(f"margin_ratio_{m.norm}").min())
                out["final_ratio"].setdefault(member, {})[s] = value
                print(f"data seed {s}: {member} -> {m.norm}: {value:.4f}", flush=True)
            for c in onehot_checks(f"seed {s}", histories, configs, data, ref, s):
                if c.kind == "theorem":
                    out["approach"].setdefault(c.name.split(": ", 1)[1], {})[s] = {
                        "verdict": c.verdict, "measured": c.measured, "control": c.control_measured,
                        "control_passed": c.control_passed}
                    print(f"data seed {s}: {c.name}: {c.verdict}; {c.measured}", flush=True)
    out["worst"] = {member: min(v.values()) for member, v in out["final_ratio"].items()}
    path = Path(__file__).with_suffix(".json")
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out["worst"], indent=1))


if __name__ == "__main__":
    main()
