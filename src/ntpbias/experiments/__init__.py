"""One package per paper (config, runs, checks, group): presets, the runs behind each figure, and the theory checks.

The tables of what exists (experiments and their trainers, ``reproduce`` groups, presets) are in :mod:`.catalog`;
importing this package imports no paper's code.
"""

from .base import RunContext
from .catalog import EXPERIMENTS, GROUPS, PRESETS

__all__ = ["EXPERIMENTS", "GROUPS", "PRESETS", "RunContext"]
