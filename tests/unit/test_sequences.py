"""Token sequences -> distinct-context NTP data (eq. (2) and App. C of paper A), against naive Python references."""

from __future__ import annotations

import math
from collections import Counter, defaultdict

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import logsumexp

from ntpbias.data.sequences import (
    autoregressive_id_samples,
    autoregressive_samples,
    kgram_samples,
    load_sequences,
    read_sequences,
)
from ntpbias.errors import DataError
from ntpbias.geometry.linear.loss import cross_entropy

TOKENS = ["a", "b", "ab", "B", "1", "é", "zz"]
corpora = st.lists(st.lists(st.sampled_from(TOKENS), min_size=1, max_size=7), min_size=1, max_size=6)


# ============================================================================ naive references
def naive_counts(lines, *, K=None, max_context=None):
    """{context tuple: Counter(next token)} by explicit loops over lines and positions."""
    counts = defaultdict(Counter)
    for line in lines:
        for t in range(1, len(line)):
            if K is not None:
                if t >= K:
                    counts[tuple(line[t - K:t])][line[t]] += 1
            elif max_context is None or t <= max_context:
                counts[tuple(line[:t])][line[t]] += 1
    return counts


def check_against_naive(data, lines, counts, *, autoregressive):
    vocab = sorted({tok for line in lines for tok in line})
    contexts = sorted(counts, key=lambda c: (len(c), c))  # by length, then lexicographically by tokens
    n = sum(sum(c.values()) for c in counts.values())
    assert data.vocab == tuple(vocab)
    assert data.contexts == tuple(" ".join(c) for c in contexts)
    assert data.n_samples == n and data.m == len(contexts) and data.V == len(vocab)
    P = np.array([[counts[c][v] / sum(counts[c].values()) for v in vocab] for c in contexts])
    pi = np.array([sum(counts[c].values()) / n for c in contexts])
    np.testing.assert_allclose(data.P.numpy(), P, rtol=1e-15, atol=0)
    np.testing.assert_allclose(data.pi.numpy(), pi, rtol=1e-15, atol=0)
    if autoregressive:
        assert data.context_lengths.tolist() == [len(c) for c in contexts]
    else:
        assert data.context_lengths is None
    assert torch.equal(data.H, torch.eye(data.m, dtype=torch.float64))  # onehot


# ============================================================================ K-gram and autoregressive readers
@given(lines=corpora, K=st.integers(1, 4))
def test_kgram_statistics_match_a_naive_count(lines, K):
    counts = naive_counts(lines, K=K)
    vocab = {tok for line in lines for tok in line}
    if not counts:
        with pytest.raises(DataError, match=f"too short for --context-length {K}"):
            kgram_samples(lines, K)
        return
    samples = kgram_samples(lines, K)
    assert samples.skipped_lines == sum(len(line) <= K for line in lines)
    if len(vocab) < 2:
        with pytest.raises(DataError, match="at least 2 tokens"):
            samples.to_data("onehot")
        return
    check_against_naive(samples.to_data("onehot"), lines, counts, autoregressive=False)


@given(lines=corpora, max_context=st.one_of(st.none(), st.integers(1, 3)))
def test_autoregressive_statistics_match_a_naive_count(lines, max_context):
    counts = naive_counts(lines, max_context=max_context)
    vocab = {tok for line in lines for tok in line}
    if not counts:
        with pytest.raises(DataError, match="at least 2 tokens"):
            autoregressive_samples(lines, max_context=max_context)
        return
    samples = autoregressive_samples(lines, max_context=max_context)
    assert samples.skipped_lines == sum(len(line) < 2 for line in lines)
    if len(vocab) < 2:
        with pytest.raises(DataError, match="at least 2 tokens"):
            samples.to_data("onehot", autoregressive=True)
        return
    data = samples.to_data("onehot", autoregressive=True)
    check_against_naive(data, lines, counts, autoregressive=True)

    # H_t: entropy of the contexts of length t, with π renormalized within that length (App. C, Remark 2)
    expected = {}
    for t in sorted({len(c) for c in counts}):
        ctxs = [c for c in counts if len(c) == t]
        total = sum(sum(counts[c].values()) for c in ctxs)
        expected[t] = -sum(k / total * math.log(k / sum(counts[c].values())) for c in ctxs for k in counts[c].values())
    got = data.entropy_per_length()
    assert got.keys() == expected.keys()
    for t in expected:
        assert got[t] == pytest.approx(expected[t], rel=1e-12, abs=1e-15)


@given(lines=corpora)
def test_id_samples_without_strings_give_the_same_statistics(lines):
    if not naive_counts(lines) or len({tok for line in lines for tok in line}) < 2:
        return
    ref = autoregressive_samples(lines)
    vocab = np.array(sorted({tok for line in lines for tok in line}))
    ids = np.searchsorted(vocab, [tok for line in lines for tok in line])
    fast = autoregressive_id_samples(ids, [len(line) for line in lines], vocab, context_strings=False)
    assert fast.contexts is None
    for name in ("context_lengths", "context_ids", "next_tokens"):
        np.testing.assert_array_equal(getattr(fast, name), getattr(ref, name))
    a, b = fast.to_data("onehot", autoregressive=True), ref.to_data("onehot", autoregressive=True)
    assert torch.equal(a.P, b.P) and torch.equal(a.pi, b.pi) and a.contexts is None


