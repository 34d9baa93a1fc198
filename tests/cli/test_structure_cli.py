"""``ntpbias structure``: Example 1, the Proposition-2 counterexample, and bad inputs (exit status 2, one line)."""

import json

import pytest

from ntpbias.data.sentences import EXAMPLE1_SENTENCES


def _write(tmp_path, text, name="s.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_example1_json(cli):
    code, out, err = cli("structure", "example1", "--json")
    assert code == 0, err
    rec = json.loads(out)
    assert rec["collocation"] == {"S": "V", "V": "O", "O": "P", "P": "S"}
    assert rec["queries"]["P"] == {"optimal": ["O"], "non_optimal": ["P"], "non_comparable": ["S", "V"],
                                   "confused": [], "order": [["O", "P"]]}
    assert rec["queries"]["O"]["non_optimal"] == ["S", "V"]
    for key in ("collocation", "partial_orders", "no_confused", "assumption3", "realizable", "all"):
        assert rec["assumptions"][key] is True
    assert rec["N"] == 9 and rec["L_max"] == 3 and rec["regeneration"]["reproduces_labels"] is True


def test_sentences_file_equals_builtin(tmp_path, cli):
    path = _write(tmp_path, "\n".join(" ".join(s) for s in EXAMPLE1_SENTENCES) + "\n")
    code, out, _ = cli("structure", path, "--json")
    assert code == 0
    from_file = json.loads(out)
    code, out, _ = cli("structure", "example1", "--json")
    builtin = json.loads(out)
    for key in ("collocation", "queries", "assumptions", "samples"):
        assert from_file[key] == builtin[key]


def test_text_output_and_query(cli):
    code, out, _ = cli("structure", "example1", "--query", "P")
    assert code == 0
    assert "collocation (a permutation): S->V, V->O, O->P, P->S" in out
    assert "O>P" in out and "V>S" not in out  # only the order under P


def test_counterexample_max_margin(run_cli):
    res = run_cli("structure", "prop2-counterexample", "--max-margin", "--json")
    assert res.returncode == 0, res.stderr
    mm = json.loads(res.stdout)["max_margin"]
    assert mm["W_kq_certified"] and mm["W_ov_certified"] and mm["prop2_holds_everywhere"] is False
    q = mm["prop2"]["q"]
    assert q["condition_holds"] is False and q["agree"] is False
    assert q["norm2_qp"] == pytest.approx(7 / 6, rel=1e-9, abs=0)
    assert q["norm2_closed_form"] == pytest.approx(6 / 5, rel=1e-12, abs=0)
    assert q["qp"]["a"] == pytest.approx(2 / 3, abs=1e-9)
    assert q["closed_form"]["a"] == pytest.approx(3 / 5, rel=1e-12, abs=0)


def test_inconsistent_labels_report_then_exit_2(tmp_path, cli, assert_user_error):
    path = _write(tmp_path, "a b c\na b d\nb a\nc d\nd c\n")
    code, out, err = cli("structure", path, "--json")
    assert_user_error(code, err, "several labels")
    assert "no longer applicable" in err
    rec = json.loads(out)  # the full report is still printed
    assert rec["assumptions"]["realizable"] is False
    offence = rec["assumptions"]["violations"]["realizable"][0]
    assert [s["text"] for s in offence["sentences"]] == ["a b c", "a b d"]


def test_confused_dataset(tmp_path, cli, assert_user_error):
    # under query c: c > b (from "b c -> d") and a > c (from "a b c -> b"), so c is confused
    path = _write(tmp_path, "a b c b\nb c d c\nc d a\nd a\n")
    code, out, err = cli("structure", path)
    assert_user_error(code, err, "no_confused")
    assert "Theorems 1-3" in err
    assert "token 'c' is confused under query 'c'" in out
    assert "sentence 2: b c d c; sentence 1: a b c b" in " ".join(out.split())


@pytest.mark.parametrize("content,args,match", [
    ("", (), "empty"),
    ("a a a\n", (), "at least 2 distinct tokens"),
    ("S V O P\nV O P\nO P P\nP S V\n", ("--query", "Z"), "'Z' in the query is not in the vocabulary"),
    ("a b c\nb c a\nc a\n", ("--query", "a"), "never the query"),
])
def test_bad_inputs(tmp_path, content, args, match, cli, assert_user_error):
    path = _write(tmp_path, content)
    code, out, err = cli("structure", path, *args)
    assert_user_error(code, err, match)
    assert out == ""


def test_missing_file_and_directory(tmp_path, cli, assert_user_error):
    code, _, err = cli("structure", tmp_path / "nope.txt")
    assert_user_error(code, err, "no such file or folder (built-in: example1")
    code, _, err = cli("structure", tmp_path)
    assert_user_error(code, err, "is a directory")
