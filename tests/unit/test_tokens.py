"""TokenSequences validation, token statistics (eqs. (3), (18), Def. 3.1, Assumption 1) and the two generators."""

import math

import numpy as np
import pytest
import torch

from ntpbias.data.tokens import (
    KLevelLaw,
    TokenSequences,
    power_level_sizes,
    relevant_tokens,
    sample_assumption1,
    sample_k_level,
    token_statistics,
)
from ntpbias.errors import ConfigError, DataError

# ----------------------------------------------------------------------------------------------------------------
# Bad input
# ----------------------------------------------------------------------------------------------------------------


def test_ragged_sequences_without_padding_are_a_data_error():
    with pytest.raises(DataError, match="unequal lengths and no padding"):
        TokenSequences.from_arrays([[0, 1, 2], [1, 2]], [1, -1])


def test_labels_must_be_pm1_and_01_is_converted_with_a_note():
    with pytest.raises(DataError, match="labels must be -1/\\+1"):
        TokenSequences.from_lists([[0], [1]], [1, 2])
    with pytest.raises(DataError, match="labels must be"):
        TokenSequences.from_lists([[0], [1]], [1.0, float("nan")])
    ds = TokenSequences.from_lists([[0], [1]], [0, 1])
    assert ds.y.tolist() == [-1.0, 1.0]
    assert len(ds.notes) == 1 and "0/1" in ds.notes[0]
    assert TokenSequences.from_lists([[0], [1]], [-1, 1]).notes == ()


def test_empty_dataset_and_empty_sequence_and_out_of_vocabulary():
    with pytest.raises(DataError, match="empty"):
        TokenSequences.from_lists([], [])
    with pytest.raises(DataError, match="empty"):
        TokenSequences.from_arrays(np.zeros((0, 3), dtype=np.int64), [])
    with pytest.raises(DataError, match="sequence 1 is empty"):
        TokenSequences.from_lists([[0], []], [1, -1])
    with pytest.raises(DataError, match="outside the vocabulary"):
        TokenSequences.from_lists([[0, 5]], [1], num_tokens=3)
    with pytest.raises(DataError, match="outside the vocabulary"):
        TokenSequences.from_arrays([[0, -1]], [1])
    with pytest.raises(DataError, match="3 labels for 2 sequences"):
        TokenSequences.from_lists([[0], [1]], [1, -1, 1])


def test_padding_values_are_ignored_and_zeroed():
    X = np.array([[3, 1, -7], [2, 99, 99]])
    mask = np.array([[True, True, False], [True, False, False]])
    ds = TokenSequences.from_arrays(X, [1, -1], mask=mask, num_tokens=4)
    assert ds.X.tolist() == [[3, 1, 0], [2, 0, 0]]
    assert ds.total_tokens == 3 and ds.lengths.tolist() == [2, 1]


# ----------------------------------------------------------------------------------------------------------------
# Statistics
# ----------------------------------------------------------------------------------------------------------------


def _naive_counts(sequences, labels, num_tokens):
    pos, neg = [0] * num_tokens, [0] * num_tokens
    for seq, y in zip(sequences, labels, strict=True):
        for s in seq:
            (pos if y > 0 else neg)[s] += 1
    return pos, neg


def test_statistics_match_a_naive_loop_on_variable_length_data():
    rng = np.random.default_rng(3)
    S = 9
    seqs = [rng.integers(0, S - 1, size=rng.integers(1, 8)).tolist() for _ in range(40)]
    labels = rng.choice([-1, 1], size=40).tolist()
    ds = TokenSequences.from_lists(seqs, labels, num_tokens=S)
    st = token_statistics(ds)
    pos, neg = _naive_counts(seqs, labels, S)
    total = sum(len(s) for s in seqs)
    assert st.count_pos.tolist() == pos and st.count_neg.tolist() == neg
    assert st.total_tokens == total
    alpha = [(a - b) / total for a, b in zip(pos, neg, strict=True)]
    assert torch.allclose(st.alpha, torch.tensor(alpha, dtype=torch.float64), rtol=0, atol=1e-15)
    for s in range(S):
        if pos[s] + neg[s] == 0:
            assert math.isnan(st.posterior_difference[s])  # token S-1 never occurs
        else:
            assert st.posterior_difference[s].item() == pytest.approx((pos[s] - neg[s]) / (pos[s] + neg[s]), abs=1e-15)
    # alpha_s = (c_s / total) PD(s) on present tokens
    present = st.present
    assert not present[S - 1]
    assert torch.allclose(st.alpha[present], st.count[present] / total * st.posterior_difference[present])


