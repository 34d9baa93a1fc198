"""The language model's run config (top-level keys, then ``data``, ``model``, ``optimizer``, ``train`` tables) and
its presets (docs/lm.md#commands)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from ...config import Config, setting
from ...data.config import TEXTS, TOKENIZERS
from ...limits import nbytes
from ...training.config import OptimizerConfig, TrainConfig
from ..base import GENERATOR_BYTES, RunConfig

#: the synthetic text of the planted control (a Markov chain with planted next-token supports)
PLANTED = "planted"


@dataclass(frozen=True)
class LMDataConfig(Config):
    """The training text and its tokenization (docs/lm.md#data)."""

    text: str = setting("shakespeare", "a UTF-8 file, a folder of .txt/.md files, shakespeare (the 38 plays, built "
                        "in), imdb (the 25,000 movie reviews, built in) or planted (a Markov chain with planted "
                        "supports); each non-blank line is a sequence",
                        pattern=r".+", admits="a non-empty string")
    tokenizer: str = setting("word", "word (words and punctuation), char (characters) or wordpiece (bert-base-uncased)",
                             choices=TOKENIZERS)
    max_vocab: int = setting(0, "keep the max_vocab - 1 most frequent tokens plus <unk> (0 = every token)", ge=0)
    max_tokens: int = setting(0, "train on the first max_tokens tokens (0 = all)", ge=0)
    lowercase: bool = setting(True, "lower-case the text (word, char)")
    punctuation: bool = setting(True, "word, wordpiece: keep punctuation symbols as tokens")
    V: int = setting(16, "planted: vocabulary size (= number of chain states)", ge=2)
    sizes: tuple[int, ...] = setting((2, 3, 5, 6), "planted: sizes of the disjoint support sets", ge=1)
    contexts: tuple[int, ...] = setting((4,), "planted: tokens sharing each support set (one value: the same for every "
                                        "set; they must sum to V)", ge=1)
    lines: int = setting(2000, "planted: lines of the corpus", ge=1)
    length: int = setting(16, "planted: tokens per line", ge=2)
    dirichlet: float = setting(2.0, "planted: Dirichlet concentration of the transition probabilities", gt=0)
    seed: int = setting(0, "planted: the corpus's seed (support sets, probabilities, lines)", ge=0)

    def check(self) -> None:
        if self.max_vocab == 1:
            raise ValueError("data.max_vocab must be >= 2 (one kept token plus <unk>), or 0 for no limit")
        if self.text == PLANTED:
            counts = self.contexts * len(self.sizes) if len(self.contexts) == 1 else self.contexts
            if len(counts) != len(self.sizes) or sum(counts) != self.V:
                raise ValueError(f"planted: data.contexts ({list(self.contexts)}) must give one count per set "
                                 f"({len(self.sizes)} sets) summing to data.V = {self.V}")
            if sum(self.sizes) > self.V:
                raise ValueError(f"planted: disjoint sets need sum(data.sizes) = {sum(self.sizes)} <= data.V = "
                                 f"{self.V}")

    def input_files(self) -> dict[str, str]:
        return {} if self.text in (PLANTED, *TEXTS) else {"text": self.text}

    def read_lines(self) -> list[str]:
        """The training text's lines (the planted chain's, or those of :func:`~ntpbias.data.lm_text.text_lines`)."""
        if self.text == PLANTED:
            return self.planted()[0]
        from ...data.lm_text import text_lines

        return text_lines(self.text)

    def planted(self):
        """The planted chain's (lines, transition data) (:func:`~ntpbias.data.planted.planted_markov_lines`)."""
        from ...data.planted import planted_markov_lines

        counts = self.contexts[0] if len(self.contexts) == 1 else self.contexts
        return planted_markov_lines(self.V, self.sizes, counts, lines=self.lines, length=self.length, seed=self.seed,
                                    dirichlet=self.dirichlet)


@dataclass(frozen=True)
class LMModelConfig(Config):
    """The GPT-style decoder (:class:`~ntpbias.models.gpt.GPT`)."""

    layers: int = setting(2, "transformer blocks", ge=1)
    d: int = setting(64, "width (embedding and hidden state dimension)", ge=1)
    heads: int = setting(4, "attention heads (must divide d)", ge=1)
    context: int = setting(16, "longest context: a training window has context + 1 tokens", ge=1)
    tied: bool = setting(False, "tie the unembedding to the token embedding")
    bias: bool = setting(True, "biases in the blocks and LayerNorms (the unembedding never has one)")

    def check(self) -> None:
        if self.d % self.heads:
            raise ValueError(f"model.d = {self.d} must be divisible by model.heads = {self.heads}")

    def kwargs(self) -> dict:
        """The keyword arguments of :class:`~ntpbias.models.gpt.GPT`."""
        return {"context": self.context, "layers": self.layers, "d": self.d, "heads": self.heads, "tied": self.tied,
                "bias": self.bias}

    def parameters(self, V: int) -> int:
        """Number of parameters for a vocabulary of V tokens."""
        d, b = self.d, int(self.bias)
        norms, attention, mlp = 2 * d * (1 + b), 4 * d * d + 4 * d * b, 8 * d * d + 5 * d * b
        block = norms + attention + mlp
        return V * d * (1 if self.tied else 2) + self.context * d + self.layers * block + d * (1 + b)


@dataclass(frozen=True)
class LMTrainConfig(TrainConfig):
    """The loop settings plus the minibatch; a checkpoint of the parameters is kept at every logged step."""

    batch_size: int = setting(64, "training windows per step", ge=1)


@dataclass(frozen=True)
class LMConfig(RunConfig):
    """One training run of the GPT-style decoder (``ntpbias lm train``, ``ntpbias train``).

    ``seed`` seeds the first run's initialisation and minibatches; run b uses ``seed + b``. The text, and so the
    vocabulary, is the same for every run.
    """

    experiment: str = setting("lm", "always lm", choices=("lm",))
    dtype: str = setting("float32", "float32 (speed; the geometry is measured in float64) or float64",
                         choices=("float32", "float64"))
    data: LMDataConfig = field(default_factory=LMDataConfig)
    model: LMModelConfig = field(default_factory=LMModelConfig)
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(name="adam", lr=3e-3,
                                                                               betas=(0.9, 0.99)))
    train: LMTrainConfig = field(default_factory=lambda: LMTrainConfig(steps=3000, log_points=24))

    final_values: ClassVar[tuple[str, ...]] = ("loss", "unembedding_norm")

    def footprint(self) -> dict[str, int]:
        """Memory by part, before the text is read (the vocabulary is at most ``max_vocab``, else a guess)."""
        V = self.data.max_vocab or (self.data.V if self.data.text == PLANTED else 30_522)
        item = 4 if self.dtype == "float32" else 8
        n = self.model.parameters(V)
        B, T, d = self.train.batch_size, self.model.context, self.model.d
        return {f"{self.seeds:,} per-run random generators": self.seeds * GENERATOR_BYTES,
                f"parameters, gradients, Adam moments ({self.seeds:,} runs x {n:,})": nbytes(self.seeds, n,
                                                                                               itemsize=item * 5),
                f"activations of one batch ({B} x {T} x d = {d}, {self.model.layers} blocks)":
                    nbytes(B, T, d * (16 * self.model.layers + 4) + 2 * V, itemsize=item)}


