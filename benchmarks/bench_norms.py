"""The NTP-SVM in the linf, l1, spectral and nuclear norms (cvxpy + Clarabel): time and certificate against size.

Sizes scale paper A's Fig. 4 instance (m = 50 contexts, d = 60, V = 10, |S_j| = 6) by a factor k in m and d
(k = 10: 10x the contexts and the dimension, 10x the variables V d, 100x the constraint-matrix nonzeros). For each size
and norm it prints the solve time (cvxpy compilation + Clarabel + the certificate, in a subprocess killed at ``--cap``
seconds), Clarabel's iterations, the worst certificate residual, and separately the time of the uniqueness tests; the
l2 program (the matrix-free dual solver of ntpbias.geometry.margins.program, ``solver="auto"``) is timed beside them for
scale. This is the measurement behind the decision whether the LP norms need a matrix-free method (docs/optimizers.md).

Run: python benchmarks/bench_norms.py [--factors 1,2,4,10] [--norms l2,linf,l1,spectral,nuclear] [--cap 600]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from _common import print_table

CHILD = r"""
import json, sys, time, warnings
warnings.simplefilter("ignore")
import torch
torch.set_num_threads(1)
from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.margins.program import ntp_svm
k, norm, unique = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
data = random_ntp(m=50 * k, d=60 * k, V=10, support_size=6, seed=0)
t0 = time.perf_counter()
if norm == "l2":
    res = ntp_svm(data)
    out = {"seconds": time.perf_counter() - t0, "iterations": res.iterations, "residual": res.certificate.worst,
           "value": res.norm, "solver": res.solver}
else:
    res = ntp_svm(data, norm=norm, decide_uniqueness=unique)
    out = {"seconds": time.perf_counter() - t0, "iterations": res.iterations, "residual": res.certificate.worst,
           "value": res.norm, "solver": res.solver, "unique": res.unique,
           "clarabel_seconds": res.details["clarabel_seconds"]}
print(json.dumps(out))
"""


def run(k: int, norm: str, cap: float) -> dict:
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(k), norm, "1"], capture_output=True, text=True,
                              timeout=cap)
    except subprocess.TimeoutExpired:
        return {"error": f"> {cap:g} s"}
    if proc.returncode:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1][:60]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--factors", default="1,2,4,10")
    parser.add_argument("--norms", default="l2,linf,l1,spectral,nuclear")
    parser.add_argument("--cap", type=float, default=600.0)
    args = parser.parse_args()
    rows = []
    for k in map(int, args.factors.split(",")):
        for norm in args.norms.split(","):
            t0 = time.perf_counter()
            r = run(k, norm, args.cap)
            if "error" in r:
                rows.append([k, 50 * k, 60 * k, norm, r["error"], "-", "-", "-", "-", "-"])
            else:
                solve = r.get("clarabel_seconds", r["seconds"])
                rows.append([k, 50 * k, 60 * k, norm, r["seconds"], solve, r["iterations"], r["residual"],
                             r["seconds"] - solve, r.get("unique", True)])
            print(f"  k={k} {norm}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    print_table("NTP-SVM in each norm (V = 10, |S_j| = 6; one thread)",
                ["k", "m", "d", "norm", "total s", "solve s", "iterations", "certificate", "certificate + uniqueness s",
                 "unique"], rows)


if __name__ == "__main__":
    main()
