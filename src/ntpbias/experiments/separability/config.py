"""The configuration of one point of the separability phase diagram, and its presets."""

from __future__ import annotations

from dataclasses import dataclass

from ...config import require_choice
from ..base import Preset, register_preset

METHODS = ("lp", "auto", "dual")


@dataclass(frozen=True)
class SeparabilityConfig:
    """One point (V, |S_j|, m) of the phase diagram: ``trials`` random datasets and their critical dimensions.

    Attributes
    ----------
    experiment : always "separability"
    seed : seeds every dataset (trial t of (V, k, m) uses ``SeedSequence([seed, V, k, m, t])``)
    V, support_size, m : vocabulary size, support size k = |S_j| (1 = one-hot), number of contexts
    trials : random datasets
    dirichlet : concentration of the in-support probabilities (compatibility needs them generic, not equal)
    method : separability decision, ``"lp"`` (HiGHS + certificate), ``"dual"`` or ``"auto"``
    scan : trials whose verdicts are also computed around d* and at d = m (consistency check)
    device : accepted for the ``train`` command's contract; the verdicts are LPs solved on the CPU (HiGHS)
    """

    experiment: str = "separability"
    seed: int = 0
    V: int = 10
    support_size: int = 6
    m: int = 40
    trials: int = 100
    dirichlet: float = 1.0
    method: str = "lp"
    scan: int = 3
    device: str = "cpu"

    def __post_init__(self):
        require_choice("experiment", self.experiment, ("separability",))
        if not (1 <= self.support_size < self.V):
            raise ValueError(f"need 1 <= support_size < V (some token out of every support), got support_size="
                             f"{self.support_size}, V={self.V}")
        if self.m < 2 or self.trials < 1 or self.scan < 0:
            raise ValueError(f"need m >= 2, trials >= 1, scan >= 0; got m={self.m}, trials={self.trials}, "
                             f"scan={self.scan}")
        require_choice("method", self.method, METHODS)
        if self.dirichlet <= 0:
            raise ValueError(f"dirichlet must be > 0, got {self.dirichlet}")

    @property
    def label(self) -> str:
        return f"V={self.V}, |S|={self.support_size}"




register_preset(Preset("separability-cover", "one-hot binary (V=2, |S_j|=1): Cover's d/m = 1/2, m = 40, 200 datasets",
                       lambda s: SeparabilityConfig(V=2, support_size=1, m=40, trials=200)))
register_preset(Preset("separability-ntp", "NTP-separability of paper A's support pattern (V=10, |S_j|=6), m = 40, "
                       "100 datasets", lambda s: SeparabilityConfig(V=10, support_size=6, m=40, trials=100)))
