"""A sweep's results table (``results.csv``): its columns, reading and writing it, and the sweep's outcome."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from .spec import SweepSpec

RESULTS = "results.csv"
#: statuses of a finished cell that a resumed sweep keeps (``failed`` is retried with ``retry_failed``)
DONE = ("completed", "diverged")
TAIL = ("checks_passed", "checks_total", "status", "seconds", "error", "run_dir", "config_hash")


@dataclass
class SweepResult:
    """What :func:`run_sweep` did: the results rows (strings, as in results.csv) and the status counts."""

    out: Path
    rows: list[dict[str, str]]
    counts: dict[str, int] = field(default_factory=dict)
    ran: int = 0
    seconds: float = 0.0

    @property
    def failed(self) -> int:
        return self.counts.get("failed", 0)



# ------------------------------------------------------------------------------------------------ results table
def read_results(path: str | Path) -> list[dict[str, str]]:
    """Rows of a results.csv (values as strings; empty cells are "")."""
    path = Path(path)
    if not path.exists():
        return []
    with open(path, newline="", encoding="utf-8") as fh:
        return [dict(r) for r in csv.DictReader(fh)]


def results_csv(rows: list[dict[str, str]], front: tuple[str, ...]) -> str:
    """CSV text: ``front`` columns, then the metric columns in first-seen order, then :data:`TAIL`."""
    cols = list(front)
    for r in rows:
        cols.extend(k for k in r if k not in cols and k not in TAIL)
    cols.extend(TAIL)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=cols, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def as_number(text: str) -> float | None:
    """A results.csv value as a float (booleans as 0/1), or None when it is not a number."""
    if text in ("true", "false", "True", "False"):
        return float(text in ("true", "True"))
    try:
        return float(text)
    except (TypeError, ValueError):
        return None



def front_columns(spec: SweepSpec) -> tuple[str, ...]:
    keys = spec.axis_keys
    seed = () if "seed" in keys or not hasattr(spec.base, "seed") else ("seed",)
    return ("cell", *keys, *seed)

