"""Every check of a paper's sentence quotes it: the claims registry, the quotes of every group's checks, the generated
docs/claims.md, and the measurements behind the reworked verdicts (steps to a threshold, Figs. 1/3's statistics,
Theorem 3's gaps), each against an independent computation."""

import math
import re
from pathlib import Path

import numpy as np
import pytest

from ntpbias.experiments.claims import CLAIMS, cite
from ntpbias.results import QUOTED_KINDS

ROOT = Path(__file__).resolve().parents[2]


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def test_every_claim_has_a_place_and_a_sentence():
    for key, claim in CLAIMS.items():
        assert claim.where and len(claim.quote) > 20, key
        assert claim.paper in ("A", "B", "C") or claim.paper.startswith("docs/"), key
    assert cite("C:lemma5")["where"] == "Lemma 5 of paper C (App. C.2)"


def test_every_docs_quote_stands_in_its_docs_page():
    """The papers are not in the repository (calibration/check_quotes.py checks their quotes where they are); the
    statements we quote from our own docs must stand there verbatim."""
    for key, claim in CLAIMS.items():
        if key.startswith("docs:"):
            page = ROOT / claim.paper
            assert _normal(claim.quote) in _normal(page.read_text(encoding="utf-8")), key


def test_claims_page_is_generated_from_the_code():
    from ntpbias.report.claims import render

    assert (ROOT / "docs" / "claims.md").read_text(encoding="utf-8") == render(), \
        "docs/claims.md is stale: python -m ntpbias.report.claims"


@pytest.mark.slow
# (the lm group grades paper A's theorem checks, quoted by the linear group's code, only above smoke scale)
@pytest.mark.parametrize("group", ["linear", "separability", "attention", "attention-imdb", "transformer",
                                   "optimizers", "ufm"])
def test_every_check_of_a_sentence_quotes_it(group, tmp_path):
    """At smoke scale (a plumbing test: nothing graded) every theorem, paper-number and erratum check carries a quote
    of the registry, where it stands and what it measures."""
    from ntpbias.api import run_groups
    from ntpbias.experiments import RunContext

    (section,) = run_groups([group], RunContext(out=tmp_path / group, scale="smoke"))
    quotes = {_normal(c.quote) for c in CLAIMS.values()}
    quoted = [c for c in section.checks if c.kind in QUOTED_KINDS]
    assert quoted
    for c in quoted:
        assert c.missing == (), (c.name, c.missing)
        assert _normal(c.quote) in quotes, c.name
    assert {c.verdict for c in section.checks} == {"not graded"}


# ---------------------------------------------------------------------------------------------- the measurements
def _history(values: dict[str, list[float]], steps: list[int]):
    from ntpbias.training.history import History

    return History.from_log(steps, [0], [{k: np.array([v[i]]) for k, v in values.items()} for i in range(len(steps))])


def test_steps_to_a_threshold_interpolates_in_log_step():
    from ntpbias.experiments.linear.speed import steps_to

    h = _history({"cos_mm": [0.0, 0.5, 0.7, 0.95], "loss_gap": [1.0, 1e-1, 1e-2, 1e-4]}, [0, 10, 100, 1000])
    # cos crosses 0.9 between steps 100 (0.7) and 1000 (0.95): 4/5 of the way in log10(step), at 10^(2 + 0.8)
    assert steps_to(h, "cos_mm", 0.9, "above") == pytest.approx(10 ** 2.8)
    # the loss gap crosses 1e-3 halfway between 1e-2 and 1e-4 in log(value): halfway in log10(step)
    assert steps_to(h, "loss_gap", 1e-3, "below") == pytest.approx(10 ** 2.5)
    assert steps_to(h, "cos_mm", 0.99, "above") == math.inf


def test_figure3_statistics_of_a_hand_made_table():
    from ntpbias.experiments.attention.figure3 import statistics

    pd = np.linspace(-1, 1, 40)
    zv = 3 * pd + np.where(np.abs(pd) < 0.1, 0.0, 0.0)
    zv[5] = -zv[5]  # one clear token on the wrong side (pd[5] = -0.74)
    zp = np.abs(pd) ** 2
    table = {"seed": np.zeros(40, dtype=int), "pd": pd, "e_dot_v": zv, "e_dot_p": zp, "count": np.full(40, 60)}
    s = statistics(table)[0]
    clear = np.abs(pd) > 0.3
    assert s["sign_agreement"] == pytest.approx((clear.sum() - 1) / clear.sum())
    assert s["irrelevant_spread"] == pytest.approx(np.median(np.abs(zv[np.abs(pd) < 0.1])) /
                                                   np.median(np.abs(zv[clear])))
    means = [zv[i * 4:(i + 1) * 4].mean() for i in range(10)]  # pd is sorted: deciles are blocks of 4
    assert s["v_bins"] == int((np.diff(means) > 0).sum()) and s["p_bins"] == 9


@pytest.mark.slow
def test_theorem3_gap_agrees_with_a_per_query_loop(tmp_path):
    """The vectorized gap the metrics log against a loop over the queries' token classes, on trained models."""
    from ntpbias._tensor import to_numpy
    from ntpbias.experiments import RunContext
    from ntpbias.experiments.transformer.config import FIG2
    from ntpbias.experiments.transformer.runs import run_config, series
    from ntpbias.geometry.transformer.optimum import token_basis

    for r in run_config(FIG2, RunContext(out=tmp_path)):
        st = r.task.structure
        A = to_numpy(token_basis(r.two_stage.W_kq[0], r.task.E))
        gaps = []
        for q in st.queries:
            c = st.token_classes(q)
            if c.optimal and c.non_comparable and c.non_optimal:
                O, M, N = (list(x) for x in (c.optimal, c.non_comparable, c.non_optimal))
                gaps.append(min(A[O, q].min() - A[M, q].max(), A[M, q].min() - A[N, q].max()))
        assert gaps, "the Fig. 2 dataset has queries with non-comparable tokens"
        assert series(r.two_stage.stage2, "order_gap")[1][-1] == pytest.approx(min(gaps), abs=1e-9)


