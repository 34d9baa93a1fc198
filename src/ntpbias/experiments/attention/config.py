"""Paper B's run configs (one form: top-level keys, then ``data``, ``model``, ``optimizer``, ``train`` tables) and
their presets."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from ..._tensor import DTYPES
from ...config import Config, setting
from ...data.tokens import KLevelLaw, power_level_sizes
from ...geometry.margins.program import SOLVERS
from ...limits import nbytes
from ...training.attention import MODELS
from ...training.loop import TrainConfig
from ...training.optimizers import OptimizerConfig
from ..base import GENERATOR_BYTES, RunConfig
from .data import TokenDataConfig


@dataclass(frozen=True)
class AttentionModelConfig(Config):
    """Model (1) or (17) of paper B and its embedding dimension."""

    kind: str = setting("one_layer", "one_layer (eq. (1)) or two_layer (eq. (17))", choices=MODELS)
    d: int = setting(2048, "embedding dimension of E, p, v (paper: 2048)", ge=1)
    train_v: bool = setting(True, "train v too (Sec. 5 of paper B trains all parameters); false = the theory's "
                            "fixed random unit v (docs/paper-b-attention.md#decisions)")
    layer_norm_affine: bool = setting(True, "the two-layer model's LayerNorm affine parameters (torch's default)")


@dataclass(frozen=True)
class AttentionTrainConfig(TrainConfig):
    """Epochs of minibatch AdamW: ``steps`` = 0 trains ``epochs`` passes over the data (the paper's form); a positive
    ``steps`` trains exactly that many optimizer steps instead."""

    steps: int = setting(0, "optimizer steps (0: epochs x steps per epoch)", ge=0)
    epochs: int = setting(196, "passes over the data (paper: 196 synthetic, 500 real)", ge=1)
    batch_size: int = setting(128, "minibatch size (paper: 128; 0 = full batch)", ge=0)
    decay_epochs: tuple[int, ...] = setting((100, 200), "epochs at which the learning rate is multiplied by "
                                            "optimizer.lr_decay (paper: 100, 200)", ge=1)
    log_points: int = setting(30, "log-spaced logging steps (metrics on the whole data)", ge=0)


@dataclass(frozen=True)
class AttentionConfig(RunConfig):
    """One joint training of model (1) or (17) (``ntpbias train``; defaults: Figure 2 at the paper's scale).

    ``optimizer`` is AdamW (paper: lr 1e-4, weight decay 1e-4 synthetic; lr 0.01, weight decay 1e-8 real data);
    ``optimizer.milestones`` must stay empty (the decay is ``train.decay_epochs``).
    """

    experiment: str = setting("attention", "always attention", choices=("attention",))
    data: TokenDataConfig = field(default_factory=TokenDataConfig)
    model: AttentionModelConfig = field(default_factory=AttentionModelConfig)
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(
        name="adamw", lr=1e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-4))
    train: AttentionTrainConfig = field(default_factory=AttentionTrainConfig)

    moved: ClassVar[dict[str, str]] = {
        "model": "model.kind", "d": "model.d", "train_v": "model.train_v",
        "layer_norm_affine": "model.layer_norm_affine", "batch_size": "train.batch_size", "epochs": "train.epochs",
        "decay_epochs": "train.decay_epochs", "log_points": "train.log_points",
        "checkpoint_every": "train.checkpoint_every"}
    final_values: ClassVar[tuple[str, ...]] = ("loss", "class_accuracy", "epoch", "p_norm", "pearson_p_abs_pd",
                                               "pearson_v_pd")

    def check(self) -> None:
        if self.optimizer.milestones:
            raise ValueError("set the learning-rate decay with train.decay_epochs (in epochs), not "
                             "optimizer.milestones")

    def footprint(self, shapes: tuple[int, int, int] | None = None) -> dict[str, int]:
        """Memory by part (see :func:`~ntpbias.experiments.base.preflight`): the seeds' parameters with their
        gradients and AdamW state, the sequences, one minibatch's activations (two-layer: its T x T attention).
        ``shapes`` = (|S|, n, T) of the data once read (default: what the settings say)."""
        B, d, item = self.seeds, self.model.d, DTYPES[self.dtype].itemsize
        S, n, T = shapes or _token_shapes(self.data)
        batch = min(self.train.batch_size or n, n) if n else self.train.batch_size
        out = {f"{B:,} per-run random generators": B * GENERATOR_BYTES,
               f"parameters, gradients, AdamW state ({B:,} runs x |S| = {S:,} x d = {d:,})":
                   nbytes(B, S + 2, d, itemsize=5 * item),
               f"sequences ({n:,} x {T:,} tokens)": nbytes(n, T)}
        # measured peaks (attention-fig2 quick, d = 256): about 2 copies of the (batch, T, d) embedded minibatch for
        # model (1); about 9 copies of it and of the (batch, T, T) attention for model (17)
        if self.model.kind == "two_layer":
            out[f"activations and T x T attention of a minibatch ({B:,} runs x {batch:,} x {T:,} x (d + T))"] = (
                nbytes(B, batch, T, d + T, itemsize=10 * item))
        else:
            out[f"activations of a minibatch ({B:,} runs x {batch:,} x {T:,} x d)"] = nbytes(B, batch, T, d,
                                                                                             itemsize=3 * item)
        return out


def _token_shapes(data: TokenDataConfig) -> tuple[int, int, int]:
    """(|S|, n, T) known from the settings (0 where the data file decides: it is checked when read)."""
    if data.source == "k_level":
        return data.law.num_tokens, data.n, data.T
    if data.source == "assumption1":
        return data.n_pos + data.n_neg + data.n_irr, data.n, data.T
    return WORDPIECE_VOCAB if data.preprocess.tokenizer == "bert-base-uncased" else 0, 0, data.preprocess.max_length


#: tokens of the bundled bert-base-uncased WordPiece vocabulary (an upper bound of a text dataset's |S|)
WORDPIECE_VOCAB = 30_522


FIG2 = AttentionConfig()


FIG2_QUICK = replace(FIG2, model=replace(FIG2.model, d=256), train=replace(FIG2.train, epochs=10, decay_epochs=(8,)),
                     optimizer=replace(FIG2.optimizer, lr=1e-3))


FIG2_SMOKE = replace(FIG2_QUICK, model=replace(FIG2.model, d=32), train=replace(FIG2.train, epochs=2, decay_epochs=()),
                     data=replace(FIG2.data, n=256, T=64))


def _fig2(scale: str) -> AttentionConfig:
    return {"paper": FIG2, "quick": FIG2_QUICK}.get(scale, FIG2_SMOKE)


@dataclass(frozen=True)
class StageTwoModelConfig(Config):
    """The embedding dimension of stage 1 and the solver of the max-margin programs (12)."""

    d: int = setting(1024, "embedding dimension", ge=1)
    solver: str = setting("auto", "backend of the max-margin programs (12)", choices=SOLVERS)


@dataclass(frozen=True)
class StageOneConfig(Config):
    """Stage 1: one GD step of size η₀ on E and p from the initialisation (eq. (4))."""

    eta0: float = setting(200.0, "stage-1 step size η₀", gt=0)


@dataclass(frozen=True)
class StageTwoTrainConfig(TrainConfig):
    """Stage 2's loop (the flow (9) on p, E fixed at E¹)."""

    steps: int = setting(4000, "stage-2 steps", ge=1)
    log_points: int = setting(60, "log-spaced logging steps", ge=0)
    grad_floor: float = setting(1e-200, "gradients below this norm are treated as zero (the iterate freezes)", gt=0)


@dataclass(frozen=True)
class StageTwoConfig(RunConfig):
    """Stage 1 (one GD step of size η₀ on E and p, eq. (4)) then stage 2 (the flow (9) on p, E fixed at E¹).

    Defaults: the "A1-base" setting (Assumption-1 data n = 16, T = 6, 4 + 4 relevant and 12 irrelevant tokens,
    d = 1024, η₀ = 200) with normalized GD, h = 0.5, 4000 steps. ``optimizer.name`` discretises the flow: "ngd"
    (normalized GD, fast) or "gd" (faithful, slow in direction). float64 always: these are theory runs. Assumption-1
    data enable the selection metrics and Lemma 4.5's reference.
    """

    experiment: str = setting("attention-stage2", "always attention-stage2", choices=("attention-stage2",))
    data: TokenDataConfig = field(default_factory=lambda: TokenDataConfig(source="assumption1", n=16, T=6))
    model: StageTwoModelConfig = field(default_factory=StageTwoModelConfig)
    stage1: StageOneConfig = field(default_factory=StageOneConfig)
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(name="ngd", lr=0.5))
    train: StageTwoTrainConfig = field(default_factory=StageTwoTrainConfig)

    moved: ClassVar[dict[str, str]] = {
        "d": "model.d", "solver": "model.solver", "eta0": "stage1.eta0", "method": "optimizer.name",
        "lr": "optimizer.lr", "steps": "train.steps", "grad_floor": "train.grad_floor",
        "log_points": "train.log_points"}
    final_values: ClassVar[tuple[str, ...]] = ("loss", "cos_mm", "grad_norm", "loss_above_floor", "margin_mm",
                                               "p_norm", "selection_accuracy")

    def check(self) -> None:
        if self.optimizer.name not in ("gd", "ngd"):
            raise ValueError(f"stage 2 is discretised by optimizer.name = 'gd' or 'ngd', got {self.optimizer.name!r}")

    def footprint(self) -> dict[str, int]:
        """Memory by part: each seed's embeddings before and after stage 1 (|S| x d), the sequences, stage 2's
        parameters, the embedded tokens of the max-margin programs (12)."""
        B, d = self.seeds, self.model.d
        S, n, T = _token_shapes(self.data)
        return {f"{B:,} per-run random generators": B * GENERATOR_BYTES,
                f"embeddings E⁰, E¹ and their gradient ({B:,} runs x |S| = {S:,} x d = {d:,})": nbytes(B, S, d,
                                                                                                    itemsize=4 * 8),
                f"sequences ({n:,} x {T:,} tokens)": nbytes(n, T),
                f"embedded sequences ({n:,} x {T:,} x d)": nbytes(n, T, d, itemsize=2 * 8)}


STAGE2_NGD = StageTwoConfig()


STAGE2_GD = replace(STAGE2_NGD, optimizer=replace(STAGE2_NGD.optimizer, name="gd", lr=1.0),
                    train=replace(STAGE2_NGD.train, steps=10_000, log_points=41))


STAGE2_LEMMA44 = replace(STAGE2_NGD, model=replace(STAGE2_NGD.model, d=16384), data=replace(STAGE2_NGD.data, n_irr=1))


@dataclass(frozen=True)
class Lemma41Config:
    """The one-step sweep of Lemma 4.1 (docs/paper-b-attention.md#theory-checks): small K-level data (|S| = 140),
    several d and η₀, seeds.

    Attributes
    ----------
    dims, eta0s : embedding dimensions and stage-1 step sizes
    seed, seeds : initialisation seeds ``seed .. seed + seeds - 1``
    delta : failure probability δ of the initialisation event (22) and of condition (5)
    data : the data (any labelled token sequences; Lemma 4.1 holds for every dataset)
    """

    dims: tuple[int, ...] = (256, 1024, 4096, 16384)
    eta0s: tuple[float, ...] = (1.0, 100.0)
    seed: int = 0
    seeds: int = 2
    delta: float = 0.01
    data: TokenDataConfig = field(default_factory=lambda: TokenDataConfig(
        n=512, T=32, law=KLevelLaw(irrelevant_size=64, level_sizes=power_level_sizes(4, offset=2),
                                   deltas=(0.4, 0.3, 0.2, 0.05), delta_tilde=0.3)))
