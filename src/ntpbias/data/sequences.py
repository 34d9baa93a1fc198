"""Token sequences -> NTP data in distinct-context form (App. C of paper A; docs/paper-a-linear-ntp.md#objects).

Sequences file format: one sequence per line, tokens separated by whitespace; contexts never cross a line
end; blank lines are ignored.

Two ways to form (context, next token) samples:

* fixed context length K (``context_length=K``): every window of K consecutive tokens of a line is a
  context and the token after it its label (K-gram statistics). A file whose lines all have K + 1 tokens is
  exactly paper A's fixed-length setting.
* autoregressive (``autoregressive=True``, App. C of paper A): every prefix z_1..z_t (1 <= t < T, optionally
  t <= ``max_context``) of every line is a context with label z_{t+1}. **Weight normalization:** π̂ is the
  frequency of each distinct prefix among all (prefix, next token) pairs, so Σ_j π̂_j = 1. For equal-length
  sequences this is the paper's objective divided by T - 1 (the average over positions instead of the sum):
  W*, W^mm and F are unchanged, CE and H are per-position averages.

Contexts are ordered by length, then lexicographically by their token strings; the vocabulary is sorted.
Everything is vectorized over tokens and samples (the only loop is over prefix lengths).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE
from ..errors import DataError
from ..io import read_input_text
from ..limits import check_memory, nbytes
from .embedding import EmbeddingSpec
from .ntp import NTPData

#: bytes per token of a window: the gather index and the gathered id (int64 each), and np.unique's sorted copy
WINDOW_BYTES = 24
#: bytes per character of the context strings: numpy's fixed-width unicode (4) in the per-length arrays and in their
#: concatenation
STRING_BYTES = 8


def _longest_token(vocab: np.ndarray) -> int:
    return int(np.char.str_len(vocab).max()) if len(vocab) else 0


def read_sequences(path: str | os.PathLike) -> list[list[str]]:
    """Read a sequences ``.txt`` file: one whitespace-tokenized sequence per non-blank line."""
    path = Path(path)
    text = read_input_text(path)
    seqs = [line.split() for line in text.splitlines()]
    seqs = [s for s in seqs if s]
    if not seqs:
        raise DataError(f"{path}: the sequences file is empty (no tokens on any line)")
    return seqs


@dataclass(frozen=True)
class ContextSamples:
    """Raw samples of a token corpus, with contexts and tokens as integer ids.

    Attributes
    ----------
    vocab : (V,) str array (sorted when built from token strings).
    contexts : (m,) str array, each context's tokens joined by spaces (None if built without strings).
    context_lengths : (m,) int array.
    context_ids, next_tokens : (n,) int arrays, one entry per (context, next token) sample.
    skipped_lines : number of lines too short to yield any sample.
    context_tokens : (m, K) int array of each context's token ids (K-gram samples only; None otherwise).
    """

    vocab: np.ndarray
    contexts: np.ndarray
    context_lengths: np.ndarray
    context_ids: np.ndarray
    next_tokens: np.ndarray
    skipped_lines: int
    context_tokens: np.ndarray | None = None

    def to_data(self, embedding: EmbeddingSpec | str = "onehot", *, dtype: torch.dtype = DEFAULT_DTYPE,
                autoregressive: bool = False) -> NTPData:
        """Aggregate into :class:`NTPData` with the given context embedding."""
        if isinstance(embedding, str):
            embedding = EmbeddingSpec.parse(embedding)
        m, V = len(self.context_lengths), len(self.vocab)
        d = {"onehot": m, "gaussian": embedding.d}.get(embedding.kind, 0)  # a file is its own size
        itemsize = torch.finfo(dtype).bits // 8
        check_memory({f"H ({m:,} x {d:,} {embedding.kind} embeddings)": nbytes(m, d, itemsize=itemsize),
                      f"P ({m:,} contexts x {V:,} tokens)": nbytes(m, V, itemsize=itemsize + 1)},
                     f"the NTP data of {m:,} contexts",
                     hint="use fewer contexts (--context-length, --max-context) or a smaller embedding "
                          "(gaussian:d=...)")
        H = embedding.matrix(m, dtype=dtype)
        return NTPData.from_samples(
            self.context_ids, self.next_tokens, H, V=len(self.vocab), vocab=self.vocab, contexts=self.contexts,
            context_lengths=self.context_lengths if autoregressive else None, dtype=dtype,
        )


def _flatten(seqs: list[list[str]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids (flat), vocab (sorted), and line lengths."""
    lengths = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    flat = np.array([tok for s in seqs for tok in s], dtype=str)
    vocab, ids = np.unique(flat, return_inverse=True)
    return ids.astype(np.int64), vocab, lengths


