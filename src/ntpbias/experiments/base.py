"""What every paper's experiments share: the run config's top-level keys, the checks at the door and the run context.

Which code trains which experiment, the ``reproduce`` groups and the presets are the tables of
:mod:`ntpbias.experiments.catalog`. Trainers and groups return results; :mod:`ntpbias.api` writes them as a run
directory (``config.toml``, ``metrics.csv``, ``summary.json``, ``figures/``, ``report.html``). They write only their
own data files and ``checkpoints/`` into ``ctx.out``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from ..config import DEVICE_PATTERN, DTYPE_BYTES, Config, setting
from ..parallel import ExecutorConfig

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
    dtype: str = setting("float64", "float64 (every theory quantity) or float32 (speed)", choices=tuple(DTYPE_BYTES))

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


def raise_if_failed(history) -> None:
    """After the outputs of a run are written: a diverged run is a user error (exit 2), one stopped by Ctrl-C or
    SIGTERM raises :class:`~ntpbias.signals.Stopped` (exit 130 or 143, with the command that continues it)."""
    if history.status == "diverged":
        from ..errors import TrainingDivergedError

        raise TrainingDivergedError(history.message)
    if history.status == "interrupted":
        from ..signals import Stopped

        raise Stopped(f"at step {history.step}")
