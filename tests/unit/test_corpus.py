"""Real-corpus next-token statistics (linear paper, App. C / Remark 2): counting, entropies, windows, export."""

import math
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch

from ntpbias.data import corpus as corpusmod
from ntpbias.data import corpus_shards
from ntpbias.data.corpus import (
    UNK,
    Corpus,
    CorpusConfig,
    CorpusStats,
    LengthStats,
    corpus_samples,
    corpus_statistics,
    export_ntp_data,
    play_text,
    read_corpus,
    shakespeare_files,
    tokenize_corpus,
)
from ntpbias.data.sequences import load_sequences
from ntpbias.errors import ConfigError, DataError


def _corpus(docs: list[list[int]], V: int) -> Corpus:
    ids = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs])
    return Corpus(ids, np.array([len(d) for d in docs]), np.array([f"w{i}" for i in range(V)]), "fixture", len(docs))


def tokenize_corpus_text(text, **cfg):
    """Tokenize ``text`` written to a temporary file."""
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "c.txt"
        f.write_text(text, encoding="utf-8")
        return tokenize_corpus(str(f), CorpusConfig(**cfg))


def _naive(docs, T, stride=1, segment="document"):
    """Reference: explicit Python loops over sequences and prefixes, dict counting."""
    if segment == "document":
        seqs = [d[s:s + T + 1] for d in docs for s in range(0, len(d) - T, stride)]
    else:
        seqs = [d[: T + 1] for d in docs if len(d) >= 2]
    follow = defaultdict(Counter)
    for seq in seqs:
        for t in range(1, len(seq)):
            follow[tuple(seq[:t])][seq[t]] += 1
    out = {}
    for t in range(1, T + 1):
        ctxs = {c: f for c, f in follow.items() if len(c) == t}
        n = sum(sum(f.values()) for f in ctxs.values())
        H = 0.0
        for f in ctxs.values():
            c = sum(f.values())
            H -= sum(k / n * math.log(k / c) for k in f.values())
        supports = [len(f) for f in ctxs.values()]
        out[t] = dict(samples=n, distinct_contexts=len(ctxs), entropy=H,
                      single_next_fraction=sum(s == 1 for s in supports) / len(ctxs),
                      single_next_mass=sum(sum(f.values()) for f in ctxs.values() if len(f) == 1) / n,
                      mean_support=float(np.mean(supports)), median_support=float(np.median(supports)),
                      max_support=max(supports), hist=Counter(supports))
    return out


@pytest.mark.parametrize(("stride", "segment"), [(1, "document"), (2, "document"), (5, "document"), (1, "line")])
def test_counting_matches_naive_reference(stride, segment):
    rng = np.random.default_rng(7)
    V, T = 5, 4
    docs = [rng.integers(0, V, size=n).tolist() for n in (40, 3, 17, 9, 1, 25)]
    docs[2][:6] = docs[0][:6]  # shared prefixes across documents
    ref = _naive(docs, T, stride, segment)
    cfg = CorpusConfig(max_context=T, stride=stride, segment=segment)
    stats = corpus_statistics(corpus_samples(_corpus(docs, V), cfg))
    assert len(stats.lengths) == T
    for s, hist in zip(stats.lengths, stats.support_histograms, strict=True):
        r = ref[s.t]
        for key in ("samples", "distinct_contexts", "max_support"):
            assert getattr(s, key) == r[key], (s.t, key)
        for key in ("entropy", "single_next_fraction", "single_next_mass", "mean_support", "median_support"):
            assert math.isclose(getattr(s, key), r[key], rel_tol=1e-12, abs_tol=1e-15), (s.t, key)
        assert {k: int(v) for k, v in enumerate(hist) if v} == dict(r["hist"])


def test_entropies_by_hand():
    # one document "a b a c a b"; T = 1: windows (a b) (b a) (a c) (c a) (a b):
    #   a -> {b: 2, c: 1}, b -> {a}, c -> {a}; H_1 = (3/5) h(2/3, 1/3); single next: 2 of 3 contexts, 2 of 5 samples
    corp = tokenize_corpus_text("a b a c a b")
    s1 = corpus_statistics(corpus_samples(corp, CorpusConfig(max_context=1))).lengths[0]
    h = -(2 / 3) * math.log(2 / 3) - (1 / 3) * math.log(1 / 3)
    assert math.isclose(s1.entropy, 3 / 5 * h, rel_tol=1e-14)
    assert (s1.samples, s1.distinct_contexts, s1.max_support) == (5, 3, 2)
    assert math.isclose(s1.single_next_fraction, 2 / 3) and math.isclose(s1.single_next_mass, 2 / 5)
    # T = 2: windows (a b a) (b a c) (a c a) (c a b); length 1: a -> {b, c}, b -> {a}, c -> {a}: H_1 = (2/4) log 2;
    # length 2: (a b) -> a, (b a) -> c, (a c) -> a, (c a) -> b: all single, H_2 = 0
    s1, s2 = corpus_statistics(corpus_samples(corp, CorpusConfig(max_context=2))).lengths
    assert math.isclose(s1.entropy, 0.5 * math.log(2), rel_tol=1e-14) and s1.samples == 4
    assert s2.entropy == 0.0 and s2.single_next_fraction == 1.0 and s2.distinct_contexts == 4


