"""One package per paper (config, runs, checks, group): presets, the runs behind each figure, and the theory checks.

Importing this package registers every paper's presets, trainers and reproduce groups (see :mod:`.base`).
"""

# the registration order is the order of `reproduce all` and of `ntpbias list`: papers A (and what goes beyond it), B, C
from . import linear, separability  # noqa: F401  isort: skip
from . import optimizers  # noqa: F401  isort: skip  (beyond paper A: every optimizer in every norm)
from . import ufm  # noqa: F401  isort: skip  (beyond paper A: trained context embeddings)
from . import lm  # noqa: F401  isort: skip  (beyond paper A: a transformer language model's own features)
from . import attention, transformer  # noqa: F401  isort: skip
from .base import GROUPS, PRESETS, TRAINERS, RunContext

__all__ = ["GROUPS", "PRESETS", "TRAINERS", "RunContext"]