def test_token_types_of_definition_3_1_on_a_hand_example():
    # token 0: only in +; 1: only in -; 2: +2/-1 (positive); 3: +1/-2 (negative); 4: +1/-1 (irrelevant); 5 absent
    seqs = [[0, 2, 4], [2, 3], [1, 3, 4], [3, 2, 1]]
    ds = TokenSequences.from_lists(seqs, [1, 1, -1, -1], num_tokens=6)
    st = token_statistics(ds)
    assert st.completely_positive.tolist() == [True, False, False, False, False, False]
    assert st.completely_negative.tolist() == [False, True, False, False, False, False]
    assert st.positive.tolist() == [True, False, True, False, False, False]
    assert st.negative.tolist() == [False, True, False, True, False, False]
    assert st.irrelevant.tolist() == [False, False, False, False, True, False]
    assert st.important.tolist() == [True, True, False, False, False, False]


def test_relevant_tokens_and_assumption1_violations():
    ds = TokenSequences.from_lists([[2, 0, 3], [1, 3, 2]], [1, -1])
    assert relevant_tokens(ds).tolist() == [0, 1]
    # two relevant tokens in one sequence
    bad = TokenSequences.from_lists([[0, 4, 2], [1, 2]], [1, -1])
    with pytest.raises(DataError, match="sequence 0 violates Assumption 1"):
        relevant_tokens(bad)
    # a positive-but-not-completely token (2 occurs twice in + and once in -)
    bad = TokenSequences.from_lists([[0, 2, 2], [1, 2], [4, 3]], [1, -1, 1])
    with pytest.raises(DataError, match="violates Assumption 1"):
        relevant_tokens(bad)


# ----------------------------------------------------------------------------------------------------------------
# Assumption-1 generator
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"n": 40, "T": 9, "n_pos": 3, "n_neg": 5, "n_irr": 4},
                                    {"n_irr": 1, "seed": 3}, {"round_robin": False, "seed": 5}])
def test_assumption1_generator(kwargs):
    ds = sample_assumption1(**kwargs)
    n, T = kwargs.get("n", 16), kwargs.get("T", 6)
    n_pos, n_neg = kwargs.get("n_pos", 4), kwargs.get("n_neg", 4)
    st = token_statistics(ds)
    assert ds.X.shape == (n, T) and bool(ds.mask.all())
    irr = torch.arange(ds.num_tokens) >= n_pos + n_neg
    assert bool((st.alpha[irr] == 0).all())  # exactly zero
    assert bool((st.count_pos[irr] == st.count_neg[irr]).all())
    assert bool(st.completely_positive[:n_pos][st.present[:n_pos]].all())
    assert bool(st.completely_negative[n_pos:n_pos + n_neg][st.present[n_pos:n_pos + n_neg]].all())
    s_star = relevant_tokens(ds, st)  # satisfies Assumption 1
    assert bool(((s_star < n_pos) == (ds.y > 0)).all())
    # twins share their irrelevant multiset
    srt = torch.sort(torch.where(irr[ds.X], ds.X, -1), dim=1).values
    assert torch.equal(srt[0::2], srt[1::2])
    # relevant alpha = +-(occurrences)/(nT)
    rel = ~irr
    assert torch.allclose(st.alpha[rel] * n * T, (st.count_pos - st.count_neg)[rel].double())
    if kwargs.get("round_robin", True):
        assert bool(st.present[:n_pos + n_neg].all())


def test_assumption1_seeded_and_validated():
    a, b, c = sample_assumption1(seed=1), sample_assumption1(seed=1), sample_assumption1(seed=2)
    assert torch.equal(a.X, b.X) and not torch.equal(a.X, c.X)
    with pytest.raises(ConfigError, match="even"):
        sample_assumption1(n=7)
    with pytest.raises(ConfigError, match="n_irr"):
        sample_assumption1(n_irr=0)


# ----------------------------------------------------------------------------------------------------------------
# K-level law and generator
# ----------------------------------------------------------------------------------------------------------------


def test_paper_level_sizes_and_totals():
    assert power_level_sizes(8) == tuple(4 + 2 ** k for k in range(1, 9))
    law = KLevelLaw()
    assert law.num_tokens == 2048 and law.irrelevant_size == 964 and law.N == 542
    printed = KLevelLaw(level_sizes=power_level_sizes(8, exponent_shift=1))
    assert printed.level_sizes == (5, 6, 8, 12, 20, 36, 68, 132) and printed.num_tokens == 1538
    assert power_level_sizes(4, offset=2) == (4, 6, 10, 18)


