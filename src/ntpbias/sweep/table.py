"""A sweep's results table (``results.csv``): its columns, reading and writing it, and the sweep's outcome."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError
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
#: the columns a sweep needs to resume from its results.csv
KEY_COLUMNS = ("cell", "status", "config_hash")
#: every status a results.csv row may have
STATUSES = (*DONE, "failed")


def read_results(path: str | Path) -> list[dict[str, str]]:
    """Rows of a results.csv (values as strings; empty cells are ""); none when there is no file.

    A damaged file (not UTF-8 text, not CSV, without the columns :data:`KEY_COLUMNS`, or with an unknown status) is a
    :class:`~ntpbias.errors.DataError` naming it and saying how to recover.
    """
    path = Path(path)
    if not path.exists():
        return []
    recover = ("delete it and run the sweep again (every cell reruns from its checkpoint; finished cells finish at "
               "once), or choose another --out")
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = [dict(r) for r in reader]
            columns = reader.fieldnames or []
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: the sweep's results table is not UTF-8 text ({exc.reason} at byte {exc.start}); "
                        f"{recover}") from None
    except (csv.Error, OSError) as exc:
        raise DataError(f"{path}: the sweep's results table cannot be read ({exc}); {recover}") from None
    missing = [c for c in KEY_COLUMNS if c not in columns]
    if missing:
        raise DataError(f"{path}: the sweep's results table lacks the column(s) {', '.join(missing)}; {recover}")
    for line, row in enumerate(rows, start=2):
        if not row.get("cell") or row.get("status") not in STATUSES:
            raise DataError(f"{path}: line {line} has cell {row.get('cell')!r} and status {row.get('status')!r} (a "
                            f"status is one of {', '.join(STATUSES)}); set its status to failed and rerun with "
                            f"--retry-failed, or {recover}")
    return rows


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

