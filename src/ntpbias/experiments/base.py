"""The experiment registry and the run-directory contract shared by every paper's experiments.

* A **preset** is a named, fully specified training configuration (the paper's values as defaults); ``ntpbias train
  --preset NAME`` runs it through its paper's :data:`TRAINERS` entry.
* A **group** is what ``ntpbias reproduce ID`` runs: several trainings, the theory's objects, figures and theory
  checks, returned as a :class:`~ntpbias.report.document.Section`. Figure IDs (``linear-fig4``) select a subset.

Run directory (DESIGN.md §2): ``config.toml``, ``metrics.csv``, ``summary.json``, ``figures/``, ``report.html``,
``checkpoints/``; every file is written atomically.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import to_dict, to_toml
from ..errors import ConfigError
from ..io import write_json, write_text
from ..parallel import ExecutorConfig
from ..results import Section, metrics_csv

#: smoke: seconds, to check an installation or a pipeline (theory checks are not expected to pass);
#: quick: minutes on a laptop CPU, the checks pass; paper: the papers' sizes.
SCALES = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class RunContext:
    """Options of one ``reproduce``/``train`` invocation, passed to group runners and trainers.

    ``executor`` spreads independent runs that cannot share one batch (the transformer paper's per-seed datasets)
    over worker processes or a Dask cluster; seeds that can be batched (linear, attention) stay one batched run.
    ``yelp``: a Yelp Open Dataset JSON-lines file for the ``attention-imdb`` group ("" = skip Yelp).
    """

    out: Path
    scale: str = "quick"
    seeds: int = 1
    device: str = "cpu"
    progress: bool = False
    resume: bool = False
    figures: tuple[str, ...] | None = None  # figure IDs asked for; None = all of the group
    say: Callable[[str], None] = lambda _msg: None
    executor: ExecutorConfig = field(default_factory=lambda: ExecutorConfig("inprocess"))
    yelp: str = ""

    def wants(self, fig_id: str) -> bool:
        return self.figures is None or fig_id in self.figures


@dataclass(frozen=True)
class Preset:
    """A named configuration: ``make(scale)`` returns the config dataclass (paper values at ``scale="paper"``)."""

    name: str
    description: str
    make: Callable[[str], Any]


@dataclass(frozen=True)
class Group:
    """A reproducible experiment group (``reproduce ID``): its figures and its runner."""

    id: str
    title: str
    figures: dict[str, str]
    run: Callable[[RunContext], Section]


#: name -> Preset
PRESETS: dict[str, Preset] = {}
#: reproduce ID -> Group
GROUPS: dict[str, Group] = {}
#: config ``experiment`` field -> (config class, trainer(config, ctx) -> Section)
TRAINERS: dict[str, tuple[type, Callable[[Any, RunContext], Section]]] = {}


def register_preset(preset: Preset) -> Preset:
    PRESETS[preset.name] = preset
    return preset


def register_group(group: Group) -> Group:
    GROUPS[group.id] = group
    return group


def register_trainer(kind: str, config_cls: type, trainer: Callable[[Any, RunContext], Section]) -> None:
    TRAINERS[kind] = (config_cls, trainer)


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; run `ntpbias list` to see the presets ({', '.join(PRESETS)})")
    return PRESETS[name]


def load_run_config(path: str | Path):
    """A saved or hand-written run config of any paper: its ``experiment`` key picks the config class."""
    import tomllib

    from ..config import load_toml

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        kind = tomllib.loads(path.read_text(encoding="utf-8")).get("experiment")
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    if kind not in TRAINERS:
        raise ConfigError(f"{path}: set `experiment` to one of {', '.join(TRAINERS)} (found {kind!r})")
    return load_toml(TRAINERS[kind][0], path)


def resolve_ids(ids: list[str]) -> dict[str, tuple[str, ...] | None]:
    """Map reproduce IDs (groups, figure IDs, or ``all``) to {group id: figure subset or None for all}."""
    if not ids or "all" in ids:
        return {g: None for g in GROUPS}
    figure_owner = {fig: g.id for g in GROUPS.values() for fig in g.figures}
    chosen: dict[str, tuple[str, ...] | None] = {}
    for item in ids:
        if item in GROUPS:
            chosen[item] = None
        elif item in figure_owner:
            owner = figure_owner[item]
            if owner not in chosen or chosen[owner] is not None:
                chosen[owner] = (*(chosen.get(owner) or ()), item)
        else:
            valid = ", ".join(["all", *GROUPS, *figure_owner])
            raise ConfigError(f"unknown experiment or figure ID {item!r}; valid IDs: {valid} (see `ntpbias list`)")
    return chosen


# ------------------------------------------------------------------------------------------------ run files
def write_run(out: Path, *, config: Any, rows: list[dict], section: Section, extra: dict | None = None,
              command: str = "") -> None:
    """Write config.toml, metrics.csv, summary.json and report.html of a run directory.

    ``config`` is one config dataclass (a ``train`` run: its config.toml can be re-run with ``ntpbias train``) or a
    dict name -> config (a ``reproduce`` group: one TOML table per training run).
    """
    from ..report.html import render

    if isinstance(config, dict):
        toml_text, config_record = config_toml(config), {n: to_dict(c) for n, c in config.items()}
    else:
        toml_text, config_record = to_toml(config), to_dict(config)
    write_text(out / "config.toml", toml_text)
    write_text(out / "metrics.csv", metrics_csv(rows))
    extra = dict(extra or {})
    if isinstance(extra.get("final"), dict):  # per-seed final values: add their mean and spread
        extra["final_summary"] = {k: _spread(v) for k, v in extra["final"].items()
                                  if isinstance(v, list) and v and all(isinstance(x, (int, float)) for x in v)}
    summary = {
        "ntpbias_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": command,
        "config": config_record,
        "sections": [section.as_dict()],
        "checks": [c.as_dict() for c in section.checks],
        "passed": section.passed,
        **extra,
    }
    write_json(out / "summary.json", summary)
    render(out, [section], title=section.title, command=command)


def save_arrays(path, **arrays) -> None:
    """Write tensors/arrays (None values skipped) to an ``.npz`` atomically."""
    import numpy as np

    from .._tensor import to_numpy
    from ..io import atomic_path

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **{k: to_numpy(v) for k, v in arrays.items() if v is not None})


def raise_if_failed(history) -> None:
    """After the outputs of a run are written: a diverged run is a user error (exit 2), an interrupted one re-raises
    Ctrl-C (exit 130)."""
    if history.status == "diverged":
        from ..errors import TrainingDivergedError

        raise TrainingDivergedError(history.message)
    if history.status == "interrupted":
        raise KeyboardInterrupt


def _spread(values: list[float]) -> dict[str, float]:
    """Mean, standard deviation, min and max over seeds."""
    import numpy as np

    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "std": float(a.std()), "min": float(a.min()), "max": float(a.max()),
            "seeds": int(a.size)}


def config_toml(configs: dict[str, Any]) -> str:
    """TOML for several named configs, each under its own table (``[fig4-gd]``, ``[fig4-gd.optimizer]``, ...)."""
    import tomli_w

    return tomli_w.dumps({name: to_dict(cfg) for name, cfg in configs.items()})