def test_k_level_law_sums_to_one_and_gives_posterior_16():
    law = KLevelLaw()
    P = law.probabilities()
    assert torch.allclose(P.sum(1), torch.ones(2, dtype=torch.float64), atol=1e-13)
    assert bool((P > 0).all())
    post = law.posterior()
    level, pol = law.level, law.polarity
    deltas = torch.tensor((0.0, *law.deltas), dtype=torch.float64)[level]
    expected = torch.where(pol == 0, 0.5, torch.where(pol > 0, 1 - deltas, deltas))  # eq. (16) for y = +1
    assert torch.allclose(post, expected, atol=1e-14)
    # eqs. (14)-(16) of paper B: PD on the levels is +-(1 - 2 delta_k) = {0.1, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9, 0.96}
    pd_levels = [law.posterior_difference()[(level == k) & (pol > 0)][0].item() for k in range(1, 9)]
    assert pd_levels == pytest.approx([0.1, 0.3, 0.4, 0.5, 0.6, 0.8, 0.9, 0.96], abs=1e-12)
    # every relevant token has the same frequency delta~/(2N) per position under equal priors (p(s|+) + p(s|-) =
    # delta~/N is the sum over the two classes; docs/paper-b-attention.md#errata), irrelevant (1-delta~)/|S~|
    marginal = P.mean(0)
    assert torch.allclose(marginal[pol != 0], torch.full_like(marginal[pol != 0], 0.05 / (2 * 542)), rtol=1e-12)
    # expected alpha per position: +-delta~ (1 - 2 delta_k) / (2N) (eq. (3) of paper B on this law)
    alpha = 0.5 * (P[1] - P[0])
    assert torch.allclose(alpha, pol * 0.05 * (1 - 2 * deltas) / (2 * 542), atol=1e-16)
    assert torch.allclose(marginal[pol == 0], torch.full_like(marginal[pol == 0], 0.95 / 964), rtol=1e-12)
    assert law.vocab()[0] == "irr0" and law.vocab()[964] == "L1+0" and law.vocab()[964 + 542] == "L1-0"


def test_k_level_law_validation():
    with pytest.raises(ConfigError, match="deltas"):
        KLevelLaw(level_sizes=(2, 3), deltas=(0.1,))
    with pytest.raises(ConfigError, match="delta_tilde = 1.5: must be < 1"):
        KLevelLaw(level_sizes=(2,), deltas=(0.1,), delta_tilde=1.5)
    with pytest.raises(ConfigError):
        sample_k_level(n=0)


def test_k_level_sample_statistics_match_the_law():
    """Posteriors of eq. (16) per level and token frequencies within sampling error (paper hyperparameters)."""
    law = KLevelLaw()
    ds = sample_k_level(law, n=4096, T=256, seed=0)
    assert ds.X.shape == (4096, 256) and int((ds.y > 0).sum()) == 2048
    st = token_statistics(ds)
    level, pol = law.level, law.polarity
    post = law.posterior()
    zs = []
    for k in range(law.K + 1):
        for sign in ((0,) if k == 0 else (1, -1)):
            m = (level == k) & (pol == sign)
            cp, c = int(st.count_pos[m].sum()), int(st.count[m].sum())
            pk = float(post[m][0])
            zs.append((cp / c - pk) / math.sqrt(pk * (1 - pk) / c))
    assert max(abs(z) for z in zs) < 4.5, zs
    # frequency of the irrelevant block: Binomial(nT, 1 - delta~)
    nT = 4096 * 256
    frac = float(st.count[pol == 0].sum()) / nT
    assert abs(frac - 0.95) < 4.5 * math.sqrt(0.95 * 0.05 / nT)
    # relevant tokens equally frequent: Pearson chi-square over the 1084 relevant tokens
    c = st.count[pol != 0].double()
    expected = nT * 0.05 / (2 * 542)
    chi2 = float(((c - expected) ** 2 / expected).sum())
    dof = c.numel() - 1
    assert abs(chi2 - dof) < 5 * math.sqrt(2 * dof)
    # alpha and PD are proportional on the relevant tokens (alpha = c/(nT) PD) and ~0 on S~
    assert torch.allclose(st.alpha, st.count / nT * torch.nan_to_num(st.posterior_difference))


def test_k_level_balance_options_and_seed():
    a = sample_k_level(n=101, T=4, seed=3)
    b = sample_k_level(n=101, T=4, seed=3)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y) and int((a.y > 0).sum()) == 51
    c = sample_k_level(n=400, T=4, positive_fraction=0.25, seed=3)
    assert int((c.y > 0).sum()) == 100
    d = sample_k_level(n=4000, T=2, positive_fraction=0.25, exact_balance=False, seed=3)
    assert abs(float((d.y > 0).double().mean()) - 0.25) < 4.5 * math.sqrt(0.25 * 0.75 / 4000)
