"""The experiment registry and what every paper's experiments share: the run config's top-level keys, presets,
groups and the run context.

* A **preset** is a named, fully specified training configuration (the paper's values as defaults); ``ntpbias train
  --preset NAME`` runs it through its paper's :data:`TRAINERS` entry.
* A **group** is what ``ntpbias reproduce ID`` runs: several trainings, the theory's objects, figure specs and theory
  checks, returned as a :class:`~ntpbias.results.RunResult`. Figure IDs (``linear-fig4``) select a subset.

Trainers and groups return results; :mod:`ntpbias.api` writes them as a run directory (``config.toml``,
``metrics.csv``, ``summary.json``, ``figures/``, ``report.html``). They write only their own data files and
``checkpoints/`` into ``ctx.out``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from .._tensor import DEVICE_PATTERN, DTYPES
from ..config import Config, setting
from ..errors import ConfigError
from ..parallel import ExecutorConfig
from ..results import RunResult

#: smoke: seconds, to check an installation or a pipeline (theory checks are not expected to pass);
#: quick: minutes on a laptop CPU, the checks pass; paper: the papers' sizes.
SCALES = ("smoke", "quick", "paper")


@dataclass(frozen=True)
class RunConfig(Config):
    """The top-level keys of every experiment's config (``experiment, seed, seeds, device, dtype``); each experiment
    adds its tables (``data``, ``model``, ``optimizer``, ``train``; paper C: ``stage1``, ``stage2``)."""

    experiment: str = setting("", "the experiment; selects the config class when a TOML file is read")
    seed: int = setting(0, "seed of the first run; every random choice of the run derives from it", ge=0)
    seeds: int = setting(1, "number of runs (seeds seed, seed+1, ...)", ge=1)
    device: str = setting("cpu", "where the run computes", pattern=DEVICE_PATTERN,
                          admits="cpu, cuda or cuda:N")
    dtype: str = setting("float64", "float64 (every theory quantity) or float32 (speed)", choices=tuple(DTYPES))

    #: the names of the run's final values (summary.json ``final``), which a sweep's ``[collect] metrics`` may name
    final_values: ClassVar[tuple[str, ...]] = ()

    def footprint(self) -> dict[str, int]:
        """Bytes the run will hold, by part, estimated from the settings alone: the memory preflight
        (:func:`preflight`). Parts that depend on a data file are checked when the file is read."""
        return {}


#: bytes of one run's random generator state (a torch Generator holds a Mersenne Twister: about 5 kB)
GENERATOR_BYTES = 5_100


def preflight(cfg, ctx: RunContext | None = None) -> None:
    """The checks of a config at the door, before any work or output: every file it names exists and is a regular
    file, and its memory estimate (:meth:`RunConfig.footprint`) fits the budget (``--max-memory``)."""
    from ..config import input_files
    from ..io import input_file
    from ..limits import check_memory

    for key, path in input_files(cfg).items():
        input_file(path, key)
    footprint = getattr(cfg, "footprint", dict)()
    if footprint:
        check_memory(footprint, f"this {cfg.experiment} run ({cfg.seeds if hasattr(cfg, 'seeds') else 1} seed(s))",
                     hint="use fewer seeds or smaller sizes")


@dataclass(frozen=True)
class RunContext:
    """Options of one ``reproduce``/``train`` invocation, passed to group runners and trainers.

    ``executor`` spreads independent runs that cannot share one batch (the transformer paper's per-seed datasets)
    over worker processes or a Dask cluster; seeds that can be batched (linear, attention) stay one batched run.
    ``yelp``: a Yelp Open Dataset JSON-lines file for the ``attention-imdb`` group ("" = skip Yelp).
    ``overwrite``: an ``out`` that holds an earlier run is cleared first (else it is refused unless ``resume``).
    """

    out: Path
    scale: str = "quick"
    seeds: int = 1
    device: str = "cpu"
    progress: bool = False
    resume: bool = False
    overwrite: bool = False
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
    run: Callable[[RunContext], RunResult]
    presets: tuple[str, ...] = ()  # the presets the group trains, at the run's scale and seeds (its preflight)
    regrade: Callable[[Path], RunResult] | None = None  # checks, tables and figures again from a run's saved outputs
    read_inputs: Callable[[RunContext], None] | None = None  # reads and checks the user's files the group takes

    def preflight(self, ctx: RunContext) -> None:
        """The group's checks at the door: :func:`preflight` of each of its presets at ``ctx``'s scale and seeds, and
        the user's files it reads (``read_inputs``, e.g. the ``--yelp`` file, read through), so that a
        ``reproduce`` of several groups fails before the first group's work."""
        from dataclasses import replace

        for name in self.presets:
            cfg = get_preset(name).make(ctx.scale)
            if hasattr(cfg, "seeds"):
                cfg = replace(cfg, seeds=max(cfg.seeds, ctx.seeds))
            preflight(cfg)
        if self.read_inputs is not None:
            self.read_inputs(ctx)


#: name -> Preset
PRESETS: dict[str, Preset] = {}
#: reproduce ID -> Group
GROUPS: dict[str, Group] = {}
#: config ``experiment`` field -> (config class, trainer(config, ctx) -> Section)
TRAINERS: dict[str, tuple[type, Callable[[Any, RunContext], RunResult]]] = {}


def register_preset(preset: Preset) -> Preset:
    PRESETS[preset.name] = preset
    return preset


def register_group(group: Group) -> Group:
    GROUPS[group.id] = group
    return group


def register_trainer(kind: str, config_cls: type, trainer: Callable[[Any, RunContext], RunResult]) -> None:
    TRAINERS[kind] = (config_cls, trainer)


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; run `ntpbias list` to see the presets ({', '.join(PRESETS)})")
    return PRESETS[name]


def load_run_config(path: str | Path):
    """A saved or hand-written run config of any paper: its ``experiment`` key picks the config class."""
    from ..config import load_toml, read_toml

    path = Path(path)
    kind = read_toml(path).get("experiment")
    if not isinstance(kind, str) or kind not in TRAINERS:
        shape = "" if kind is None or isinstance(kind, str) else ": expected a string in quotes"
        raise ConfigError(f"{path}: experiment = {kind!r}{shape}; set `experiment` to one of {', '.join(TRAINERS)}")
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


def raise_if_failed(history) -> None:
    """After the outputs of a run are written: a diverged run is a user error (exit 2), an interrupted one re-raises
    Ctrl-C (exit 130)."""
    if history.status == "diverged":
        from ..errors import TrainingDivergedError

        raise TrainingDivergedError(history.message)
    if history.status == "interrupted":
        raise KeyboardInterrupt
