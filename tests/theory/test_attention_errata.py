"""Paper B's errata as checks (docs/paper-b-attention.md#errata) and the negative controls of the checks built from
pure functions: each measurement against an independent computation (closed forms, a naive loop, Clarabel), each
check failing on its control."""

import math

import cvxpy as cp
import numpy as np
import pytest
import torch

from ntpbias.data.config import KLevelLaw, power_level_sizes
from ntpbias.data.tokens import relevant_tokens, sample_assumption1, sample_k_level, token_statistics
from ntpbias.experiments.attention import errata
from ntpbias.experiments.attention.checks import lemma45_gap_check
from ntpbias.experiments.attention.figure3 import figure_checks
from ntpbias.geometry.attention import selection as gs
from ntpbias.geometry.attention import stage_one as ga
from ntpbias.training.history import History


def test_the_printed_law_does_not_sum_to_one_and_the_corrected_one_does():
    """B-E1 in closed form: the printed law sums to 1 + (1 - δ~) Σ_k |S_k| δ_k / N over either class."""
    law = KLevelLaw()
    sizes, deltas = np.array(law.level_sizes), np.array(law.deltas)
    expected = (1 - law.delta_tilde) * float(sizes @ deltas) / sizes.sum()
    check = errata.law_erratum(law)
    assert check.measured == pytest.approx(expected, rel=1e-12) and check.verdict == "refuted"
    assert float((law.probabilities().sum(1) - 1).abs().max()) < 1e-14
    last = law.delta_tilde * sizes[-1] / sizes.sum()  # the mass of the dropped level, in either class
    assert check.control_measured == pytest.approx(last, rel=1e-12) and check.control_passed is False


def test_the_printed_level_sizes_give_1538_tokens():
    check = errata.sizes_erratum(KLevelLaw())
    assert check.measured == 964 + 2 * sum(4 + 2 ** (k - 1) for k in range(1, 9)) == 1538
    assert check.verdict == "refuted" and check.control_measured == 2048 - 2 * 260 and not check.control_passed
    assert 964 + 2 * sum(power_level_sizes(8)) == 2048  # the corrected sizes


def test_tokens_of_the_k_level_law_do_not_appear_equally_often():
    """B-E6: an irrelevant token is (1 - δ~)/|S~| / (δ~/(2N)) = 21.4 times as frequent as a relevant one."""
    law = KLevelLaw()
    ds = sample_k_level(law, n=2048, T=256, seed=0)
    a1 = sample_assumption1(seed=0)
    stats = token_statistics(a1)
    check = errata.same_counts_erratum(ds, law.level, ("A1", a1, stats.irrelevant, stats.important))
    expected = ((1 - law.delta_tilde) / law.irrelevant_size) / (law.delta_tilde / (2 * law.N))
    assert check.measured == pytest.approx(expected, rel=0.03) and check.verdict == "refuted"
    count = np.bincount(a1.X[a1.mask].numpy(), minlength=a1.num_tokens)  # naive count on the control
    imp = stats.important.numpy()
    assert check.control_measured == pytest.approx(count[stats.irrelevant.numpy()].mean() / count[imp].mean())
    assert check.control_passed is False


@pytest.fixture(scope="module")
def lemma44_setting():
    """The review's setting of erratum B-E9: one irrelevant token, d = 2048, η₀ = 200, seed 0."""
    ds = sample_assumption1(n_irr=1, seed=0)
    return ds, ga.stage_one(ds, d=2048, eta0=200.0, seed=0)


