"""NTP-SVM: the matrix-free dual solver against cvxpy + Clarabel, on paper A's random instances
(h̄_j ~ N(0, I_d), |S_j| uniform random supports; spec dependencies.md §1).

For each size (m, d, V, k = |S_j|) it prints, side by side: the dual solver's time (solve + float64 KKT certificate +
active-set polish) and iterations, cvxpy + Clarabel's time in a subprocess killed at ``--cap`` seconds (and
under an address-space limit of ``--mem-gb``; reported as "> cap" or "out of memory"), the ratio, the relative
agreement of the objectives ½||W||², the worst KKT residual, and the fraction of this machine's matrix-product
throughput the dual iterations achieve (each iteration is two products of the (V, m), (m, d) and (V, d),
(d, m) shapes, timed in the same run). The ``gpu`` size runs only when CUDA is available. With ``--analyze`` it
also times the whole ``analyze`` (subspace F, W*, separability, W^mm) on each size.

Targets (one CPU thread): medium in under 2 s and at least 50x faster than cvxpy + Clarabel; large in under
60 s. The script reports them and never fails on time.

Run: python benchmarks/bench_svm.py [--sizes small,medium,large,gpu] [--cap 120] [--threads 1] [--analyze]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import time

import torch
from _common import print_table

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.dual import LANCZOS_STEPS
from ntpbias.geometry.svm import ntp_svm

SIZES = {  # name: (m, d, V, |S_j|)
    "small": (50, 60, 10, 6),
    "medium": (200, 250, 50, 10),
    "large": (1000, 1200, 100, 10),
    "gpu": (4000, 4096, 1000, 20),
}
TARGETS = {"medium": (2.0, 50.0), "large": (60.0, None)}  # (seconds, min speed-up vs Clarabel)


def matmul_rate(V: int, d: int, m: int, device: str, dtype=torch.float64, min_seconds: float = 0.3) -> float:
    """Flop/s of the dual iteration's two products (V, m) @ (m, d) and (V, d) @ (d, m) on this machine."""
    g = torch.Generator().manual_seed(0)
    Lam = torch.randn(V, m, generator=g, dtype=dtype).to(device)
    H = torch.randn(m, d, generator=g, dtype=dtype).to(device)
    W = torch.randn(V, d, generator=g, dtype=dtype).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(2):
        Lam @ H, W @ H.T
    sync()
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        Lam @ H, W @ H.T
        reps += 1
        if device == "cuda" and reps % 10:
            continue
        sync()
    sync()
    return reps * 4.0 * V * d * m / (time.perf_counter() - t0)


def clarabel_child(m: int, d: int, V: int, k: int, seed: int) -> None:
    """Run inside the capped subprocess: cvxpy + Clarabel on the same instance, result as one JSON line."""
    data = random_ntp(m, d, V, k, seed=seed)
    t0 = time.perf_counter()
    res = ntp_svm(data, "clarabel", polish=False)
    print(json.dumps({"seconds": time.perf_counter() - t0, "objective": 0.5 * res.norm ** 2,
                      "kkt": res.kkt.worst}))


