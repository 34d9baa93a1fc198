"""One module per paper: presets, the runs behind each figure, and the theory checks.

Importing this package registers every paper's presets, trainers and reproduce groups (see :mod:`.base`).
"""

from . import attention, attention_imdb, linear, transformer  # noqa: F401
from . import separability  # noqa: F401  (after linear: the NTP-separability phase transition)
from .base import GROUPS, PRESETS, TRAINERS, RunContext

__all__ = ["GROUPS", "PRESETS", "TRAINERS", "RunContext"]
