"""Certified critical dimensions d* of NTP-separability: ntpbias's search against a plain HiGHS bisection, same run.

Instances: the study's datasets (``ntpbias reproduce separability``: trial t of (V, |S_j|, m) with seed 0, Gaussian
embeddings h̄_j ~ N(0, I_m), uniformly random supports; the first d coordinates for every d). For each dataset d* is
found twice, from the same guess round(δ* m) (:func:`ntpbias.geometry.separability.thresholds.separability_threshold`)
and the same first step round(sqrt(m)/4):

* **reference**: a plain bisection written here, independently of ntpbias: one cold scipy ``linprog`` (HiGHS) per
  verdict on A_in(W) >= 1, A_eq(W) = 0 (W free; status 0 separable, 2 not; the interior-point method when the
  default returns another status), the separating W checked on its constraints in float64 (margin >= 1 - 1e-6,
  ties <= 1e-6: HiGHS's feasibility tolerance 1e-7 holds on its scaled rows, and the unscaled rows came out 1.3e-7
  short once), steps s, 2s, 4s, ... away from the guess to bracket d*, then bisection.
  Non-separable verdicts carry no certificate.
* **ntpbias**: :func:`ntpbias.geometry.separability.nested.nested_critical_dimension` (the study's method): the
  nested LP (one LP and a few warm re-solves) for small LPs, the interior-point search (one structured
  interior-point solve per verdict) from 400 variables on; either way a separating W on the first d* coordinates and
  Gordan multipliers on the first d* - 1, both checked in float64. The last column says which ran.
* **verdicts** (``--verdicts``): the single-verdict search ntpbias used before
  (:func:`ntpbias.geometry.separability.verdict.critical_dimension`: one cold certified LP per verdict).

Times are CPU seconds (``time.process_time``, one thread) summed over the datasets; the run fails if any d* differs.

``--trials runs/X/data/trials.csv`` instead summarizes a finished study: per (V, k, m) the datasets, verdicts, HiGHS
runs, seconds in the trials and seconds per dataset.

Run: python benchmarks/bench_separability.py [--cases 5:1:200:10,...] [--verdicts] [--trials PATH]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter, defaultdict

import numpy as np
import scipy.sparse as sp
from _common import print_table
from scipy.optimize import linprog

from ntpbias.experiments.separability import read_trials, trial_dataset
from ntpbias.experiments.separability.runs import Trial
from ntpbias.geometry.separability.nested import nested_critical_dimension
from ntpbias.geometry.separability.thresholds import separability_threshold
from ntpbias.geometry.separability.verdict import critical_dimension

#: V:|S_j|:m:datasets; the first is the setting of `ntpbias train --preset separability-ntp --set V=5
#: support_size=1 m=200 trials=10`; (10, 2) takes the interior-point search
CASES = "5:1:200:10,2:1:400:10,10:2:200:6,5:4:200:10,10:9:200:6"


# ------------------------------------------------------------------------------------ the reference (independent)
def _rows(P: np.ndarray):
    """(context, anchor, other token) of the separation rows (other out of the support) and of the tie rows."""
    S = P > 0
    anchor = S.argmax(1)
    j_in, v_in = np.nonzero(~S)
    ties = S.copy()
    ties[np.arange(len(P)), anchor] = False
    j_eq, v_eq = np.nonzero(ties)
    return (j_in, anchor[j_in], v_in), (j_eq, anchor[j_eq], v_eq)


def _gaps(H: np.ndarray, rows, V: int) -> sp.csr_matrix:
    """Rows (e_a - e_b)^T W h_j over vec W (V * d, row-major)."""
    j, a, b = rows
    d = H.shape[1]
    r = np.repeat(np.arange(len(j)), 2 * d)
    cols = np.concatenate([a[:, None] * d + np.arange(d), b[:, None] * d + np.arange(d)], axis=1).ravel()
    vals = np.concatenate([H[j], -H[j]], axis=1).ravel()
    return sp.csr_matrix((vals, (r, cols)), shape=(len(j), V * d))


def reference_separable(H: np.ndarray, P: np.ndarray, d: int) -> bool:
    """The plain feasibility LP at the first d coordinates, the separating W checked."""
    V = P.shape[1]
    ineq, eq = _rows(P)
    A = _gaps(H[:, :d], ineq, V)
    E = _gaps(H[:, :d], eq, V) if len(eq[0]) else None
    problem = dict(A_ub=-A, b_ub=-np.ones(A.shape[0]), A_eq=E, b_eq=None if E is None else np.zeros(E.shape[0]),
                   bounds=(None, None))
    res = linprog(np.zeros(V * d), method="highs", **problem)
    if res.status not in (0, 2):
        res = linprog(np.zeros(V * d), method="highs-ipm", **problem)
    if res.status == 2:
        return False
    if res.status != 0:
        raise RuntimeError(f"reference LP failed at d = {d}: {res.message}")
    margin = (A @ res.x).min()
    tie = 0.0 if E is None else np.abs(E @ res.x).max()
    if margin < 1 - 1e-6 or tie > 1e-6:
        raise RuntimeError(f"reference LP's W does not separate at d = {d} (margin {margin}, ties {tie})")
    return True


def reference_critical(H: np.ndarray, P: np.ndarray, guess: int, step: int) -> tuple[int, int]:
    """(d*, LPs): steps s, 2s, 4s, ... from the guess bracket d*, bisection closes the bracket."""
    m = H.shape[1]
    seen: dict[int, bool] = {}

    def sep(d: int) -> bool:
        if d <= 0:
            return False
        if d > m:
            return True
        if d not in seen:
            seen[d] = reference_separable(H, P, d)
        return seen[d]

    g = min(max(guess, 1), m)
    if sep(g):
        hi, s = g, step
        while hi - s >= 1 and sep(hi - s):
            hi, s = hi - s, 2 * s
        lo = max(hi - s, 0)
    else:
        lo, s = g, step
        while lo + s <= m and not sep(lo + s):
            lo, s = lo + s, 2 * s
        hi = min(lo + s, m + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if sep(mid) else (mid, hi)
    return hi, len(seen)


# ------------------------------------------------------------------------------------ the comparison
def cpu(fn):
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def compare(V: int, k: int, m: int, n: int, with_verdicts: bool) -> list:
    guess, step = round(separability_threshold(V, k) * m), max(1, round(math.sqrt(m) / 4))
    datas = [trial_dataset(Trial(V, k, m, 0, t)) for t in range(n)]
    arrays = [(d.H.numpy().astype(np.float64), d.P.numpy().astype(np.float64)) for d in datas]
    t_ref, ref = cpu(lambda: [reference_critical(H, P, guess, step) for H, P in arrays])
    t_nest, found = cpu(lambda: [nested_critical_dimension(d, guess, step=step) for d in datas])
    d_ref, d_nest = [r[0] for r in ref], [f.d_star for f in found]
    if d_ref != d_nest:
        raise SystemExit(f"d* differ at V={V}, k={k}, m={m}: reference {d_ref}, nested {d_nest}")
    row = [V, k, m, n, f"{np.mean(d_ref):.1f}", f"{np.mean([r[1] for r in ref]):.1f}", t_ref,
           f"{np.mean([f.solves for f in found]):.1f}", t_nest, t_ref / t_nest,
           f"{sum(f.certified for f in found)}/{n}",
           ", ".join(f"{method} {count}" for method, count in sorted(Counter(f.method for f in found).items()))]
    if with_verdicts:
        t_ver, old = cpu(lambda: [critical_dimension(d, guess, step=step)[0] for d in datas])
        if old != d_ref:
            raise SystemExit(f"the verdict search's d* differ at V={V}, k={k}, m={m}: {old} vs {d_ref}")
        row += [t_ver, t_ref / t_ver]
    print(*row, flush=True)
    return row


def study(path: str) -> None:
    """Seconds per dataset of a finished study, per (V, k, m)."""
    acc = defaultdict(lambda: [0, 0, 0, 0.0])
    for r in read_trials(path):
        a = acc[(r["V"], r["k"], r["m"])]
        a[0] += 1
        a[1] += r["solves"]
        a[2] += r.get("lp_runs", r["solves"])
        a[3] += r["seconds"]
    rows = [[V, k, m, n, v, runs, s, s / n] for (V, k, m), (n, v, runs, s) in sorted(acc.items())]
    rows.append(["all", "", "", sum(r[3] for r in rows), sum(r[4] for r in rows), sum(r[5] for r in rows),
                 sum(r[6] for r in rows), ""])
    print_table(f"Certified separability verdicts of a study ({path}; seconds inside the trials: the d* searches, "
                "compatibility by rank, the consistency scans)",
                ["V", "k", "m", "datasets", "verdicts", "HiGHS runs", "seconds", "s per dataset"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=CASES, help="V:k:m:datasets, comma-separated")
    ap.add_argument("--verdicts", action="store_true", help="also time the single-verdict search (slow)")
    ap.add_argument("--trials", default="", help="summarize this trials.csv instead of timing")
    args = ap.parse_args()
    if args.trials:
        study(args.trials)
        return
    rows = [compare(*(int(x) for x in case.split(":")), args.verdicts) for case in args.cases.split(",")]
    header = ["V", "k", "m", "datasets", "mean d*", "reference LPs/dataset", "reference CPU s",
              "ntpbias solver runs/dataset", "ntpbias CPU s", "reference/ntpbias", "both sides certified",
              "method (datasets)"] + (["verdict search CPU s", "reference/verdict search"] if args.verdicts else [])
    print_table("Critical dimension d* of NTP-separability, plain HiGHS bisection vs ntpbias (same datasets, "
                "same guess round(δ* m) and first step; CPU seconds summed over the datasets, one thread; d* "
                "identical)", header, rows)


if __name__ == "__main__":
    main()
