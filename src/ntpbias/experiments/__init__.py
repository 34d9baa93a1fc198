"""One package per paper (config, runs, checks, group): presets, the runs behind each figure, and the theory checks.

Importing this package registers every paper's presets, trainers and reproduce groups (see :mod:`.base`).
"""

from . import attention, linear, separability, transformer  # noqa: F401
from .base import GROUPS, PRESETS, TRAINERS, RunContext

__all__ = ["GROUPS", "PRESETS", "TRAINERS", "RunContext"]
