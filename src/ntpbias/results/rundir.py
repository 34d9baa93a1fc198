"""The run directory's files: ``config.toml``, ``metrics.csv`` and ``summary.json`` of a training or a group.

A trainer or a ``reproduce`` group returns a :class:`RunResult`; :func:`write_run` writes its files (the figures and
``report.html`` are drawn by :mod:`ntpbias.report`). Every file is written atomically, and a run directory is written
by one process at a time and holds one run (:func:`claim_run_dir`).
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w
import torch

from .. import __version__
from ..config import to_dict, to_toml
from ..errors import ConfigError, OutputInUseError
from ..io import check_output_dir, locked_dir, write_json, write_text
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


#: every file and folder an ntpbias command writes into an output directory (a run, a reproduction, an analysis, a
#: sweep, corpus statistics; a reproduction of several groups adds one folder per group): what ``--overwrite`` removes
OUTPUT_FILES = (*RUN_FILES, "analysis.json", "sweep.toml", "results.csv", "corpus.json", "support_sizes.csv",
                "tokenizer.json", "ntp_data.npz", "lm_geometry.npz")
OUTPUT_DIRS = (*RUN_DIRS, "cells")
#: the names that show an earlier output (generic names such as ``figures/`` or ``data/`` alone do not)
MARKERS = ("summary.json", "config.toml", "metrics.csv", "report.html", "geometry.npz", "analysis.json", "sweep.toml",
           "results.csv", "corpus.json", "checkpoints", "cells")


def earlier_outputs(out: str | Path, groups: tuple[str, ...] = ()) -> list[str]:
    """The names in ``out`` that show an earlier ntpbias output: :data:`MARKERS`, and the folders of ``groups`` that
    hold a ``summary.json``."""
    out = Path(out)
    found = [name for name in MARKERS if (out / name).exists()]
    return found + [g for g in groups if (out / g / "summary.json").exists()]


def check_earlier_run(out: str | Path, *, overwrite: bool = False, resume: bool = False,
                      groups: tuple[str, ...] = (), continues: Callable[[Path], bool] | None = None) -> bool:
    """Whether ``out`` holds an earlier ntpbias output (:func:`earlier_outputs`) that this run replaces; refused
    (:class:`~ntpbias.errors.OutputInUseError`) when it holds one and neither ``overwrite`` nor ``resume`` is given nor
    ``continues(out)`` says it is the same run (e.g. a sweep's own directory). Writes nothing: the door check of
    :func:`claim_run_dir`."""
    if overwrite and resume:
        raise ConfigError("--overwrite starts the run over and --resume continues it: give one of them")
    out = Path(out)
    found = earlier_outputs(out, groups) if out.is_dir() else []
    if not found or resume or (continues is not None and continues(out)):
        return False
    if not overwrite:
        raise OutputInUseError(f"{out} already holds an earlier run ({', '.join(found[:4])}); pass --overwrite to "
                               "replace it, --resume to continue it, or choose another --out")
    return True


@contextlib.contextmanager
def claim_run_dir(out: str | Path, *, overwrite: bool = False, resume: bool = False, groups: tuple[str, ...] = (),
                  continues: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """Hold the output directory ``out`` for this run (:func:`~ntpbias.io.locked_dir`: a second writer is refused
    with the holder's pid) and make sure that it holds this run only (:func:`check_earlier_run`): an earlier run is
    continued (``resume``, ``continues``), replaced (``overwrite``: the earlier outputs, :data:`OUTPUT_FILES`,
    :data:`OUTPUT_DIRS` and the folders of ``groups``, are removed first; nothing else is touched) or refused, so
    that the files of two runs never mix."""
    with locked_dir(out) as path:
        if check_earlier_run(path, overwrite=overwrite, resume=resume, groups=groups, continues=continues):
            for name in (*OUTPUT_FILES, *OUTPUT_DIRS, *groups):
                target = path / name
                if target.is_dir() and not target.is_symlink():
                    shutil.rmtree(target)
                elif target.exists() or target.is_symlink():
                    target.unlink()
        yield path


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
        "threads": torch.get_num_threads(),  # torch's intra-op threads (ntpbias.threads)
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
