"""Metric rows (one dict per logged step and seed, with a ``run`` name): CSV I/O and series extraction."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np


def metrics_csv(rows: list[dict]) -> str:
    """CSV text of metric rows (columns: the union of keys, in first-seen order; ``run``, ``step``, ``seed`` first)."""
    cols: list[str] = []
    for key in ("run", "step", "seed"):
        if any(key in r for r in rows):
            cols.append(key)
    for r in rows:
        cols.extend(k for k in r if k not in cols)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, restval="", lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


def read_metrics_csv(path: str | Path) -> list[dict]:
    """Rows of a metrics.csv with numbers parsed (``run`` stays a string)."""
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        for r in csv.DictReader(fh):
            parsed = {}
            for k, v in r.items():
                if v == "":
                    continue
                if k == "run":
                    parsed[k] = v
                elif k in ("step", "seed"):
                    parsed[k] = int(v)
                else:
                    parsed[k] = float(v)
            rows.append(parsed)
    return rows


def series(rows: list[dict], run: str, metric: str):
    """(steps (n,), values (n, n_seeds)) of one metric of one run from metric rows."""
    sel = [r for r in rows if r.get("run") == run and metric in r]
    steps = np.array(sorted({r["step"] for r in sel}))
    seeds = sorted({r["seed"] for r in sel})
    table = {(r["step"], r["seed"]): r[metric] for r in sel}
    return steps, np.array([[table.get((s, sd), np.nan) for sd in seeds] for s in steps], dtype=float)
