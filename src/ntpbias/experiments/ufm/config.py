"""The log-bilinear model's run config (top-level keys, then ``data``, ``model``, ``optimizer``, ``train``, ``path``
tables) and its presets (docs/ufm.md#commands)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ...config import Config, setting
from ...training.config import OptimizerConfig, TrainConfig
from ..base import RunConfig

if TYPE_CHECKING:
    import torch

    from ...data.ntp import NTPData

DATA_SOURCES = ("planted", "overlap", "shakespeare", "file")
#: the overlapping support sets of the "overlap" source: a chain of sets sharing tokens, for which the centred support
#: matrix does not solve the nuclear-norm SVM (its polar factor is positive off the supports, docs/ufm.md U-3)
OVERLAP_SETS = ((0, 1, 2), (2, 3, 4, 5), (5, 6), (7, 8, 9, 10, 11), (0, 7))


@dataclass(frozen=True)
class UFMDataConfig(Config):
    """Which NTP data the log-bilinear model learns (docs/ufm.md#data)."""

    source: str = setting("planted", "planted (random support sets shared by groups of contexts), overlap (the fixed "
                          "overlapping sets of OVERLAP_SETS), shakespeare (corpus statistics) or file",
                          choices=DATA_SOURCES)
    V: int = setting(16, "planted/overlap: vocabulary size", ge=2)
    sizes: tuple[int, ...] = setting((2, 3, 4, 6), "planted: support sizes of the planted sets", ge=1)
    contexts: tuple[int, ...] = setting((6, 5, 4, 3), "planted/overlap: contexts per set (one value: the same for "
                                        "every set)", ge=1)
    disjoint: bool = setting(True, "planted: disjoint sets (else independent uniform subsets, which may overlap)")
    dirichlet: float = setting(1.0, "planted/overlap: Dirichlet concentration of each context's probabilities", gt=0)
    seed: int = setting(0, "planted/overlap: the dataset's seed (sets, probabilities)", ge=0)
    max_context: int = setting(2, "shakespeare: longest context (contexts of lengths 1..max_context)", ge=1)
    max_vocab: int = setting(20, "shakespeare: vocabulary cap (the rest becomes <unk>)", ge=2)
    max_tokens: int = setting(20_000, "shakespeare: use the first max_tokens tokens (0 = all)", ge=0)
    path: str = setting("", "file: an NTP .npz or a sequences .txt file")
    context_length: int = setting(1, "file (sequences): contexts are windows of this many tokens", ge=1)

    def check(self) -> None:
        if self.source == "file" and not self.path:
            raise ValueError("data.source = 'file' needs data.path")
        if self.source == "planted" and len(self.contexts) not in (1, len(self.sizes)):
            raise ValueError(f"data.contexts needs one value or one per set ({len(self.sizes)} sets), got "
                             f"{len(self.contexts)}")
        if self.source == "planted" and self.disjoint and sum(self.sizes) > self.V:
            raise ValueError(f"disjoint sets need sum(data.sizes) = {sum(self.sizes)} <= data.V = {self.V}")
        if self.source == "planted" and max(self.sizes) > self.V:
            raise ValueError(f"data.sizes must be <= data.V = {self.V}")
        if self.source == "overlap" and self.V < 12:
            raise ValueError("data.source = 'overlap' uses tokens 0..11: data.V must be >= 12")

    def build(self, dtype: torch.dtype | None = None) -> NTPData:
        """The dataset (float64 unless ``dtype`` says otherwise)."""
        from ..._tensor import DEFAULT_DTYPE
        from ...data.ntp import NTPData
        from ...data.planted import planted_supports

        dtype = dtype or DEFAULT_DTYPE
        counts = self.contexts[0] if len(self.contexts) == 1 else self.contexts
        if self.source == "planted":
            return planted_supports(self.V, self.sizes, counts, seed=self.seed, disjoint=self.disjoint,
                                    dirichlet=self.dirichlet, dtype=dtype)
        if self.source == "overlap":
            counts = self.contexts[0]
            return planted_supports(self.V, contexts=counts, sets=OVERLAP_SETS, seed=self.seed,
                                    dirichlet=self.dirichlet, dtype=dtype)
        if self.source == "shakespeare":
            from ...data.config import CorpusConfig
            from ...data.corpus import export_ntp_data, tokenize_corpus

            cfg = CorpusConfig(max_context=self.max_context, max_vocab=self.max_vocab, max_tokens=self.max_tokens)
            # the log-bilinear model learns its own context embeddings: a small placeholder H keeps memory linear in m
            return export_ntp_data(tokenize_corpus("shakespeare", cfg), cfg, "gaussian:d=8,seed=0", dtype=dtype)
        if self.path.endswith(".npz"):
            return NTPData.load(self.path, dtype=dtype)
        from ...data.sequences import load_sequences

        return load_sequences(self.path, context_length=self.context_length, embedding="gaussian:d=8,seed=0",
                              dtype=dtype)


@dataclass(frozen=True)
class UFMModelConfig(Config):
    """The log-bilinear model: embedding dimension, initialisation, ridge strength, and the SVM's solver."""

    d: int = setting(0, "embedding dimension (0: min(V, m) + 4, enough for every logit matrix)", ge=0)
    init_scale: float = setting(1e-3, "standard deviation of the Gaussian initialisation of W and H (small)", gt=0)
    lam: float = setting(1e-3, "ridge strength λ of (λ/2)(||W||² + ||H||²) during training", ge=0)
    solver: str = setting("auto", "nuclear-norm NTP-SVM backend: auto, clarabel (SDP) or admm",
                          choices=("auto", "clarabel", "admm"))

    def dim(self, data: NTPData) -> int:
        return self.d or min(data.V, data.m) + 4


@dataclass(frozen=True)
class UFMPathConfig(Config):
    """The regularization path: λ from λ_0/√10 down ``decades`` decades (λ_0 = ||∇CE(0)||_op), each point solved to
    ``tol`` (relative gradient norm)."""

    points: int = setting(6, "number of λ values", ge=2)
    decades: float = setting(4.0, "decades below λ_0 the path reaches", gt=0.5, le=8)
    tol: float = setting(1e-8, "relative gradient norm every path point reaches", gt=0, lt=1e-3)
    init_scale: float = setting(1e-2, "initialisation of the first point (then warm starts)", gt=0)


@dataclass(frozen=True)
class UFMConfig(RunConfig):
    """One training run of the log-bilinear model (``ntpbias train``; defaults: GD on the planted data)."""

    experiment: str = setting("ufm", "always ufm", choices=("ufm",))
    seeds: int = setting(3, "number of runs (initialisations), trained as one batch", ge=1)
    data: UFMDataConfig = field(default_factory=UFMDataConfig)
    model: UFMModelConfig = field(default_factory=UFMModelConfig)
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(name="gd", lr=2.0))
    train: TrainConfig = field(default_factory=lambda: TrainConfig(steps=20_000, log_points=150))
    path: UFMPathConfig = field(default_factory=UFMPathConfig)


