"""The norms study's run config (one training of a linear NTP model by one optimizer, measured in every norm), the
datasets, the optimizer roster and the scales (docs/optimizers.md#measurements)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import ClassVar

from ...config import setting
from ...data.corpus import CorpusConfig
from ...geometry.norms import NORMS
from ...training.loop import TrainConfig
from ...training.optimizers import OptimizerConfig
from ..base import Preset, RunConfig, register_preset
from ..linear.config import LinearDataConfig, LinearModelConfig

GROUP = "optimizers"


@dataclass(frozen=True)
class NormsModelConfig(LinearModelConfig):
    """The linear model W (V x d) and the norms it is measured in."""

    norms: tuple[str, ...] = setting(NORMS, "norms whose NTP-SVM the iterates are measured against",
                                     choices=NORMS)


@dataclass(frozen=True)
class NormsConfig(RunConfig):
    """One training run of the norms study (``ntpbias train``; the defaults are sign descent on the one-hot data).

    The gradient is computed without cancellation (:func:`~ntpbias.geometry.linear.excess.excess_loss_grad`), so the
    normalized and adaptive optimizers keep a faithful direction far into the separable regime, and every logged step
    measures the margin of P_⊥(W_k) in each norm relative to that norm's NTP-SVM (``margin_ratio_<norm>``), the distance
    to the NTP-SVM direction where it is unique (``dist_<norm>``), CE - H and ||P_F(W_k) - W*||.
    """

    experiment: str = setting(GROUP, "always optimizers", choices=(GROUP,))
    data: LinearDataConfig = field(default_factory=lambda: ONEHOT)
    model: NormsModelConfig = field(default_factory=NormsModelConfig)
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(name="sign", lr=0.1, lr_power=0.5))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=10_000, log_points=40))

    moved: ClassVar[dict[str, str]] = {}


# ------------------------------------------------------------------------------------------------ datasets
#: Paper A's Figs. 3-5 data: m = 50, d = 60, V = 10, |S_j| = 6.
FIG4 = LinearDataConfig()
#: One-hot multiclass data (|S_j| = 1, Gaussian h̄_j): where the known max-margin results apply.
ONEHOT = LinearDataConfig(m=40, d=30, V=5, support_size=1)
#: Shakespeare (the `corpus` built-in): contexts of 1-2 words, the 10 most frequent words (others <unk>),
#: Gaussian embeddings with d = 64.
SHAKESPEARE = CorpusConfig(max_context=2, max_tokens=600, max_vocab=10)
SHAKESPEARE_EMBEDDING = "gaussian:d=64,seed=0"
#: Paper scale: a larger slice (more contexts, vocabulary 16), embedding dimension above the number of contexts.
SHAKESPEARE_PAPER = CorpusConfig(max_context=2, max_tokens=2000, max_vocab=16)
SHAKESPEARE_PAPER_EMBEDDING = "gaussian:d=128,seed=0"
DATASETS = ("onehot", "fig4", "shakespeare")
DATASET_TITLES = {"onehot": "one-hot multiclass data (m = 40, d = 30, V = 5)",
                  "fig4": "paper A's Fig. 4 data (m = 50, d = 60, V = 10, |S_j| = 6)",
                  "shakespeare": "Shakespeare, contexts of 1-2 words, 10-word vocabulary"}

# ------------------------------------------------------------------------------------------------ optimizers
#: Decaying steps η_t = η0 (t + 1)^-1/2 for every optimizer the theorems cover (they assume η_t = Θ(t^-a), 0 < a <= 1).
LR_POWER = 0.5
#: η0 sets the Frobenius length of a step to about BASE_LR sqrt(V d) for every norm (a unit linf step has length
#: sqrt(V d), a unit l2, l1 or nuclear step 1, a unit spectral step sqrt(rank) <= sqrt(min(V, d))).
BASE_LR = 0.1
#: Adam's and Adagrad's ε: the theorems take ε -> 0 (with the cancellation-free gradient the squared gradients stay far
#: above 1e-300; a standard ε = 1e-8 turns Adam into gradient descent once the gradients fall below it).
TINY_EPS = 1e-300


@dataclass(frozen=True)
class Member:
    """One optimizer of the roster: its run name, a label, the norm whose NTP-SVM the known results say it finds on
    one-hot data (None: no known result), and the source of that result."""

    name: str
    label: str
    norm: str | None
    source: str


ROSTER = (
    Member("gd", "GD (η = min(0.5, 1/(2L)))", "l2", "Soudry et al. 2018; Thm 2 of paper A (one-hot supports)"),
    Member("ngd", "normalized GD (l2 steepest)", "l2", "Nacson et al. 2019; Fan, Schmidt & Thrampoulidis 2025"),
    Member("sign", "sign descent (linf steepest)", "linf", "Fan, Schmidt & Thrampoulidis 2025"),
    Member("nsd-l1", "l1 steepest (largest-magnitude entry)", "l1",
           "Gunasekar et al. 2018 (binary, any norm); Fan, Schmidt & Thrampoulidis 2025 (entrywise p-norms)"),
    Member("nsd-spectral", "spectral steepest (U V^T by SVD)", "spectral", "Fan, Schmidt & Thrampoulidis 2025"),
    Member("nsd-nuclear", "nuclear steepest (top singular pair)", "nuclear",
           "Gunasekar et al. 2018 (binary, any norm); Fan, Schmidt & Thrampoulidis 2025 (Schatten p-norms)"),
    Member("muon", "Muon (β = 0.9, quintic Newton-Schulz)", "spectral",
           "Fan, Schmidt & Thrampoulidis 2025 (momentum NSD)"),
    Member("muon-svd", "Muon with the exact polar factor (SVD)", "spectral",
           "Fan, Schmidt & Thrampoulidis 2025 (momentum NSD)"),
    Member("adam", "Adam (β = 0.9, 0.99)", "linf", "Zhang, Zou & Cao 2024 (binary); Fan, Schmidt & Thrampoulidis 2025"),
    Member("adam-eq", "Adam (β1 = β2 = 0.9)", "linf",
           "Zhang, Zou & Cao 2024 (binary); Fan, Schmidt & Thrampoulidis 2025"),
    Member("adagrad", "Adagrad", None, "no known max-margin result in these norms (a finding)"),
)
MEMBERS = {m.name: m for m in ROSTER}


def optimizer_for(name: str, V: int, d: int, smoothness: float = 1.0) -> OptimizerConfig:
    """The roster member's optimizer settings for data with V tokens and dimension d (steps matched in length); GD
    takes paper A's η = 0.5 unless the smoothness bound L of the data asks for less (η <= 1/(2L), Thm 2 of paper A)."""
    root = math.sqrt(V * d)
    decay = {"lr_power": LR_POWER}
    return {
        "gd": OptimizerConfig(name="gd", lr=min(0.5, math.floor(1e6 / (2 * smoothness)) / 1e6)),
        "ngd": OptimizerConfig(name="ngd", lr=BASE_LR * root, **decay),
        "sign": OptimizerConfig(name="sign", lr=BASE_LR, **decay),
        "nsd-l1": OptimizerConfig(name="nsd", norm="l1", lr=BASE_LR * root, **decay),
        "nsd-spectral": OptimizerConfig(name="nsd", norm="spectral", polar="svd",
                                        lr=BASE_LR * math.sqrt(max(V, d)), **decay),
        "nsd-nuclear": OptimizerConfig(name="nsd", norm="nuclear", lr=BASE_LR * root, **decay),
        "muon": OptimizerConfig(name="muon", momentum=0.9, polar="quintic", lr=BASE_LR * math.sqrt(max(V, d)),
                                **decay),
        "muon-svd": OptimizerConfig(name="muon", momentum=0.9, polar="svd", lr=BASE_LR * math.sqrt(max(V, d)),
                                    **decay),
        "adam": OptimizerConfig(name="adam", betas=(0.9, 0.99), eps=TINY_EPS, lr=BASE_LR, **decay),
        "adam-eq": OptimizerConfig(name="adam", betas=(0.9, 0.9), eps=TINY_EPS, lr=BASE_LR, **decay),
        "adagrad": OptimizerConfig(name="adagrad", eps=TINY_EPS, lr=BASE_LR),
    }[name]


