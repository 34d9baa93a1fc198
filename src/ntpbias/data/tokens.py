"""Labelled token sequences (the attention paper's classification data, spec attention_embeddings.md §1).

A dataset of n sequences over a vocabulary of |S| tokens, padded to a common length T, with labels ±1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE, to_numpy
from ..errors import DataError


@dataclass(frozen=True, eq=False)
class TokenSequences:
    """n labelled token sequences, padded.

    Attributes
    ----------
    X : LongTensor (n, T)
        Token ids in ``0..num_tokens-1``; padded positions hold 0.
    mask : BoolTensor (n, T)
        True at real tokens, False at padding. Every row has at least one real token.
    y : Tensor (n,)
        Labels in {-1, +1} (float64).
    num_tokens : int
        Vocabulary size |S|.
    vocab : tuple of str or None
        Token strings, when known.

    Examples
    --------
    >>> ds = TokenSequences.from_lists([[0, 1, 1], [2]], [1, -1], num_tokens=3)
    >>> ds.X.tolist(), ds.mask.tolist(), ds.lengths.tolist()
    ([[0, 1, 1], [2, 0, 0]], [[True, True, True], [True, False, False]], [3, 1])
    """

    X: torch.Tensor
    mask: torch.Tensor
    y: torch.Tensor
    num_tokens: int
    vocab: tuple[str, ...] | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def T(self) -> int:
        return self.X.shape[1]

    @property
    def lengths(self) -> torch.Tensor:
        """(n,) number of real tokens per sequence."""
        return self.mask.sum(dim=1)

    @classmethod
    def from_lists(cls, sequences: Sequence[Sequence[int]], labels, *, num_tokens: int | None = None,
                   vocab: Sequence[str] | None = None, source: str = "sequences") -> TokenSequences:
        """Pad variable-length id lists; labels ±1, or 0/1 (mapped 0 -> -1)."""
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        if lengths.size == 0:
            raise DataError(f"{source}: the dataset is empty (no sequences)")
        if (lengths == 0).any():
            raise DataError(f"{source}: sequence {int(np.argmax(lengths == 0))} is empty")
        T = int(lengths.max())
        mask = np.arange(T)[None, :] < lengths[:, None]
        X = np.zeros((lengths.size, T), dtype=np.int64)
        X[mask] = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences])
        return cls.from_arrays(X, labels, mask=mask, num_tokens=num_tokens, vocab=vocab, source=source)

    @classmethod
    def from_arrays(cls, X, y, *, mask=None, num_tokens: int | None = None, vocab: Sequence[str] | None = None,
                    source: str = "sequences") -> TokenSequences:
        """Validate (n, T) ids, optional (n, T) mask (all True if omitted), and labels ±1 (or 0/1)."""
        X = np.asarray(to_numpy(X))
        if X.ndim != 2 or X.shape[0] == 0 or X.shape[1] == 0:
            raise DataError(f"{source}: token ids must be a non-empty (n, T) array, got shape {X.shape}")
        if X.dtype.kind not in "iu":
            raise DataError(f"{source}: token ids must be integers, got dtype {X.dtype}")
        mask = np.ones(X.shape, dtype=bool) if mask is None else np.asarray(to_numpy(mask), dtype=bool)
        if mask.shape != X.shape:
            raise DataError(f"{source}: mask has shape {mask.shape} but the ids have shape {X.shape}")
        if not mask.any(axis=1).all():
            raise DataError(f"{source}: sequence {int(np.argmin(mask.any(axis=1)))} has no real token")
        if vocab is not None:
            vocab = tuple(str(v) for v in vocab)
            num_tokens = num_tokens or len(vocab)
        real = X[mask]
        if num_tokens is None:
            num_tokens = int(real.max()) + 1
        if real.min() < 0 or real.max() >= num_tokens:
            raise DataError(f"{source}: token ids must lie in 0..{num_tokens - 1}; found {int(real.min())}.."
                            f"{int(real.max())} (tokens outside the vocabulary)")
        y = np.asarray(to_numpy(y), dtype=np.float64).reshape(-1)
        if y.shape[0] != X.shape[0]:
            raise DataError(f"{source}: {y.shape[0]} labels for {X.shape[0]} sequences")
        values = set(np.unique(y).tolist())
        if values <= {0.0, 1.0} and 0.0 in values:
            y = 2 * y - 1  # 0/1 labels -> -1/+1
        elif not values <= {-1.0, 1.0}:
            raise DataError(f"{source}: labels must be -1/+1 (or 0/1); found {sorted(values)[:5]}")
        X = np.where(mask, X, 0)
        return cls(X=torch.as_tensor(X), mask=torch.as_tensor(mask), y=torch.as_tensor(y, dtype=DEFAULT_DTYPE),
                   num_tokens=int(num_tokens), vocab=vocab)
