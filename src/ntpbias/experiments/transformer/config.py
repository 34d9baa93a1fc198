"""Paper C's run config (one form: top-level keys, then ``data``, ``model``, ``train``, ``stage1``, ``stage2``
tables) and its presets."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, ClassVar

from ...config import Config, setting
from ...data.config import BUILTIN_SENTENCES
from ...geometry.config import SOLVERS
from ...limits import nbytes
from ...models.config import EMBEDDINGS
from ...training.config import INITS, TrainConfig, paper_step_sizes
from ..base import RunConfig

if TYPE_CHECKING:
    from ...data.sentences import NTPSamples

DATA_SOURCES = ("sentences", "samples", *BUILTIN_SENTENCES, "file")

ALGORITHMS = ("two-stage", "joint")


@dataclass(frozen=True)
class TransformerDataConfig(Config):
    """Which sentences to train on: a random generator (docs/paper-c-transformer.md#objects), a built-in dataset, or a
    sentences file (one sentence per line, every prefix is a sample)."""

    source: str = setting("sentences", "sentences (random prefix-closed realizable data, Sec. 7's default), samples "
                          "(collocation + intended orders, not prefix-closed), example1, prop2-counterexample, or file",
                          choices=DATA_SOURCES)
    V: int = setting(20, "vocabulary size of the random generators (Sec. 7: 20)", ge=2)
    L_max: int = setting(8, "sentences: longest input", ge=1)
    r_max: int = setting(0, "largest multiplicity (0: the generator's default, 1 for sentences, 4 for samples)", ge=0)
    p_self: float = setting(0.5, "samples: probability that a query is its own optimal token", ge=0, le=1)
    k_max: int = setting(3, "samples: most optimal tokens per query", ge=1)
    m_max: int = setting(5, "samples: most non-optimal tokens per query", ge=1)
    derangement: bool = setting(True, "random collocations without fixed points "
                                "(docs/paper-c-transformer.md#decisions)")
    path: str = setting("", "file: the sentences .txt file")
    allow_violations: bool = setting(False, "train even when Assumption 1 or 3 fails (the report names the results "
                                     "that no longer apply)")

    def check(self) -> None:
        if self.source == "file" and not self.path:
            raise ValueError("data.source = 'file' needs data.path (a sentences .txt file)")

    def input_files(self) -> dict[str, str]:
        return {"path": self.path} if self.source == "file" else {}

    @property
    def random(self) -> bool:
        """The dataset depends on the seed."""
        return self.source in ("sentences", "samples")

    def build(self, seed: int) -> NTPSamples:
        """The dataset (``seed`` drives the random generators)."""
        from ...data.generators import generate_samples, generate_sentences
        from ...data.sentences import BUILTIN, NTPSamples

        if self.source == "sentences":
            return generate_sentences(self.V, L_max=self.L_max, r_max=self.r_max or 1, seed=seed,
                                      derangement=self.derangement)
        if self.source == "samples":
            return generate_samples(self.V, p_self=self.p_self, k_max=self.k_max, m_max=self.m_max,
                                    r_max=self.r_max or 4, seed=seed, derangement=self.derangement)
        if self.source == "file":
            return NTPSamples.from_file(self.path)
        return BUILTIN[self.source]()


@dataclass(frozen=True)
class TransformerModelConfig(Config):
    """The one-layer transformer of paper C (Sec. 3) and how it is trained."""

    algorithm: str = setting("two-stage", "two-stage (Algorithm 1) or joint (W_ov and W_kq together: "
                             "stage1.steps + stage2.steps NGD steps of size η₀; an ablation)", choices=ALGORITHMS)
    embedding: str = setting("onehot", "onehot (E = I), orthonormal (random, Assumption 2) or unit (random "
                             "unit-norm columns: not orthonormal, outside the theory)", choices=EMBEDDINGS)
    d: int = setting(0, "embedding dimension (0: |V|)", ge=0)
    init: str = setting("zeros", "zeros (Algorithm 1) or a LeCun scheme", choices=INITS)
    solver: str = setting("auto", "max-margin backend for W_ov*, W_kq*", choices=SOLVERS)


@dataclass(frozen=True)
class StageConfig(Config):
    """One stage of Algorithm 1: normalized GD for ``steps`` steps of size ``lr``."""

    steps: int = setting(0, "steps of this stage (0: train.steps)", ge=0)
    lr: float = setting(0.0, "step size (0: the paper's, 0.2/√d in stage 1 and 0.05/√d in stage 2)", ge=0)


@dataclass(frozen=True)
class Stage2Config(StageConfig):
    """Stage 2 of Algorithm 1; ``past_t0`` runs it past Lemma 7's t_0, where Theorems 1 and 3 are graded."""

    past_t0: float = setting(0.0, "if > 0, stage 2 runs ceil(past_t0 t_0) steps (overriding steps), t_0 = "
                             "ceil(8 L_max ||W_kq*||²/η) being Lemma 7's start on each seed's dataset; with "
                             "train.log_every = 0 and train.log_points for long runs", ge=0)


@dataclass(frozen=True)
class TransformerTrainConfig(TrainConfig):
    """The loop settings; ``steps`` is the length of each stage (Sec. 7: T = T_1 = 900)."""

    steps: int = setting(900, "steps of each stage unless the stage sets its own", ge=1)
    log_every: int = setting(1, "log every this many steps (0: only the log-spaced points)", ge=0)
    log_points: int = setting(0, "log-spaced logging steps", ge=0)


@dataclass(frozen=True)
class TransformerConfig(RunConfig):
    """Algorithm 1 (or joint training) on one dataset per seed (``ntpbias train``; defaults: Fig. 2).

    Run i uses seed ``seed + i`` for its dataset (random sources), embedding (random kinds) and initialization
    (non-zero schemes); runs are trained one after the other. float64 always (``dtype``).
    """

    experiment: str = setting("transformer", "always transformer", choices=("transformer",))
    data: TransformerDataConfig = field(default_factory=TransformerDataConfig)
    model: TransformerModelConfig = field(default_factory=TransformerModelConfig)
    train: TransformerTrainConfig = field(default_factory=TransformerTrainConfig)
    stage1: StageConfig = field(default_factory=StageConfig)
    stage2: Stage2Config = field(default_factory=Stage2Config)

    moved: ClassVar[dict[str, str]] = {
        "algorithm": "model.algorithm", "embedding": "model.embedding", "d": "model.d", "init": "model.init",
        "solver": "model.solver", "steps1": "stage1.steps", "steps2": "stage2.steps", "eta0": "stage1.lr",
        "eta": "stage2.lr", "log_every": "train.log_every", "log_points": "train.log_points",
        "checkpoint_every": "train.checkpoint_every"}

    def check(self) -> None:
        if self.dtype != "float64":
            raise ValueError("paper C's runs are float64 (dtype = float64)")
        if self.stage2.past_t0 and self.model.algorithm != "two-stage":
            raise ValueError("stage2.past_t0 needs model.algorithm = 'two-stage' (t_0 is Algorithm 1's stage-2 "
                             "start of Lemma 7)")

    @property
    def stage_steps(self) -> tuple[int, int]:
        """(T, T_1): the steps of stages 1 and 2 (T_1 before ``stage2.past_t0``: :meth:`stage2_steps`)."""
        return self.stage1.steps or self.train.steps, self.stage2.steps or self.train.steps

    def stage2_steps(self, t0: int) -> int:
        """T_1 on a dataset whose Lemma-7 start is ``t0``: ceil(past_t0 t_0) when ``stage2.past_t0`` is set."""
        return math.ceil(self.stage2.past_t0 * t0) if self.stage2.past_t0 else self.stage_steps[1]

    def footprint(self) -> dict[str, int]:
        """Memory by part (runs train one after the other): W_ov, W_kq with their gradients and updates; the
        samples' embedded inputs are checked when the data are built."""
        V = self.data.V if self.data.random else 0
        d = self.model.d or V
        return {f"W_ov (|V| x d), W_kq (d x d) with gradients (|V| = {V:,}, d = {d:,})": nbytes(d, V + d,
                                                                                             itemsize=4 * 8)}

    def step_sizes(self, d: int) -> tuple[float, float]:
        """(η₀, η), the paper's 0.2/√d and 0.05/√d where unset."""
        eta0, eta = paper_step_sizes(d)
        return self.stage1.lr or eta0, self.stage2.lr or eta

    def train_config(self, steps: int) -> TrainConfig:
        return TrainConfig(steps=steps, log_points=self.train.log_points, log_every=self.train.log_every,
                           checkpoint_every=self.train.checkpoint_every)


# ------------------------------------------------------------------------------------------------ presets
FIG2 = TransformerConfig()
FIG2_SAMPLES = replace(FIG2, data=TransformerDataConfig(source="samples"))
EXAMPLE1 = replace(FIG2, data=TransformerDataConfig(source="example1"))
PROP2 = replace(FIG2, data=TransformerDataConfig(source="prop2-counterexample"))
UNIT = replace(FIG2, model=replace(FIG2.model, embedding="unit"))
JOINT = replace(FIG2, model=replace(FIG2.model, algorithm="joint"))
