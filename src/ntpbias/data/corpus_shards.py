"""Counting a large corpus in shards: each shard (a group of documents) is tokenized and counted on its own (a
worker process or a Dask task, :mod:`ntpbias.parallel`), then the counts are merged exactly into the
:class:`~ntpbias.data.corpus.CorpusStats` that :func:`~ntpbias.data.corpus.corpus_statistics` gives on the whole."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from .config import CorpusConfig
from .corpus import (
    CorpusStats,
    Document,
    _check_context,
    _sequences,
    _source_label,
    corpus_documents,
    pair_statistics,
)
from .text import tokenize_texts


@dataclass(frozen=True)
class ShardTask:
    """A contiguous run of documents counted by one worker (picklable).

    ``limits`` (one per segment of the shard, after tokenization) caps each segment's tokens: it carries a global
    ``max_tokens`` budget into the shard (None: keep every token).
    """

    documents: tuple[Document, ...]
    config: CorpusConfig
    limits: tuple[int, ...] | None = None


@dataclass(frozen=True, eq=False)
class ShardCounts:
    """What one shard contributes; shards merge by summing counts (:func:`merge_shard_counts`).

    Attributes
    ----------
    vocab, token_ids : (V_s,) the shard's token strings and their tokenizer ids (the global order is by string for
        ``word`` and by tokenizer id for WordPiece, as in :func:`~ntpbias.data.text.tokenize_texts`)
    unigrams : (V_s,) token counts after the ``max_tokens`` cap
    segment_lengths : (L_s,) tokens per segment after the cap
    pairs : int64 (p, T + 2): context length t, the t context tokens (shard ids, padded with -1), next token
    counts : (p,) occurrences of each distinct pair row
    documents : documents read
    """

    vocab: np.ndarray
    token_ids: np.ndarray
    unigrams: np.ndarray
    segment_lengths: np.ndarray
    pairs: np.ndarray
    counts: np.ndarray
    documents: int


def _tokenize_shard(task: ShardTask):
    texts = [d.read() for d in task.documents]
    if task.config.segment == "line":
        texts = [line for text in texts for line in text.splitlines() if line.strip()]
    return tokenize_texts(texts, task.config.preprocess_config())


def shard_segment_lengths(task: ShardTask) -> np.ndarray:
    """Tokens per segment of a shard (the first pass when a ``max_tokens`` budget must be split over shards)."""
    return _tokenize_shard(task).lengths


def count_shard(task: ShardTask) -> ShardCounts:
    """Tokenize a shard and count its distinct (context, next token) pairs, vectorized per context length."""
    config, T = task.config, task.config.max_context
    tt = _tokenize_shard(task)
    ids, lengths = tt.ids, tt.lengths
    if task.limits is not None:  # keep the first limits[i] tokens of segment i (vectorized over tokens)
        keep = np.minimum(lengths, np.asarray(task.limits, dtype=np.int64))
        position = np.arange(ids.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        ids, lengths = ids[position < np.repeat(keep, lengths)], keep
    lengths = lengths[lengths > 0]
    unigrams = np.bincount(ids, minlength=len(tt.vocab))
    rows: list[np.ndarray] = []
    usable = (lengths >= 2).any() if config.segment == "line" else bool(len(lengths)) and lengths.max() >= T + 1
    if usable:
        seq_ids, seq_len = _sequences(ids, lengths, config, "shard")
        starts = np.cumsum(seq_len) - seq_len
        for t in range(1, T + 1):  # loop over context lengths, vectorized over sequences
            alive = np.nonzero(seq_len > t)[0]
            if not len(alive):
                break
            block = np.full((len(alive), T + 2), -1, dtype=np.int64)
            block[:, 0] = t
            block[:, 1:t + 1] = seq_ids[starts[alive, None] + np.arange(t)]
            block[:, T + 1] = seq_ids[starts[alive] + t]
            rows.append(block)
    pairs = np.concatenate(rows) if rows else np.zeros((0, T + 2), dtype=np.int64)
    pairs, inverse = _unique_rows(pairs)
    counts = np.bincount(inverse, minlength=len(pairs))
    return ShardCounts(np.asarray(tt.vocab.tolist(), dtype=str), tt.token_ids, unigrams, lengths, pairs, counts,
                       len(task.documents))


def plan_shards(sources: str | Sequence[str], config: CorpusConfig, shards: int) -> list[ShardTask]:
    """Split the documents of ``sources`` into at most ``shards`` contiguous runs (document order kept)."""
    docs = corpus_documents(sources)
    bounds = np.linspace(0, len(docs), min(max(1, shards), len(docs)) + 1).round().astype(int)
    return [ShardTask(tuple(docs[a:b]), config) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def sharded_corpus_statistics(sources: str | Sequence[str], config: CorpusConfig = CorpusConfig(), *,
                              shards: int = 8, map_fn=map) -> tuple[CorpusStats, int]:
    """:func:`corpus_statistics` of a corpus counted in shards: ``(stats, documents)``.

    ``map_fn(function, tasks)`` runs the shard tasks (the builtin ``map``, or an executor's map such as
    ``lambda f, xs: ntpbias.sweep.map_values(f, xs, executor="dask")``). The merged counts, and so every
    statistic, equal the single-process ones exactly: shards return integer counts keyed by token strings, the
    merge rebuilds the single-process vocabulary (order, ``max_vocab`` and ``<unk>``) and context numbering, and
    the statistics are summed in the same order.
    """
    tasks = plan_shards(sources, config, shards)
    if config.max_tokens:  # split the global budget: the first max_tokens tokens in document order
        seg = list(map_fn(shard_segment_lengths, tasks))
        ends = np.cumsum(np.concatenate(seg)) if seg else np.zeros(0, dtype=np.int64)
        allowed = np.clip(config.max_tokens - (ends - np.concatenate(seg)), 0, None)
        offsets = np.cumsum([0] + [len(x) for x in seg])
        tasks = [dataclasses.replace(t, limits=tuple(int(v) for v in allowed[a:b]))
                 for t, a, b in zip(tasks, offsets[:-1], offsets[1:], strict=True)]
    return merge_shard_counts(list(map_fn(count_shard, tasks)), config, _source_label(sources)), \
        sum(len(t.documents) for t in tasks)


def merge_shard_counts(shards: list[ShardCounts], config: CorpusConfig, source: str) -> CorpusStats:
    """Sum the shards' counts into the statistics of the whole corpus (see :func:`sharded_corpus_statistics`)."""
    T = config.max_context
    lengths = np.concatenate([s.segment_lengths for s in shards])
    tokens = int(lengths.sum())
    if tokens == 0:
        raise DataError(f"{source}: the corpus holds no token after tokenization")
    # the single-process vocabulary: present tokens in tokenizer order, then the max_vocab cut (stable ties)
    strings = np.concatenate([s.vocab for s in shards])
    order_key = np.concatenate([s.token_ids for s in shards]) if config.tokenizer != "word" else None
    vocab, first = np.unique(strings, return_index=True)
    if order_key is not None:
        vocab = vocab[np.argsort(order_key[first], kind="stable")]
    index = {w: i for i, w in enumerate(vocab.tolist())}
    local = [np.array([index[w] for w in s.vocab.tolist()], dtype=np.int64) for s in shards]  # per vocab entry
    counts = np.zeros(len(vocab), dtype=np.int64)
    for s, g in zip(shards, local, strict=True):
        np.add.at(counts, g, s.unigrams)
    present = counts > 0
    if config.max_vocab and present.sum() > config.max_vocab:
        keep = np.zeros(len(vocab), dtype=bool)
        keep[np.argsort(-counts, kind="stable")[: config.max_vocab - 1]] = True
        final = np.where(keep, np.cumsum(keep) - 1, keep.sum())
        V = int(keep.sum()) + 1
    else:
        final, V = np.cumsum(present) - 1, int(present.sum())
    _check_context(lengths, config, source)
    rows, weights = [], []
    for s, g in zip(shards, local, strict=True):
        if len(s.pairs):
            mapped = s.pairs.copy()
            tok = mapped[:, 1:]
            mapped[:, 1:] = np.where(tok >= 0, final[g[np.maximum(tok, 0)]], -1)
            rows.append(mapped)
            weights.append(s.counts)
    pairs, inverse = _unique_rows(np.concatenate(rows))
    pair_counts = np.bincount(inverse, weights=np.concatenate(weights), minlength=len(pairs)).astype(np.int64)
    # pairs are sorted by (t, context tokens, next): a new context starts where the first T + 1 columns change
    new_ctx = np.ones(len(pairs), dtype=bool)
    new_ctx[1:] = (pairs[1:, : T + 1] != pairs[:-1, : T + 1]).any(axis=1)
    return pair_statistics(pairs[new_ctx, 0], np.cumsum(new_ctx) - 1, pair_counts, vocab=V, tokens=tokens)


def _unique_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct rows in lexicographic order, index of each input row among them).

    Rows are shifted to non-negative values and stored big-endian, so that one ``np.unique`` over the rows as
    raw bytes (a memcmp order) sorts them lexicographically: about twice as fast as ``np.unique(axis=0)``.
    """
    if not len(rows):
        return rows, np.zeros(0, dtype=np.int64)
    low = int(rows.min())
    width = ">u4" if int(rows.max()) - low < 2**32 else ">u8"
    packed = np.ascontiguousarray((rows - low).astype(width))
    keys = packed.view(np.dtype((np.void, packed.itemsize * rows.shape[1]))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return rows[first], inverse.reshape(-1)
