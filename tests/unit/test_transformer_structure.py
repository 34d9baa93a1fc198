"""Dataset structure of paper C (Sec. 4; C-C2 of docs/paper-c-transformer.md): samples, collocation, orders, classes,
assumptions."""

import itertools
import json

import numpy as np
import pytest
import torch

from ntpbias.data.generators import generate_samples, generate_sentences
from ntpbias.data.sentences import (
    EXAMPLE1_SENTENCES,
    NTPSamples,
    example1,
    example2_inputs,
    prop2_counterexample,
)
from ntpbias.data.structure import (
    CONFUSED,
    NON_COMPARABLE,
    NON_OPTIMAL,
    OPTIMAL,
    analyze_structure,
    orthonormality_residual,
    regenerate_labels,
)
from ntpbias.data.unseen import regenerate_sentences
from ntpbias.errors import ConfigError, DataError

S, V_, O, P = range(4)


# ---------------------------------------------------------------------------------------------- samples
def test_example1_samples():
    ds = example1()
    assert (ds.N, ds.L_max, ds.V, ds.total) == (9, 3, 4, 9)
    assert [ds.sample_text(n) for n in range(ds.N)] == [
        "S -> V", "S V -> O", "S V O -> P", "V -> O", "V O -> P", "O -> P", "O P -> P", "P -> S", "P S -> V"]
    assert torch.allclose(ds.pi, torch.full((9,), 1 / 9, dtype=torch.float64))
    assert ds.queries.tolist() == [S, V_, O, V_, O, O, P, P, S]


