"""The nuclear-norm NTP-SVM in logit space (docs/ufm.md): cvxpy + Clarabel (the SDP) against ADMM (first order), on
planted supports with independently drawn, overlapping sets (so the centred support matrix is usually not the
solution and ADMM has to iterate): m / 4 sets of sizes cycling through 2, 3, 4, 5, 6, 8, four contexts each.

Per size: seconds and certified relative duality gap of each backend (Clarabel's own gap before the ADMM polish, and
after it), their values' relative difference, and ADMM's iterations. Clarabel stops being run once its extrapolated
time (as (V + m)^3) passes ``--cap`` seconds.

Run: python benchmarks/bench_logit_svm.py [--V 16] [--m 16,32,48,96,192,384,768] [--cap 60]
"""

from __future__ import annotations

import argparse
import warnings

from _common import print_table, timed

from ntpbias.data.planted import planted_supports
from ntpbias.geometry.ufm.logit_svm import nuclear_svm

SIZES = (2, 3, 4, 5, 6, 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--V", type=int, default=16)
    parser.add_argument("--m", default="16,32,48,96,192,384,768", help="numbers of contexts (multiples of 4)")
    parser.add_argument("--cap", type=float, default=60.0)
    args = parser.parse_args()
    rows, clarabel_time, last_side = [], 0.0, 0
    for m in (int(c) for c in args.m.split(",")):
        sizes = [SIZES[k % len(SIZES)] for k in range(max(m // 4, 1))]
        data = planted_supports(args.V, sizes, 4, seed=m, disjoint=False)
        side = data.V + data.m
        t_admm, admm = timed(lambda data=data: nuclear_svm(data, "admm"))
        row = [data.m, data.V, side, round(t_admm, 3), admm.iterations, f"{admm.certificate.duality_gap:.1e}"]
        if clarabel_time and clarabel_time * (side / last_side) ** 3 > args.cap:
            row += ["-", "-", "-", "-"]
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t_cl, cl = timed(lambda data=data: nuclear_svm(data, "clarabel"))
            clarabel_time, last_side = t_cl, side
            row += [round(t_cl, 3), f"{cl.details['clarabel_gap_rel']:.1e}", f"{cl.certificate.duality_gap:.1e}",
                    f"{abs(cl.norm - admm.norm) / admm.norm:.1e}"]
        rows.append(row)
    print_table(f"nuclear-norm NTP-SVM, planted overlapping supports (V = {args.V}, four contexts per set)",
                ["m", "V", "V + m", "ADMM (s)", "ADMM iterations", "ADMM gap", "Clarabel (s)", "Clarabel's gap",
                 "gap after polish", "value rel. diff"], rows)


if __name__ == "__main__":
    main()
