"""NTP-SVM solvers against their references, in one run, one CPU thread.

Two tables, both ready-to-paste Markdown:

1. **NTP supports** (paper A's random instances: h̄_j ~ N(0, I_d), |S_j| uniform random supports;
   docs/paper-a-linear-ntp.md#experiments-and-figures), sizes ``small, medium, large, gpu``: the workset method
   (``solver="workset"``, what ``solver="auto"`` now picks beyond Clarabel) against the dual method (``solver="dual"``,
   the previous default) and against cvxpy + Clarabel in a subprocess killed at ``--cap`` seconds or ``--mem-gb`` of
   address space.
2. **One-hot labels**, sizes ``onehot-a, onehot-b, onehot-c`` (h_j ~ N(0, I_d / d), one uniformly random label
   per context). There the NTP-SVM is the Crammer-Singer multiclass SVM without bias, and its strongest peer is
   liblinear's dual coordinate descent for it: scikit-learn's ``LinearSVC(multi_class="crammer_singer",
   fit_intercept=False, C=--liblinear-C, tol=1e-6)`` (a benchmark-only dependency: ``pip install -e .[bench]``).
   liblinear solves the soft-margin problem; C = 1e3 is large enough that its every margin is at least 1 - 1e-6
   on these sizes (the column ``liblinear min margin`` shows it), and the two solutions are compared by
   ||W|| (``||W|| rel. diff``: |‖W_ours‖ - ‖W_liblinear‖| / ‖W_liblinear‖; the objective ½||W||² differs by
   about twice that). ``--huge`` adds (m, d, V) = (20000, 1000, 1000): 10^6 variables, 2·10^7 constraints
   (no liblinear or Clarabel there unless ``--huge-peers``).

Per row: wall and CPU seconds (CPU seconds are the fairer comparison on a loaded machine, and the target line
compares them: the title gives the load average before and after), iterations (accelerated-gradient +
conjugate-gradient steps), the working set and the active face (rows with positive multiplier), the worst KKT
residual recomputed in float64 on the full problem (every row), the ratio, and the fraction of this machine's
matrix-product throughput the solve achieved (its matrix products, each one (V, m) x (m, d) or (V, d) x (d, m)
product, timed at the rates measured in the same run for float32, float64 and bfloat16 (the workset method's
low-precision increments), over the solve's wall time; face-restricted products count as dense ones). The script
never fails on time.

Run: python benchmarks/bench_svm.py [--sizes small,medium,large,onehot-a,onehot-b,onehot-c] [--huge]
     [--cap 120] [--no-clarabel] [--no-liblinear] [--analyze] [--json out.json]
     python benchmarks/bench_svm.py --device cuda --sizes gpu,onehot-c,huge,huge-10x --no-clarabel   (a GPU: the
     one-hot sizes on the GPU without peers, huge-10x the 10^7-variable size)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from _common import print_table, run_capped

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.margins.program import MarginProgram, ntp_svm

SIZES = {  # name: (m, d, V, |S_j|)
    "small": (50, 60, 10, 6),
    "medium": (200, 250, 50, 10),
    "large": (1000, 1200, 100, 10),
    "gpu": (4000, 4096, 1000, 20),
}
ONEHOT = {  # name: (m, d, V); |S_j| = 1
    "onehot-a": (2000, 1000, 20),
    "onehot-b": (5000, 2000, 50),
    "onehot-c": (20000, 2000, 100),
    "huge": (20000, 1000, 1000),
    "huge-10x": (20000, 10000, 1000),  # 10^7 variables: with --device cuda
}
#: The one-hot sizes' goal in CPU seconds against liblinear CS (issue 29; issue 17's was 10x).
TARGET = 15
#: On the one-hot sizes Clarabel is not attempted above this many constraint nonzeros (the sparse matrix alone
#: takes gigabytes; the smallest one-hot size, 7.6e7 nonzeros, shows what happens below it).
CLARABEL_MAX_NNZ = 2e8


def instance(name: str, seed: int):
    if name in SIZES:
        m, d, V, k = SIZES[name]
        return random_ntp(m, d, V, k, seed=seed)
    m, d, V = ONEHOT[name]
    return random_ntp(m, d, V, 1, embedding_scale=d ** -0.5, seed=seed)


def matmul_rate(V: int, d: int, m: int, device: str, dtype, min_seconds: float = 0.3) -> float:
    """Flop/s of the two products (V, m) @ (m, d) and (V, d) @ (d, m) on this machine, in ``dtype``."""
    g = torch.Generator().manual_seed(0)
    Lam = torch.randn(V, m, generator=g).to(device=device, dtype=dtype)
    H = torch.randn(m, d, generator=g).to(device=device, dtype=dtype)
    W = torch.randn(V, d, generator=g).to(device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(2):
        Lam @ H, W @ H.T
    sync()
    reps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_seconds:
        Lam @ H, W @ H.T
        reps += 1
    sync()
    return reps * 4.0 * V * d * m / (time.perf_counter() - t0)


def product_fraction(res, V: int, d: int, m: int, device: str) -> str:
    """Time the solve's matrix products take at the measured rates, over its wall time."""
    det = res.details
    flops = 2.0 * V * d * m
    if res.solver == "workset":
        f32 = det.get("products", 0) if det.get("precision", "").startswith("float32") else 0
        f64 = det.get("products_float64", 0) + (det.get("products", 0) - f32)
    else:
        f32, f64 = 0, 2 * (res.iterations or 0)
    f16 = det.get("products_lowp", 0) if res.solver == "workset" else 0
    rate32 = matmul_rate(V, d, m, device, torch.float32) if f32 else 1.0
    rate64 = matmul_rate(V, d, m, device, torch.float64) if f64 else 1.0
    rate16 = matmul_rate(V, d, m, device, torch.bfloat16) if f16 else 1.0
    ideal = f32 * flops / rate32 + f64 * flops / rate64 + f16 * flops / rate16
    return f"{ideal / res.solve_seconds:.0%}"