def _independent_svm(E: torch.Tensor, ds, selected: torch.Tensor) -> float:
    """||p̂|| of (12) for a selection, by Clarabel on constraints built by a naive loop over sequences and positions
    (selected tokens tied to the first selected one, unselected ones at margin >= 1), in the row space of E."""
    Q, R = np.linalg.qr(E.numpy().T)
    H = R.T  # E Q: coordinates of the embeddings
    c = cp.Variable(H.shape[1])
    cons = []
    for k in range(ds.n):  # naive loop: the reference for the vectorized rows
        toks = ds.X[k][ds.mask[k]].tolist()
        sel = [t for t, s in zip(toks, selected[k][ds.mask[k]].tolist(), strict=True) if s]
        rest = [t for t, s in zip(toks, selected[k][ds.mask[k]].tolist(), strict=True) if not s]
        cons += [(H[sel[0]] - H[t]) @ c == 0 for t in sel[1:]]
        cons += [(H[sel[0]] - H[t]) @ c >= 1 for t in rest]
    problem = cp.Problem(cp.Minimize(cp.sum_squares(c)), cons)
    problem.solve(solver=cp.CLARABEL)
    assert problem.status == "optimal"
    return float(np.linalg.norm(c.value))


def test_lemma44_counterexample_a_partial_tie_is_its_own_max_margin_direction(lemma44_setting):
    """B-E9: tying the irrelevant token with s*_X wherever s*_X is token 0 gives a feasible (12) whose solution
    selects exactly that selection and is its own max-margin direction: ||p̂'|| = 1.185 against ||p̂|| = 0.916."""
    ds, st = lemma44_setting
    tie = gs.partial_tie(st.E1, ds, relevant_tokens(ds) == 0)
    assert tie.svm.status == "optimal" and tie.self_consistent
    assert tie.svm.norm == pytest.approx(1.1854, abs=1e-4) and tie.important.norm == pytest.approx(0.9160, abs=1e-4)
    assert tie.svm.norm == pytest.approx(_independent_svm(st.E1, ds, tie.selected), rel=1e-6)
    s_star = relevant_tokens(ds)
    only = (ds.X == s_star[:, None]) & ds.mask
    assert tie.important.norm == pytest.approx(_independent_svm(st.E1, ds, only), rel=1e-6)
    # p̂' ties u with s*_X exactly where asked, and nowhere else; it selects s*_X in every sequence (Thm 4.3 item 1)
    scores = (st.E1 @ tie.svm.p_hat)[ds.X]
    u = int(torch.nonzero(token_statistics(ds).irrelevant)[0])
    gap = scores.gather(1, torch.argmax((ds.X == s_star[:, None]).int(), 1, keepdim=True))[:, 0] - \
        (st.E1 @ tie.svm.p_hat)[u]
    assert gap[tie.tied].abs().max() < 1e-7 and gap[~tie.tied].min() > 0.5
    assert gs.important_selection(st.E1, tie.svm.p_hat, ds, tol=1e-6).all_relevant_selected
    # the erratum check: refuted, and refuted again on its control
    check = errata.lemma44_erratum(tie, "d = 2048, seed 0", ("the same tie at seed 1", gs.partial_tie(
        ga.stage_one(ds, d=2048, eta0=200.0, seed=1).E1, ds, s_star == 0)))
    assert check.verdict == "refuted" and check.control_passed is False
    assert check.measured.startswith("self-consistent partial tie: ||p̂'|| = 1.185")


def test_a_partial_tie_that_is_not_self_consistent_is_recognised(lemma44_setting):
    """The measurement can come out the other way: tying u with s*_X in a single sequence is infeasible (s*_X occurs
    in another sequence where it must beat u), and the check then says the corollary holds for that selection."""
    ds, st = lemma44_setting
    one = torch.zeros(ds.n, dtype=torch.bool)
    one[0] = True
    tie = gs.partial_tie(st.E1, ds, one)
    assert tie.svm.status == "infeasible" and not tie.self_consistent
    check = errata.lemma44_erratum(tie, "one sequence", ("x", tie))
    assert check.passed and check.measured.startswith("no self-consistent partial tie ((12) infeasible")


@pytest.fixture(scope="module")
def a1_base():
    ds = sample_assumption1(seed=0)
    st = ga.stage_one(ds, d=1024, eta0=200.0, seed=0)
    return ds, st, gs.lemma45_gap(st.E1, ds)


