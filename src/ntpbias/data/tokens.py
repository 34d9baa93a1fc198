"""Labelled token sequences: paper B's classification data (Sec. 5; docs/paper-b-attention.md#objects).

A dataset of n sequences over a vocabulary of |S| tokens, padded to a common length T, with labels ±1
(:class:`TokenSequences`); the token statistics of paper B computed on any such dataset (average signed
frequency α_s of eq. (3), posterior difference PD(s) of eq. (18), the token types of Definition 3.1, the
relevant token of each sequence under Assumption 1: :func:`token_statistics`, :func:`relevant_tokens`); and
the paper's two synthetic generators (Assumption-1 data, docs/paper-b-attention.md#setting: :func:`sample_assumption1`;
the K-level model of eqs. (14)-(16) with the corrected law, docs/paper-b-attention.md#setting and #errata:
:class:`KLevelLaw`, :func:`sample_k_level`). Every generator takes one ``seed`` that drives every random choice.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._tensor import DEFAULT_DTYPE, to_numpy
from ..config import Config, setting
from ..errors import ConfigError, DataError


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
    notes : tuple of str
        What validation changed on the way in (e.g. 0/1 labels mapped to -1/+1), for run summaries.

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
    notes: tuple[str, ...] = ()

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

    @property
    def total_tokens(self) -> int:
        """Number of real (non-padding) tokens, nT for fixed-length data (the denominator of eq. (3))."""
        return int(self.mask.sum())

    def to(self, device) -> TokenSequences:
        """The same dataset with its tensors on ``device``."""
        return TokenSequences(X=self.X.to(device), mask=self.mask.to(device), y=self.y.to(device),
                              num_tokens=self.num_tokens, vocab=self.vocab, notes=self.notes)

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
        try:
            X = np.asarray(to_numpy(X))
        except (ValueError, TypeError):
            raise DataError(f"{source}: the sequences have unequal lengths and no padding information; pass "
                            f"padded (n, T) ids with a mask, or use TokenSequences.from_lists") from None
        if X.dtype == object:
            raise DataError(f"{source}: the sequences have unequal lengths and no padding information; pass "
                            f"padded (n, T) ids with a mask, or use TokenSequences.from_lists")
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
        notes: tuple[str, ...] = ()
        if values <= {0.0, 1.0} and 0.0 in values:
            y = 2 * y - 1  # 0/1 labels -> -1/+1
            notes = ("labels given as 0/1 were mapped to -1/+1 (0 -> -1)",)
        elif not values <= {-1.0, 1.0}:
            raise DataError(f"{source}: labels must be -1/+1 (or 0/1); found {sorted(values)[:5]}")
        X = np.where(mask, X, 0)
        return cls(X=torch.as_tensor(X), mask=torch.as_tensor(mask), y=torch.as_tensor(y, dtype=DEFAULT_DTYPE),
                   num_tokens=int(num_tokens), vocab=vocab, notes=notes)


# ---------------------------------------------------------------------------------------------------------------
# Token statistics: eq. (3), eq. (18), Definition 3.1, Assumption 1
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class TokenStatistics:
    """Per-token occurrence counts of a labelled dataset and everything paper B derives from them.

    Counts are over real (non-padding) positions, each occurrence counted (a token repeated in a sequence
    counts as often as it appears). Types are defined on *present* tokens only (count > 0): a vocabulary
    entry that never occurs has α = 0 but is not called irrelevant (it gets no gradient,
    docs/paper-b-attention.md#objects).

    Attributes
    ----------
    count_pos, count_neg : LongTensor (|S|,)
        Occurrences in sequences labelled +1 and -1.
    total_tokens : int
        Number of real tokens in the dataset (nT for fixed length; docs/paper-b-attention.md#decisions for variable
        length).

    Examples
    --------
    >>> ds = TokenSequences.from_lists([[0, 2, 2], [1, 2], [0, 3]], [1, -1, 1], num_tokens=5)
    >>> st = token_statistics(ds)
    >>> st.count.tolist(), st.alpha.mul(7).tolist()
    ([2, 1, 3, 1, 0], [2.0, -1.0, 1.0, 1.0, 0.0])
    >>> st.completely_positive.tolist(), st.irrelevant.tolist()
    ([True, False, False, True, False], [False, False, False, False, False])
    """

    count_pos: torch.Tensor
    count_neg: torch.Tensor
    total_tokens: int

    @property
    def count(self) -> torch.Tensor:
        """(|S|,) total occurrences c_s."""
        return self.count_pos + self.count_neg

    @property
    def present(self) -> torch.Tensor:
        """(|S|,) bool, c_s > 0."""
        return self.count > 0

    @property
    def alpha(self) -> torch.Tensor:
        """(|S|,) average signed frequency α_s = Σ_D y #{i: x_i = s} / (total tokens), eq. (3) (float64)."""
        return (self.count_pos - self.count_neg).to(DEFAULT_DTYPE) / self.total_tokens

    @property
    def posterior_difference(self) -> torch.Tensor:
        """(|S|,) PD(s) = P̂(y=+1|s) - P̂(y=-1|s) = Σ y #{x_i=s} / Σ #{x_i=s}, eq. (18); NaN where c_s = 0.

        Relation: α_s = (c_s / total_tokens) PD(s).
        """
        c = self.count.to(DEFAULT_DTYPE)
        return (self.count_pos - self.count_neg).to(DEFAULT_DTYPE) / c  # 0/0 = NaN for absent tokens

    @property
    def positive(self) -> torch.Tensor:
        """(|S|,) bool, α_s > 0 (Definition 3.1)."""
        return self.count_pos > self.count_neg

    @property
    def negative(self) -> torch.Tensor:
        """(|S|,) bool, α_s < 0."""
        return self.count_pos < self.count_neg

    @property
    def irrelevant(self) -> torch.Tensor:
        """(|S|,) bool, α_s = 0 exactly (equal integer counts), among present tokens."""
        return (self.count_pos == self.count_neg) & self.present

    @property
    def completely_positive(self) -> torch.Tensor:
        """(|S|,) bool, the token occurs, and only in sequences labelled +1."""
        return (self.count_pos > 0) & (self.count_neg == 0)

    @property
    def completely_negative(self) -> torch.Tensor:
        """(|S|,) bool, the token occurs, and only in sequences labelled -1."""
        return (self.count_neg > 0) & (self.count_pos == 0)

    @property
    def important(self) -> torch.Tensor:
        """(|S|,) bool, the set S_c of completely positive or completely negative tokens (Theorem 4.3)."""
        return self.completely_positive | self.completely_negative


def token_statistics(ds: TokenSequences) -> TokenStatistics:
    """Per-token counts by label (one ``bincount`` per class) and the derived α, PD and types.

    Parameters
    ----------
    ds : TokenSequences
        Any labelled token dataset (padding is ignored).

    Returns
    -------
    TokenStatistics
    """
    pos = ds.mask & (ds.y > 0)[:, None]
    neg = ds.mask & (ds.y < 0)[:, None]
    count_pos = torch.bincount(ds.X[pos], minlength=ds.num_tokens)
    count_neg = torch.bincount(ds.X[neg], minlength=ds.num_tokens)
    return TokenStatistics(count_pos=count_pos, count_neg=count_neg, total_tokens=ds.total_tokens)


def relevant_tokens(ds: TokenSequences, stats: TokenStatistics | None = None) -> torch.Tensor:
    """The relevant token s_*^X of every sequence under Assumption 1; DataError if the data violate it.

    Assumption 1 (Sec. 4 of paper B; docs/paper-b-attention.md#objects): every sequence has exactly one position holding
    a completely positive or completely negative token, and every other real position holds an irrelevant token (α = 0).

    Parameters
    ----------
    ds : TokenSequences
    stats : TokenStatistics, optional
        ``token_statistics(ds)``, if already computed.

    Returns
    -------
    LongTensor (n,)
        s_*^X per sequence; its sign (completely positive/negative) agrees with the label by construction.

    Examples
    --------
    >>> ds = TokenSequences.from_lists([[0, 2, 3], [1, 3, 2]], [1, -1])
    >>> relevant_tokens(ds).tolist()
    [0, 1]
    """
    stats = token_statistics(ds) if stats is None else stats
    important = stats.important[ds.X] & ds.mask  # (n, T)
    irrelevant = stats.irrelevant[ds.X] & ds.mask
    n_important = important.sum(1)
    bad = (n_important != 1) | ((important | irrelevant) != ds.mask).any(1)
    if bool(bad.any()):
        k = int(torch.nonzero(bad)[0])
        raise DataError(f"sequence {k} violates Assumption 1: it has {int(n_important[k])} completely "
                        f"positive/negative positions (need exactly 1) and "
                        f"{int((ds.mask[k] & ~important[k] & ~irrelevant[k]).sum())} positions holding tokens "
                        f"that are neither irrelevant (alpha = 0) nor completely positive/negative; "
                        f"use data built by sample_assumption1 or check the labels")
    return ds.X.gather(1, important.to(torch.int8).argmax(1, keepdim=True)).squeeze(1)


# ---------------------------------------------------------------------------------------------------------------
# Generators
# ---------------------------------------------------------------------------------------------------------------


def sample_assumption1(n: int = 16, T: int = 6, n_pos: int = 4, n_neg: int = 4, n_irr: int = 12, *, seed: int = 0,
                       round_robin: bool = True) -> TokenSequences:
    """Assumption-1 data with α = 0 exactly on irrelevant tokens (docs/paper-b-attention.md#setting; defaults = the
    "A1-base" setup).

    Token ids: ``[0, n_pos)`` completely positive, ``[n_pos, n_pos + n_neg)`` completely negative, the remaining
    ``n_irr`` irrelevant. For each of the n/2 pairs k a multiset of T - 1 irrelevant tokens is drawn uniformly
    with replacement; row 2k is that multiset plus the positive token ``k mod n_pos`` (label +1), row 2k + 1
    (its twin, label -1) the same multiset plus the negative token ``n_pos + (k mod n_neg)``; each row is put
    in an independent uniformly random order. Every irrelevant token thus occurs equally often in both classes
    (α_s = 0) and a relevant token has α_s = ±(its occurrences)/(nT). With ``round_robin=False`` the relevant
    token of each pair is drawn uniformly instead (imbalanced relevant counts). Vocabulary entries that never
    occur are kept (|S| = n_pos + n_neg + n_irr); they are neither of Definition 3.1's types.

    Examples
    --------
    >>> ds = sample_assumption1(seed=0)
    >>> ds.n, ds.T, ds.num_tokens, ds.y[:4].tolist()
    (16, 6, 20, [1.0, -1.0, 1.0, -1.0])
    >>> st = token_statistics(ds)
    >>> bool((st.alpha[8:] == 0).all()), st.alpha[:8].mul(ds.n * ds.T).tolist()
    (True, [2.0, 2.0, 2.0, 2.0, -2.0, -2.0, -2.0, -2.0])
    """
    if n < 2 or n % 2:
        raise ConfigError(f"sample_assumption1: n must be even and >= 2 (sequences come in twin pairs), got {n}")
    if T < 1:
        raise ConfigError(f"sample_assumption1: T must be >= 1, got {T}")
    if n_pos < 1 or n_neg < 1:
        raise ConfigError(f"sample_assumption1: n_pos and n_neg must be >= 1, got {n_pos}, {n_neg}")
    if n_irr < (1 if T > 1 else 0):
        raise ConfigError(f"sample_assumption1: T = {T} needs n_irr >= 1 irrelevant tokens, got {n_irr}")
    gen = torch.Generator().manual_seed(seed)
    pairs = n // 2
    k = torch.arange(pairs)
    if round_robin:
        pos_tok, neg_tok = k % n_pos, n_pos + k % n_neg
    else:
        pos_tok = torch.randint(n_pos, (pairs,), generator=gen)
        neg_tok = n_pos + torch.randint(n_neg, (pairs,), generator=gen)
    multiset = n_pos + n_neg + torch.randint(max(n_irr, 1), (pairs, T - 1), generator=gen)
    rows = torch.stack([torch.cat([pos_tok[:, None], multiset], 1),
                        torch.cat([neg_tok[:, None], multiset], 1)], 1).reshape(n, T)
    order = torch.argsort(torch.rand(n, T, generator=gen), dim=1)
    X = rows.gather(1, order)
    y = torch.tensor([1.0, -1.0], dtype=DEFAULT_DTYPE).repeat(pairs)
    return TokenSequences.from_arrays(X, y, num_tokens=n_pos + n_neg + n_irr, source="sample_assumption1")


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
        lv = torch.repeat_interleave(torch.arange(1, self.K + 1), torch.tensor(self.level_sizes))
        return torch.cat([torch.zeros(self.irrelevant_size, dtype=torch.int64), lv, lv])

    @property
    def polarity(self) -> torch.Tensor:
        """(|S|,) int64: 0 irrelevant, +1 for S_k^{+1}, -1 for S_k^{-1}."""
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
        d = torch.tensor((0.0, *self.deltas), dtype=DEFAULT_DTYPE)[self.level]  # δ_k per token (0 on S~)
        same = self.delta_tilde * (1 - d) / self.N
        opposite = self.delta_tilde * d / self.N
        irr = torch.full((self.num_tokens,), (1 - self.delta_tilde) / self.irrelevant_size, dtype=DEFAULT_DTYPE)
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


def sample_k_level(law: KLevelLaw | None = None, *, n: int = 4096, T: int = 256, positive_fraction: float = 0.5,
                   exact_balance: bool = True, seed: int = 0) -> TokenSequences:
    """Sample n sequences of T i.i.d. tokens from the K-level law (eq. (15) corrected), Figure 2 of paper B.

    Parameters
    ----------
    law : KLevelLaw, optional
        Defaults to the paper's hyperparameters (|S| = 2048, K = 8, δ~ = 0.05, the eight δ_k).
    n : int
        Number of sequences. The paper does not give it (docs/paper-b-attention.md#decisions); the default 4096 is the
        CPU-feasible choice of decision B-D1.
    T : int
        Sequence length (paper: 256).
    positive_fraction : float
        Class prior P(y = +1). The posterior (16) holds for the default 1/2.
    exact_balance : bool
        True: exactly n · ``positive_fraction`` positive sequences (rounded half up), in random order; False: i.i.d.
        labels with P(y = +1) = ``positive_fraction``.
    seed : int

    Returns
    -------
    TokenSequences (n, T), with ``vocab`` from :meth:`KLevelLaw.vocab`.

    Examples
    --------
    >>> ds = sample_k_level(n=8, T=16, seed=1)
    >>> ds.X.shape, ds.num_tokens, int(ds.y.sum())
    (torch.Size([8, 16]), 2048, 0)
    """
    law = KLevelLaw() if law is None else law
    if n < 1 or T < 1:
        raise ConfigError(f"sample_k_level: n and T must be >= 1, got n={n}, T={T}")
    if not 0.0 <= positive_fraction <= 1.0:
        raise ConfigError(f"sample_k_level: positive_fraction must lie in [0, 1], got {positive_fraction}")
    gen = torch.Generator().manual_seed(seed)
    if exact_balance:
        n_plus = int(math.floor(n * positive_fraction + 0.5))
        labels = torch.cat([torch.ones(n_plus, dtype=torch.bool), torch.zeros(n - n_plus, dtype=torch.bool)])
        labels = labels[torch.randperm(n, generator=gen)]
    else:
        labels = torch.rand(n, generator=gen, dtype=DEFAULT_DTYPE) < positive_fraction
    P = law.probabilities()
    X = torch.empty(n, T, dtype=torch.int64)
    for cls_idx in (0, 1):  # two classes, one multinomial draw each
        rows = labels == bool(cls_idx)
        m = int(rows.sum())
        if m:
            X[rows] = torch.multinomial(P[cls_idx], m * T, replacement=True, generator=gen).view(m, T)
    y = labels.to(DEFAULT_DTYPE) * 2 - 1
    return TokenSequences.from_arrays(X, y, num_tokens=law.num_tokens, vocab=law.vocab(), source="sample_k_level")