def solve(data, solver: str, **options):
    """(result, wall seconds, CPU seconds) of ntp_svm."""
    c0, t0 = time.process_time(), time.perf_counter()
    res = ntp_svm(data, solver, **options)
    return res, time.perf_counter() - t0, time.process_time() - c0


def clarabel_child(name: str, seed: int) -> None:
    """Run inside the capped subprocess: cvxpy + Clarabel on the same instance, result as one JSON line."""
    data = instance(name, seed)
    t0 = time.perf_counter()
    res = ntp_svm(data, "clarabel", polish=False)
    print(json.dumps({"seconds": time.perf_counter() - t0, "objective": 0.5 * res.norm ** 2,
                      "kkt": res.certificate.worst}))


def run_clarabel(name: str, seed: int, cap: float, mem_gb: float) -> dict:
    """cvxpy + Clarabel in a subprocess, killed after ``cap`` seconds or when it exceeds ``mem_gb``."""
    out, why = run_capped([sys.executable, os.path.abspath(__file__), "--clarabel-child", f"{name},{seed}"], cap,
                          mem_gb)
    if out is None:
        return {"label": why, "seconds": None}
    return {"label": f"{out['seconds']:.3g}", **out}


def clarabel_column(name: str, data, args, max_nnz: float = float("inf")) -> dict:
    cons = constraints(data)
    nnz = MarginProgram(cons.ineq, cons.eq).nnz
    if args.no_clarabel:
        return {"label": "not run", "seconds": None}
    if nnz > max_nnz:
        return {"label": f"not run ({nnz:.1e} nonzeros)", "seconds": None}
    return run_clarabel(name, args.seed, args.cap, args.mem_gb)


def liblinear_cs(data, C: float) -> dict:
    """scikit-learn's LinearSVC (liblinear) Crammer-Singer without bias on one-hot data: times, ||W||, min margin."""
    import numpy as np
    from sklearn.svm import LinearSVC

    X = data.H.numpy()
    y = data.support.to(torch.int8).argmax(1).numpy()
    clf = LinearSVC(multi_class="crammer_singer", fit_intercept=False, C=C, tol=1e-6, max_iter=100_000,
                    random_state=0)
    c0, t0 = time.process_time(), time.perf_counter()
    clf.fit(X, y)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    W = np.zeros((data.V, data.d))
    W[clf.classes_] = clf.coef_  # classes never seen as labels keep a zero row (none on these sizes)
    L = X @ W.T
    gaps = L[np.arange(data.m), y][:, None] - L
    gaps[np.arange(data.m), y] = np.inf
    return {"wall": wall, "cpu": cpu, "norm": float(np.linalg.norm(W)), "min_margin": float(gaps.min()),
            "epochs": int(clf.n_iter_)}