def test_lemma45_gap_and_its_printed_direction_fail_on_their_controls(a1_base):
    ds, st, gap = a1_base
    nearest = gap.nearest
    feasible = gap.alternative_norms[torch.isfinite(gap.alternative_norms)]
    assert nearest.norm == pytest.approx(float(feasible.min()), rel=1e-12) and nearest.norm > gap.norm
    check = lemma45_gap_check(gap, True)
    assert check.verdict == "pass" and check.measured == pytest.approx(0.179, abs=1e-3)
    assert check.control_measured == pytest.approx(1 - nearest.norm / gap.norm) and check.control_passed is False
    printed = errata.lemma45_printed_erratum(gap)
    assert printed.measured == pytest.approx(float(feasible.max()) / gap.norm)
    assert printed.verdict == "refuted" and printed.control_passed is False
    assert float(feasible.min()) / gap.norm > 1  # the printed inequality fails for every alternative, not only one


def test_the_heuristic_after_lemma45_is_centred(a1_base):
    """B-E10: on A1-base (8 relevant, 11 present irrelevant tokens) the scores of p̂ are 11/19 and -8/19, not 1 and
    0, and ||p̂|| = 2.056, nearer sqrt(8 11/19) = 2.152 than sqrt(8) = 2.828."""
    ds, st, gap = a1_base
    p = gs.important_svm(st.E1, ds).p_hat
    h = gs.lemma45_heuristic(st.E1, st.v, p, ds)
    scores = (st.E1 @ p).numpy()
    present = token_statistics(ds).present.numpy()
    important = token_statistics(ds).important.numpy()
    assert (h.n_selected, h.n_other) == (important.sum(), (present & ~important).sum()) == (8, 11)
    assert h.centred_score == pytest.approx(11 / 19) and h.centred_norm == pytest.approx(math.sqrt(8 * 11 / 19))
    assert h.printed_score_error == pytest.approx(max(np.abs(scores[important] - 1).max(),
                                                      np.abs(scores[present & ~important]).max()))
    assert h.centred_score_error < 0.005 and abs(h.p_dot_v) < 0.01
    scores_check, norm_check = errata.heuristic_errata(h, ("p¹", gs.lemma45_heuristic(st.E1, st.v, st.p1, ds)))
    assert scores_check.measured == pytest.approx(0.4222, abs=1e-4) and scores_check.verdict == "refuted"
    assert norm_check.measured == pytest.approx(2.0558 / math.sqrt(8), abs=1e-4) and norm_check.verdict == "refuted"
    assert scores_check.control_passed is False and norm_check.control_passed is False


def test_the_figure_statistics_of_real_text_fail_on_permuted_scores():
    """Figs. 1/3's checks on a table with the figures' pattern pass, and fail on its control (the scores permuted
    over the tokens)."""
    rng = np.random.default_rng(0)
    pd = np.linspace(-1, 1, 400)
    table = {"seed": np.zeros(400, dtype=int), "pd": pd, "e_dot_v": 2 * pd + 0.05 * rng.standard_normal(400),
             "e_dot_p": np.abs(pd) + 0.05 * rng.standard_normal(400), "count": np.full(400, 60)}
    history = History.from_log([0, 10], [0], [{"loss": np.array([0.69])}, {"loss": np.array([0.1])}])
    levels = {"sign_agreement": 0.9, "irrelevant_spread": 0.4, "pearson_v_pd": 0.8, "spearman_v_pd": 0.8,
              "pearson_p_abs_pd": 0.6, "spearman_p_abs_pd": 0.6}
    checks = figure_checks("r", table, history, model="one_layer", converged=True, setting="the paper's",
                           levels=levels, level_source="test")
    graded = [c for c in checks if c.kind != "sanity"]
    assert len(graded) == 8 and all(c.verdict == "pass" and c.control_passed is False for c in graded), graded
