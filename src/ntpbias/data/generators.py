"""Random realizable datasets for paper C's experiments (Sec. 7), each checked against Assumptions 1 and 3.

The generators build :class:`~ntpbias.data.sentences.NTPSamples` and run every output through
:func:`ntpbias.data.structure.analyze_structure`: a dataset that violates an assumption is a bug, never silent.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .sentences import NTPSamples
from .structure import analyze_structure


def _random_collocation(rng: np.random.Generator, V: int, derangement: bool) -> np.ndarray:
    """A uniformly random permutation of range(V), rejected until it has no fixed point if ``derangement``."""
    while True:
        n = rng.permutation(V)
        if not derangement or not (n == np.arange(V)).any():
            return n


def _check_generated(samples: NTPSamples) -> NTPSamples:
    """Every generator output goes through the assumption checker; a failure is a bug, never silent."""
    structure = analyze_structure(samples)
    if not structure.assumptions_hold:
        raise RuntimeError(f"generator bug: {samples.source} violates {structure.failure_message()}")
    return samples


def generate_sentences(V: int = 20, *, L_max: int = 8, r_max: int = 1, seed: int = 0,
                       derangement: bool = True, max_tries: int = 1000) -> NTPSamples:
    """Random prefix-closed realizable dataset, generator "sentences" of docs/paper-c-transformer.md#objects (the
    default of Sec. 7).

    One maximal sentence per start token (in random order), each continued greedily: the label of a prefix X
    with query q is n(u) for a uniformly chosen candidate u that keeps every order free of confused tokens
    (u not yet below anything under q, no other token of X above something under q) and satisfies
    Assumption 3 (u is a most frequent token of X). A sentence stops at a random target input length in
    1..``L_max`` or when no candidate exists. Each sentence is repeated r ~ U{1..r_max} times (π). Datasets
    whose orders are all empty are redrawn. The output passes Assumptions 1 and 3 (checked).

    Parameters
    ----------
    V : vocabulary size |V| (>= 2). L_max : longest input length (>= 1). r_max : largest sentence multiplicity.
    seed : drives every random choice. derangement : collocation without fixed points
    (docs/paper-c-transformer.md#decisions). max_tries : redraws allowed before giving up (a :class:`ConfigError`).

    Examples
    --------
    >>> ds = generate_sentences(8, L_max=4, seed=1)
    >>> ds.V, ds.L_max <= 4, len(ds.sentences) == 8
    (8, True, True)
    """
    _check_params(V=V, L_max=L_max, r_max=r_max, max_tries=max_tries)
    rng = np.random.default_rng(seed)
    vocab = tuple(f"t{i}" for i in range(V))
    for _ in range(max_tries):
        n = _random_collocation(rng, V, derangement)
        win: list[set[int]] = [set() for _ in range(V)]
        lose: list[set[int]] = [set() for _ in range(V)]
        sentences, counts = [], []
        for x1 in rng.permutation(V):  # sequential by nature: each label constrains the next
            target = int(rng.integers(1, L_max + 1))
            counts.append(int(rng.integers(1, r_max + 1)))
            X = [int(x1)]
            while True:
                if len(X) == 1:
                    y = int(n[X[0]])
                else:
                    q, toks = X[-1], sorted(set(X))
                    cnt = {t: X.count(t) for t in toks}
                    top = max(cnt.values())
                    cand = [u for u in toks if u not in lose[q] and cnt[u] == top
                            and not (set(toks) - {u}) & win[q]]
                    if not cand:
                        break  # the sentence ends with X; X itself is not a sample
                    u = cand[int(rng.integers(len(cand)))]
                    if len(toks) > 1:
                        win[q].add(u)
                        lose[q].update(set(toks) - {u})
                    y = int(n[u])
                if len(X) == target:
                    X.append(y)
                    break
                X.append(y)
            sentences.append([vocab[t] for t in X])
        if any(win):
            source = f"generate_sentences(V={V}, L_max={L_max}, r_max={r_max}, seed={seed})"
            return _check_generated(NTPSamples.from_sentences(sentences, counts=counts, vocab=vocab, source=source))
    raise ConfigError(f"generate_sentences: no dataset with a non-empty order in {max_tries} tries "
                      f"(V={V}, L_max={L_max}); increase V or L_max")


def generate_samples(V: int = 20, *, p_self: float = 0.5, k_max: int = 3, m_max: int = 5, r_max: int = 4,
                     seed: int = 0, derangement: bool = True) -> NTPSamples:
    """Random realizable dataset from a collocation and intended orders, generator "samples" of
    docs/paper-c-transformer.md#objects.

    Not prefix-closed. For each query q: with probability ``p_self`` the query is the optimal token
    (O_q = {q}, N_q = m tokens != q), else O_q = k tokens != q and N_q = {q} plus m - 1 further tokens
    (k ~ U{1..k_max}, m ~ U{1..m_max}, clipped to fit |V|). Each optimal u gets r ~ U{1..r_max} samples
    [shuffled {u} ∪ S, q] -> n(u) with S a random subset of N_q \\ {q} (for u = q: [shuffled S, q], S non-empty);
    identical draws add to the multiplicity. Plus the |V| one-token samples [x] -> n(x). Every token occurs
    at most once per sample (Assumption 3); |O_q| >= 2 is common, which exercises Proposition 2.

    Examples
    --------
    >>> ds = generate_samples(6, seed=0)
    >>> ds.V, int((ds.lengths == 1).sum())
    (6, 6)
    """
    _check_params(V=V, k_max=k_max, m_max=m_max, r_max=r_max)
    if not 0.0 <= p_self <= 1.0:
        raise ConfigError(f"generate_samples: p_self must lie in [0, 1], got {p_self}")
    rng = np.random.default_rng(seed)
    n = _random_collocation(rng, V, derangement)
    inputs = [[x] for x in range(V)]
    labels = [int(v) for v in n]
    for q in range(V):
        others = rng.permutation(np.delete(np.arange(V), q)).tolist()
        m = int(rng.integers(1, m_max + 1))
        if rng.random() < p_self:
            optimal, rest = [q], others[: min(m, V - 1)]
        else:
            k = min(int(rng.integers(1, k_max + 1)), V - 1)
            optimal, rest = others[:k], others[k: k + min(m - 1, V - 1 - k)]
        for u in optimal:
            for _ in range(int(rng.integers(1, r_max + 1))):
                S = rng.permutation(rest)[: int(rng.integers(0, len(rest) + 1))].tolist() if rest else []
                if u == q and not S:
                    continue
                body = S if u == q else [u, *S]
                inputs.append([*rng.permutation(body).tolist(), q])
                labels.append(int(n[u]))
    source = f"generate_samples(V={V}, p_self={p_self}, k_max={k_max}, m_max={m_max}, r_max={r_max}, seed={seed})"
    vocab = tuple(f"t{i}" for i in range(V))
    return _check_generated(NTPSamples.from_samples(inputs, labels, vocab=vocab, source=source))


def _check_params(**params: int) -> None:
    low = {"V": 2}
    for name, value in params.items():
        if not isinstance(value, (int, np.integer)) or value < low.get(name, 1):
            raise ConfigError(f"generator parameter {name} must be an integer >= {low.get(name, 1)}, got {value!r}")
