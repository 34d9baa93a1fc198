"""The run directory's files: ``config.toml``, ``metrics.csv`` and ``summary.json`` of a training or a group.

A trainer or a ``reproduce`` group returns a :class:`RunResult`; :func:`write_run` writes its files (the figures and
``report.html`` are drawn by :mod:`ntpbias.report`). Every file is written atomically.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from .. import __version__
from ..config import to_dict, to_toml
from ..io import check_output_dir, write_json, write_text
from ..training.history import History
from .metrics_table import metrics_csv
from .records import Section, tally


@dataclass
class RunResult:
    """What a trainer (``ntpbias train``) or a group (``ntpbias reproduce ID``) produced.

    Attributes
    ----------
    section : facts, checks, tables, figure specs and notes for the report
    config : one config dataclass (a ``train`` run: ``config.toml`` re-runs it), or a dict name -> config (a group:
        one TOML table per training run)
    histories : the training histories (their ``run`` names label ``metrics.csv``)
    rows : further ``metrics.csv`` rows that no training history produced (e.g. a phase-transition curve per d)
    summary : extra ``summary.json`` fields (``final``: per-seed final values get their mean and spread added)
    failure : a diverged or interrupted history; raised after the outputs are written
    """

    section: Section
    config: Any
    histories: list[History] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    failure: History | None = None
    rows: list[dict] = field(default_factory=list)


#: the files and folders a run directory holds (``check_outputs`` checks them before any work)
RUN_FILES = ("config.toml", "metrics.csv", "summary.json", "report.html", "geometry.npz")
RUN_DIRS = ("figures", "checkpoints", "data")


def check_outputs(*dirs: str | Path) -> None:
    """Before any work: each run directory in ``dirs`` can be created or written, and no file it will hold stands
    there as a folder (or the reverse); a :class:`~ntpbias.errors.DataError` naming the path otherwise."""
    for out in dirs:
        check_output_dir(out, RUN_FILES, RUN_DIRS)


def write_run(out: str | Path, result: RunResult, *, command: str = "") -> dict:
    """Write ``config.toml``, ``metrics.csv`` and ``summary.json`` of ``result`` into ``out``; returns the summary."""
    out = Path(out)
    config = result.config
    if isinstance(config, dict):
        toml_text, config_record = config_toml(config), {n: to_dict(c) for n, c in config.items()}
    else:
        toml_text, config_record = to_toml(config), to_dict(config)
    write_text(out / "config.toml", toml_text)
    write_text(out / "metrics.csv", metrics_csv([row for h in result.histories for row in h.rows()] + result.rows))
    extra = dict(result.summary)
    if isinstance(extra.get("final"), dict):  # per-seed final values: add their mean and spread
        extra["final_summary"] = {k: spread(v) for k, v in extra["final"].items()
                                  if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v)}
    section = result.section
    status = result.failure.status if result.failure is not None else extra.get("status", "completed")
    summary = {
        "ntpbias_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": command,
        "config": config_record,
        "sections": [section.as_dict()],
        "checks": [c.as_dict() for c in section.checks],
        "tally": tally(section.checks),
        "passed": section.passed and status == "completed",
        **extra,
        "status": status,  # a run that stopped early (diverged, interrupted) says so: it never looks complete
    }
    write_json(out / "summary.json", summary)
    return summary


def spread(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation, min and max over seeds.

    >>> spread([1.0, 3.0])
    {'mean': 2.0, 'std': 1.0, 'min': 1.0, 'max': 3.0, 'seeds': 2}
    """
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max()),
            "seeds": int(a.size)}


def config_toml(configs: dict[str, Any]) -> str:
    """TOML for several named configs, each under its own table (``[fig4-gd]``, ``[fig4-gd.optimizer]``, ...)."""
    return tomli_w.dumps({name: to_dict(cfg) for name, cfg in configs.items()})