def test_entropies_agree_with_ntp_data_entropy_per_length():
    """H_t from the counts equals NTPData.entropy_per_length (an independent torch computation)."""
    rng = np.random.default_rng(3)
    docs = [rng.integers(0, 6, size=n).tolist() for n in (30, 22)]
    corp = _corpus(docs, 6)
    cfg = CorpusConfig(max_context=3)
    stats = corpus_statistics(corpus_samples(corp, cfg))
    data = export_ntp_data(corp, cfg, "gaussian:d=4")
    per_t = data.entropy_per_length()
    for s in stats.lengths:
        assert math.isclose(s.entropy, per_t[s.t], rel_tol=1e-12, abs_tol=1e-15)
    assert data.n_samples == sum(s.samples for s in stats.lengths)
    assert data.m == sum(s.distinct_contexts for s in stats.lengths) and data.d == 4


def test_windows_never_cross_documents(tmp_path):
    (tmp_path / "a.txt").write_text("x y", encoding="utf-8")
    (tmp_path / "b.txt").write_text("z w", encoding="utf-8")
    corp = tokenize_corpus(str(tmp_path), CorpusConfig(max_context=1))
    assert corp.documents == 2
    samples = corpus_samples(corp, CorpusConfig(max_context=1), context_strings=True)
    pairs = {(str(samples.contexts[c]), str(samples.vocab[z]))
             for c, z in zip(samples.context_ids, samples.next_tokens, strict=True)}
    assert pairs == {("x", "y"), ("z", "w")}


def test_line_segments_equal_the_sequences_file_convention(tmp_path):
    f = tmp_path / "seqs.txt"
    f.write_text("a b c d\nb c\n\nc a b\n", encoding="utf-8")
    cfg = CorpusConfig(max_context=3, segment="line", punctuation=False)
    ours = export_ntp_data(tokenize_corpus(str(f), cfg), cfg, "onehot")
    ref = load_sequences(f, autoregressive=True, max_context=3)
    assert ours.contexts == ref.contexts and ours.vocab == ref.vocab
    assert torch.allclose(ours.P, ref.P) and torch.allclose(ours.pi, ref.pi)


def test_corpus_smaller_than_the_context_is_a_data_error(tmp_path):
    corp = tokenize_corpus_text("to be or not")
    with pytest.raises(DataError, match=r"smaller than the context.*4 token.*--max-context 4 needs 5"):
        corpus_samples(corp, CorpusConfig(max_context=4))
    assert corpus_statistics(corpus_samples(corp, CorpusConfig(max_context=3))).lengths[0].samples == 1  # one window
    with pytest.raises(DataError, match="no such file or folder"):
        read_corpus(str(tmp_path / "missing.txt"))
    with pytest.raises(DataError, match="no token"):
        tokenize_corpus_text("   \n\n ")
    with pytest.raises(ConfigError):
        CorpusConfig(max_context=0)
    with pytest.raises(ConfigError):
        CorpusConfig(segment="paragraph")


def test_word_tokens_lowercase_and_punctuation_options():
    corp = tokenize_corpus_text("O Romeo, Romeo! wherefore art thou Romeo?")
    assert [str(corp.vocab[i]) for i in corp.ids] == ["o", "romeo", ",", "romeo", "!", "wherefore", "art", "thou",
                                                      "romeo", "?"]
    corp = tokenize_corpus_text("O Romeo, Romeo!", lowercase=False, punctuation=False)
    assert [str(corp.vocab[i]) for i in corp.ids] == ["O", "Romeo", "Romeo"]
    corp = tokenize_corpus_text("Unbelievably good", tokenizer="wordpiece")
    assert [str(corp.vocab[i]) for i in corp.ids] == ["un", "##bel", "##ie", "##va", "##bly", "good"]


def test_max_tokens_and_max_vocab():
    corp = tokenize_corpus_text("a a a a b b b c c d e", max_tokens=9)
    assert corp.ids.size == 9 and sorted(map(str, corp.vocab)) == ["a", "b", "c"]
    corp = tokenize_corpus_text("a a a a b b b c c d e", max_vocab=3)
    words = [str(corp.vocab[i]) for i in corp.ids]
    assert words == ["a"] * 4 + ["b"] * 3 + [UNK] * 4 and len(corp.vocab) == 3
    with pytest.raises(ConfigError):
        CorpusConfig(max_vocab=1)


def test_shannon_check_is_reported_not_asserted():
    mk = lambda t, h: LengthStats(t, 10, 5, h, 0.5, 0.5, 1.5, 1.0, 3)  # noqa: E731
    stats = CorpusStats(tokens=10, vocab=3, lengths=(mk(1, 1.0), mk(2, 1.2), mk(3, 0.5)),
                        support_histograms=(np.array([0, 1]),) * 3)
    assert stats.shannon_violations() == [1]
    d = stats.to_dict()
    assert d["shannon"]["holds"] is False and d["shannon"]["violations_at_t"] == [1]
    assert d["lengths"][1] == {"t": 2, "samples": 10, "distinct_contexts": 5, "entropy": 1.2,
                               "single_next_fraction": 0.5, "single_next_mass": 0.5, "mean_support": 1.5,
                               "median_support": 1.0, "max_support": 3}