def test_sentences_file_counts_and_blank_lines(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text("a b c\n\n  a b c  \nb c\nc\n")
    ds = NTPSamples.from_file(path)
    assert ds.vocab == ("a", "b", "c")
    texts = {ds.sample_text(n): int(ds.counts[n]) for n in range(ds.N)}
    assert texts == {"a -> b": 2, "a b -> c": 2, "b -> c": 1}
    assert ds.total == 5 and float(ds.pi.sum()) == pytest.approx(1.0, rel=1e-12, abs=0)
    assert ds.sentence_of(2) == {"sentence": 3, "text": "b c"}


@pytest.mark.parametrize("content,match", [
    ("", "empty"),
    ("\n  \n", "empty"),
    ("a a a\na\n", "at least 2 distinct tokens"),
    ("a\nb\n", "single token"),
])
def test_bad_sentence_files(tmp_path, content, match):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(DataError, match=match):
        NTPSamples.from_file(path)


def test_samples_and_arrays_constructors():
    ds = NTPSamples.from_samples([[3, 1], [1], [3, 1]], [0, 3, 0])
    assert ds.vocab == ("t0", "t1", "t2", "t3") and ds.N == 2 and ds.counts.tolist() == [2, 1]
    arr = NTPSamples.from_arrays([[0, 1], [2, 0]], [1, 1], mask=[[True, True], [True, False]], counts=[1, 3])
    assert arr.sample_text(1) == "t2 -> t1" and arr.pi.tolist() == [0.25, 0.75]
    with pytest.raises(DataError, match="not in the vocabulary"):
        example1().encode(["S", "Z"])
    with pytest.raises(DataError, match="run of True"):
        NTPSamples.from_arrays([[0, 1]], [1], mask=[[False, True]])
    with pytest.raises(DataError, match="0..1"):
        NTPSamples.from_arrays([[0, 5]], [1], vocab=["a", "b"])
    with pytest.raises(DataError, match="positive integers"):
        NTPSamples.from_sentences([["a", "b"]], counts=[0])
    with pytest.raises(DataError, match="empty"):
        NTPSamples.from_samples([], [])


# ---------------------------------------------------------------------------------------------- Example 1
def test_example1_structure_matches_the_paper():
    st = analyze_structure(example1())
    assert st.collocation.next_token.tolist() == [V_, O, P, S] and st.collocation.is_permutation
    assert {tuple(r) for r in st.relations.tolist()} == {(S, S, P), (V_, V_, S), (O, O, S), (O, O, V_), (P, O, P)}
    expected = {S: ((S,), (P,), (V_, O)), V_: ((V_,), (S,), (O, P)), O: ((O,), (S, V_), (P,)), P: ((O,), (P,), (S, V_))}
    for q, (opt, non, nc) in expected.items():
        c = st.token_classes(q)
        assert (c.optimal, c.non_optimal, c.non_comparable, c.confused) == (opt, non, nc, ())
    assert st.assumptions_hold and st.regenerates and st.not_applicable() == ()
    assert [c.name for c in st.checks] == ["collocation", "realizable", "partial_orders", "no_confused", "assumption3"]
    k, m = st.k_and_m
    assert k.tolist() == [1, 1, 1, 1] and m.tolist() == [1, 1, 2, 1]
    starts = [EXAMPLE1_SENTENCES[i][0] for i in range(4)]
    regen = regenerate_sentences(st, st.samples.encode(starts), [len(s) for s in EXAMPLE1_SENTENCES])
    assert [st.samples.text(s) for s in regen] == [" ".join(s) for s in EXAMPLE1_SENTENCES]
    record = json.loads(json.dumps(st.to_dict()))
    assert record["collocation"] == {"S": "V", "V": "O", "O": "P", "P": "S"}
    assert record["queries"]["O"]["non_optimal"] == ["S", "V"]


def test_regeneration_is_undefined_on_example2_inputs():
    """SP, OSP, VP are unseen combinations: the data-derived orders give no unique maximal token (Theorem 3's case)."""
    st = analyze_structure(example1())
    ex2 = example2_inputs()
    assert regenerate_labels(st, ex2.X, ex2.mask).tolist() == [-1, -1, -1]


def test_query_errors():
    st = analyze_structure(NTPSamples.from_sentences([["a", "b", "c"], ["b", "c", "a"], ["c", "a"]]))
    with pytest.raises(DataError, match="not in the vocabulary"):
        st.token_classes("z")
    with pytest.raises(DataError, match="never the query"):
        st.token_classes("a")  # no input of length >= 2 ends with a


# ---------------------------------------------------------------------------------------------- naive reference
def _naive(ds):
    """Definition 1 and Sec. 4.1 of paper C literally, one sample at a time with Python sets."""
    V = ds.V
    samples = [(tuple(ds.input_ids(n)), int(ds.y[n])) for n in range(ds.N)]
    succ = {x: {y for X, y in samples if X == (x,)} for x in range(V)}
    R, optimal, a3 = set(), [], set()
    for n, (X, y) in enumerate(samples):
        win = {t for t in X if y in succ[t]}
        optimal.append([t in win for t in X])
        R |= {(X[-1], u, v) for u in win for v in set(X) - win}
        n_opt = sum(X.count(t) for t in win)
        if win and any(X.count(t) > n_opt for t in set(X) - win):
            a3.add(n)
    classes = np.zeros((V, V), dtype=int)
    for q, x in itertools.product(range(V), range(V)):
        w = any(r[:2] == (q, x) for r in R)
        l = any(r[0] == q and r[2] == x for r in R)
        classes[q, x] = CONFUSED if w and l else OPTIMAL if w else NON_OPTIMAL if l else NON_COMPARABLE
    intrans = {(q, u, v, w) for (q, u, v) in R for (q2, v2, w) in R if q2 == q and v2 == v and (q, u, w) not in R}
    regen = []
    for X, _ in samples:
        cand = {u for u in set(X) if all((X[-1], u, v) in R for v in set(X) - {u})}
        u = next(iter(cand)) if len(cand) == 1 else None
        regen.append(next(iter(succ[u])) if u is not None and len(succ[u]) == 1 else -1)
    inputs = {}
    for X, y in samples:
        inputs.setdefault(X, set()).add(y)
    inconsistent = sum(len(v) > 1 for v in inputs.values())
    no_winner = sum(not any(o) for o in optimal)
    return R, optimal, classes, a3, intrans, regen, inconsistent + no_winner


@pytest.mark.parametrize("seed", range(40))
def test_structure_matches_naive_reference(seed):
    rng = np.random.default_rng(seed)
    V = int(rng.integers(3, 6))
    firsts = rng.permutation(V)[: int(rng.integers(V - 1, V + 1))]
    inputs = [[int(x)] for x in firsts] + [rng.integers(0, V, int(rng.integers(2, 5))).tolist()
                                           for _ in range(int(rng.integers(3, 9)))]
    labels = rng.integers(0, V, len(inputs)).tolist()
    ds = NTPSamples.from_samples(inputs, labels, vocab=[f"t{i}" for i in range(V)])
    st = analyze_structure(ds)
    R, optimal, classes, a3, intrans, regen, n_unreal = _naive(ds)
    assert {tuple(r) for r in st.relations.tolist()} == R
    for n in range(ds.N):
        assert st.optimal[n, : int(ds.lengths[n])].tolist() == optimal[n]
    assert np.array_equal(st.classes.numpy(), classes)
    assert {v.samples[0] for v in st.check("assumption3").violations} == a3
    found = {(v.query, *v.tokens) for v in st.check("partial_orders").violations}
    assert found == intrans
    assert st.regenerated.tolist() == regen
    assert len(st.check("realizable").violations) == n_unreal
    assert st.check("no_confused").holds == (classes != CONFUSED).all()


# ---------------------------------------------------------------------------------------------- violations
def failed(st):
    return {c.name for c in st.checks if not c.holds}


def test_confused_token_and_cycle_are_reported():
    """Example 1 plus [V, P] -> S: under query P, O > P and P > V, so P is confused and O > V is missing."""
    ex = example1()
    inputs = [ex.input_ids(n) for n in range(ex.N)] + [[V_, P]]
    labels = ex.y.tolist() + [S]
    st = analyze_structure(NTPSamples.from_samples(inputs, labels, vocab=ex.vocab, source="ex1+"))
    assert failed(st) == {"no_confused", "partial_orders"}
    (v,) = st.check("no_confused").violations
    assert v.query == P and v.tokens == (P,) and "'O P -> P'" in v.message and "'V P -> S'" in v.message
    assert "Theorems 1-3" in st.not_applicable()
    with pytest.raises(DataError, match="no_confused"):
        st.require()
    st.require("collocation", "assumption3")  # the others still hold
    cyc = analyze_structure(NTPSamples.from_samples([[0], [1], [2], [0, 1, 2], [1, 0, 2]], [1, 2, 0, 1, 2]))
    assert any("cycle" in v.message for v in cyc.check("partial_orders").violations)


def test_assumption3_violation_is_reported():
    ds = NTPSamples.from_samples([["a"], ["b"], ["c"], ["a", "c", "c", "b"]], ["b", "c", "a", "b"])
    st = analyze_structure(ds)
    assert failed(st) == {"assumption3"}
    (v,) = st.check("assumption3").violations
    assert ds.vocab[v.tokens[0]] == "c" and "2 times" in v.message
    assert "Lemma 5" in st.not_applicable() and "Proposition 2" not in st.not_applicable()


@pytest.mark.parametrize("sentences,check,text", [
    ([["a", "b"], ["b", "a", "c"]], "collocation", "never start"),  # c has no n(c)
    ([["a", "c"], ["b", "c"], ["c", "a"]], "collocation", "not injective"),
    ([["a", "b"], ["a", "c"], ["b", "a"], ["c", "a"]], "collocation", "contradictory"),
    ([["a", "b", "c"], ["a", "b", "d"], ["b", "a"], ["c", "d"], ["d", "c"]], "realizable", "several labels"),
    ([["a", "b", "d"], ["b", "a"], ["c", "d"], ["d", "c"]], "realizable", "no token"),
])
def test_collocation_and_realizability_violations(sentences, check, text):
    st = analyze_structure(NTPSamples.from_sentences(sentences, source="bad.txt"))
    assert check in failed(st)
    messages = [v.message for v in st.check(check).violations]
    assert any(text in m for m in messages)
    record = json.loads(json.dumps(st.to_dict()))
    assert record["assumptions"][check] is False and record["assumptions"]["all"] is False
    assert all(v["sentences"] or v["tokens"] for v in record["assumptions"]["violations"][check])
    with pytest.raises(DataError, match=f"bad.txt violates .*{check}"):
        st.require()


def test_orthonormality_residual():
    assert orthonormality_residual(torch.eye(3, dtype=torch.float64)) == 0.0
    E = torch.tensor([[1.0, 0.5 ** 0.5], [0.0, 0.5 ** 0.5]], dtype=torch.float64)  # unit columns at 45 degrees
    assert orthonormality_residual(E) == pytest.approx(0.5 ** 0.5, rel=1e-12, abs=0)


# ---------------------------------------------------------------------------------------------- generators
def _prefix_closed(ds) -> bool:
    index = {(tuple(ds.input_ids(n)), int(ds.y[n])) for n in range(ds.N)}
    return all((tuple(X[:-1]), X[-1]) in index for X, _ in index if len(X) >= 2)


@pytest.mark.parametrize("seed", range(50))
def test_sentence_generator_output_is_realizable_and_prefix_closed(seed):
    ds = generate_sentences(20, L_max=8, r_max=1 + seed % 3, seed=seed)
    st = analyze_structure(ds)
    assert st.assumptions_hold and st.regenerates and st.relations.shape[0] > 0
    assert st.collocation.fixed_points == ()  # derangement by default
    assert _prefix_closed(ds)
    assert len(ds.sentences) <= ds.V and ds.L_max <= 8
    starts = [s.split()[0] for s in ds.sentences]
    regen = regenerate_sentences(st, ds.encode(starts), [len(s.split()) for s in ds.sentences])
    assert [ds.text(s) for s in regen] == list(ds.sentences)


@pytest.mark.parametrize("seed", range(50))
def test_samples_generator_output_is_realizable(seed):
    ds = generate_samples(20, seed=seed)
    st = analyze_structure(ds)
    assert st.assumptions_hold and st.regenerates
    assert sorted(ds.X[ds.lengths == 1, 0].tolist()) == list(range(20))
    for n in range(ds.N):  # every token at most once per sample
        ids = ds.input_ids(n)
        assert len(set(ids)) == len(ids)


def test_samples_generator_exercises_several_optimal_tokens():
    k = torch.stack([analyze_structure(generate_samples(20, seed=s)).k_and_m[0] for s in range(10)])
    assert int((k >= 2).sum()) > 0


def test_generators_are_seeded():
    a, b = generate_sentences(10, seed=4), generate_sentences(10, seed=4)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y) and a.sentences == b.sentences
    assert a.sentences != generate_sentences(10, seed=5).sentences
    c, d = generate_samples(10, seed=4), generate_samples(10, seed=4)
    assert torch.equal(c.X, d.X) and torch.equal(c.counts, d.counts)


def test_generator_parameters_are_checked():
    with pytest.raises(ConfigError, match="V must be"):
        generate_sentences(1)
    with pytest.raises(ConfigError, match="L_max"):
        generate_sentences(5, L_max=0)
    with pytest.raises(ConfigError, match="p_self"):
        generate_samples(5, p_self=1.5)
    small = generate_samples(2, seed=0, k_max=3, m_max=5)  # k and m are clipped to fit |V| = 2
    assert analyze_structure(small).assumptions_hold


def test_prop2_counterexample_structure():
    st = analyze_structure(prop2_counterexample())
    assert st.assumptions_hold
    c = st.token_classes("q")
    assert st.samples.text(c.optimal) == "a d" and st.samples.text(c.non_optimal) == "b c q"
