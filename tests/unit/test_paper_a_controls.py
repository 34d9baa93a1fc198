"""Every graded check of paper A's groups (linear, lm) fails on its negative control, and the controls, the key
lemma's ratio and the steps-to-threshold readings agree with independent computations (issue 37).

The checks are computed on small instances (m = 12 contexts, a few thousand steps) and on constructed histories, not at
smoke scale (which grades nothing): the levels are not graded there, but each check's control is computed all the
same and must come out false.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp, two_d_example
from ntpbias.experiments.linear import checks as lc
from ntpbias.experiments.linear.config import FIG4, FIG5_ADAM, FIG5_NGD, LinearDataConfig
from ntpbias.experiments.linear.errata import (
    autoregressive_errata,
    flat_directions,
    geometry_errata,
    sequence_statistics,
    support_patterns,
    two_d_errata,
)
from ntpbias.geometry.linear.loss import cross_entropy
from ntpbias.results import GRADED_KINDS
from ntpbias.training.history import History
from ntpbias.training.linear import LinearNTPProblem
from ntpbias.training.loop import Trainer
from ntpbias.training.optimizers import Optimizer

SMALL = LinearDataConfig(m=12, d=16, V=6, support_size=3, seed=2)


@pytest.fixture(scope="module")
def small():
    data = SMALL.build()
    return data, LinearNTPProblem.reference_for(data)


def _train(small, preset, steps=3000, seeds=(0,)):
    data, ref = small
    cfg = replace(preset, data=SMALL, train=replace(preset.train, steps=steps, log_points=40), seeds=len(seeds))
    history = Trainer(LinearNTPProblem(data, ref), Optimizer(cfg.optimizer, loss_floor=data.entropy), cfg.train,
                      seeds=list(seeds)).run()
    return cfg, history


def _history(values: dict[str, list[float]], steps: list[int]) -> History:
    return History.from_log(steps, [0], [{k: np.array([v[i]]) for k, v in values.items()} for i in range(len(steps))])


def assert_controls_fail(checks):
    graded = [c for c in checks if c.kind in GRADED_KINDS]
    assert graded
    for c in graded:
        assert c.control and c.control_passed is False, (c.name, c.control, c.control_measured)
        assert c.missing == (), (c.name, c.missing)


@pytest.mark.parametrize(("preset", "steps"), [(FIG4, 3000), (FIG5_NGD, 10_000), (FIG5_ADAM, 3000)],
                         ids=["gd", "ngd", "adam"])
def test_every_check_of_a_training_run_fails_on_its_control(small, preset, steps):
    """(NGD's constant step of 0.01 needs 10^4 steps before ||P_F(W_k)||, the norm-growth control, settles.)"""
    cfg, history = _train(small, preset, steps)
    data, ref = small
    checks = lc.run_checks("r", cfg, history, data, ref)
    assert_controls_fail(checks)
    by = {c.name: c for c in checks}
    # the levels were calibrated at the Figs. 4-5 schedule (10^4 steps on their generator): not graded here, said why
    loss = by["r: loss gap"]
    assert loss.verdict == "not graded" and "calibrated on the Figs. 4-5" in loss.ungraded_reason
    assert by["r: norm growth"].graded and by["r: margin of P_perp(W_k)"].graded  # 3000 steps: both in range
    if preset is FIG4:  # η = 0.5 > 1/(2L) here: the premise is unmet, the check can only be consistent
        assert by["r: monotone loss"].control_measured > 1e-6


def test_a_run_that_stops_before_k_1000_is_not_graded_on_theorem_2(small):
    cfg, history = _train(small, FIG4, steps=300)
    data, ref = small
    by = {c.name: c for c in lc.run_checks("r", cfg, history, data, ref)}
    for name in ("r: margin of P_perp(W_k)", "r: norm growth"):
        assert by[name].verdict == "not graded" and "the run stops at k = 300" in by[name].ungraded_reason


def test_the_calibrated_levels_grade_only_their_schedule():
    assert lc.calibration_schedule(FIG4, 10_000) == ""
    assert lc.calibration_schedule(replace(FIG4, data=replace(FIG4.data, seed=7)), 10_000) == ""  # another draw
    assert lc.calibration_schedule(FIG4, 300)  # another number of steps
    assert lc.calibration_schedule(replace(FIG4, data=SMALL), 10_000)  # another generator


def test_the_key_lemma_ratio_is_both_sides_of_eq_14(small):
    """The stored ratio against a direct evaluation, and the control's perturbed direction: a unit vector of F^⊥ at
    cos about 0.7 with W̄^mm, on which the inequality fails."""
    data, ref = small
    cfg, history = _train(small, FIG4, steps=2000)
    W = history.params["W"]
    W_F = ref.F.project(W)
    unit = ref.W_mm / torch.linalg.vector_norm(ref.W_mm)
    genie = W_F + 1.5 * torch.linalg.vector_norm(W - W_F) * unit
    direct = float(cross_entropy(W, data)[0] / cross_entropy(genie, data)[0])
    assert history["key_lemma"][-1, 0] == pytest.approx(direct, rel=1e-12)
    moved = lc.perturbed_direction(ref)
    assert float(torch.linalg.vector_norm(moved)) == pytest.approx(1.0)
    assert float(torch.linalg.vector_norm(ref.F.project(moved))) < 1e-10  # still in F^⊥
    assert 0.5 < float((moved * unit).sum()) < 0.9


def test_decade_increases_tell_unbounded_growth_from_a_limit():
    steps = [1, 10, 100, 1000, 10_000]
    k = np.array(steps, dtype=float)
    for values, ratio in ((np.log(k), 1.0), (3 - 1 / k, 0.1), (k, 10.0)):  # log k, settling like 1/k, linear
        h = _history({"x": list(values)}, steps)
        early, late = lc.decade_increases(h, h["x"])
        assert late[0] / early[0] == pytest.approx(ratio)


def test_the_early_step_is_the_logged_step_nearest_a_hundredth_of_the_run():
    h = _history({"x": [0.0] * 6}, [0, 1, 10, 92, 1000, 10_000])
    assert lc.early_step(h) == 92


def test_geometry_and_errata_checks_fail_on_their_controls(small):
    data, ref = small
    cfg, history = _train(small, FIG4, steps=500)
    checks = lc.geometry_checks(data, ref) + geometry_errata(data, ref, history.params["W"][0])
    checks += two_d_errata() + autoregressive_errata(0)
    assert_controls_fail(checks)
    by = {c.name: c for c in checks}
    assert by["Prop. 1 rate"].verdict == "pass" and by["Lemma 4, claim 1: CE_F(W*) = H"].verdict == "pass"
    assert by["CE strictly convex off its flat directions"].verdict == "pass"
    for name in ("A-E1: CE_F as printed, CE_F(W*) = H", "A-E2: CE_F as a limit along any W^d with (6a)",
                 "A-E3: ||W|| = ||P_F W|| + ||P_⊥ W||", "A-E11: CE is strictly convex",
                 "A-E13: Figs. 1-2 captions on one support pattern", "A-E12: m_1 >= m_2 >= ... >= m_{T-1}"):
        assert by[name].verdict == "refuted", name
    assert by["m_t <= m_{t+1} for equal-length sequences"].verdict == "pass"


def test_the_errata_measurements_can_say_holds():
    """Positive controls: each erratum's measurement says "holds" where the printed statement is true."""
    # A-E11: strict convexity holds along a direction off the flat space (the corrected check's directions)
    data = random_ntp(m=12, d=16, V=6, support_size=3, seed=2)
    flat = flat_directions(data, torch.Generator().manual_seed(0))
    W = torch.zeros(data.V, data.d, dtype=torch.float64)
    for D in flat:  # flat: CE does not move along them at all
        assert float(cross_entropy(W + 3 * D, data)) == pytest.approx(float(cross_entropy(W, data)), abs=1e-12)
    # A-E12: m_t non-increasing when most sequences are short (lengths unequal)
    seqs = np.random.default_rng(0).integers(0, 8, size=(300, 6))
    lengths = np.where(np.arange(300) < 297, 2, 6)
    m_t, H_t = sequence_statistics(seqs, lengths)
    assert all(a >= b for a, b in zip(m_t, m_t[1:], strict=False))
    # A-E13: Fig. 1's caption alone is met by some patterns, among them the 2D example's supports
    patterns = support_patterns(3)
    ours = (two_d_example().P > 0).numpy()
    assert any((p == ours).all() for p in patterns)


def test_m_t_and_h_t_against_a_naive_count():
    seqs = np.random.default_rng(3).integers(0, 4, size=(40, 5))
    m_t, H_t = sequence_statistics(seqs)
    for t in range(1, 5):
        prefixes = {tuple(s[:t]) for s in seqs}
        assert m_t[t - 1] == len(prefixes)
        counts = {}
        for s in seqs:
            counts.setdefault(tuple(s[:t]), []).append(s[t])
        H = 0.0
        for nxt in counts.values():
            _, c = np.unique(nxt, return_counts=True)
            p = c / c.sum()
            H -= len(nxt) / len(seqs) * float((p * np.log(p)).sum())
        assert H_t[t - 1] == pytest.approx(H, abs=1e-12)


def test_the_figure_captions_admit_no_common_support_pattern_by_a_naive_loop():
    import itertools

    count_fig1 = count_both = 0
    for supports in itertools.product(itertools.combinations(range(5), 3), repeat=3):
        follows = [[v in s for s in supports] for v in range(5)]  # token -> contexts
        fig1 = follows[2] == [True, False, False] and all(sum(follows[v]) == 2 for v in (0, 1, 3, 4))
        fig2 = follows[0] == follows[4] == [True, True, False]
        count_fig1 += fig1
        count_both += fig1 and fig2
    (check,) = two_d_errata()
    assert count_both == 0 and check.measured.startswith(f"0 of 1000 patterns ({count_fig1} fit Fig. 1's alone")


def test_the_entropy_check_fails_for_another_generator():
    draws = np.linspace(1.0, 2.0, 201)
    check = lc.entropy_check("d", "A:fig3-entropy", 1.445, draws, 1.5, 0, ("a generator centred at 1.2",
                                                                            np.linspace(1.1, 1.3, 201)))
    assert check.verdict == "pass" and check.control_measured == 1.0 and check.control_passed is False


def test_speed_is_graded_on_the_papers_draw_and_reported_on_the_others():
    from ntpbias.experiments.linear.speed import speed

    steps = [0, 10, 100, 1000, 10000]
    fast = {"loss_gap": [1, 1e-2, 1e-3, 1e-4, 1e-5], "cos_mm": [0, 0.92, 0.96, 0.97, 0.98],
            "F_error_rel": [1, 0.09, 0.04, 0.01, 0.0]}
    slow = {"loss_gap": [1, 1e-1, 1e-2, 1e-3, 1e-4], "cos_mm": [0, 0.5, 0.91, 0.96, 0.99],
            "F_error_rel": [1, 0.5, 0.09, 0.04, 0.01]}
    gd = {"loss_gap": [1, 0.5, 0.2, 0.1, 0.05], "cos_mm": [0, 0.2, 0.4, 0.6, 0.8],
          "F_error_rel": [1, 0.9, 0.8, 0.7, 0.6]}

    def draw(adam, ngd):
        return {"gd": _history(gd, steps), "ngd": _history(ngd, steps), "adam": _history(adam, steps)}

    # on the paper's draw Adam is first everywhere; on another draw NGD reaches cos >= 0.95 first (reported only)
    crossing = dict(fast, cos_mm=[0, 0.92, 0.94, 0.95, 0.955])
    checks, tables, notes = speed({"data seed 0": draw(fast, slow), "data seed 101": draw(crossing, slow)},
                                  graded="data seed 0", paper_settings=True)
    by = {c.name: c for c in checks}
    adam_ngd = by["Fig. 5: Adam faster than NGD"]
    assert adam_ngd.verdict == "pass" and adam_ngd.measured == "6/6" and "data seed 101: 5/6" in adam_ngd.metric
    assert adam_ngd.control_measured == "0/6" and adam_ngd.control_passed is False
    assert_controls_fail(checks)
    assert tables[1].rows[1][0] == "data seed 101" and tables[1].rows[0][0] == "data seed 0 (graded)"
    assert any(n.startswith("data seed 101: NGD's cos(W_k, W^mm) overtakes Adam's at step 1000") for n in notes)
    # without the paper's draw nothing is graded
    assert speed({"data seed 101": draw(crossing, slow)}, graded=None, paper_settings=True)[0] == []


def test_the_lm_checks_fail_on_their_controls():
    from ntpbias.experiments.lm.checks import CALIBRATION_WORST, CLAIMS, ERRORS, frozen_checks, model_checks

    good = {k: (v / 2 if k in ERRORS else 1 - (1 - v) / 2) for k, v in CALIBRATION_WORST.items() if k in CLAIMS}
    bad = {k: (10 * v + 1 if k in ERRORS else 0.0) for k, v in good.items()}
    checks = model_checks([{"step": 0, **bad}, {"step": 100, **good}], data_seed=0)
    assert all(c.verdict == "pass" for c in checks)
    assert_controls_fail(checks)
    steps = [0, 1, 10, 100, 1000, 10_000]
    frozen = _history({"loss_gap": [2, 1, 0.5, 0.2, 1e-2, 1e-5], "F_error_rel": [1, 1, 0.9, 0.8, 0.3, 0.05],
                       "cos_mm_corrected": [0, 0.1, 0.3, 0.5, 0.9, 0.99]}, steps)
    checks = frozen_checks(frozen, data_seed=0)
    assert all(c.verdict == "pass" for c in checks)
    assert_controls_fail(checks)
    assert all("k = 100 " in c.control for c in checks)


def test_a_run_stopped_early_is_what_the_calibrated_levels_are_compared_with(small):
    """The calibrated levels' control is the same run at a hundredth of its steps: the history's own row there."""
    cfg, history = _train(small, FIG5_ADAM, steps=2000)
    data, ref = small
    by = {c.name: c for c in lc.run_checks("r", cfg, history, data, ref)}
    k = lc.early_step(history)
    assert by["r: alignment"].control_measured == pytest.approx(min(history.at(k)["cos_mm"]))
    assert f"k = {k} " in by["r: alignment"].control
    assert math.isfinite(by["r: key lemma (α = 0.5)"].control_measured)