def test_export_size_guard(monkeypatch):
    corp = _corpus([list(range(5)) * 4], 5)
    monkeypatch.setattr(corpusmod, "MAX_EXPORT_ENTRIES", 10)
    with pytest.raises(DataError, match="--max-tokens"):
        export_ntp_data(corp, CorpusConfig(max_context=2))


def test_shakespeare_builtin_corpus():
    files = shakespeare_files()
    assert len(files) == 38
    names, texts = read_corpus("shakespeare")
    assert len(texts) == 38 and "hamlet" in names
    hamlet = texts[names.index("hamlet")]
    assert "**" not in hamlet and "# " not in hamlet and "_Enter" not in hamlet and "[Aside" not in hamlet
    assert "To be, or not to be" in hamlet and "BERNARDO" not in hamlet  # speaker names removed
    md = "## ACT I\n\n_Enter ADAM, with\nhis train_\n\n**ADAM**  \n\\[Aside] Yonder comes my *master*.  \n"
    assert play_text(md).split() == ["Yonder", "comes", "my", "master", "."]



# ------------------------------------------------------------------------------------------------ sharded counting
def _folder(tmp_path, n_docs=7, seed=0):
    """A folder of random documents (Zipf-like words, some lines, some empty documents)."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(40)] + [",", "."])
    p = 1 / np.arange(1, len(words) + 1)
    folder = tmp_path / "docs"
    folder.mkdir()
    for k in range(n_docs):
        n = int(rng.integers(0, 120)) if k != 3 else 0
        toks = rng.choice(words, size=n, p=p / p.sum())
        lines = [" ".join(toks[i:i + 9]) for i in range(0, n, 9)]
        (folder / f"d{k:02d}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("cfg", [
    dict(max_context=3), dict(max_context=4, stride=3), dict(max_context=2, max_vocab=12),
    dict(max_context=3, max_tokens=250), dict(max_context=3, max_tokens=300, max_vocab=8),
    dict(max_context=3, segment="line"), dict(max_context=2, segment="line", max_tokens=140, max_vocab=10),
])
@pytest.mark.parametrize("shards", [1, 3, 50])
def test_sharded_counts_equal_the_single_process_counts(tmp_path, cfg, shards):
    folder = _folder(tmp_path)
    extra = tmp_path / "extra.txt"
    extra.write_text("w1 w2 w3 w1 w2 w4 , w1 w2 w3 .\nw5 w1\n", encoding="utf-8")
    config = CorpusConfig(**cfg)
    sources = [str(folder), str(extra)]
    corp = tokenize_corpus(sources, config)
    ref = corpus_statistics(corpus_samples(corp, config), tokens=int(corp.ids.size))
    stats, documents = corpus_shards.sharded_corpus_statistics(sources, config, shards=shards)
    assert documents == corp.documents == 8
    assert stats.to_dict() == ref.to_dict()  # exact: integer counts and identically summed floats
    for a, b in zip(stats.support_histograms, ref.support_histograms, strict=True):
        assert np.array_equal(a, b)


def test_sharded_wordpiece_vocabulary_order_and_errors(tmp_path):
    config = CorpusConfig(max_context=2, tokenizer="wordpiece", max_tokens=4000, max_vocab=60)
    corp = tokenize_corpus("shakespeare", config)
    ref = corpus_statistics(corpus_samples(corp, config), tokens=int(corp.ids.size))
    stats, documents = corpus_shards.sharded_corpus_statistics("shakespeare", config, shards=4)
    assert documents == 38 and stats.to_dict() == ref.to_dict()
    small = tmp_path / "s.txt"
    small.write_text("to be or not", encoding="utf-8")
    for cfg in (CorpusConfig(max_context=4), CorpusConfig(max_context=2, segment="line", max_tokens=1)):
        with pytest.raises(DataError) as single:
            corpus_samples(tokenize_corpus(str(small), cfg), cfg)
        with pytest.raises(DataError) as sharded:
            corpus_shards.sharded_corpus_statistics(str(small), cfg)
        assert str(sharded.value) == str(single.value)


@pytest.mark.slow
def test_sharded_counting_through_an_executor(tmp_path):
    from ntpbias.parallel import map_values

    folder = _folder(tmp_path, seed=4)
    config = CorpusConfig(max_context=3, max_tokens=400)
    corp = tokenize_corpus(str(folder), config)
    ref = corpus_statistics(corpus_samples(corp, config), tokens=int(corp.ids.size))
    stats, _ = corpus_shards.sharded_corpus_statistics(
        str(folder), config, shards=4, map_fn=lambda f, xs: map_values(f, xs, executor="local"))
    assert stats.to_dict() == ref.to_dict()
