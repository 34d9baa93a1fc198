"""``ntpbias predict`` says which result covers each answer, and reports ties instead of dressing them as answers."""

import itertools
import json

import pytest
import torch

from ntpbias.data.generators import generate_sentences
from ntpbias.data.sentences import example1
from ntpbias.data.structure import (
    CONFUSED,
    NON_COMPARABLE,
    NON_OPTIMAL,
    OPTIMAL,
    analyze_structure,
)
from ntpbias.data.unseen import theorem3_premise


def _predict(cli, *inputs):
    args = ["predict", "--train", "example1", "--steps", "300", "--json"]
    for text in inputs:
        args += ["--input", text]
    code, out, err = cli(*args)
    assert code == 0, err
    return {r["input"]: r for r in json.loads(out)}


def test_a_tie_is_reported_with_no_guarantee(cli):
    """Under query P, S and V are both non-comparable: equal attention, n(S) = V and n(V) = O equally likely."""
    rec = _predict(cli, "S V P")["S V P"]
    assert rec["tie"] is True and rec["guarantee"] == "none"
    assert {rec["prediction"], rec["runner_up"]} == {"V", "O"}
    assert rec["probability"] == pytest.approx(rec["runner_up_probability"], rel=1e-9)


def test_each_answer_names_the_result_that_fixes_it(cli):
    recs = _predict(cli, "S P", "O S P", "O P", "P")
    assert {k: (r["prediction"], r["guarantee"], r["tie"]) for k, r in recs.items()} == {
        "S P": ("V", "Theorem 3", False),  # Example 2: a non-comparable token among non-optimal ones
        "O S P": ("P", "Theorem 3", False),  # the optimal O above the inserted non-comparable S
        "O P": ("P", "Theorem 2", False),  # the training orders decide: O >_P P
        "P": ("S", "Theorem 2", False),  # a one-token input: the collocation n(P) = S
    }
    assert all(r["probability"] > r["runner_up_probability"] for r in recs.values())


def _naive_premise(st, x):
    """Theorem 3's premise for one input, by the definitions (independent of the vectorized code)."""
    q = x[-1]
    if len(x) < 2 or q not in st.queries:
        return False
    cls = [int(st.classes[q, t]) for t in x]
    if CONFUSED in cls or NON_COMPARABLE not in cls:
        return False
    rank = {NON_OPTIMAL: 0, NON_COMPARABLE: 1, OPTIMAL: 2}
    top = max(rank[c] for c in cls)
    return len({t for t, c in zip(x, cls, strict=True) if rank[c] == top}) == 1


@pytest.mark.parametrize("samples", [example1(), generate_sentences(8, seed=3), generate_sentences(6, seed=5)])
def test_theorem3_premise_matches_a_naive_reading_of_the_definitions(samples):
    st = analyze_structure(samples)
    V = samples.V
    inputs = [list(x) for L in (1, 2, 3) for x in itertools.product(range(V), repeat=L)]
    L = 3
    X = torch.tensor([x + [0] * (L - len(x)) for x in inputs])
    mask = torch.tensor([[True] * len(x) + [False] * (L - len(x)) for x in inputs])
    got = theorem3_premise(st, X, mask).tolist()
    assert got == [_naive_premise(st, x) for x in inputs]
    assert any(got) and not all(got)
