"""What a check's verdict proves: kinds, premises, vacuous bounds, calibrated levels graded on held-out data."""

import pytest

from ntpbias.results import Check, headline, tally


def _check(kind, passed, premise_met=None):
    return Check("c", "claim", 1.0, ">= 0", passed, kind=kind, premise="p", premise_met=premise_met)


@pytest.mark.parametrize("kind, passed, premise_met, verdict", [
    ("theorem", True, True, "pass"), ("theorem", False, True, "fail"), ("theorem", True, None, "pass"),
    ("theorem", True, False, "consistent"), ("theorem", False, False, "inconsistent"),
    ("vacuous", True, None, "shown"), ("vacuous", False, None, "shown"),
    ("paper-number", False, None, "fail"), ("paper-number", False, False, "inconsistent"),
    ("calibrated", True, False, "pass"), ("sanity", False, None, "fail"),
])
def test_verdict_of_each_kind(kind, passed, premise_met, verdict):
    assert _check(kind, passed, premise_met).verdict == verdict


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown kind 'proof'"):
        _check("proof", True)


def test_headline_never_counts_a_vacuous_bound_as_passed():
    checks = [_check("theorem", True), _check("theorem", True, premise_met=False), _check("vacuous", True),
              _check("vacuous", False), _check("paper-number", True), _check("paper-number", False),
              _check("theorem", False, premise_met=False), _check("calibrated", True), _check("sanity", True)]
    t = tally(checks)
    assert t == {"theorem_passed": 2, "theorem_outside_premises": 1, "theorem_failed": 0, "paper_matched": 1,
                 "paper_missed": 1, "calibrated_passed": 1, "calibrated_failed": 0, "sanity_passed": 1,
                 "sanity_failed": 0, "vacuous_shown": 2, "inconsistent": 1, "failed": 1}
    assert headline(checks) == ("2 theorem checks passed (1 outside their premises: consistent), 1 paper numbers "
                                "matched (of 2), 1 calibrated and 1 sanity checks passed, 2 vacuous bounds shown, "
                                "1 inconsistent outside their premises; 1 failed")


def test_linear_group_checks_say_what_they_prove(tmp_path):
    from ntpbias.experiments import RunContext
    from ntpbias.experiments.linear import run_group

    section = run_group(RunContext(out=tmp_path, scale="smoke")).section
    assert section.checks
    for c in section.checks:
        assert c.kind in ("theorem", "paper-number", "calibrated", "sanity", "vacuous"), c.name
        assert c.threshold_source, c.name
        if c.kind == "calibrated":  # the group grades data seed 0; the levels were set on seeds 1-8
            assert "held out" in c.threshold_source and "not held out" not in c.threshold_source, c.name
    by_name = {c.name: c for c in section.checks}
    # NGD and Adam are outside Lemma 2 / Thm 2 (proved for GD): their theorem checks can only be "consistent"
    assert by_name["fig5-ngd: norm growth"].premise_met is False
    assert by_name["fig5-ngd: norm growth"].verdict in ("consistent", "inconsistent")
    assert {"Adam vs NGD: loss", "Adam vs NGD: alignment"} <= set(by_name)
    table = next(t for t in section.tables if t.title == "Paper vs ntpbias")
    assert [r[1] for r in table.rows] == [0.8811, 1.445]


def test_a_train_run_on_a_calibration_dataset_says_it_is_not_held_out(tmp_path):
    import ntpbias as nb

    run = nb.train("linear-fig4-gd", out=tmp_path / "r", set={"train.steps": 50, "data.seed": 3})
    calibrated = [c for c in run.checks if c.kind == "calibrated"]
    assert calibrated and all("not held out" in c.threshold_source for c in calibrated)


def test_the_2d_example_satisfies_every_statement_of_figure_1_and_the_symmetric_one_does_not():
    """Decision A-D8: contexts at 90°, 205°, 300° and the first Dirichlet draw whose H rounds to 0.8811 make every
    statement of Fig. 1's caption hold; the symmetric configuration (equal cones) cannot show 'the wider the cone,
    the larger the norm', and its draw has another entropy (so these checks can fail)."""
    from ntpbias.experiments.linear.checks import two_d_checks
    from ntpbias.experiments.linear.config import TWO_D, TWO_D_SYMMETRIC
    from ntpbias.experiments.linear.runs import reference

    def verdicts(cfg):
        data = cfg.data.build()
        return {c.name: c.verdict for c in two_d_checks(data, reference(data)[0])}

    faithful, symmetric = verdicts(TWO_D), verdicts(TWO_D_SYMMETRIC)
    assert set(faithful.values()) == {"pass"} and len(faithful) == 8
    assert symmetric["2D: wider cone, larger norm"] == "fail" and symmetric["2D: entropy"] == "fail"
    assert TWO_D.data.build().entropy == pytest.approx(0.8811, abs=5e-5)


def test_paper_c_checks_say_what_they_prove(tmp_path):
    """Paper C's vacuous bounds are shown, never counted; every check has a kind and a threshold source; Lemma 5's
    floor is checked per sample; Theorem 2's t-condition decides whether its checks can pass or only be consistent."""
    import ntpbias as nb

    run = nb.train("transformer-example1", out=tmp_path / "ex1", set={"train.steps": 60})
    by_name = {c.name: c for c in run.checks}
    assert all(c.threshold_source for c in run.checks)
    assert by_name["train: Prop. 1 cosine bound (vacuous)"].verdict == "shown"
    assert by_name["train: Theorem 1 cosine bound (vacuous)"].verdict == "shown"
    floor = by_name["train: Lemma 5 attention floor"]
    assert "every sample" in floor.claim and floor.kind == "theorem"
    thm2 = by_name["train: Theorem 2 attention bound"]
    assert thm2.premise_met is False and thm2.verdict in ("consistent", "inconsistent")  # t-condition unmet at t=60
    assert run.summary["tally"]["vacuous_shown"] >= 2


def test_the_separability_study_puts_covers_threshold_beside_ours(tmp_path):
    from ntpbias.experiments import RunContext
    from ntpbias.experiments.separability import run_group

    section = run_group(RunContext(out=tmp_path, scale="smoke")).section
    table = next(t for t in section.tables if t.title == "Paper vs ntpbias")
    assert table.rows[0][1] == 0.5 and table.rows[0][2].endswith("at m = 12")
    assert all(c.kind in ("theorem", "sanity") and c.threshold_source for c in section.checks)
