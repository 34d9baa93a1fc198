"""The HTML run report shows each graded check's negative control (the input, its value there, its outcome) and why a
check was not graded."""

from ntpbias.report.html import render
from ntpbias.results import Check, Section, check_at_least, with_control


def test_report_shows_controls_and_why_a_check_was_not_graded(tmp_path):
    graded = with_control(check_at_least("rate", "decays", 1.9, 1.0), "a run stopped at step 10",
                          check_at_least("rate", "decays", 0.3, 1.0))
    vacuous_pass = with_control(check_at_least("bound", "holds", 2.0, 1.0), "a random iterate",
                                check_at_least("bound", "holds", 5.0, 1.0))
    skipped = Check("Thm 1 rate", "decays", 0.0, ">= 1", False, graded=False,
                    ungraded_reason="the run stops before t_0 = 32200")
    page = render(tmp_path, [Section("g", "Group", checks=[graded, vacuous_pass, skipped])], title="t", command="c")
    text = page.read_text(encoding="utf-8")
    assert "control: a run stopped at step 10 &rarr; 0.3, fails" in text
    assert "control: a random iterate &rarr; 5, <b>passes too</b>" in text and ">control passed<" in text
    assert "not graded<br><small>the run stops before t_0 = 32200</small>" in text