def run_clarabel(size: tuple[int, int, int, int], seed: int, cap: float, mem_gb: float) -> dict:
    """cvxpy + Clarabel in a subprocess, killed after ``cap`` seconds or when it exceeds ``mem_gb``."""
    limit = int(mem_gb * 2 ** 30)

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    cmd = [sys.executable, os.path.abspath(__file__), "--clarabel-child", ",".join(map(str, (*size, seed)))]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=cap, preexec_fn=limit_memory,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        return {"label": f"> {cap:g}", "seconds": None}
    if proc.returncode != 0:
        oom = "MemoryError" in proc.stderr or "bad_alloc" in proc.stderr or "memory" in proc.stderr.lower()
        reason = f"out of memory (> {mem_gb:g} GB)" if oom else f"failed ({proc.stderr.strip().splitlines()[-1:]})"
        return {"label": reason, "seconds": None}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {"label": f"{out['seconds']:.3g}", **out}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated subset of " + ",".join(SIZES))
    parser.add_argument("--cap", type=float, default=120.0, help="seconds before cvxpy + Clarabel is killed")
    parser.add_argument("--mem-gb", type=float, default=8.0, help="address-space limit of the Clarabel subprocess")
    parser.add_argument("--no-clarabel", action="store_true", help="skip cvxpy + Clarabel")
    parser.add_argument("--float32", action="store_true", help="run the dual solver in float32 (certified in float64)")
    parser.add_argument("--analyze", action="store_true", help="also time the whole `analyze` on each size")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--clarabel-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.clarabel_child:
        clarabel_child(*map(int, args.clarabel_child.split(",")))
        return
    cuda = torch.cuda.is_available()
    ntp_svm(random_ntp(5, 6, 4, 2, seed=0), "dual")  # warm up torch's kernels and allocator
    rows, records = [], []
    for name in args.sizes.split(","):
        m, d, V, k = SIZES[name]
        if name == "gpu" and not cuda:
            print(f"{name} {SIZES[name]}: skipped (no CUDA GPU)")
            continue
        device = "cuda" if name == "gpu" else "cpu"
        data = random_ntp(m, d, V, k, seed=args.seed).to(device)  # certificate and polish run there too
        options = {"dtype": torch.float32} if args.float32 else {}
        t0 = time.perf_counter()
        res = ntp_svm(data, "dual", **options)
        t_dual = time.perf_counter() - t0
        rate = matmul_rate(V, d, m, device, torch.float32 if args.float32 else torch.float64)
        achieved = (res.iterations + LANCZOS_STEPS) * 4.0 * V * d * m / res.details["dual_seconds"]
        ref = {"label": "not run", "seconds": None}
        if not args.no_clarabel:
            ref = run_clarabel((m, d, V, k), args.seed, args.cap, args.mem_gb)
        obj = 0.5 * res.norm ** 2
        if ref["seconds"] is not None:
            ratio = f"{ref['seconds'] / t_dual:.3g}"
            agree = f"{abs(obj - ref['objective']) / ref['objective']:.1e}"
        else:
            ratio = f"> {args.cap / t_dual:.3g}" if ref["label"].startswith(">") else "-"
            agree = "-"
        t_an = None
        if args.analyze:
            from ntpbias.geometry.analysis import analyze

            fresh = random_ntp(m, d, V, k, seed=args.seed).to(device)
            t0 = time.perf_counter()
            an = analyze(fresh, solver_options=options)
            t_an = time.perf_counter() - t0
        record = {"size": name, "m": m, "d": d, "V": V, "k": k, "variables": V * d, "dual_seconds": t_dual,
                  "iterations": res.iterations, "objective": obj, "kkt": res.kkt.worst, "clarabel": ref,
                  "matmul_gflops": rate / 1e9, "fraction_of_matmul": achieved / rate, "analyze_seconds": t_an,
                  "precision": res.details["precision"], "device": device}
        records.append(record)
        row = [f"{name} ({m}, {d}, {V}, {k})", V * d, f"{t_dual:.3g}", res.iterations, ref["label"], ratio, agree,
               f"{res.kkt.worst:.1e}", f"{achieved / rate:.0%} of {rate / 1e9:.3g} GF/s"]
        if args.analyze:
            row.append(f"{t_an:.3g}" + ("" if an.svm is None or an.svm.certified else " (not certified)"))
        rows.append(row)
    header = ["size (m, d, V, k)", "variables", "dual (s)", "iters", "cvxpy+Clarabel (s)", "speed-up",
              "objective rel. diff", "KKT worst", "dual matmul throughput"]
    if args.analyze:
        header.append("analyze (s)")
    print_table(f"NTP-SVM, dual solver vs cvxpy + Clarabel ({torch.get_num_threads()} CPU thread(s), "
                f"{'float32+float64 check' if args.float32 else 'float64'}, cap {args.cap:g} s)", header, rows)
    for rec in records:
        if rec["size"] in TARGETS:
            seconds, speedup = TARGETS[rec["size"]]
            t = rec["dual_seconds"]
            line = f"target {rec['size']}: dual < {seconds:g} s: {'met' if t < seconds else 'missed'} ({t:.3g} s)"
            if speedup is not None:
                ref_s = rec["clarabel"]["seconds"]
                lower = (ref_s if ref_s is not None else args.cap if rec["clarabel"]["label"].startswith(">")
                         else math.nan) / rec["dual_seconds"]
                line += (f"; >= {speedup:g}x faster than Clarabel: "
                         f"{'met' if lower >= speedup else 'not shown' if math.isnan(lower) else 'missed'}"
                         f" ({'>' if ref_s is None else ''}{lower:.3g}x)")
            print(line)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(records, fh, indent=2)


if __name__ == "__main__":
    main()
