"""Calibration of the language model's planted-control levels on held-out chains (``reproduce lm`` grades chain 0).

For planted chains 1..4 (the quick-scale ``lm-planted`` preset with ``data.seed`` = ``seed`` = s: a 16-token Markov
chain whose next-token supports are 4 disjoint sets, 2000 lines of 16 tokens, the decoder with 2 blocks, d = 32,
trained by Adam for 3000 steps), trains the model, measures every checkpoint at context length 1 and runs GD on the
final features (the frozen-feature run, 20,000 steps), exactly as the group does; writes the values at the last
checkpoint and step, and whether each alignment grew, to ``lm.json`` next to this file. The levels in
:mod:`ntpbias.experiments.lm.checks` are the worst calibration value with a margin (decision LM-D7); the graded chain
(seed 0) is not among these.

Run: ``OMP_NUM_THREADS=1 python calibration/lm.py`` (about 2 minutes of CPU per chain).
"""

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import torch

from ntpbias.experiments.base import RunContext
from ntpbias.experiments.lm.checks import CALIBRATION_SEEDS, ERRORS, calibration_values
from ntpbias.experiments.lm.config import PLANTED_CHAIN, scaled
from ntpbias.experiments.lm.group import planted_control


def main() -> None:
    torch.set_num_threads(1)
    out: dict = {"chains": list(CALIBRATION_SEEDS), "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for s in CALIBRATION_SEEDS:
            base = scaled(PLANTED_CHAIN, "quick")
            cfg = replace(base, seed=s, data=replace(base.data, seed=s))
            ctx = RunContext(out=Path(tmp) / str(s))
            run = planted_control(cfg, ctx, ctx.out / "model")
            rec = calibration_values(run.analysis.rows, run.frozen.at())
            out["runs"][s] = rec
            print(s, json.dumps(rec), flush=True)
    runs = list(out["runs"].values())
    keys = [k for k in runs[0] if not k.endswith("_grows")]
    out["worst"] = {k: (max if k in ERRORS else min)(r[k] for r in runs) for k in keys}
    out["worst"].update({k: all(r[k] for r in runs) for k in runs[0] if k.endswith("_grows")})
    path = Path(__file__).with_suffix(".json")
    path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print("worst:", json.dumps(out["worst"]))


if __name__ == "__main__":
    main()