def ntp_rows(args, names) -> tuple[list, list]:
    rows, records = [], []
    for name in names:
        m, d, V, k = SIZES[name]
        device = "cuda" if name == "gpu" else "cpu"
        if device == "cuda" and not torch.cuda.is_available():
            print(f"{name} {SIZES[name]}: skipped (no CUDA GPU)")
            continue
        data = instance(name, args.seed).to(device)
        dual, t_dual, _ = solve(data, "dual")
        data = instance(name, args.seed).to(device)  # fresh: no cached warm start
        ws, t_ws, c_ws = solve(data, "workset")
        ref = clarabel_column(name, data, args) if device == "cpu" else {"label": "not run", "seconds": None}
        obj = 0.5 * ws.norm ** 2
        agree = f"{abs(obj - ref['objective']) / ref['objective']:.1e}" if ref["seconds"] else "-"
        vs_clarabel = f"{ref['seconds'] / t_ws:.3g}x" if ref["seconds"] else "-"
        det = ws.details
        records.append({"size": name, "m": m, "d": d, "V": V, "k": k, "variables": V * d, "dual_seconds": t_dual,
                        "dual_iterations": dual.iterations, "workset_seconds": t_ws, "workset_cpu_seconds": c_ws,
                        "apg_iterations": det["apg_iterations"], "pcg_iterations": det["pcg_iterations"],
                        "kkt": ws.certificate.worst, "objective": obj, "dual_objective": 0.5 * dual.norm ** 2,
                        "clarabel": ref, "face_rows": det.get("face_rows")})
        rows.append([f"{name} ({m}, {d}, {V}, {k})", f"{V * d:,}", f"{t_dual:.3g}", dual.iterations, f"{t_ws:.3g}",
                     f"{det['apg_iterations']} + {det['pcg_iterations']}", f"{t_dual / t_ws:.2g}x", ref["label"],
                     vs_clarabel, agree, f"{abs(obj - records[-1]['dual_objective']) / obj:.1e}",
                     f"{ws.certificate.worst:.1e}", product_fraction(ws, V, d, m, device)])
    header = ["size (m, d, V, \\|S_j\\|)", "variables", "dual (s)", "dual iters", "workset (s)",
              "workset iters (AG + CG)", "workset vs dual", "cvxpy+Clarabel (s)", "workset vs Clarabel",
              "objective rel. diff (Clarabel)", "objective rel. diff (dual)", "KKT worst", "matmul throughput"]
    return [header, rows], records