def test_autoregressive_ce_is_the_average_over_all_positions():
    """CE over the multiset of distinct prefixes = (1/#positions) Σ_{lines, t} -log q(z_{t+1} | z_1..z_t)."""
    rng = np.random.default_rng(0)
    lines = [list(rng.choice(["x", "y", "z", "w"], size=rng.integers(2, 7), p=[0.5, 0.3, 0.15, 0.05]))
             for _ in range(25)]
    samples = autoregressive_samples(lines)
    data = samples.to_data("gaussian:d=6,seed=2", autoregressive=True)
    W = torch.randn(data.V, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    row = {c: j for j, c in enumerate(data.contexts)}
    col = {v: i for i, v in enumerate(data.vocab)}
    H, Wn = data.H.numpy(), W.numpy()
    losses = []
    for line in lines:
        for t in range(1, len(line)):
            ell = Wn @ H[row[" ".join(line[:t])]]
            losses.append(logsumexp(ell) - ell[col[line[t]]])
    assert float(cross_entropy(W, data)) == pytest.approx(np.mean(losses), rel=1e-12)
    assert data.n_samples == len(losses)

    # equal-length lines: the same value is the paper's sum over t of per-length CEs, divided by T - 1
    T = 5
    eq_lines = [list(rng.choice(["x", "y", "z"], size=T)) for _ in range(12)]
    data = autoregressive_samples(eq_lines).to_data("gaussian:d=6,seed=2", autoregressive=True)
    W = torch.randn(data.V, data.d, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    lengths = data.context_lengths
    per_t = []
    for t in range(1, T):
        sel = lengths == t
        logp = torch.log_softmax(data.H[sel] @ W.T, dim=-1)
        pi_t = data.pi[sel] / data.pi[sel].sum()  # π̂_{t,j}: frequency among the contexts of length t
        per_t.append(float(-(pi_t * (data.P[sel] * logp).sum(-1)).sum()))
        assert float(data.pi[sel].sum()) == pytest.approx(1 / (T - 1), rel=1e-12)
    assert float(cross_entropy(W, data)) == pytest.approx(sum(per_t) / (T - 1), rel=1e-12)


def test_fixed_length_file_is_the_papers_setting(tmp_path):
    """Lines of exactly K + 1 tokens: one sample per line, contexts = z_{1:K} (paper A's fixed-length setting)."""
    path = tmp_path / "seq.txt"
    path.write_text("the cat sat\nthe cat ran\n\n  the dog sat  \nthe cat sat\n", encoding="utf-8")
    data = load_sequences(path, context_length=2, embedding="gaussian:d=4,seed=0")
    assert data.contexts == ("the cat", "the dog") and data.vocab == ("cat", "dog", "ran", "sat", "the")
    assert data.n_samples == 4 and data.pi.tolist() == [0.75, 0.25]
    np.testing.assert_allclose(data.P.numpy(), [[0, 0, 1 / 3, 2 / 3, 0], [0, 0, 0, 1, 0]], rtol=1e-15)
    assert data.d == 4
    ar = load_sequences(path, autoregressive=True, max_context=1)
    assert ar.contexts == ("the",) and ar.context_lengths.tolist() == [1]


def test_read_sequences_splits_on_any_whitespace(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("a\tb  c\r\n\n   \nd e\n", encoding="utf-8")
    assert read_sequences(path) == [["a", "b", "c"], ["d", "e"]]


# ============================================================================ bad input
@pytest.mark.parametrize(
    "content, kwargs, pattern",
    [
        (None, dict(context_length=1), r"no such file"),
        ("", dict(context_length=1), r"the sequences file is empty"),
        ("  \n\t\n\n", dict(autoregressive=True), r"the sequences file is empty"),
        (b"a b \xff\xfe c\n", dict(context_length=1), r"not UTF-8 text"),
        ("a b\nc d e\n", dict(context_length=3), r"every line is too short for --context-length 3 .*at least 4 "
                                                  r"tokens; the longest has 3"),
        ("a b c\n", dict(context_length=0), r"--context-length must be >= 1, got 0"),
        ("a\nb\nc\n", dict(autoregressive=True), r"need lines of at least 2 tokens"),
        ("a b c\n", dict(autoregressive=True, max_context=0), r"--max-context must be >= 1, got 0"),
        ("a a a\n", dict(context_length=1), r"at least 2 tokens; P has V = 1"),
        ("a b c\n", dict(), r"exactly one of --context-length K or --autoregressive"),
        ("a b c\n", dict(context_length=1, autoregressive=True), r"exactly one of"),
        ("a b c\n", dict(context_length=1, embedding="gaussian:d=0"), r"need d >= 1"),
    ],
    ids=["missing", "empty", "blank-lines", "not-utf8", "too-short", "K=0", "ar-too-short", "max-context=0",
         "one-token-vocab", "no-rule", "two-rules", "bad-embedding"],
)
def test_bad_sequence_files_raise_data_error(tmp_path, content, kwargs, pattern):
    path = tmp_path / "seq.txt"
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=pattern) as info:
        load_sequences(path, **kwargs)
    assert "\n" not in str(info.value)


def test_user_embedding_file_must_match_the_number_of_contexts(tmp_path):
    path = tmp_path / "seq.txt"
    path.write_text("a b c\nb c a\n", encoding="utf-8")  # bigram contexts: a, b, c (m = 3)
    np.save(tmp_path / "emb.npy", np.ones((4, 2)))
    with pytest.raises(DataError, match=r"m = 3 rows.*got shape \(4, 2\)"):
        load_sequences(path, context_length=1, embedding=str(tmp_path / "emb.npy"))
    emb = np.arange(6.0).reshape(3, 2)
    np.save(tmp_path / "emb.npy", emb)
    data = load_sequences(path, context_length=1, embedding=str(tmp_path / "emb.npy"))
    np.testing.assert_array_equal(data.H.numpy(), emb)  # row j embeds the j-th context of data.contexts
    assert data.contexts == ("a", "b", "c")