# ------------------------------------------------------------------------------------------------ presets
#: the built-in Shakespeare at the size that trains in under 10 minutes on one CPU thread (docs/lm.md#decisions, LM-D9)
SHAKESPEARE = LMConfig(data=LMDataConfig(max_vocab=64),
                       model=LMModelConfig(layers=2, d=128, heads=4, context=16),
                       train=LMTrainConfig(steps=4000, log_points=16, batch_size=64))
#: a model worth reading: the same decoder on Shakespeare's words with a 1024-token vocabulary (1023 words and <unk>),
#: 16,000 steps with η decayed x0.1 at step 12,000 (under 15 CPU minutes on one thread; docs/lm.md#a-larger-vocabulary)
SHAKESPEARE_1K = LMConfig(data=LMDataConfig(max_vocab=1024),
                          model=LMModelConfig(layers=2, d=128, heads=4, context=16),
                          optimizer=OptimizerConfig(name="adam", lr=3e-3, betas=(0.9, 0.99), milestones=(12_000,)),
                          train=LMTrainConfig(steps=16_000, log_points=24, batch_size=64, checkpoint_every=1000))
#: the planted control: a 16-state Markov chain whose next-token supports are 4 disjoint sets (docs/lm.md)
PLANTED_CHAIN = LMConfig(data=LMDataConfig(text=PLANTED),
                         model=LMModelConfig(layers=2, d=32, heads=2, context=8),
                         train=LMTrainConfig(steps=3000, log_points=24, batch_size=32))
SMOKE_STEPS = 60
#: quick scale on Shakespeare: the first 200,000 tokens, a 32-token vocabulary, d = 64, 600 steps, 8 checkpoints
QUICK_TOKENS, QUICK_VOCAB, QUICK_D, QUICK_STEPS = 200_000, 32, 64, 600


def scaled(cfg: LMConfig, scale: str) -> LMConfig:
    """A preset at ``scale``: paper (the preset as stated), quick (Shakespeare: its first 200,000 tokens, 32 tokens,
    d = 64, 600 steps; the planted control as stated), smoke (60 steps, smaller texts)."""
    if scale == "smoke":
        data = replace(cfg.data, lines=200, max_tokens=20_000)
        return replace(cfg, data=data, train=replace(cfg.train, steps=SMOKE_STEPS, log_points=6))
    if scale == "quick" and cfg.data.text != PLANTED:
        return replace(cfg, data=replace(cfg.data, max_tokens=QUICK_TOKENS, max_vocab=QUICK_VOCAB),
                       model=replace(cfg.model, d=QUICK_D), train=replace(cfg.train, steps=QUICK_STEPS, log_points=7))
    return cfg