def kgram_samples(seqs: list[list[str]], K: int, *, source: str = "sequences") -> ContextSamples:
    """Every window of K tokens inside a line is a context; the next token is its label."""
    ids, vocab, lengths = _flatten(seqs)
    return kgram_id_samples(ids, lengths, vocab, K, source=source)


def kgram_id_samples(ids: np.ndarray, lengths: np.ndarray, vocab: np.ndarray, K: int, *,
                     source: str = "sequences") -> ContextSamples:
    """:func:`kgram_samples` for already tokenized lines: every window of K tokens inside a line is a context.

    Parameters
    ----------
    ids : int array (N,)
        Token ids in ``0..V-1`` of all lines, concatenated.
    lengths : int array (L,)
        Tokens per line (they sum to N).
    vocab : str array (V,)
        Token strings (ids index into it; tokens that never occur stay in the vocabulary).

    The contexts are the distinct windows, sorted by their token ids; ``context_tokens`` holds them (m, K).

    Examples
    --------
    >>> s = kgram_id_samples(np.array([0, 1, 0, 1, 2]), np.array([3, 2]), np.array(["a", "b", "c"]), 1)
    >>> s.contexts.tolist(), s.context_ids.tolist(), s.next_tokens.tolist(), s.context_tokens.tolist()
    (['a', 'b'], [0, 1, 1], [1, 0, 2], [[0], [1]])
    """
    if K < 1:
        raise DataError(f"{source}: --context-length must be >= 1, got {K}")
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    vocab = np.asarray(vocab, dtype=str)
    starts_of_line = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    line_of = np.repeat(np.arange(len(lengths)), lengths)
    pos = np.arange(ids.size) - starts_of_line[line_of]
    valid = pos + K < lengths[line_of]
    if not valid.any():
        raise DataError(
            f"{source}: every line is too short for --context-length {K} (a line needs at least {K + 1} "
            f"tokens; the longest has {int(lengths.max())})"
        )
    starts = np.nonzero(valid)[0]
    n = len(starts)
    check_memory({f"windows ({n:,} samples x {K + 1:,} tokens)": nbytes(n, K + 1, itemsize=WINDOW_BYTES),
                  f"context strings ({n:,} x {K:,} tokens)": nbytes(n, K, _longest_token(vocab) + 1,
                                                                     itemsize=STRING_BYTES)},
                 f"{source}: the {K}-token contexts", hint="use a smaller --context-length")
    windows = ids[starts[:, None] + np.arange(K + 1)]
    ctx, ctx_ids = np.unique(windows[:, :K], axis=0, return_inverse=True)
    contexts = vocab[ctx[:, 0]]
    for k in range(1, K):  # loop over the K context positions, vectorized over contexts
        contexts = np.char.add(np.char.add(contexts, " "), vocab[ctx[:, k]])
    skipped = int((lengths <= K).sum())
    return ContextSamples(vocab, contexts, np.full(len(ctx), K), ctx_ids.reshape(-1), windows[:, K], skipped,
                          context_tokens=ctx)


def autoregressive_samples(seqs: list[list[str]], *, max_context: int | None = None,
                           source: str = "sequences") -> ContextSamples:
    """Every prefix z_1..z_t (t >= 1, t <= max_context) of every line is a context; z_{t+1} is its label."""
    ids, vocab, lengths = _flatten(seqs)
    return autoregressive_id_samples(ids, lengths, vocab, max_context=max_context, source=source)


