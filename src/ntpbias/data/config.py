"""The settings of the data layer: how text is preprocessed and read into NTP data, the K-level token law of paper B,
and the names of the built-in datasets. Nothing here imports torch or numpy at import time, so a run config (and
``ntpbias settings``) loads without them; the tensors of :class:`KLevelLaw` are built when asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..config import Config, setting
from ..errors import ConfigError

if TYPE_CHECKING:
    import torch

#: Tokenizer names that mean the bundled bert-base-uncased WordPiece vocabulary.
WORDPIECE_NAMES = ("bert-base-uncased", "wordpiece")
#: Names of the built-in corpora (:mod:`.corpus`).
BUILTIN_CORPORA = ("shakespeare",)
#: Names of the built-in sentence datasets of paper C (:data:`ntpbias.data.sentences.BUILTIN`).
BUILTIN_SENTENCES = ("example1", "prop2-counterexample")
#: The tokenizers of :class:`ntpbias.data.lm_text.TextTokenizer`.
TOKENIZERS = ("word", "char", "wordpiece")
#: The built-in texts of :func:`ntpbias.data.lm_text.text_lines` (one sequence per line).
TEXTS = ("shakespeare", "imdb")


def power_level_sizes(K: int = 8, *, offset: int = 4, exponent_shift: int = 0) -> tuple[int, ...]:
    """Level sizes |S_k^{±1}| = offset + 2^(k - exponent_shift), k = 1..K.

    The default ``4 + 2^k`` reproduces the paper's totals (|S| = 2048 with |S~| = 964,
    docs/paper-b-attention.md#decisions); the formula printed in the paper, ``4 + 2^(k-1)``, is ``exponent_shift=1``
    (|S| = 1538).

    >>> power_level_sizes(8)
    (6, 8, 12, 20, 36, 68, 132, 260)
    """
    if K < 1:
        raise ConfigError(f"the number of levels K must be >= 1, got {K}")
    return tuple(offset + 2 ** (k - exponent_shift) for k in range(1, K + 1))





@dataclass(frozen=True)
class KLevelLaw(Config):
    """The K-level token law of eqs. (14)-(15) with the corrected opposite-polarity case
    (docs/paper-b-attention.md#setting and #errata).

    Given the label y, each of the T tokens of a sequence is drawn i.i.d. from

        p(s|y) = (1 - δ~)/|S~|           for s ∈ S~ (irrelevant),
                 δ~ (1 - δ_k)/N          for s ∈ S_k^{y},
                 δ~ δ_k / N              for s ∈ S_k^{-y}   (the paper prints δ_k/N: a typo, it does not sum to 1),

    with N = Σ_k |S_k^{±1}|. With equal class priors the posterior is eq. (16): p(y|s) = 1/2 on S~, 1 - δ_k on
    S_k^y, δ_k on S_k^{-y}. Defaults are the paper's Figure-2 values (level sizes 4 + 2^k,
    docs/paper-b-attention.md#decisions).

    Token ids: ``[0, |S~|)`` irrelevant, then the positive levels S_1^{+1}, ..., S_K^{+1} in order, then the
    negative levels S_1^{-1}, ..., S_K^{-1} (token ``t + N`` is the negative twin of positive token ``t``).

    Examples
    --------
    >>> law = KLevelLaw()
    >>> law.num_tokens, law.N, law.K
    (2048, 542, 8)
    >>> [round(x, 2) for x in law.posterior_difference()[law.level == 1][:1].tolist()]
    [0.1]
    """

    irrelevant_size: int = setting(964, "irrelevant tokens |S~|", ge=1)
    level_sizes: tuple[int, ...] = setting(factory=power_level_sizes, doc="|S_k^{+1}| = |S_k^{-1}| for k = 1..K "
                                           "(default 4 + 2^k)", ge=1)
    deltas: tuple[float, ...] = setting((0.45, 0.35, 0.3, 0.25, 0.2, 0.1, 0.05, 0.02), "δ_k of each level, eq. (15)",
                                        gt=0, lt=1)
    delta_tilde: float = setting(0.05, "δ~: probability mass of the relevant tokens", gt=0, lt=1)

    def check(self):
        if len(self.level_sizes) != len(self.deltas) or not self.deltas:
            raise ConfigError(f"KLevelLaw: {len(self.level_sizes)} level sizes but {len(self.deltas)} deltas; give "
                              f"one size and one delta per level (K >= 1)")
        if min(self.level_sizes) < 1 or self.irrelevant_size < 1:
            raise ConfigError(f"KLevelLaw: level sizes and irrelevant_size must be >= 1, got {self.level_sizes}, "
                              f"{self.irrelevant_size}")
        if not all(0.0 < x < 1.0 for x in (*self.deltas, self.delta_tilde)):
            raise ConfigError(f"KLevelLaw: every delta_k and delta_tilde must lie in (0, 1), got deltas "
                              f"{self.deltas}, delta_tilde {self.delta_tilde}")

    @property
    def K(self) -> int:
        return len(self.level_sizes)

    @property
    def N(self) -> int:
        """Σ_k |S_k^{+1}| (= Σ_k |S_k^{-1}|)."""
        return sum(self.level_sizes)

    @property
    def num_tokens(self) -> int:
        """|S| = |S~| + 2N."""
        return self.irrelevant_size + 2 * self.N

    @property
    def level(self) -> torch.Tensor:
        """(|S|,) int64: 0 for irrelevant tokens, k in 1..K for S_k^{±1}."""
        import torch

        lv = torch.repeat_interleave(torch.arange(1, self.K + 1), torch.tensor(self.level_sizes))
        return torch.cat([torch.zeros(self.irrelevant_size, dtype=torch.int64), lv, lv])

    @property
    def polarity(self) -> torch.Tensor:
        """(|S|,) int64: 0 irrelevant, +1 for S_k^{+1}, -1 for S_k^{-1}."""
        import torch

        return torch.cat([torch.zeros(self.irrelevant_size, dtype=torch.int64),
                          torch.ones(self.N, dtype=torch.int64), -torch.ones(self.N, dtype=torch.int64)])

    def vocab(self) -> tuple[str, ...]:
        """Token names: ``irr<i>``, ``L<k>+<j>``, ``L<k>-<j>``."""
        names = [f"irr{i}" for i in range(self.irrelevant_size)]
        for sign in "+-":
            names += [f"L{k}{sign}{j}" for k, size in enumerate(self.level_sizes, 1) for j in range(size)]
        return tuple(names)

    def probabilities(self) -> torch.Tensor:
        """(2, |S|) float64: row 0 = p(s | y=-1), row 1 = p(s | y=+1), eq. (15) corrected."""
        import torch

        d = torch.tensor((0.0, *self.deltas), dtype=torch.float64)[self.level]  # δ_k per token (0 on S~)
        same = self.delta_tilde * (1 - d) / self.N
        opposite = self.delta_tilde * d / self.N
        irr = torch.full((self.num_tokens,), (1 - self.delta_tilde) / self.irrelevant_size, dtype=torch.float64)
        pol = self.polarity
        plus = torch.where(pol == 0, irr, torch.where(pol > 0, same, opposite))
        minus = torch.where(pol == 0, irr, torch.where(pol < 0, same, opposite))
        return torch.stack([minus, plus])

    def posterior(self, prior_positive: float = 0.5) -> torch.Tensor:
        """(|S|,) p(y=+1 | s) by Bayes' rule from :meth:`probabilities`; eq. (16) for the default equal priors."""
        P = self.probabilities()
        joint_plus, joint_minus = prior_positive * P[1], (1 - prior_positive) * P[0]
        return joint_plus / (joint_plus + joint_minus)

    def posterior_difference(self, prior_positive: float = 0.5) -> torch.Tensor:
        """(|S|,) p(+1|s) - p(-1|s): ±(1 - 2δ_k) on the levels, 0 on S~ (equal priors)."""
        return 2 * self.posterior(prior_positive) - 1


@dataclass(frozen=True)
class PreprocessConfig(Config):
    """The paper's preprocessing pipeline (Sec. 5 of paper B; docs/paper-b-attention.md#decisions, B-D9); see
    :mod:`ntpbias.data.text` for what each stage does."""

    strip_html: bool = setting(True, "remove HTML tags")
    lowercase: bool = setting(True, "lower-case the text")
    remove_punctuation: bool = setting(True, "remove punctuation")
    remove_stopwords: bool = setting(True, "remove stop words")
    stopwords: str = setting("builtin", "builtin (NLTK's 179 English words, shipped) or a path to a list, one word "
                             "per line", pattern=r".+", admits="a non-empty string")
    stem: bool = setting(True, "Snowball-stem every word")
    tokenizer: str = setting("bert-base-uncased", "bert-base-uncased (bundled WordPiece), word, or a path to a "
                             "tokenizer.json", pattern=r".+", admits="a non-empty string")
    min_count: int = setting(50, "purge tokens seen fewer than this many times (paper: 50; 0 or 1 keeps all)", ge=0)
    max_length: int = setting(0, "keep the first max_length tokens of each sequence (0 = no cap; 512 is BERT's "
                              "length, for the two-layer model's T x T attention)", ge=0)
    drop_empty: bool = setting(True, "drop sequences left empty (counted in the report); false makes one an error")

    def input_files(self) -> dict[str, str]:
        files = {"stopwords": self.stopwords} if self.remove_stopwords and self.stopwords != "builtin" else {}
        if self.tokenizer not in (*WORDPIECE_NAMES, "word"):
            files["tokenizer"] = self.tokenizer
        return files

    def stages(self) -> tuple[str, ...]:
        """Names of the enabled stages, in the order they run."""
        on = [("strip_html", self.strip_html), ("lowercase", self.lowercase),
              ("remove_punctuation", self.remove_punctuation), ("split_words", True),
              ("remove_stopwords", self.remove_stopwords), ("stem", self.stem), ("tokenize", True),
              ("purge", self.min_count > 1), ("truncate", self.max_length > 0)]
        return tuple(name for name, enabled in on if enabled)


@dataclass(frozen=True)
class YelpConfig(Config):
    """Selection of Yelp reviews (Sec. 5 of paper B; docs/paper-b-attention.md#decisions, B-D10): length window, seeded
    subsample, optional class balance."""

    min_chars: int = setting(1000, "keep reviews with at least this many characters (raw text)", ge=0)
    max_chars: int = setting(1500, "keep reviews with at most this many characters (raw text)", ge=0)
    size: int = setting(50_000, "seeded uniform subsample of this many reviews (0 = every eligible review)", ge=0)
    seed: int = setting(0, "seed of the subsample", ge=0)
    balance: bool = setting(False, "sample size // 2 reviews per class instead of a uniform sample (Yelp is "
                            "positive-skewed; the class ratio is reported either way)")

    def check(self):
        if self.max_chars < self.min_chars:
            raise ConfigError(f"need min_chars <= max_chars, got {self.min_chars}, {self.max_chars}")


@dataclass(frozen=True)
class CorpusConfig(Config):
    """How a text becomes autoregressive NTP data (see the module docstring)."""

    max_context: int = setting(8, "longest context T (contexts of lengths 1..T)", ge=1)
    tokenizer: str = setting("word", "word (words and punctuation symbols), bert-base-uncased or wordpiece (the "
                             "bundled WordPiece), or a path to a tokenizer.json", pattern=r".+",
                             admits="a non-empty string")
    lowercase: bool = setting(True, "lower-case the text first (WordPiece lower-cases anyway)")
    punctuation: bool = setting(True, "keep punctuation symbols as tokens")
    segment: str = setting("document", "document (sliding windows inside each document) or line (each line a "
                           "sequence)", choices=("document", "line"))
    stride: int = setting(1, "document: a window starts every stride tokens (1: all t-grams; T + 1: disjoint blocks)",
                          ge=1)
    max_tokens: int = setting(0, "use only the first max_tokens tokens of the corpus (0 = all)", ge=0)
    max_vocab: int = setting(0, "keep the max_vocab most frequent tokens, the others become <unk> (0 = all)", ge=0)

    def check(self):
        if self.max_vocab == 1:
            raise ConfigError("--max-vocab must be >= 2 (one kept token plus <unk>), or 0 for no limit")

    def preprocess_config(self) -> PreprocessConfig:
        """The text pipeline used: no HTML, stop-word, stemming, purge or cap stages."""
        return PreprocessConfig(strip_html=False, lowercase=self.lowercase, remove_punctuation=not self.punctuation,
                                remove_stopwords=False, stem=False, tokenizer=self.tokenizer, min_count=0,
                                max_length=0)
