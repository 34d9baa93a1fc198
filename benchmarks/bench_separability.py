"""Certified NTP-separability verdicts per second: the LP forms against each other on paper A's random instances
(h̄_j ~ N(0, I_d), uniformly random supports of size k, nested d), and the verdicts per second of a whole study.

Forms (``ntp_separability(data, method="lp", lp_form=...)``): ``feasibility`` (the first path: a feasibility LP,
then a Gordan LP on non-separable data), ``margin`` (one capped margin LP with V d variables), ``cokernel`` (the
Gordan alternative over the cokernel of H, (m - d) V variables: :mod:`ntpbias.geometry.separability.cokernel`); ``auto``
picks the one of margin / cokernel with fewer constraint nonzeros. For each (V, k, m) one dataset is drawn with d = m
and the verdicts are taken on its first d coordinates at ``--fractions`` of the predicted threshold d = δ*(V, k) m
(:func:`ntpbias.geometry.separability.thresholds.separability_threshold`), so both verdict classes appear. The table
gives the verdicts (separable / not), the seconds per verdict of each form, the speed-up of the one ``auto`` picks over
the margin LP, whether every verdict is certified and whether the forms agree. A form stops growing m once its verdicts
at the next m would take more than ``--cap`` seconds (extrapolated as m^3.5, about what was measured).

``--trials runs/X/data/trials.csv`` instead summarizes a finished study (``ntpbias reproduce separability``): per
(V, k, m) the datasets, verdicts, seconds in the trials and verdicts per second, as the study ran them.

Run: python benchmarks/bench_separability.py [--m 50,100,200,400] [--V 2,10,20] [--k 1,half,last]
     [--forms margin,cokernel] [--trials PATH]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

from _common import print_table

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.experiments.separability import read_trials
from ntpbias.geometry.constraints import constraints
from ntpbias.geometry.margins.program import MarginProgram
from ntpbias.geometry.separability.cokernel import cokernel_nnz
from ntpbias.geometry.separability.thresholds import separability_threshold
from ntpbias.geometry.separability.verdict import ntp_separability


def support_sizes(V: int, spec: str) -> list[int]:
    """Support sizes named by ``spec``: integers, ``half`` (V // 2) and ``last`` (V - 1), comma-separated."""
    named = {"half": V // 2, "last": V - 1}
    return sorted({named[s] if s in named else int(s) for s in spec.split(",")} & set(range(1, V)))


def verdict(full: NTPData, d: int, form: str):
    data = NTPData.from_arrays(full.H[:, :d], full.P)
    t0 = time.perf_counter()
    result = ntp_separability(data, method="lp", lp_form=form)
    return time.perf_counter() - t0, result


def auto_form(full: NTPData, d: int) -> str:
    data = NTPData.from_arrays(full.H[:, :d], full.P)
    cons = constraints(data)
    return "cokernel" if cokernel_nnz(data, cons) < MarginProgram(cons.ineq, cons.eq).nnz else "margin"


def study(path: str) -> None:
    """Verdicts per second of a finished study, per (V, k, m)."""
    acc = defaultdict(lambda: [0, 0, 0.0])
    for r in read_trials(path):
        a = acc[(r["V"], r["k"], r["m"])]
        a[0] += 1
        a[1] += r["solves"]
        a[2] += r["seconds"]
    rows = [[V, k, m, n, v, s, v / s, s / n] for (V, k, m), (n, v, s) in sorted(acc.items())]
    print_table(f"Certified separability verdicts of a study ({path}; one worker process, seconds inside the trials: "
                "the searches from extrapolated guesses, compatibility by rank, the consistency scans)",
                ["V", "k", "m", "datasets", "verdicts", "seconds", "verdicts/s", "s per dataset"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", default="50,100,200,400")
    ap.add_argument("--V", default="2,10,20")
    ap.add_argument("--k", default="1,half,last")
    ap.add_argument("--forms", default="margin,cokernel")
    ap.add_argument("--fractions", default="0.95,1.05")
    ap.add_argument("--cap", type=float, default=60.0, help="skip an m whose verdicts of a form would take longer (s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--trials", default="", help="summarize this trials.csv instead of timing")
    args = ap.parse_args()
    if args.trials:
        study(args.trials)
        return
    forms = args.forms.split(",")
    fractions = [float(f) for f in args.fractions.split(",")]
    rows = []
    for V in (int(v) for v in args.V.split(",")):
        for k in support_sizes(V, args.k):
            t_star = separability_threshold(V, k)
            ms = [int(x) for x in args.m.split(",")]
            live = set(forms)
            for i, m in enumerate(ms):
                full = random_ntp(m, m, V, k, seed=args.seed)
                ds = sorted({min(m, max(1, round(f * t_star * m))) for f in fractions})
                times = {f: 0.0 for f in live}
                verdicts, certified = {f: [] for f in live}, True
                for d in ds:
                    for form in sorted(live):
                        sec, res = verdict(full, d, form)
                        times[form] += sec
                        verdicts[form].append(res.separable)
                        certified &= res.certified
                picks = {auto_form(full, d) for d in ds}
                per = {f: times[f] / len(ds) for f in live}
                chosen = per.get(picks.pop()) if len(picks) == 1 else None
                ref = next(iter(verdicts.values()))
                n_sep = sum(ref)
                rows.append([V, k, m, f"{min(ds)}..{max(ds)}", f"{n_sep}/{len(ds) - n_sep}"]
                            + [per.get(f, "-") for f in forms]
                            + ["-" if chosen is None or "margin" not in per else per["margin"] / chosen,
                               "-" if chosen is None else 1 / chosen, certified,
                               all(v == ref for v in verdicts.values())])
                print(*rows[-1], flush=True)
                if i + 1 < len(ms):
                    live = {f for f in live if times[f] * (ms[i + 1] / m) ** 3.5 <= args.cap}
                    if not live:
                        break
    print_table("NTP-separability verdicts, seconds per verdict by LP form (one CPU thread); auto = the form with "
                "fewer constraint nonzeros", ["V", "k", "m", "d", "sep/not"] + [f"{f} s" for f in forms]
                + ["margin/auto", "auto verdicts/s", "certified", "agree"], rows)


if __name__ == "__main__":
    main()