def autoregressive_id_samples(ids: np.ndarray, lengths: np.ndarray, vocab: np.ndarray, *,
                              max_context: int | None = None, context_strings: bool = True,
                              source: str = "sequences") -> ContextSamples:
    """:func:`autoregressive_samples` for already tokenized sequences.

    Parameters
    ----------
    ids : int array (N,)
        Token ids in ``0..V-1`` of all sequences, concatenated.
    lengths : int array (L,)
        Length of each sequence (they sum to N).
    vocab : str array (V,)
        Token strings (any order; ids index into it).
    context_strings : bool
        Build the (m,) context strings; ``False`` leaves ``contexts`` None (large corpora: the strings of
        millions of contexts would not fit in memory, and the counts do not need them).
    """
    ids = np.asarray(ids, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    vocab = np.asarray(vocab, dtype=str)
    if (lengths >= 2).sum() == 0:
        raise DataError(f"{source}: autoregressive data need lines of at least 2 tokens; every line has 1")
    if max_context is not None and max_context < 1:
        raise DataError(f"{source}: --max-context must be >= 1, got {max_context}")
    T = int(lengths.max()) - 1 if max_context is None else min(int(lengths.max()) - 1, max_context)
    starts_of_line = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    per_line = np.clip(lengths - 1, 0, T)  # samples of each line
    n = int(per_line.sum())
    parts = {f"{n:,} samples (ids, next tokens, lengths)": nbytes(n, 4)}
    if context_strings:  # at most n contexts, as wide as the longest prefix (its characters and spaces)
        chars = np.concatenate([[0], np.cumsum(np.char.str_len(vocab)[ids] if len(ids) else [])])
        width = int((chars[starts_of_line + per_line] - chars[starts_of_line] + per_line).max())
        parts[f"context strings (up to {n:,} prefixes of up to {width:,} characters)"] = nbytes(
            n, width, itemsize=STRING_BYTES)
    check_memory(parts, f"{source}: the autoregressive contexts (every prefix of every line, up to {T:,} tokens)",
                 hint="use --max-context, or split long lines")
    V = len(vocab)
    offset = 0
    prefix = np.zeros(len(lengths), dtype=np.int64)  # id (within length t-1) of each line's prefix
    all_contexts, all_lengths, ctx_ids, next_tokens = [], [], [], []
    prev_strings = np.array([""], dtype=str)
    for t in range(1, T + 1):  # loop over prefix lengths, vectorized over lines
        alive = np.nonzero(lengths > t)[0]  # lines with a prefix of length t and a next token
        tok = ids[starts_of_line[alive] + t - 1]
        key = prefix[alive] * V + tok
        uniq, inv = np.unique(key, return_inverse=True)
        if context_strings:
            strings = vocab[uniq % V] if t == 1 else np.char.add(np.char.add(prev_strings[uniq // V], " "),
                                                                   vocab[uniq % V])
            all_contexts.append(strings)
            prev_strings = strings
        all_lengths.append(np.full(len(uniq), t))
        ctx_ids.append(offset + inv.reshape(-1))
        next_tokens.append(ids[starts_of_line[alive] + t])
        prefix = np.zeros(len(lengths), dtype=np.int64)
        prefix[alive] = inv.reshape(-1)
        offset += len(uniq)
    skipped = int((lengths < 2).sum())
    contexts = np.concatenate(all_contexts) if context_strings else None
    return ContextSamples(vocab, contexts, np.concatenate(all_lengths),
                          np.concatenate(ctx_ids), np.concatenate(next_tokens), skipped)


def load_sequences(path: str | os.PathLike, *, context_length: int | None = None, autoregressive: bool = False,
                   max_context: int | None = None, embedding: EmbeddingSpec | str = "onehot",
                   dtype: torch.dtype = DEFAULT_DTYPE) -> NTPData:
    """Read a sequences file and build NTP data (exactly one of ``context_length`` / ``autoregressive``)."""
    if (context_length is None) == (not autoregressive):
        raise DataError(f"{path}: a sequences file needs exactly one of --context-length K or --autoregressive")
    seqs = read_sequences(path)
    if autoregressive:
        samples = autoregressive_samples(seqs, max_context=max_context, source=str(path))
    else:
        samples = kgram_samples(seqs, context_length, source=str(path))
    return samples.to_data(embedding, dtype=dtype, autoregressive=autoregressive)