# ------------------------------------------------------------------------------------------------ presets
PLANTED_GD = UFMConfig()
PLANTED_ADAM = replace(PLANTED_GD, optimizer=OptimizerConfig(name="adam", lr=1e-2, betas=(0.9, 0.99)))
PLANTED_NGD = replace(PLANTED_GD, optimizer=OptimizerConfig(name="ngd", lr=0.05))
OVERLAP = replace(PLANTED_GD, data=UFMDataConfig(source="overlap", V=12, contexts=(4,)),
                  path=UFMPathConfig(points=4))
#: real text: Adam (GD is slow here: a context's gradient is proportional to its frequency π̂_j, and most contexts are
#: rare), at a larger λ than on planted data
SHAKESPEARE = replace(PLANTED_GD, data=UFMDataConfig(source="shakespeare"),
                      model=UFMModelConfig(lam=3e-3),
                      optimizer=OptimizerConfig(name="adam", lr=1e-2, betas=(0.9, 0.99)),
                      train=TrainConfig(steps=5000, log_points=100), path=UFMPathConfig(points=5, decades=3.0))

SMOKE_STEPS = 300


def scaled(cfg: UFMConfig, scale: str) -> UFMConfig:
    """A preset at ``scale``: smoke (seconds: 300 steps, 3 path points over 2 decades, 3000 Shakespeare tokens),
    quick (the defaults), paper (10^5 steps, 10 path points over 5 decades, 100,000 Shakespeare tokens, V = 40)."""
    if scale == "smoke":
        data = replace(cfg.data, max_tokens=3000, max_vocab=12) if cfg.data.source == "shakespeare" else cfg.data
        return replace(cfg, data=data, train=replace(cfg.train, steps=SMOKE_STEPS, log_points=30),
                       path=replace(cfg.path, points=3, decades=2.0))
    if scale == "paper":
        data = replace(cfg.data, max_tokens=100_000, max_vocab=40) if cfg.data.source == "shakespeare" else cfg.data
        return replace(cfg, data=data, train=replace(cfg.train, steps=100_000, log_points=300),
                       path=replace(cfg.path, points=10, decades=5.0))
    return cfg
