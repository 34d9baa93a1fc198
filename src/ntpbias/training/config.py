"""The training settings every experiment shares: the loop's ``[train]`` table, the ``[optimizer]`` table, and the names
the training code accepts. Nothing here imports torch, so a config (and ``ntpbias settings``) loads without it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..config import Config, setting

#: How the polar factor of a spectral steepest-descent direction is computed (:mod:`.steepest`).
POLAR_METHODS = ("svd", "newton_schulz", "quintic")
#: Initialisation schemes of :func:`ntpbias.training.init.lecun`.
INITS = ("lecun_normal", "lecun_uniform", "zeros")

OPTIMIZERS = ("gd", "ngd", "adam", "adamw", "sign", "nsd", "muon", "adagrad")
NORMALIZATIONS = ("grad", "loss", "excess")
#: The norms of ``nsd`` (docs/optimizers.md#norms).
STEEPEST_NORMS = ("l2", "linf", "l1", "spectral", "nuclear")


@dataclass(frozen=True)
class OptimizerConfig(Config):
    """Optimizer settings (defaults: paper A's GD, η = 0.5)."""

    name: str = setting("gd", "the optimizer", choices=OPTIMIZERS)
    lr: float = setting(0.5, "step size η", gt=0)
    betas: tuple[float, float] = setting((0.9, 0.99), "Adam's (β1, β2); paper A uses (0.9, 0.99)", ge=0, lt=1)
    eps: float = setting(1e-8, "Adam's ε (paper A leaves it open; standard 1e-8)", gt=0)
    weight_decay: float = setting(0.0, "L2 (adam) or decoupled (adamw) weight decay", ge=0)
    normalize: str = setting("grad", "normalized GD: divide by the gradient norm, the loss, or the loss above its "
                             "floor", choices=NORMALIZATIONS)
    milestones: tuple[int, ...] = setting((), "steps at which η is multiplied by lr_decay", ge=1)
    lr_decay: float = setting(0.1, "step-decay factor", gt=0)
    lr_power: float = setting(0.0, "decaying step η_t = η (t+1)^-lr_power (0 = constant; the max-margin theorems of "
                              "nsd/sign/muon/adam assume 0 < lr_power <= 1)", ge=0, le=2)
    norm: str = setting("l2", "nsd: the norm of the steepest-descent direction", choices=STEEPEST_NORMS)
    polar: str = setting("auto", "spectral directions: the polar factor by svd (exact), newton_schulz (cubic, "
                         "converges) or quintic (Muon's); auto = svd for nsd, quintic for muon",
                         choices=("auto", *POLAR_METHODS))
    ns_steps: int = setting(0, "Newton-Schulz iterations (0 = 40 cubic, Muon's 5 quintic)", ge=0)
    momentum: float = setting(0.95, "muon: momentum β of M <- β M + (1 - β) ∇L (Muon's 0.95)", ge=0, lt=1)


@dataclass(frozen=True)
class TrainConfig(Config):
    """Loop settings (the ``[train]`` table of every training config)."""

    steps: int = setting(10_000, "number of optimizer steps", ge=1)
    log_points: int = setting(60, "log-spaced logging steps in 1..steps (step 0 and the last step always log)", ge=0)
    log_every: int = setting(0, "if > 0, also log every log_every steps", ge=0)
    checkpoint_every: int = setting(0, "if > 0, checkpoint every that many steps (one is always written at the end)",
                                    ge=0)
    checkpoint_minutes: float = setting(10.0, "also checkpoint when that many minutes of wall-clock time have passed "
                                        "since the last checkpoint (0 = off): a killed run loses at most that much",
                                        ge=0)


def paper_step_sizes(d: int) -> tuple[float, float]:
    """(η₀, η) = (0.2/√d, 0.05/√d), the step sizes of Sec. 7 of paper C (its defaults where a config leaves them 0).

    >>> [round(v, 7) for v in paper_step_sizes(20)]
    [0.0447214, 0.0111803]
    """
    return 0.2 / math.sqrt(d), 0.05 / math.sqrt(d)
