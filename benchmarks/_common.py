"""Shared benchmark helpers: single-threaded setup and a table printer."""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import json  # noqa: E402
import resource  # noqa: E402
import subprocess  # noqa: E402
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


def run_capped(cmd: list[str], cap: float, mem_gb: float) -> tuple[dict | None, str]:
    """Run ``cmd`` (whose last line of output is one JSON record) in a subprocess killed after ``cap`` seconds or
    beyond ``mem_gb`` GB of address space: (the record, "") or (None, why there is none)."""
    limit = int(mem_gb * 2 ** 30)

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=cap, preexec_fn=limit_memory,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        return None, f"> {cap:g}"
    if proc.returncode != 0:
        oom = "MemoryError" in proc.stderr or "bad_alloc" in proc.stderr or "memory" in proc.stderr.lower()
        return None, f"out of memory (> {mem_gb:g} GB)" if oom else f"failed ({proc.stderr.strip().splitlines()[-1:]})"
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""
