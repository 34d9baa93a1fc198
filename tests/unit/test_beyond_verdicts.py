"""The verdicts of the two groups beyond the papers (docs/optimizers.md#checks, docs/ufm.md#checks): every graded check
computed on its negative control must fail there, the measurements against independent computations, and the checks
that cannot fail kept out of the counts (by construction, sanity)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.experiments.optimizers.checks import (
    CALIBRATED_STEPS,
    approach,
    approached,
    mismatches,
    onehot_checks,
)
from ntpbias.experiments.optimizers.config import ONEHOT, run_config
from ntpbias.experiments.optimizers.runs import NormsReference
from ntpbias.results import GRADED_KINDS
from ntpbias.training.history import History

NORMS = ("l2", "linf", "spectral")


# ---------------------------------------------------------------------------------------------- optimizers
def _trajectory(run: str, limit: str | None, steps: int = CALIBRATED_STEPS, plateau: float = 0.05) -> History:
    """Margin ratios of a direction converging to ``limit``'s maximum: its gap closes like t^-1/2, every other norm's
    levels off at ``plateau`` (None: every gap levels off)."""
    t = np.unique(np.geomspace(1, steps, 40).astype(int))
    columns = {f"margin_ratio_{n}": (1 - (0.5 * t ** -0.5 if n == limit else plateau + 0.3 * t ** -0.3))[:, None]
               for n in NORMS}
    return History(steps=t, seeds=(0,), columns=columns, run=run)


@pytest.fixture(scope="module")
def onehot():
    data = random_ntp(m=8, d=6, V=4, support_size=1, seed=0)
    ref = NormsReference(F=None, svm={n: SimpleNamespace(W=torch.zeros(4, 6)) for n in NORMS})
    return data, ref


def _group(limits: dict[str, str | None], data, steps: int = CALIBRATED_STEPS):
    histories = [_trajectory(f"onehot-{m}", lim, steps) for m, lim in limits.items()]
    configs = {h.run: run_config(ONEHOT, h.run.split("-", 1)[1], data.V, data.d, "quick") for h in histories}
    return histories, configs


KNOWN = {"ngd": "l2", "sign": "linf", "nsd-spectral": "spectral", "muon": "spectral", "adagrad": "l2"}


def test_approach_against_an_independent_computation():
    h = _trajectory("onehot-sign", "linf")
    a = approach(h, "linf", NORMS)
    i = int(np.argmin(np.abs(h.steps - h.steps[-1] / 10)))
    gaps = {n: np.log10(1 - h[f"margin_ratio_{n}"][:, 0]) for n in NORMS}
    slopes = {n: np.polyfit(np.log10(h.steps[i:]), gaps[n][i:], 1)[0] for n in NORMS}
    assert a.lead == pytest.approx(min(gaps["l2"][-1], gaps["spectral"][-1]) - gaps["linf"][-1], rel=1e-12)
    assert a.slope == pytest.approx(slopes["linf"], rel=1e-10) and a.slope == pytest.approx(-0.5, abs=0.01)
    assert a.slope_lead == pytest.approx(min(slopes["l2"], slopes["spectral"]) - slopes["linf"], rel=1e-10)
    assert a.passed and a.window == (int(h.steps[i]), CALIBRATED_STEPS)
    assert not approach(h, "l2", NORMS).passed and approached(h, NORMS) == "linf"
    assert approached(_trajectory("onehot-x", None), NORMS) is None  # every gap levels off: no norm


def test_each_norm_check_passes_and_fails_on_its_control(onehot):
    data, ref = onehot
    histories, configs = _group(KNOWN, data)
    checks = {c.name: c for c in onehot_checks("onehot", histories, configs, data, ref, 0)}
    theorem = [c for c in checks.values() if c.kind == "theorem"]
    assert {c.name for c in theorem} == {f"onehot: {m} -> {n} margin" for m, n in KNOWN.items() if m != "adagrad"}
    for c in checks.values():
        assert c.kind in GRADED_KINDS and c.missing == (), c.name
    for name in ("onehot: ngd -> l2 margin", "onehot: sign -> linf margin", "onehot: nsd-spectral -> spectral margin"):
        assert checks[name].verdict == "pass" and checks[name].control_passed is False, name
        assert "muon" not in checks[name].control  # quintic Muon's limit is not known: never a control
    muon = checks["onehot: muon -> spectral margin"]
    assert muon.premise_met is False and "quintic" in muon.premise and muon.verdict == "consistent"


def test_a_trajectory_of_another_limit_fails_and_a_rival_that_approaches_the_norm_shows_nothing(onehot):
    data, ref = onehot
    histories, configs = _group({**KNOWN, "sign": "l2"}, data)  # sign descent's trajectory heads for l2
    checks = {c.name: c for c in onehot_checks("onehot", histories, configs, data, ref, 0)}
    assert checks["onehot: sign -> linf margin"].verdict == "fail"
    # ngd's own check passes, but its control (sign descent, known limit linf) approaches l2 too: the pass shows nothing
    ngd = checks["onehot: ngd -> l2 margin"]
    assert ngd.passed and ngd.control_passed and ngd.verdict == "control passed"
    assert ngd.control_measured.startswith("sign:")
    assert any("sign descent" in n and "approaches the l2 maximum instead" in n
               for n in mismatches("onehot", histories, ref))


def test_levels_are_calibrated_controlled_and_graded_at_their_schedule_only(onehot):
    data, ref = onehot
    histories, configs = _group(KNOWN, data)
    levels = [c for c in onehot_checks("onehot", histories, configs, data, ref, 0) if c.kind == "calibrated"]
    assert {c.name for c in levels} >= {"onehot: sign linf margin level", "onehot: ngd l2 margin level"}
    for c in levels:
        assert c.graded and c.threshold.startswith(">=") and c.control_passed is not None
        rival_best = max(float(h[f"margin_ratio_{c.name.split()[2]}"][-1, 0]) for h in histories
                         if KNOWN[h.run.split("-", 1)[1]] != c.name.split()[2] and "muon" not in h.run
                         and "adagrad" not in h.run)
        assert c.control_measured == pytest.approx(rival_best)
    short, configs = _group(KNOWN, data, steps=3000)
    for c in onehot_checks("onehot", short, configs, data, ref, 0):
        if c.kind == "calibrated":
            assert c.verdict == "not graded" and "calibrated at 10000 steps" in c.ungraded_reason
        else:
            assert c.graded  # the level-free checks grade any run length


# ---------------------------------------------------------------------------------------------- ufm
@pytest.fixture(scope="module")
def planted_path(tmp_path_factory):
    from ntpbias.experiments import RunContext
    from ntpbias.experiments.ufm.config import PLANTED_GD, UFMDataConfig, UFMPathConfig
    from ntpbias.experiments.ufm.runs import data_for, reference, run_path

    cfg = PLANTED_GD.__class__(data=UFMDataConfig(V=9, sizes=(2, 2, 3), contexts=(3, 2, 2)),
                               path=UFMPathConfig(points=5, decades=3.0), seeds=2)
    data = data_for(cfg)
    ref, _ = reference(data, cfg)
    path = run_path(cfg, data, ref, RunContext(out=tmp_path_factory.mktemp("path")), "planted")
    return cfg, data, ref, path


def test_shuffled_finite_part_against_a_loop():
    from ntpbias.data.planted import planted_supports
    from ntpbias.experiments.ufm.checks import shuffled_finite_logits
    from ntpbias.geometry.ufm.logits import finite_logits, support_groups

    data = planted_supports(10, (2, 3, 1), (3, 1, 2), seed=1)
    groups, _ = support_groups(data)
    L = finite_logits(data)
    expected = torch.empty_like(L)
    for j in range(data.m):  # the next context of j's support set, cyclically
        members = [k for k in range(data.m) if groups[k] == groups[j]]
        expected[:, j] = L[:, members[(members.index(j) + 1) % len(members)]]
    assert torch.equal(shuffled_finite_logits(data, groups), expected)
    assert not torch.allclose(expected, L)
    assert torch.equal(shuffled_finite_logits(data, torch.arange(data.m)), L)  # one context per set: no change


@pytest.mark.slow
def test_competing_limits(planted_path):
    from ntpbias.experiments.ufm.checks import competing_limits
    from ntpbias.experiments.ufm.config import OVERLAP
    from ntpbias.experiments.ufm.runs import data_for, reference

    _, data, ref, _ = planted_path
    rivals = competing_limits(data, ref)
    assert list(rivals) == ["D0"]  # disjoint planted sets: S̃ is L^mm, no rival
    D0 = (data.P.T - 1 / data.V) * data.pi  # docs/ufm.md, U-6
    torch.testing.assert_close(rivals["D0"], D0, rtol=1e-12, atol=1e-15)
    overlap = data_for(OVERLAP)
    assert list(competing_limits(overlap, reference(overlap, OVERLAP)[0])) == ["S̃", "D0"]


@pytest.mark.slow
def test_path_checks_pass_and_fail_on_their_controls(planted_path):
    from ntpbias.experiments.ufm.checks import path_checks

    _, data, ref, path = planted_path
    checks = {c.name: c for c in path_checks("p", path, data, ref, levels="not at the calibration's grid")}
    graded = [c for c in checks.values() if c.kind in GRADED_KINDS]
    assert {c.name for c in graded if c.kind == "theorem"} == {
        "p: finite part -> L*", "p: growing part -> L^mm", "p: Gram alignment", "p: subspace collapse"}
    for c in graded:
        assert c.missing == () and c.control_passed is False, (c.name, c.control_measured)
    for c in graded:
        if c.kind == "theorem":
            assert c.verdict == "pass", c.name
        else:
            assert c.verdict == "not graded" and c.ungraded_reason == "not at the calibration's grid"
    assert checks["p: variational identity"].kind == "by-construction"
    assert checks["p: variational identity"].verdict == "by construction"


def test_limit_follows_the_svm_is_controlled_by_data_where_the_predictions_coincide():
    from ntpbias.experiments.ufm.checks import limit_is_svm
    from ntpbias.experiments.ufm.runs import PathRun

    def path(name, mm, s):
        rows = [{"step": i, "seed": b, "cos_context_gram": mm[i] + 1e-3 * b, "cos_context_gram_S": s[i]}
                for i in range(len(mm)) for b in range(2)]
        return PathRun(name, [SimpleNamespace(lam=10.0 ** -i) for i in range(len(mm))], rows, 0.0)

    ref = SimpleNamespace(support=SimpleNamespace(polar_out_max=0.05, svm_is_centred_support=False))
    overlap = path("overlap", [0.85, 0.93, 0.96, 0.976], [0.852, 0.929, 0.958, 0.973])
    same = path("planted", [0.87, 0.95, 0.97, 0.986], [0.87, 0.95, 0.97, 0.986])
    c = limit_is_svm(overlap, ref, same)
    assert c.verdict == "pass" and c.measured == pytest.approx(0.003) and c.control_passed is False
    assert limit_is_svm(same, ref, same).verdict == "fail"  # no preference where the predictions coincide
    shrinking = path("overlap", [0.85, 0.93, 0.96, 0.974], [0.852, 0.929, 0.957, 0.973])
    assert limit_is_svm(shrinking, ref, same).verdict == "fail"  # the excess must grow


def test_order_of_learning_control_is_the_reversed_order():
    from ntpbias.experiments.ufm.checks import reversed_order
    from ntpbias.experiments.ufm.runs import order_statistics

    sigma = np.array([1.0, 0.7, 0.5, 0.2])
    times = np.array([[10.0], [15.0], [21.0], [30.0]])
    back = reversed_order(sigma, times)
    assert back[:, 0].tolist() == [21.0, 15.0, 10.0, 30.0]  # the leading modes (σ >= 1/3) reversed, the rest kept
    assert order_statistics(sigma, times)["concordance"] == [1.0]
    assert order_statistics(sigma, back)["concordance"] == [0.0]


def test_calibrated_schedule():
    from dataclasses import replace

    from ntpbias.experiments.ufm.checks import calibration_differs
    from ntpbias.experiments.ufm.config import PLANTED_ADAM, PLANTED_GD, scaled

    other_seed = replace(PLANTED_GD, data=replace(PLANTED_GD.data, seed=7), seeds=5)
    assert calibration_differs(other_seed, PLANTED_GD) == ""
    assert calibration_differs(PLANTED_ADAM, PLANTED_GD) != ""
    paper = calibration_differs(scaled(PLANTED_GD, "paper"), PLANTED_GD)
    assert "train.steps" in paper and "path" not in paper
    assert "path.points" in calibration_differs(scaled(PLANTED_GD, "paper"), PLANTED_GD, path=True)


def test_by_construction_values_are_not_counted():
    from ntpbias.experiments.ufm.checks import neural_collapse_check

    c = neural_collapse_check()
    assert c.kind == "by-construction" and c.verdict == "by construction" and "S̃" in c.construction
