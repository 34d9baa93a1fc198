"""Certified NTP-separability verdicts per second: the one-LP path (capped margin LP, ``lp_form="margin"``) against
the earlier two-LP path (feasibility LP, then a Gordan LP on non-separable data, ``lp_form="feasibility"``), in
one run, on paper A's random instances (h̄_j ~ N(0, I_d), uniformly random supports of size k, nested d).

For each (V, k, m) one dataset is drawn with d = m and the verdicts are taken on its first d coordinates at
``--fractions`` of the predicted threshold d = δ*(V, k) m (:func:`ntpbias.geometry.thresholds.separability_threshold`),
so both verdict classes appear. Per (V, k, m) the table gives: the verdicts (separable / not), the seconds per
verdict of each path, the ratio, whether every verdict of both paths is certified and whether they agree. With
``--bisect`` it also times one trial's whole nested-d search
(:func:`ntpbias.geometry.separability.critical_dimension`): the bisection on 0..m with each path, and the new path
searched from the predicted threshold. A (V, k) stops growing m once the old path's verdicts at the next m would
take more than ``--cap`` seconds, extrapolated as m^3.

Run: python benchmarks/bench_separability.py [--m 40,100,200,400,800] [--V 2,10,20] [--k 1,half,last] [--bisect]
"""

from __future__ import annotations

import argparse
import time

from _common import print_table

from ntpbias.data.ntp import NTPData
from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.separability import critical_dimension, ntp_separability
from ntpbias.geometry.thresholds import separability_threshold

FORMS = ("feasibility", "margin")


def support_sizes(V: int, spec: str) -> list[int]:
    """Support sizes named by ``spec``: integers, ``half`` (V // 2) and ``last`` (V - 1), comma-separated."""
    named = {"half": V // 2, "last": V - 1}
    return sorted({named[s] if s in named else int(s) for s in spec.split(",")} & set(range(1, V)))


def verdict(full: NTPData, d: int, form: str):
    data = NTPData.from_arrays(full.H[:, :d], full.P)
    t0 = time.perf_counter()
    result = ntp_separability(data, method="lp", lp_form=form)
    return time.perf_counter() - t0, result


def trial_search(full: NTPData, guess: int | None, form: str) -> tuple[float, int, int]:
    """(seconds, d*, verdicts) of one nested-d search (:func:`critical_dimension`; guess None = bisection)."""
    t0 = time.perf_counter()
    d_star, verdicts = critical_dimension(full, guess, method="lp", lp_form=form)
    return time.perf_counter() - t0, d_star, len(verdicts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", default="40,100,200,400")
    ap.add_argument("--V", default="2,10,20")
    ap.add_argument("--k", default="1,half")
    ap.add_argument("--fractions", default="0.8,0.95,1.05,1.2")
    ap.add_argument("--cap", type=float, default=60.0, help="skip an m whose old-path verdicts would take longer (s)")
    ap.add_argument("--bisect", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    fractions = [float(f) for f in args.fractions.split(",")]
    rows, brows = [], []
    for V in (int(v) for v in args.V.split(",")):
        for k in support_sizes(V, args.k):
            t_star = separability_threshold(V, k)
            ms = [int(x) for x in args.m.split(",")]
            for i, m in enumerate(ms):
                full = random_ntp(m, m, V, k, seed=args.seed)
                ds = sorted({min(m, max(1, round(f * t_star * m))) for f in fractions})
                times = {f: 0.0 for f in FORMS}
                verdicts, certified = {f: [] for f in FORMS}, True
                for d in ds:
                    for form in FORMS:
                        sec, res = verdict(full, d, form)
                        times[form] += sec
                        verdicts[form].append(res.separable)
                        certified &= res.certified
                n_sep = sum(verdicts["margin"])
                old, new = times["feasibility"] / len(ds), times["margin"] / len(ds)
                rows.append([V, k, m, f"{min(ds)}..{max(ds)}", f"{n_sep}/{len(ds) - n_sep}", old, new, old / new,
                             1 / new, certified, verdicts["margin"] == verdicts["feasibility"]])
                print(*rows[-1], flush=True)
                if args.bisect:
                    t_old, d_old, n_old = trial_search(full, None, "feasibility")
                    t_new, d_new, n_new = trial_search(full, None, "margin")
                    t_g, d_g, n_g = trial_search(full, round(t_star * m), "margin")
                    brows.append([V, k, m, n_old, t_old, t_new, n_g, t_g, t_old / t_new, t_old / t_g,
                                  d_old == d_new == d_g])
                    print(*brows[-1], flush=True)
                if i + 1 < len(ms) and times["feasibility"] * (ms[i + 1] / m) ** 3 > args.cap:
                    break  # LP time grows about like m^3 (measured: x8 to x13 per doubling of m)
    print_table("NTP-separability verdicts, seconds per verdict (one CPU thread; old = feasibility LP + Gordan LP, "
                "new = one capped margin LP)",
                ["V", "k", "m", "d", "sep/not", "old s", "new s", "old/new", "new verdicts/s", "certified",
                 "agree"], rows)
    if brows:
        print_table("One trial's nested-d search: bisection on 0..m with the old / new verdicts, and the new verdicts "
                    "searched from the predicted threshold round(δ* m)",
                    ["V", "k", "m", "bisection verdicts", "old s", "new s", "guided verdicts", "guided s",
                     "old/new", "old/guided", "same d*"], brows)


if __name__ == "__main__":
    main()
