"""`ntpbias train`, `reproduce` and `list`: tiny runs end to end, the run-directory contract, and bad input."""

import json
import os
import tomllib

import numpy as np
import pytest

from ntpbias.results import read_metrics_csv


@pytest.mark.slow
def test_reproduce_linear_smoke_in_a_real_process(tmp_path, run_cli, report_matches_summary, paper_vs_ntpbias):
    out = tmp_path / "lin"
    proc = run_cli("reproduce", "linear", "--out", out, "--scale", "smoke", "--seeds", "2", "--quiet")
    assert proc.returncode == 0, proc.stderr
    for name in ("config.toml", "metrics.csv", "summary.json", "report.html"):
        assert (out / name).is_file(), name
    summary = report_matches_summary(out)
    figures = {f["id"] for f in summary["sections"][0]["figures"]}
    assert figures == {"linear-fig1", "linear-fig2", "linear-fig3", "linear-fig4", "linear-fig5", "linear-regpath",
                       "linear-spread"}
    for fig in figures:
        assert (out / "figures" / f"{fig}.png").stat().st_size > 1000
        assert (out / "figures" / f"{fig}.svg").is_file()
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(figures)  # self-contained
    paper_rows = paper_vs_ntpbias(out)
    assert any("1.445" in cell for row in paper_rows for cell in row)  # paper A's entropy beside ours
    assert "http://" not in html and "https://" not in html  # no CDN
    for check in summary["checks"]:
        assert set(check) >= {"name", "claim", "measured", "threshold", "passed"}
    rows = read_metrics_csv(out / "metrics.csv")
    runs = {r["run"] for r in rows}
    assert {"2d-gd", "fig4-gd", "fig5-ngd", "fig5-adam"} <= runs
    assert {r for r in runs if r.startswith("spread-")} == {f"spread-{o}-{s}" for o in ("gd", "ngd", "adam")
                                                             for s in (100, 101)}  # two fresh datasets at smoke
    assert {r["seed"] for r in rows} == {0, 1}
    configs = tomllib.loads((out / "config.toml").read_text())
    assert configs["fig5-adam"]["optimizer"]["name"] == "adam" and configs["fig4-gd"]["seeds"] == 2


