"""The NTP-SVM on ill-conditioned features: the interior-point method (``solver="ipm"``) against cvxpy + Clarabel and
the workset method, one CPU thread.

Two families of problems (docs/benchmarks.md#ill-conditioned-features):

1. **Controlled spectrum**: H (m, d) with singular values log-spaced from 1 down to 1/cond (times sqrt(d)) and random
   singular vectors, m <= d (so every size is separable); cond = 1e4, 1e5, 1e6 and sizes ``xs`` to ``xl``, from V d =
   1,024 to 131,072 variables; supports of 1..k tokens drawn uniformly, k = 3V/4 (``--supports text``: many
   in-support ties per context, as a text's next tokens; the hard case for the first-order methods) or k = 4
   (``few``, as paper A's random instances).
2. **A trained model's features** (``--features FILE.npz``, repeatable): an NTP ``.npz`` with H and P, e.g. the
   ``ntp_data.npz`` that ``ntpbias lm analyze RUN --context-length 1 --max-contexts 64 --out DIR`` writes for the last
   checkpoint of ``RUN`` (docs/benchmarks.md says how the documented files were made).

Per row: wall and CPU seconds of the interior-point method, its iterations (Newton factorizations) and worst KKT
residual (recomputed in float64 on every row); the workset method (``solver="workset"``, the default beyond Clarabel's
sizes) and cvxpy + Clarabel, each in a subprocess killed after ``--cap`` seconds (``--mem-gb`` of address space), with
their worst KKT residual and the relative difference of their objective ½||W||² from the interior-point method's.
A second table runs the nuclear-norm NTP-SVM in logit space (``nuclear_svm``, docs/ufm.md) on the supports of each
``--features`` file, ADMM against Clarabel's SDP: that program depends on the supports alone, not on H. The script
never fails on time.

Run: python benchmarks/bench_svm_illcond.py [--sizes xs,s,m,l,xl] [--conds 1e4,1e5,1e6] [--supports text,few]
     [--features DIR/ntp_data.npz] [--cap 120] [--mem-gb 8] [--no-clarabel] [--no-workset] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
from _common import print_table, run_capped

from ntpbias.data.ntp import NTPData
from ntpbias.geometry.margins.program import ntp_svm
from ntpbias.geometry.ufm.logit_svm import nuclear_svm

SIZES = {  # name: (m, d, V)
    "xs": (16, 32, 32),
    "s": (32, 64, 64),
    "m": (64, 128, 128),
    "l": (128, 128, 512),
    "xl": (128, 128, 1024),
}
#: the largest support size |S_j| of each support family: "text" (many in-support ties, as the next tokens of a text's
#: contexts: |S_j| up to 3V/4) and "few" (|S_j| <= 4, as paper A's random instances)
SUPPORTS = {"text": lambda V: 3 * V // 4, "few": lambda V: 4}


def spectrum_ntp(m: int, d: int, V: int, k: int, cond: float, seed: int = 0) -> NTPData:
    """H (m, d) with singular values log-spaced from 1 to 1/cond (times sqrt(d)) and random singular vectors; supports
    of 1..k tokens drawn uniformly; probabilities uniform on [0.1, 1.1] then normalized."""
    g = torch.Generator().manual_seed(seed)
    r = min(m, d)
    U, _ = torch.linalg.qr(torch.randn(m, r, generator=g, dtype=torch.float64))
    Q, _ = torch.linalg.qr(torch.randn(d, r, generator=g, dtype=torch.float64))
    H = (U * torch.logspace(0, -math.log10(cond), r, dtype=torch.float64)) @ Q.T * math.sqrt(d)
    sizes = torch.randint(1, k + 1, (m,), generator=g)
    order = torch.argsort(torch.rand(m, V, generator=g), dim=1)
    support = torch.zeros(m, V, dtype=torch.bool).scatter(1, order, torch.arange(V)[None, :] < sizes[:, None])
    P = torch.where(support, torch.rand(m, V, generator=g, dtype=torch.float64) + 0.1, 0)
    return NTPData.from_arrays(H, P / P.sum(1, keepdim=True))


def instance(spec: str) -> NTPData:
    """``size:cond:supports`` (the controlled spectrum) or ``file:PATH`` (an NTP .npz)."""
    kind, _, rest = spec.partition(":")
    if kind == "file":
        z = np.load(rest, allow_pickle=False)
        return NTPData.from_arrays(torch.as_tensor(z["H"]).double(), torch.as_tensor(z["P"]).double(),
                                   torch.as_tensor(z["pi"]).double() if "pi" in z else None)
    cond, supports = rest.split(":")
    m, d, V = SIZES[kind]
    return spectrum_ntp(m, d, V, SUPPORTS[supports](V), float(cond))


def solve(data: NTPData, solver: str, **options) -> dict:
    """One solve's record: ``solver`` is an NTP-SVM backend, or ``nuclear-admm`` / ``nuclear-clarabel`` (the
    nuclear-norm NTP-SVM in logit space of the same supports)."""
    c0, t0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an uncertified result says so in its status
        if solver.startswith("nuclear-"):
            res = nuclear_svm(data, solver.removeprefix("nuclear-"))
        else:
            res = ntp_svm(data, solver, **options)
    if solver.startswith("nuclear-"):
        return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "objective": res.norm,
                "kkt": res.certificate.worst, "certified": res.certified, "iterations": res.iterations,
                "rank": res.rank}
    det = res.details
    iters = det.get("ipm_iterations", res.iterations) if solver == "ipm" else (
        f"{det.get('apg_iterations', 0)} + {det.get('pcg_iterations', 0)}" if solver == "workset" else res.iterations)
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0, "objective": 0.5 * res.norm ** 2,
            "kkt": res.certificate.worst, "certified": res.certified, "iterations": iters,
            "factorizations": det.get("factorizations"), "polish": det.get("polish")}


def child(spec: str, solver: str) -> None:
    """Inside the capped subprocess: one solve, its record as one JSON line."""
    options = {"polish": False} if solver == "clarabel" else {}
    print(json.dumps(solve(instance(spec), solver, **options)))


def capped(spec: str, solver: str, cap: float, mem_gb: float) -> dict:
    """``solver`` on ``spec`` in a subprocess killed after ``cap`` seconds or beyond ``mem_gb`` of address space."""
    out, why = run_capped([sys.executable, os.path.abspath(__file__), "--child", f"{solver}|{spec}"], cap, mem_gb)
    return {"label": why} if out is None else {"label": f"{out['wall']:.3g} ({out['cpu']:.3g})", **out}


def peer_columns(peer: dict, ours: dict) -> list[str]:
    """A capped peer's time, worst residual and objective's relative difference from ours."""
    if "kkt" not in peer:
        return [peer["label"], "-", "-"]
    agree = abs(peer["objective"] - ours["objective"]) / ours["objective"]
    return [peer["label"], f"{peer['kkt']:.1e}", f"{agree:.1e}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="xs,s,m,l,xl", help=f"comma-separated subset of {','.join(SIZES)}")
    parser.add_argument("--conds", default="1e4,1e5,1e6", help="condition numbers of H")
    parser.add_argument("--supports", default="text", help=f"support families, of {','.join(SUPPORTS)}")
    parser.add_argument("--features", action="append", default=[], help="an NTP .npz of a model's features")
    parser.add_argument("--cap", type=float, default=120.0, help="seconds before a peer's subprocess is killed")
    parser.add_argument("--mem-gb", type=float, default=8.0, help="address-space limit of a peer's subprocess")
    parser.add_argument("--no-clarabel", action="store_true")
    parser.add_argument("--no-workset", action="store_true")
    parser.add_argument("--json", default=None, help="also write the rows to this JSON file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        solver, spec = args.child.split("|", 1)
        child(spec, solver)
        return
    sizes, families = [s for s in args.sizes.split(",") if s], [f for f in args.supports.split(",") if f]
    unknown = [s for s in sizes if s not in SIZES] + [f for f in families if f not in SUPPORTS]
    if unknown:
        parser.error(f"unknown size(s) or support families {', '.join(unknown)}; choose from {', '.join(SIZES)} and "
                     f"{', '.join(SUPPORTS)}")
    specs = [f"{s}:{c}:{f}" for f in families for s in sizes for c in args.conds.split(",") if c]
    specs += [f"file:{p}" for p in args.features]
    ntp_svm(spectrum_ntp(4, 6, 4, 2, 10.0), "ipm")  # warm up torch's kernels
    print(f"{len(specs)} problems: {', '.join(specs)}", flush=True)
    load0 = os.getloadavg()[0]
    rows, records = [], []
    for spec in specs:
        data = instance(spec)
        s = torch.linalg.svdvals(data.H)
        kappa = float(s[0] / s[s > 1e-12 * s[0]][-1])
        ipm = solve(data, "ipm")
        workset = {"label": "not run"} if args.no_workset else capped(spec, "workset", args.cap, args.mem_gb)
        clarabel = {"label": "not run"} if args.no_clarabel else capped(spec, "clarabel", args.cap, args.mem_gb)
        name = os.path.basename(spec[5:]) if spec.startswith("file:") else spec
        records.append({"problem": name, "m": data.m, "d": data.d, "V": data.V, "cond": kappa,
                        "variables": data.V * data.d, "ipm": ipm, "workset": workset, "clarabel": clarabel})
        rows.append([name, f"{data.m}, {data.d}, {data.V}", f"{data.V * data.d:,}", f"{kappa:.1e}",
                     f"{ipm['wall']:.3g} ({ipm['cpu']:.3g})", ipm["iterations"], f"{ipm['kkt']:.1e}",
                     *peer_columns(workset, ipm), *peer_columns(clarabel, ipm)])
        print(f"{name}: " + " | ".join(str(c) for c in rows[-1][4:]), flush=True)
    nuclear_rows = []
    for spec in (s for s in specs if s.startswith("file:")):
        data = instance(spec)
        admm = solve(data, "nuclear-admm")
        clarabel = {"label": "not run"} if args.no_clarabel else capped(spec, "nuclear-clarabel", args.cap, args.mem_gb)
        records.append({"problem": os.path.basename(spec[5:]), "program": "nuclear", "V": data.V, "m": data.m,
                        "admm": admm, "clarabel": clarabel})
        nuclear_rows.append([os.path.basename(spec[5:]), f"{data.V}, {data.m}", f"{data.V * data.m:,}",
                             f"{admm['wall']:.3g} ({admm['cpu']:.3g})", admm["iterations"], f"{admm['kkt']:.1e}",
                             admm["rank"], *peer_columns(clarabel, admm)])
    load = f"load average {load0:.1f} before, {os.getloadavg()[0]:.1f} after"
    header = ["problem (size:cond:supports)", "m, d, V", "variables V d", "cond(H)", "ipm wall (CPU) s",
              "ipm iterations", "ipm KKT worst", "workset wall (CPU) s", "workset KKT worst",
              "objective rel. diff (workset)", "Clarabel wall (CPU) s", "Clarabel KKT worst",
              "objective rel. diff (Clarabel)"]
    print_table(f"NTP-SVM on ill-conditioned features: interior-point method vs workset vs cvxpy + Clarabel "
                f"({torch.get_num_threads()} CPU thread(s), {load}, peers capped at {args.cap:g} s)", header, rows)
    if nuclear_rows:
        print_table("The nuclear-norm NTP-SVM in logit space of the same supports (it does not depend on H): ADMM vs "
                    "cvxpy + Clarabel (the SDP); the certificate's worst residual is the relative duality gap or a "
                    "violation", ["problem", "V, m", "logit cells", "ADMM wall (CPU) s", "ADMM iterations",
                                  "ADMM certificate worst", "rank of L^mm", "Clarabel wall (CPU) s",
                                  "Clarabel certificate worst", "value rel. diff (Clarabel)"], nuclear_rows)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"load": load, "rows": records}, fh, indent=2)


if __name__ == "__main__":
    main()
