"""Running a sweep: each cell trained into its own run directory, one ``results.csv`` row per cell, resumable.

Output directory::

    OUT/sweep.toml        the sweep file as given (the record of what was asked)
    OUT/results.csv       one row per finished cell: cell, axis values, seed, collected final metrics,
                          checks_passed, checks_total, status, seconds, error, run_dir, config_hash
    OUT/cells/<cell>/     each cell's run directory (config.toml, metrics.csv, summary.json, report.html, ...)
    OUT/figures/, OUT/summary.json, OUT/report.html   mean and spread over seeds (:mod:`.report`)

``results.csv`` is rewritten atomically after every finished cell, so a killed sweep loses only the cells that
were running; running it again skips finished cells (status ``completed`` or ``diverged``, same resolved
config), reruns the rest (a cell's trainer resumes from its checkpoint), and retries ``failed`` cells only with
``retry_failed=True``. A cell that raises is recorded (status ``failed``, the one-line error in ``error``, the
traceback in ``cells/<cell>/error.txt``) and the sweep goes on.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError, NTPBiasError
from ..io import check_output_dir, ensure_dir, write_text
from ..parallel import TaskOutcome, check_reachable, map_tasks
from ..results import claim_run_dir
from .report import write_report
from .spec import Cell, SweepSpec, format_value
from .table import DONE, RESULTS, SweepResult, front_columns, read_results, results_csv


@dataclass(frozen=True)
class CellTask:
    """What a worker needs to run one cell (picklable)."""

    key: str
    config: Any
    out: str


def run_cell(task: CellTask) -> dict:
    """Train one cell's config (:func:`ntpbias.api.run_config`) into ``task.out``.

    Returns the run's ``final`` values and ``checks`` from its summary.json, and its status (``completed``, or
    ``diverged`` when training produced a non-finite loss: a finding, recorded with the metrics logged so far).
    The run context resumes from the cell's checkpoint when one exists.
    """
    from ..api import run_config
    from ..errors import TrainingDivergedError
    from ..experiments import RunContext

    cfg = task.config
    out = Path(task.out)
    ctx = RunContext(out=out, resume=True, progress=False, device=getattr(cfg, "device", "cpu"))
    status, message = "completed", ""
    try:
        run_config(cfg, ctx)
    except TrainingDivergedError as exc:
        status, message = "diverged", str(exc)
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"status": status, "message": message, "final": summary.get("final", {}),
            "checks": summary.get("checks", [])}


def _metric(value) -> str:
    """A summary.json final value as one CSV value: a per-seed list becomes its mean."""
    if isinstance(value, list):
        nums = [float("nan") if v is None else v for v in value if isinstance(v, (int, float)) or v is None]
        if len(nums) != len(value) or not nums:
            return json.dumps(value)
        value = nums[0] if len(nums) == 1 else math.fsum(nums) / len(nums)
    if value is None:
        return "nan"
    return format_value(value)


def _collect(record: dict, names: tuple[str, ...], checks: bool) -> tuple[dict[str, str], list[str]]:
    """(metric columns, requested names that the record lacks)."""
    final, cks = record.get("final", {}) or {}, record.get("checks", []) or []
    by_name = {c["name"]: c for c in cks}
    wanted = names or tuple(final)
    out, missing = {}, []
    for name in wanted:
        if name.startswith("check:"):
            c = by_name.get(name[len("check:"):])
            if c is None:
                missing.append(name)
                continue
            measured = c.get("measured")
            out[name] = _metric(measured) if isinstance(measured, (int, float)) else format_value(c["passed"])
        elif name in final:
            out[name] = _metric(final[name])
        else:
            missing.append(name)
    if checks:  # vacuous bounds ("shown") are not counted; "consistent" counts as passed
        counted = [c for c in cks if c.get("verdict", "pass" if c.get("passed") else "fail") != "shown"]
        out["checks_passed"] = str(sum(c.get("verdict", "pass" if c.get("passed") else "fail") in ("pass", "consistent")
                                       for c in counted))
        out["checks_total"] = str(len(counted))
    return out, missing


def _base_row(cell: Cell, spec: SweepSpec) -> dict[str, str]:
    row = {"cell": cell.key}
    row.update({k: format_value(v) for k, v in cell.values})
    if "seed" not in row and hasattr(cell.config, "seed"):
        row["seed"] = format_value(cell.config.seed)
    row.update(run_dir=cell.directory, config_hash=cell.config_hash)
    return row


# ------------------------------------------------------------------------------------------------ the run
def is_sweep_dir(out: Path) -> bool:
    """Whether ``out`` holds a sweep (its ``sweep.toml`` or ``results.csv``): running a sweep there continues it."""
    return (out / "sweep.toml").is_file() or (out / RESULTS).is_file()


def preflight_cells(cells: list[Cell], spec: SweepSpec) -> None:
    """Every cell's checks at the door (:func:`~ntpbias.experiments.base.preflight`: the files it names, its memory)
    before the first cell runs; cells that run at once on this machine (local workers) must fit together."""
    from ..experiments.base import preflight
    from ..limits import check_memory

    largest = 0
    for cell in cells:
        try:
            preflight(cell.config)
        except NTPBiasError as exc:
            raise type(exc)(f"sweep cell {cell.key or '(base)'}: {exc}") from None
        largest = max(largest, sum(getattr(cell.config, "footprint", dict)().values()))
    at_once = min(spec.executor.n_workers, len(cells)) if spec.executor.kind == "local" else 1
    if at_once > 1:
        check_memory({f"{at_once} cells at once (the largest {largest:,} bytes each)": at_once * largest},
                     f"{at_once} local workers", hint="use fewer --workers")


def run_sweep(spec: SweepSpec, out: str | Path, *, retry_failed: bool = False, overwrite: bool = False,
              progress: Callable[[dict], None] | None = None, say: Callable[[str], None] = lambda _m: None,
              command: str = "", report: bool = True) -> SweepResult:
    """Run every unfinished cell of ``spec`` with ``spec.executor``; write results.csv (and the report).

    ``progress(counts)`` receives ``{"total", "done", "running", "failed"}`` whenever they change. ``out`` is held by
    this process alone; an ``out`` that holds a sweep is continued, one that holds another run is refused unless
    ``overwrite`` (which also starts a sweep over).

    Raises
    ------
    ConfigError
        When ``out`` holds results of a different base config for one of the cells (use another ``--out``), or a
        name of ``[collect] metrics`` is not among the runs' final values.
    DataError
        When ``out/results.csv`` is damaged (not UTF-8 text, not CSV, or without the columns of a sweep's results).
    """
    cells = spec.cells()  # checks every cell's config before anything runs or is written
    preflight_cells(cells, spec)
    check_output_dir(out, (RESULTS, "summary.json", "report.html", "sweep.toml"), ("cells", "figures"))
    check_reachable(spec.executor)  # an unreachable scheduler leaves nothing behind
    if not overwrite:
        read_results(Path(out) / RESULTS)  # a damaged results.csv is refused before anything is written
    t0 = time.perf_counter()
    with claim_run_dir(out, overwrite=overwrite, continues=is_sweep_dir) as out:
        results_path = out / RESULTS
        previous = read_results(results_path)
        rows: dict[str, dict[str, str]] = {r["cell"]: r for r in previous}
        grid = {c.key for c in cells}
        for cell in cells:
            old = rows.get(cell.key)
            if old is not None and old.get("status") in DONE and old.get("config_hash") != cell.config_hash:
                raise ConfigError(f"{results_path}: cell {cell.key!r} was run with a different config (base or "
                                  "overrides changed); use another --out, or delete that directory to start over")
        write_text(out / "sweep.toml", spec.text or f"# {spec.base_label}\n")
        todo = [c for c in cells if rows.get(c.key, {}).get("status") not in
                (DONE + (() if retry_failed else ("failed",)))]
        front = front_columns(spec)
        todo_keys = {c.key for c in todo}
        state = {"total": len(cells), "running": 0,
                 "done": sum(rows.get(c.key, {}).get("status") in DONE for c in cells),
                 "failed": sum(rows.get(c.key, {}).get("status") == "failed" for c in cells
                               if c.key not in todo_keys)}
        skipped = state["failed"]
        if skipped:
            say(f"{skipped} cell(s) failed in an earlier run and are not retried (use --retry-failed)")
        say(f"{len(cells)} cells: {state['done']} done earlier, {len(todo)} to run on {spec.executor.describe()}")
        if progress is not None:
            progress(dict(state))

        def on_start(_i: int) -> None:
            state["running"] += 1
            if progress is not None:
                progress(dict(state))

        tasks = [CellTask(c.key, c.config, str((out / c.directory).resolve())) for c in todo]
        checked = False
        ran = 0
        for outcome in map_tasks(run_cell, tasks, executor=spec.executor, on_start=on_start):
            cell = todo[outcome.index]
            row = _base_row(cell, spec)
            row.update(_outcome_columns(outcome, spec, out / cell.directory))
            if outcome.ok and not checked and spec.metrics:
                _, missing = _collect(outcome.value, spec.metrics, spec.checks)
                if missing:
                    available = list(outcome.value.get("final") or {}) + [
                        "check:" + c["name"] for c in outcome.value.get("checks", [])]
                    raise ConfigError(f"[collect] metrics: {missing[0]!r} is not a final value of the runs; "
                                      f"available: {', '.join(available) or '(none)'}")
                checked = True
            rows[cell.key] = row
            ordered = [rows[c.key] for c in cells if c.key in rows] + [r for k, r in rows.items() if k not in grid]
            write_text(results_path, results_csv(ordered, front))
            ran += 1
            state["running"] -= 1
            state["done" if row["status"] in DONE else "failed"] += 1
            if row["status"] == "failed":
                say(f"cell {cell.key}: failed: {row['error']}")
            if progress is not None:
                progress(dict(state))
        ordered = [rows[c.key] for c in cells if c.key in rows] + [r for k, r in rows.items() if k not in grid]
        if not results_path.exists():
            write_text(results_path, results_csv(ordered, front))
        counts = {s: sum(r.get("status") == s for r in ordered) for s in ("completed", "diverged", "failed")}
        result = SweepResult(out, ordered, counts, ran, time.perf_counter() - t0)
        if report:
            write_report(spec, result, command=command)
        return result


def _outcome_columns(outcome: TaskOutcome, spec: SweepSpec, run_dir: Path) -> dict[str, str]:
    cols = {"seconds": f"{outcome.seconds:.3f}"}
    if outcome.ok:
        metrics, _ = _collect(outcome.value, spec.metrics, spec.checks)
        cols.update(metrics)
        cols.update(status=outcome.value["status"], error=" ".join(outcome.value.get("message", "").split()))
        return cols
    cols.update(status="failed", error=outcome.error)
    try:
        write_text(ensure_dir(run_dir) / "error.txt", (outcome.traceback or outcome.error) + "\n")
    except (DataError, OSError):  # an unwritable cell directory must not stop the sweep
        pass
    return cols