def _cos(a, b):
    return float((a * b).sum() / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_train_preset_writes_a_rerunnable_config(tmp_path, cli, report_matches_summary):
    out = tmp_path / "gd"
    code, stdout, err = cli("train", "--preset", "linear-fig4-gd", "--set", "train.steps=150",
                            "--set", "data.m=10", "--set", "data.d=12", "--out", out, "--quiet")
    assert code == 0, err
    cfg = tomllib.loads((out / "config.toml").read_text())
    assert cfg["train"]["steps"] == 150 and cfg["data"]["m"] == 10 and cfg["experiment"] == "linear"
    summary = report_matches_summary(out)
    assert summary["status"] == "completed" and summary["checks"]
    spread = summary["final_summary"]["loss_gap"]
    assert spread["seeds"] == 1 and spread["mean"] == summary["final"]["loss_gap"][0] and spread["std"] == 0
    first = read_metrics_csv(out / "metrics.csv")
    steps = [r["step"] for r in first]
    assert steps[0] == 0 and steps[-1] == 150 and steps == sorted(set(steps))  # train.steps=150 ran 150 steps
    assert {r["run"] for r in first} == {"train"} and {r["seed"] for r in first} == {0}
    assert summary["final"] == {k: [first[-1][k]] for k in summary["final"]}  # the last logged row
    # identities against the saved weights (geometry.npz) and the data facts, recomputed here with numpy
    facts = summary["sections"][0]["facts"]
    assert (facts["contexts m"], facts["embedding dim d"]) == (10, 12)
    for row in first:  # CE(W_k) - (CE(W_k) - H) = H, the entropy of the data, at every logged step
        assert row["loss"] - row["loss_gap"] == pytest.approx(facts["entropy H (nats)"], abs=1e-12)
    geo = np.load(out / "geometry.npz")
    W, W_star, W_mm = geo["W_final"][0], geo["W_star"], geo["W_mm"]
    assert W.shape == W_star.shape == W_mm.shape == (facts["vocabulary V"], 12)
    assert np.linalg.norm(W_star) == pytest.approx(facts["||W*||"], rel=1e-12)
    assert np.linalg.norm(W_mm) == pytest.approx(facts["||W^mm||"], rel=1e-12)
    last = first[-1]
    assert np.linalg.norm(W) == pytest.approx(last["norm"], rel=1e-12)
    assert _cos(W, W_mm) == pytest.approx(last["cos_mm"], rel=1e-10)
    assert _cos(W - W_star, W_mm) == pytest.approx(last["cos_mm_corrected"], rel=1e-10)
    assert last["F_error_rel"] == pytest.approx(last["F_error"] / np.linalg.norm(W_star), rel=1e-12)
    # re-running the saved config reproduces the metrics exactly
    code, _, _ = cli("train", out / "config.toml", "--out", tmp_path / "again", "--quiet")
    assert code == 0
    assert read_metrics_csv(tmp_path / "again" / "metrics.csv") == first
    assert (out / "figures" / "training.png").is_file() and (out / "checkpoints" / "train" / "last.pt").is_file()


def test_train_resume_gives_the_uninterrupted_numbers(tmp_path, cli):
    args = ["train", "--preset", "linear-fig5-adam", "--set", "data.m=8", "--set", "data.d=10", "--quiet"]
    code, _, err = cli(*args, "--set", "train.steps=200", "--out", tmp_path / "full")
    assert code == 0, err
    # a run stopped at 80 steps, then resumed in the same directory with the full length
    code, _, err = cli(*args, "--set", "train.steps=80", "--out", tmp_path / "part")
    assert code == 0, err
    assert read_metrics_csv(tmp_path / "part" / "metrics.csv")[-1]["step"] == 80
    code, _, err = cli(*args, "--set", "train.steps=200", "--out", tmp_path / "part", "--resume")
    assert code == 0, err
    full = read_metrics_csv(tmp_path / "full" / "metrics.csv")
    part = read_metrics_csv(tmp_path / "part" / "metrics.csv")
    assert full[-1] == part[-1] and full[-1]["step"] == 200


def test_list_shows_presets_and_figure_ids(cli):
    code, out, _ = cli("list", "--json")
    assert code == 0
    listing = json.loads(out)
    assert "linear-fig4-gd" in listing["presets"] and "linear-fig5" in listing["groups"]["linear"]["figures"]


def test_diverging_step_size_stops_keeps_metrics_and_exits_2(tmp_path, cli, assert_user_error):
    out = tmp_path / "nan"
    code, _, err = cli("train", "--preset", "linear-fig4-gd", "--set", "optimizer.lr=1e308",
                       "--set", "train.steps=500", "--out", out, "--quiet")
    assert_user_error(code, err, "non-finite")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "diverged"
    rows = read_metrics_csv(out / "metrics.csv")  # the metrics up to the divergence are kept
    assert rows and rows[-1]["step"] < 500


@pytest.mark.parametrize("args, pattern", [
    (["train", "--preset", "no-such-preset"], "unknown preset"),
    (["reproduce", "linear-fig99"], "unknown experiment or figure ID"),
    (["train", "--preset", "linear-fig4-gd", "--set", "optimizer.learning_rate=0.1"],
     "unknown setting optimizer.learning_rate"),
    (["train", "--preset", "linear-fig4-gd", "--set", "train.steps=ten"], "train.steps: expected an integer"),
    (["train", "--preset", "linear-fig4-gd", "--set", "optimizer.name=sgdx"], "optimizer.name = 'sgdx': unknown value"),
    (["train", "--preset", "linear-fig4-gd", "--set", "steps"], "expected key=value"),
    (["train"], "exactly one of"),
    (["train", "CONFIG"], "no such config file"),
    (["train", "UNKNOWN_FIELD"], "unknown setting data.colour"),
    (["train", "BAD_TOML"], "not valid TOML"),
    (["train", "NO_EXPERIMENT"], "set `experiment`"),
])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, args, pattern, cli, assert_user_error):
    (tmp_path / "unknown.toml").write_text('experiment = "linear"\n[data]\ncolour = "red"\n')
    (tmp_path / "bad.toml").write_text("experiment = \n")
    (tmp_path / "noexp.toml").write_text("seed = 1\n")
    subst = {"CONFIG": tmp_path / "missing.toml", "UNKNOWN_FIELD": tmp_path / "unknown.toml",
             "BAD_TOML": tmp_path / "bad.toml", "NO_EXPERIMENT": tmp_path / "noexp.toml"}
    out = tmp_path / "out"
    code, _, err = cli(*[subst.get(a, a) for a in args], "--out", out)
    assert_user_error(code, err, pattern)
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_unwritable_output_directory(tmp_path, cli, assert_user_error):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    code, _, err = cli("reproduce", "linear-fig3", "--scale", "smoke", "--out", locked / "x")
    assert_user_error(code, err, "cannot create output directory")


