"""The configuration of one point of the separability phase diagram, and its presets."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ...config import DEVICE_PATTERN, Config, setting

METHODS = ("nested", "lp", "auto", "dual")


@dataclass(frozen=True)
class SeparabilityConfig(Config):
    """One point (V, |S_j|, m) of the phase diagram: ``trials`` random datasets and their critical dimensions."""

    experiment: str = setting("separability", "always separability", choices=("separability",))
    seed: int = setting(0, "seeds every dataset (trial t of (V, k, m) uses SeedSequence([seed, V, k, m, t]))", ge=0)
    V: int = setting(10, "vocabulary size", ge=2)
    support_size: int = setting(6, "support size k = |S_j| (1 = one-hot; < V)", ge=1)
    m: int = setting(40, "number of contexts", ge=2)
    trials: int = setting(100, "random datasets", ge=1)
    dirichlet: float = setting(1.0, "concentration of the in-support probabilities (compatibility needs them "
                               "generic, not equal)", gt=0)
    method: str = setting("nested", "how d*_sep is found: nested (one LP family with warm re-solves, or an "
                          "interior-point search for large LPs; a certificate on each side of d*), or a search over "
                          "single verdicts by lp (HiGHS + certificate), dual or auto", choices=METHODS)
    scan: int = setting(3, "trials whose verdicts are also computed around d* and at d = m (consistency check)", ge=0)
    device: str = setting("cpu", "accepted for the train command's contract; the verdicts are LPs solved on the CPU",
                          pattern=DEVICE_PATTERN,
                          admits="cpu, cuda or cuda:N")

    #: summary.json ``final`` values (see RunConfig.final_values)
    final_values: ClassVar[tuple[str, ...]] = (
        "certified", "certified_fraction", "compatible_threshold", "compatible_threshold_high",
        "compatible_threshold_low", "consistent", "counting_bound", "lp_runs", "lp_solves", "max_residual_compatible",
        "min_residual_incompatible", "scanned", "seconds", "threshold", "threshold_high", "threshold_low",
        "threshold_mean", "threshold_std", "trials")

    def check(self) -> None:
        if self.support_size >= self.V:
            raise ValueError(f"need 1 <= support_size < V (some token out of every support), got support_size="
                             f"{self.support_size}, V={self.V}")

    @property
    def label(self) -> str:
        return f"V={self.V}, |S|={self.support_size}"



#: the presets (:data:`ntpbias.experiments.catalog.PRESETS`): Cover's one-hot binary case and paper A's support pattern
COVER = SeparabilityConfig(V=2, support_size=1, m=40, trials=200)
NTP = SeparabilityConfig(V=10, support_size=6, m=40, trials=100)
