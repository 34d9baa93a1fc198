"""10^5-step runs of part of the norms-study roster on its two NTP datasets (docs/optimizers.md, "longer runs").

The quick-scale datasets of ``ntpbias reproduce optimizers`` (paper A's Fig. 4 data and the small Shakespeare slice)
with the paper scale's 10^5 steps, for the optimizers the conjectures are about; prints and writes the margin ratios in
every norm near steps 10^3, 10^4 and 10^5 to OUT/long.json. The full paper scale is
``ntpbias reproduce optimizers --scale paper`` (every optimizer, a larger Shakespeare slice).

Run: ``OMP_NUM_THREADS=1 python examples/optimizers_long.py OUT`` (about 30 minutes on one busy core).
"""

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from ntpbias.experiments import RunContext
from ntpbias.experiments.optimizers.config import run_config
from ntpbias.experiments.optimizers.runs import dataset, norm_references, train_run
from ntpbias.geometry.linear.loss import smoothness_bound
from ntpbias.geometry.norms import NORMS

DATASETS = ("fig4", "shakespeare")
MEMBERS = ("gd", "ngd", "sign", "nsd-spectral", "muon", "muon-svd", "adam", "adam-eq")


def main(out: Path) -> None:
    torch.set_num_threads(1)
    ctx = RunContext(out=out)
    result = {}
    for name in DATASETS:
        cfg, data = dataset(name, "quick", out)
        ref = norm_references(data, NORMS)
        for member in MEMBERS:
            run_cfg = run_config(cfg, member, data.V, data.d, "paper", smoothness_bound(data))
            t0 = time.perf_counter()
            h = train_run(run_cfg, data, ref, ctx, f"{name}-{member}")
            picks = [int(np.argmin(np.abs(h.steps - t))) for t in (1_000, 10_000, 100_000)]
            result[f"{name}-{member}"] = {int(h.steps[i]): {k: float(h[k][i, 0]) for k in h.names
                                                            if k.startswith("margin_ratio") or k in ("loss_gap",
                                                                                                     "F_error")}
                                          for i in picks}
            print(name, member, f"{time.perf_counter() - t0:.0f} s", result[f"{name}-{member}"][int(h.steps[-1])],
                  flush=True)
            (out / "long.json").write_text(json.dumps(result, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