def test_unwritable_output_path_is_a_file(tmp_path, cli, assert_user_error):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, err = cli("reproduce", "linear-fig3", "--scale", "smoke", "--out", blocker / "x")
    assert_user_error(code, err, "cannot create output directory")


# ---------------------------------------------------------------------------------------------- exit status
def _group(gid, passed):
    """A group that trains nothing and returns one sanity check that passes or fails."""
    from ntpbias.experiments.base import Group
    from ntpbias.results import Check, RunResult, Section

    def run(ctx):
        section = Section(gid, gid, checks=[Check(f"{gid}: invariant", "claim", 1.0, "<= 0", passed, kind="sanity")])
        return RunResult(section, {})

    return Group(gid, gid, {}, run)


def test_a_completed_reproduce_with_a_failing_check_exits_3_after_every_group_and_the_report(tmp_path, cli,
                                                                                              monkeypatch):
    from ntpbias.experiments import GROUPS

    monkeypatch.setitem(GROUPS, "x-fails", _group("x-fails", False))
    monkeypatch.setitem(GROUPS, "x-passes", _group("x-passes", True))
    code, out, err = cli("reproduce", "x-fails", "x-passes", "--out", tmp_path / "r", "--quiet")
    assert code == 3, err
    assert "1 failed" in out and not err
    for gid in ("x-fails", "x-passes"):  # every group ran and wrote its outputs before the exit status
        assert json.loads((tmp_path / "r" / gid / "summary.json").read_text())["checks"]
    assert (tmp_path / "r" / "report.html").is_file()
    code, _, err = cli("reproduce", "x-passes", "--out", tmp_path / "p", "--quiet")
    assert code == 0, err


def test_smoke_scale_grades_nothing_and_exits_0(tmp_path, cli, monkeypatch):
    from ntpbias.experiments import GROUPS

    monkeypatch.setitem(GROUPS, "x-fails", _group("x-fails", False))
    code, out, err = cli("reproduce", "x-fails", "--scale", "smoke", "--out", tmp_path / "s", "--quiet")
    assert code == 0, err
    assert "not graded (smoke scale: 1 checks computed, none judged)" in out
    summary = json.loads((tmp_path / "s" / "summary.json").read_text())
    assert summary["checks"][0]["verdict"] == "not graded" and summary["passed"]


def test_exit_status_3_is_documented_in_help(cli):
    code, out, _ = cli("reproduce", "--help")
    assert code == 0 and "3 when the run completed but a graded" in " ".join(out.split())