def onehot_rows(args, names) -> tuple[list, list]:
    rows, records = [], []
    for name in names:
        m, d, V = ONEHOT[name]
        data = instance(name, args.seed).to(args.device)
        ws, t_ws, c_ws = solve(data, "workset", device=args.device)
        peers = args.device == "cpu" and (not name.startswith("huge") or args.huge_peers)
        lib = liblinear_cs(data, args.liblinear_C) if peers and not args.no_liblinear else None
        ref = clarabel_column(name, data, args, CLARABEL_MAX_NNZ) if peers else {"label": "not run", "seconds": None}
        det = ws.details
        sets = det["working_set"]
        record = {"size": name, "m": m, "d": d, "V": V, "variables": V * d, "rows": m * (V - 1),
                  "workset_seconds": t_ws, "workset_cpu_seconds": c_ws, "apg_iterations": det["apg_iterations"],
                  "pcg_iterations": det["pcg_iterations"], "working_set": sets, "face_rows": det.get("face_rows"),
                  "norm": ws.norm, "kkt": ws.certificate.worst, "certified": ws.certified, "liblinear": lib,
                  "clarabel": ref}
        records.append(record)
        if lib is None:
            lib_cols = ["not run"] * 5
        else:
            lib_cols = [f"{lib['wall']:.3g} ({lib['cpu']:.3g})",
                        f"{lib['wall'] / t_ws:.3g}x ({lib['cpu'] / c_ws:.3g}x)",
                        f"{abs(ws.norm - lib['norm']) / lib['norm']:.1e}", f"{lib['min_margin']:.7f}",
                        str(lib["epochs"])]
        rows.append([f"{name} ({m}, {d}, {V})", f"{V * d:,}", f"{m * (V - 1):,}", f"{t_ws:.3g} ({c_ws:.3g})",
                     f"{det['apg_iterations']} + {det['pcg_iterations']}",
                     f"{sets[-1]:,} / {det.get('face_rows', 0):,}", *lib_cols[:2], ref["label"], lib_cols[2],
                     lib_cols[3], lib_cols[4], f"{ws.certificate.worst:.1e}",
                     product_fraction(ws, V, d, m, args.device)])
    header = ["size (m, d, V)", "variables", "constraints", "workset wall (CPU) s", "iters (AG + CG)",
              "working set / active rows", "liblinear CS wall (CPU) s", "speed-up wall (CPU)", "cvxpy+Clarabel (s)",
              "\\|\\|W\\|\\| rel. diff", "liblinear min margin", "liblinear epochs", "KKT worst", "matmul throughput"]
    return [header, rows], records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    default = "small,medium,large,gpu,onehot-a,onehot-b,onehot-c"
    parser.add_argument("--sizes", default=default,
                        help=f"comma-separated subset of {','.join([*SIZES, *ONEHOT])} (default {default})")
    parser.add_argument("--huge", action="store_true", help="add the 10^6-variable one-hot size (20000, 1000, 1000)")
    parser.add_argument("--huge-peers", action="store_true", help="also run liblinear and Clarabel on it")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where the workset method runs on the one-hot sizes (cuda: no peers; with huge-10x, the "
                             "10^7-variable size)")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds before cvxpy + Clarabel is killed")
    parser.add_argument("--mem-gb", type=float, default=8.0, help="address-space limit of the Clarabel subprocess")
    parser.add_argument("--no-clarabel", action="store_true", help="skip cvxpy + Clarabel")
    parser.add_argument("--no-liblinear", action="store_true", help="skip liblinear (scikit-learn)")
    parser.add_argument("--liblinear-C", type=float, default=1e3, help="liblinear's C (large: hard margin)")
    parser.add_argument("--analyze", action="store_true", help="also time the whole `analyze` on NTP sizes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--clarabel-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.clarabel_child:
        name, seed = args.clarabel_child.split(",")
        clarabel_child(name, int(seed))
        return
    names = [s for s in args.sizes.split(",") if s]
    unknown = [s for s in names if s not in SIZES and s not in ONEHOT]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; choose from {', '.join([*SIZES, *ONEHOT])}")
    if args.huge and "huge" not in names:
        names.append("huge")
    ntp_svm(random_ntp(5, 6, 4, 2, seed=0), "dual")  # warm up torch's kernels and allocator
    ntp_svm(random_ntp(5, 6, 4, 2, seed=0).to(args.device), "workset", device=args.device)
    load0 = os.getloadavg()[0]
    ntp_table, ntp_rec = ntp_rows(args, [n for n in names if n in SIZES])
    hot_table, hot_rec = onehot_rows(args, [n for n in names if n in ONEHOT])
    load = f"load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
    threads = f"{torch.get_num_threads()} CPU thread(s)"
    if ntp_rec:
        print_table(f"NTP-SVM on NTP supports: workset vs dual vs cvxpy + Clarabel ({threads}, {load}, "
                    f"Clarabel cap {args.cap:g} s)", *ntp_table)
        if args.analyze:
            from ntpbias.geometry.analysis import analyze

            for rec in ntp_rec:
                t0 = time.perf_counter()
                analyze(instance(rec["size"], args.seed))
                print(f"analyze {rec['size']}: {time.perf_counter() - t0:.3g} s")
    if hot_rec:
        print_table(f"NTP-SVM on one-hot labels (Crammer-Singer without bias): workset vs liblinear CS, "
                    f"C = {args.liblinear_C:g}, tol 1e-6 ({threads}, {load}, workset on {args.device})", *hot_table)
        for rec in hot_rec:
            lib = rec["liblinear"]
            if lib is not None:
                ratio = lib["cpu"] / rec["workset_cpu_seconds"]  # CPU seconds: the machine is shared (module doc)
                agree = abs(rec["norm"] ** 2 - lib["norm"] ** 2) / lib["norm"] ** 2
                met = ratio >= TARGET and rec["certified"] and agree <= 1e-6
                print(f"target {rec['size']}: >= {TARGET}x faster than liblinear CS in CPU seconds, KKT <= 1e-6, "
                      f"objective within 1e-6: {'met' if met else 'missed'} ({ratio:.3g}x CPU, "
                      f"{lib['wall'] / rec['workset_seconds']:.3g}x wall; KKT {rec['kkt']:.1e}; objective rel. diff "
                      f"{agree:.1e})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load": load, "ntp": ntp_rec, "onehot": hot_rec}, fh, indent=2)


if __name__ == "__main__":
    main()