# ------------------------------------------------------------------------------------------------ scales
STEPS = {"smoke": 300, "quick": 10_000, "paper": 100_000}
LOG_POINTS = {"smoke": 12, "quick": 40, "paper": 60}


def run_config(dataset: LinearDataConfig, member: str, V: int, d: int, scale: str,
               smoothness: float = 1.0) -> NormsConfig:
    """The config of one run of the group (``smoothness``: the data's bound L, for GD's step)."""
    return NormsConfig(data=dataset, optimizer=optimizer_for(member, V, d, smoothness),
                       train=TrainConfig(steps=STEPS[scale], log_points=LOG_POINTS[scale]))


def scaled(cfg: NormsConfig, scale: str) -> NormsConfig:
    """A preset at ``scale`` (steps of :data:`STEPS`)."""
    return replace(cfg, train=replace(cfg.train, steps=STEPS[scale], log_points=LOG_POINTS[scale]))


for _member in ("sign", "muon", "adam"):
    _cfg = NormsConfig(data=ONEHOT, optimizer=optimizer_for(_member, ONEHOT.V, ONEHOT.d))
    register_preset(Preset(f"optimizers-{_member}", f"{MEMBERS[_member].label} on the one-hot data, measured in every "
                           "norm (10^4 steps; paper 10^5)", lambda scale, cfg=_cfg: scaled(cfg, scale)))

