"""Shared benchmark helpers: single-threaded setup and a table printer."""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import time  # noqa: E402

import torch  # noqa: E402

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def timed(fn, *, repeat: int = 1, clock=time.perf_counter):
    """(best time in seconds over ``repeat`` calls, last result): wall time, or CPU time of this process with
    ``clock=time.process_time``."""
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = clock()
        result = fn()
        best = min(best, clock() - t0)
    return best, result


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    """A plain-text table (also valid Markdown), so it can be pasted into the README."""
    cells = [[str(h) for h in header]] + [[f"{v:.4g}" if isinstance(v, float) else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    print(f"\n{title}\n")
    print("| " + " | ".join(c.ljust(w) for c, w in zip(cells[0], widths, strict=True)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in cells[1:]:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |")
