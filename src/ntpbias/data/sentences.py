"""Training sentences of the transformer paper (004) as distinct samples with frequencies.

Sentences file format (the README's "File formats"): one training sentence per line, whitespace-separated tokens, blank
lines ignored. Every prefix [x_1..x_l] (1 <= l < L) of a sentence [x_1..x_L] is a training sample whose label is the
next token x_{l+1} (prefix closure, Sec. 3). The multiset D_0 of samples is summarized by its distinct
(input, label) pairs with multiplicities; π^(n) = multiplicity / |D_0| (eq. 1). Under realizability every
distinct input has one label; inputs with two labels are kept (the loss stays well defined) and reported by the
structure checker (:mod:`ntpbias.data.structure`).

Also here: Example 1 (Sec. 4.1), the Example-2 generalization inputs (Sec. 6), the Proposition-2
counterexample (docs/paper-c-transformer.md#objects), and the two random realizable-dataset generators of
docs/paper-c-transformer.md#objects. Token ids are 0-based; the vocabulary is in order of first appearance unless given.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE, to_numpy
from ..errors import DataError
from ..limits import check_memory, nbytes
from .config import BUILTIN_SENTENCES
from .sequences import read_sequences


@dataclass(frozen=True, eq=False)
class NTPSamples:
    """Distinct (input sequence, next token) samples of a next-token-prediction training set, with multiplicities.

    Build it with :meth:`from_sentences`, :meth:`from_file`, :meth:`from_samples` or :meth:`from_arrays`;
    the constructors validate once, merge duplicate (input, label) pairs, and keep samples in order of first
    appearance.

    Attributes
    ----------
    X : LongTensor (N, L)
        Input token ids, left-aligned, padded with 0; L = L_max, the longest input.
    mask : BoolTensor (N, L)
        True at real tokens. Row n has ``lengths[n] >= 1`` leading True entries.
    y : LongTensor (N,)
        Label (next token) of each sample.
    counts : LongTensor (N,)
        Multiplicity of each (input, label) pair in the multiset D_0.
    vocab : tuple of str
        Token names; id i is ``vocab[i]``.
    sentences : tuple of str
        The source sentences (tokens joined by spaces) when built from sentences, else empty.
    first_sentence : LongTensor (N,) or None
        Index into ``sentences`` of the first sentence that contains sample n.
    source : str
        Where the data came from (a path or a generator description), used in messages.

    Examples
    --------
    >>> ds = NTPSamples.from_sentences([["a", "b", "c"], ["b", "c"]])
    >>> ds.N, ds.L_max, ds.vocab, [ds.sample_text(n) for n in range(ds.N)]
    (3, 2, ('a', 'b', 'c'), ['a -> b', 'a b -> c', 'b -> c'])
    """

    X: torch.Tensor
    mask: torch.Tensor
    y: torch.Tensor
    counts: torch.Tensor
    vocab: tuple[str, ...]
    sentences: tuple[str, ...] = ()
    first_sentence: torch.Tensor | None = None
    source: str = "samples"

    # ------------------------------------------------------------------ sizes
    @property
    def N(self) -> int:
        """Number of distinct (input, label) pairs."""
        return self.X.shape[0]

    @property
    def L_max(self) -> int:
        """Longest input length (decision C-D4: L_max := max_n L^(n) in every bound)."""
        return self.X.shape[1]

    @property
    def V(self) -> int:
        """Vocabulary size |V|."""
        return len(self.vocab)

    @property
    def lengths(self) -> torch.Tensor:
        """(N,) input lengths L^(n)."""
        return self.mask.sum(1)

    @property
    def queries(self) -> torch.Tensor:
        """(N,) query token x_L^(n) (the last input token) of each sample."""
        return self.X.gather(1, (self.lengths - 1)[:, None])[:, 0]

    @property
    def total(self) -> int:
        """|D_0|, the number of samples counted with multiplicity."""
        return int(self.counts.sum())

    @property
    def pi(self) -> torch.Tensor:
        """(N,) float64 frequencies π^(n) = counts / |D_0| (eq. 1)."""
        return self.counts.to(DEFAULT_DTYPE) / self.total

    # ------------------------------------------------------------------ names
    def encode(self, tokens: Sequence[str | int], *, what: str = "input") -> list[int]:
        """Token names (or ids) -> ids; an unknown token is a :class:`DataError` naming the vocabulary."""
        return _encode(tokens, self.vocab, self.source, what)

    def text(self, ids) -> str:
        """Token ids -> names joined by spaces."""
        return " ".join(self.vocab[int(i)] for i in np.atleast_1d(to_numpy(ids)))

    def input_ids(self, n: int) -> list[int]:
        """The input token ids of sample n (without padding)."""
        return self.X[n, : int(self.lengths[n])].tolist()

    def sample_text(self, n: int) -> str:
        """Sample n as ``"x_1 .. x_L -> label"``."""
        return f"{self.text(self.input_ids(n))} -> {self.vocab[int(self.y[n])]}"

    def sentence_of(self, n: int) -> dict:
        """Where sample n comes from: ``{"sentence": 1-based index, "text": ...}``, or the sample itself."""
        if self.first_sentence is None:
            return {"sentence": None, "text": self.sample_text(n)}
        s = int(self.first_sentence[n])
        return {"sentence": s + 1, "text": self.sentences[s]}

    def to_dict(self) -> dict:
        """JSON-ready summary: sizes and every distinct sample with its count and π."""
        pi = self.pi.tolist()
        return {
            "source": self.source, "vocab": list(self.vocab), "V": self.V, "N": self.N, "total": self.total,
            "L_max": self.L_max, "n_sentences": len(self.sentences),
            "samples": [{"input": self.text(self.input_ids(n)), "label": self.vocab[int(self.y[n])],
                         "count": int(self.counts[n]), "pi": pi[n]} for n in range(self.N)],
        }

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_file(cls, path: str | os.PathLike) -> NTPSamples:
        """Read a sentences ``.txt`` file (one sentence per line; every prefix is a sample)."""
        return cls.from_sentences(read_sequences(path), source=str(path))

    @classmethod
    def from_sentences(cls, sentences: Sequence[Sequence[str]], *, counts: Sequence[int] | None = None,
                       vocab: Sequence[str] | None = None, source: str = "sentences") -> NTPSamples:
        """All prefixes of the given sentences (each sentence counted ``counts[i]`` times, default 1).

        A one-token sentence yields no sample (its token still joins the vocabulary).
        """
        sentences = [[str(t) for t in s] for s in sentences]
        if not sentences or not any(sentences):
            raise DataError(f"{source}: no sentences (the file is empty)")
        if any(not s for s in sentences):
            raise DataError(f"{source}: sentence {next(i for i, s in enumerate(sentences) if not s) + 1} is empty")
        vocab = _vocabulary([t for s in sentences for t in s], vocab, source)
        lengths = np.fromiter((len(s) for s in sentences), dtype=np.int64, count=len(sentences))
        if lengths.max() < 2:
            raise DataError(f"{source}: every sentence has a single token, so there is no (input, next token) "
                            "sample; a sentence needs at least 2 tokens")
        counts = _counts(counts, len(sentences), source, "sentences")
        _check_padded(int((lengths - 1).sum()), int(lengths.max()) - 1, source)
        index = {t: i for i, t in enumerate(vocab)}
        S = np.zeros((len(sentences), int(lengths.max())), dtype=np.int64)
        S[np.arange(S.shape[1])[None, :] < lengths[:, None]] = [index[t] for s in sentences for t in s]
        L = S.shape[1] - 1
        # raw sample (i, l): input S[i, :l], label S[i, l], for 1 <= l < lengths[i]; sentence-major order
        ell = np.arange(1, L + 1)
        valid = ell[None, :] < lengths[:, None]  # (n_sent, L)
        sent, col = np.nonzero(valid)
        X = np.where(np.arange(L)[None, :] < ell[col][:, None], S[sent, :L], 0)
        mask = np.arange(L)[None, :] < ell[col][:, None]
        return cls._from_raw(X, mask, S[sent, ell[col]], counts[sent], vocab, source,
                             sentences=tuple(" ".join(s) for s in sentences), sentence_ids=sent)

    @classmethod
    def from_samples(cls, inputs: Sequence[Sequence[str | int]], labels: Sequence[str | int], *,
                     counts: Sequence[int] | None = None, vocab: Sequence[str] | None = None,
                     source: str = "samples") -> NTPSamples:
        """Samples given directly as (input, label) pairs (not necessarily prefix-closed).

        Tokens are names (vocabulary in order of first appearance unless ``vocab`` is given) or integer ids
        (into ``vocab`` if given, else the vocabulary is ``t0, t1, ...`` up to the largest id).
        """
        if len(inputs) == 0:
            raise DataError(f"{source}: the dataset is empty (no samples)")
        if len(labels) != len(inputs):
            raise DataError(f"{source}: {len(labels)} labels for {len(inputs)} inputs")
        if any(len(x) == 0 for x in inputs):
            raise DataError(f"{source}: input {next(i for i, x in enumerate(inputs) if len(x) == 0)} is empty")
        if vocab is None:
            tokens = [t for x, y in zip(inputs, labels, strict=True) for t in (*x, y)]
            if all(isinstance(t, (int, np.integer)) for t in tokens):
                vocab = [f"t{i}" for i in range(max(0, *tokens) + 1)]
            tokens = [str(t) for t in tokens] if vocab is None else []
            vocab = _vocabulary(tokens, vocab, source)
        else:
            vocab = _vocabulary([], vocab, source)
        ids = [_encode(x, vocab, source, "input") for x in inputs]
        y = np.asarray(_encode(labels, vocab, source, "labels"), dtype=np.int64)
        lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))
        _check_padded(len(ids), int(lengths.max()), source)
        mask = np.arange(lengths.max())[None, :] < lengths[:, None]
        X = np.zeros(mask.shape, dtype=np.int64)
        X[mask] = [t for x in ids for t in x]
        return cls._from_raw(X, mask, y, _counts(counts, len(ids), source, "samples"), vocab, source)

    @classmethod
    def from_arrays(cls, X, y, *, mask=None, counts=None, vocab: Sequence[str] | None = None,
                    source: str = "arrays") -> NTPSamples:
        """Validate (N, L) integer inputs, optional (N, L) left-aligned mask, (N,) labels, optional counts."""
        X = np.asarray(to_numpy(X))
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise DataError(f"{source}: inputs must be a non-empty (N, L) array, got shape {X.shape}")
        if X.dtype.kind not in "iu":
            raise DataError(f"{source}: token ids must be integers, got dtype {X.dtype}")
        mask = np.ones(X.shape, dtype=bool) if mask is None else np.asarray(to_numpy(mask), dtype=bool)
        if mask.shape != X.shape:
            raise DataError(f"{source}: mask has shape {mask.shape} but the inputs have shape {X.shape}")
        lengths = mask.sum(1)
        if (lengths == 0).any() or not np.array_equal(mask, np.arange(X.shape[1])[None, :] < lengths[:, None]):
            raise DataError(f"{source}: every mask row must be a non-empty run of True followed by False (padding)")
        y = np.asarray(to_numpy(y)).reshape(-1)
        if y.shape[0] != X.shape[0] or y.dtype.kind not in "iu":
            raise DataError(f"{source}: expected {X.shape[0]} integer labels, got {y.shape[0]} of dtype {y.dtype}")
        V = len(vocab) if vocab is not None else int(max(X[mask].max(), y.max())) + 1
        vocab = _vocabulary([], vocab if vocab is not None else [f"t{i}" for i in range(V)], source)
        lo, hi = min(X[mask].min(), y.min()), max(X[mask].max(), y.max())
        if lo < 0 or hi >= len(vocab):
            raise DataError(f"{source}: token ids must lie in 0..{len(vocab) - 1}; found {lo}..{hi}")
        return cls._from_raw(np.where(mask, X, 0), mask, y.astype(np.int64),
                             _counts(counts, X.shape[0], source, "samples"), vocab, source)

    @classmethod
    def _from_raw(cls, X, mask, y, counts, vocab, source, *, sentences=(), sentence_ids=None) -> NTPSamples:
        """Merge duplicate (input, label) rows of raw samples (summing counts), keep first-appearance order."""
        lengths = mask.sum(1)
        L = int(lengths.max())
        keys = np.concatenate([lengths[:, None], X[:, :L], y[:, None]], axis=1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # distinct rows in order of first appearance
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        inverse = rank[inverse.reshape(-1)]
        first = first[order]
        merged = np.bincount(inverse, weights=counts, minlength=first.size).astype(np.int64)
        return cls(
            X=torch.as_tensor(X[first, :L]), mask=torch.as_tensor(mask[first, :L]), y=torch.as_tensor(y[first]),
            counts=torch.as_tensor(merged), vocab=vocab, sentences=tuple(sentences),
            first_sentence=None if sentence_ids is None else torch.as_tensor(sentence_ids[first]), source=source,
        )


#: bytes per entry of the padded (N, L) sample arrays while they are built and merged (ids, mask, sort keys, copies)
PADDED_BYTES_PER_ENTRY = 40


def _check_padded(N: int, L: int, source: str) -> None:
    """The memory preflight of N samples padded to length L (every input of a long sentence is a sample)."""
    check_memory({f"{N:,} samples padded to {L:,} tokens": nbytes(N, L, itemsize=PADDED_BYTES_PER_ENTRY)},
                 f"{source}: the samples", hint="split long sentences into shorter lines")


def _vocabulary(tokens: list[str], vocab: Sequence[str] | None, source: str) -> tuple[str, ...]:
    """The vocabulary: ``vocab`` if given (checked), else tokens in order of first appearance; needs >= 2 tokens."""
    if vocab is None:
        vocab = tuple(dict.fromkeys(tokens))
    else:
        vocab = tuple(str(v) for v in vocab)
        if len(set(vocab)) != len(vocab):
            raise DataError(f"{source}: the vocabulary lists a token twice")
        unknown = sorted(set(tokens) - set(vocab))
        if unknown:
            raise DataError(f"{source}: tokens {_preview(unknown)} are not in the given vocabulary")
    if len(vocab) < 2:
        raise DataError(f"{source}: the vocabulary has {len(vocab)} token(s) ({_preview(vocab)}); next-token "
                        "prediction needs at least 2 distinct tokens")
    return vocab


def _encode(tokens: Sequence[str | int], vocab: tuple[str, ...], source: str, what: str) -> list[int]:
    index = {t: i for i, t in enumerate(vocab)}
    ids = []
    for tok in tokens:
        if isinstance(tok, (int, np.integer)) and not isinstance(tok, bool):
            if not 0 <= tok < len(vocab):
                raise DataError(f"{source}: token id {tok} in the {what} is outside 0..{len(vocab) - 1}")
            ids.append(int(tok))
        elif tok in index:
            ids.append(index[tok])
        else:
            raise DataError(f"{source}: token {tok!r} in the {what} is not in the vocabulary ({_preview(vocab)}); "
                            "use tokens seen in the training data")
    return ids


def _counts(counts, n: int, source: str, what: str) -> np.ndarray:
    if counts is None:
        return np.ones(n, dtype=np.int64)
    counts = np.asarray(counts)
    if counts.shape != (n,) or counts.dtype.kind not in "iu" or (counts < 1).any():
        raise DataError(f"{source}: counts must be {n} positive integers (one per {what[:-1]})")
    return counts.astype(np.int64)


def _preview(items, k: int = 8) -> str:
    items = list(items)
    shown = ", ".join(map(str, items[:k]))
    return shown + (f", ... ({len(items)} in all)" if len(items) > k else "")


# ---------------------------------------------------------------------------------------------- the paper's data
#: Example 1 (Sec. 4.1): tokens S, V, O, P (ids 0..3) and the sentences SVOP, VOP, OPP, PSV.
EXAMPLE1_SENTENCES = (("S", "V", "O", "P"), ("V", "O", "P"), ("O", "P", "P"), ("P", "S", "V"))

#: Example 2 (Sec. 6, docs/paper-c-transformer.md#objects): unseen inputs after training on Example 1 and the token
#: Theorem 3 predicts.
EXAMPLE2_INPUTS = ((("S", "P"), "V"), (("O", "S", "P"), "P"), (("V", "P"), "O"))


def example1() -> NTPSamples:
    """Example 1 of Sec. 4.1: N = 9 distinct samples, each π = 1/9, L_max = 3, collocation S->V->O->P->S.

    >>> ds = example1()
    >>> ds.N, ds.L_max, ds.vocab
    (9, 3, ('S', 'V', 'O', 'P'))
    """
    return NTPSamples.from_sentences(EXAMPLE1_SENTENCES, source="example1")


def example2_inputs() -> NTPSamples:
    """The Example-2 inputs SP, OSP, VP (Sec. 6) labelled with Theorem 3's predictions V, P, O (Example 1 tokens)."""
    inputs, labels = zip(*EXAMPLE2_INPUTS, strict=True)
    return NTPSamples.from_samples(inputs, labels, vocab=example1().vocab, source="example2")


def prop2_counterexample() -> NTPSamples:
    """The 5-token dataset where Proposition 2's closed form is not the QP solution
    (docs/paper-c-transformer.md#objects).

    n = a->b, b->c, c->d, d->q, q->a; samples: the five one-token samples, [a,b,c,q] -> b, [d,q] -> q (π = 1/7).
    Under query q: O = {a, d}, N = {b, c, q}; the QP column is (2/3, -1/3, -1/3, 1/2, -1/2), Prop. 2's
    (3/5, -2/5, -2/5, 3/5, -2/5).
    """
    vocab = ("a", "b", "c", "d", "q")
    inputs = [["a"], ["b"], ["c"], ["d"], ["q"], ["a", "b", "c", "q"], ["d", "q"]]
    labels = ["b", "c", "d", "q", "a", "b", "q"]
    return NTPSamples.from_samples(inputs, labels, vocab=vocab, source="prop2-counterexample")


#: Built-in datasets by name (the ``structure`` command accepts these instead of a file).
BUILTIN = dict(zip(BUILTIN_SENTENCES, (example1, prop2_counterexample), strict=True))