def test_claims_page_lists_each_sentence_with_its_checks_and_verdicts(tmp_path):
    """Records collected from a run directory end up under their sentence, with both scales' verdicts; a recorded
    quote that is no claim of the code makes the page stale (an error, not a silent omission)."""
    import json

    from ntpbias.report.claims import render, update_records

    quote = CLAIMS["C:lemma5"].quote
    check = {"name": "fig2: Lemma 5 per position", "kind": "theorem", "verdict": "pass", "measured": 0.0,
             "threshold": ">= -1e-12", "metric": "smallest φ - 1/L", "quote": quote, "where": "Lemma 5",
             "premise": "Assumptions 1-3", "premise_met": True}
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"command": "ntpbias reproduce transformer",
                                                  "sections": [{"id": "transformer"}], "checks": [check]}))
    update_records("quick", [run], docs=tmp_path / "docs")
    page = render(docs=tmp_path / "docs")
    section = page.split("### Lemma 5 of paper C (App. C.2)")[1].split("###")[0]
    assert "| transformer: Lemma 5 per position (theorem) | smallest φ - 1/L | Assumptions 1-3 (met); *runs:* fig2 | " \
           "**pass** (0) | not run |" in section
    assert "`ntpbias reproduce transformer`" in page
    check["quote"] = "a sentence no paper says"
    (run / "summary.json").write_text(json.dumps({"sections": [{"id": "transformer"}], "checks": [check]}))
    update_records("quick", [run], docs=tmp_path / "docs")
    with pytest.raises(ValueError, match="no claim of the code"):
        render(docs=tmp_path / "docs")


def test_claims_page_gathers_configurations_and_counts_each_verdict_apart(tmp_path):
    """One row per check of a sentence: its configurations (the name before ": ") summarized, each verdict counted
    apart, the negative control with its values, why a check was not graded; text that Markdown reads is escaped."""
    import json

    from ntpbias.report.claims import render, update_records

    quote = CLAIMS["C:lemma5"].quote
    base = {"kind": "theorem", "threshold": ">= 0", "metric": "min_n φ_+ over |S| steps", "quote": quote,
            "where": "Lemma 5", "premise": "Assumptions 1-3", "premise_met": True,
            "control": "a run with the keys' *gradient* flipped", "ungraded_reason": ""}
    verdicts = ["pass", "pass", "consistent", "fail", "not graded", "control passed"]
    checks = [{**base, "name": f"V={v}, m=40: Lemma 5", "verdict": verdict, "measured": 0.1 * (i + 1),
               "control_measured": -0.5 * (i + 1), "control_passed": verdict == "control passed"}
              for i, (v, verdict) in enumerate(zip([20, 5, 10, 7, 3, 2], verdicts, strict=True))]
    checks[4]["ungraded_reason"] = "the run stops before t_0"
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"command": "ntpbias reproduce transformer",
                                                  "sections": [{"id": "transformer"}], "checks": checks}))
    update_records("quick", [run], docs=tmp_path / "docs")
    recorded = json.loads((tmp_path / "docs" / "results" / "checks-quick.json").read_text())["checks"]
    assert recorded[4]["ungraded_reason"] == "the run stops before t_0" and recorded[5]["control_passed"] is True
    section = render(docs=tmp_path / "docs").split("### Lemma 5 of paper C (App. C.2)")[1].split("###")[0]
    rows = [line for line in section.splitlines() if line.startswith("| transformer")]
    assert len(rows) == 1
    row = rows[0]
    assert "min\\_n φ\\_+ over \\|S\\| steps" in row  # escaped: no italics, no cell break
    assert "*control:* a run with the keys' \\*gradient\\* flipped" in row
    assert "*runs:* 6: V = 2, 3, 5, 7, 10, 20; m = 40" in row
    assert ("**2 pass**, 1 consistent, **1 fail**, 1 not graded, 1 control passed (0.1 to 0.6; control -3 to -0.5; "
            "not graded: the run stops before t\\_0)") in row
    assert row.endswith("| not run |")


def test_a_note_on_a_groups_records_is_shown_until_the_group_is_collected_again(tmp_path):
    """A note on one group's records (an earlier version's run, not rerun) stands on the page, and recollecting that
    group's run drops it (the note was about the records it replaces)."""
    import json

    from ntpbias.report.claims import load_records, records_path, render, update_records

    run = tmp_path / "run"
    run.mkdir()
    check = {"name": "fig2: Lemma 5 per position", "kind": "theorem", "verdict": "pass", "measured": 0.0,
             "threshold": ">= -1e-12", "metric": "smallest φ - 1/L", "quote": CLAIMS["C:lemma5"].quote,
             "where": "Lemma 5", "premise": "Assumptions 1-3", "premise_met": True}
    (run / "summary.json").write_text(json.dumps({"command": "ntpbias reproduce transformer",
                                                  "sections": [{"id": "transformer"}], "checks": [check]}))
    docs = tmp_path / "docs"
    update_records("paper", [run], docs=docs)
    data = load_records("paper", docs)
    data["notes"] = {"transformer": "from an earlier version", "linear": "kept"}
    records_path("paper", docs).write_text(json.dumps(data))
    assert "Note on the paper-scale records of `transformer`: from an earlier version" in render(docs=docs)
    update_records("paper", [run], docs=docs)
    assert load_records("paper", docs)["notes"] == {"linear": "kept"}
    assert "earlier version" not in render(docs=docs)
