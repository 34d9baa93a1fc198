"""Every input of a command checked at the door (docs/errors-and-limits.md): files, output paths, every group of
``reproduce`` and every cell of a sweep before the first unit of work; a run that stops early says so."""

import json
import os

import numpy as np
import pytest


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("command", [["train", "--preset", "linear-2d"], ["reproduce", "linear-fig2"]])
def test_an_output_file_that_is_a_directory_is_refused_before_any_work(tmp_path, cli, assert_user_error, command):
    out = tmp_path / "run"
    (out / "summary.json").mkdir(parents=True)
    code, _, err = cli(*command, "--scale", "smoke", "--out", out, "--quiet")
    assert_user_error(code, err, "summary.json is a directory (or not a regular file) where ntpbias writes a file")
    assert _tree(out) == ["summary.json"]


def test_analyze_refuses_an_analysis_json_directory_and_a_file_as_out(tmp_path, cli, assert_user_error):
    data = tmp_path / "s.txt"
    data.write_text("a b c\nb c a\n")
    (tmp_path / "a" / "analysis.json").mkdir(parents=True)
    code, _, err = cli("analyze", data, "--context-length", "1", "--out", tmp_path / "a")
    assert_user_error(code, err, "analysis.json is a directory")
    assert _tree(tmp_path / "a") == ["analysis.json"]
    (tmp_path / "f").write_text("x")
    code, _, err = cli("analyze", data, "--context-length", "1", "--out", tmp_path / "f")
    assert_user_error(code, err, "is a file")


@pytest.mark.parametrize("kind", ["directory", "fifo", "empty", "renamed-npz", "text", "object"])
def test_a_bad_embedding_file_is_one_line(tmp_path, cli, assert_user_error, kind):
    data = tmp_path / "s.txt"
    data.write_text("a b c\nb c a\n")
    emb = tmp_path / "e.npy"
    if kind == "directory":
        emb.mkdir()
    elif kind == "fifo":
        os.mkfifo(emb)
    elif kind == "empty":
        emb.write_bytes(b"")
    elif kind == "renamed-npz":
        np.savez(tmp_path / "x.npz", H=np.ones((3, 2)))
        (tmp_path / "x.npz").rename(emb)
    elif kind == "text":
        emb.write_text("0 1\n1 0\n")
    else:
        np.save(emb, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    code, _, err = cli("analyze", data, "--context-length", "1", "--embedding", emb, "--out", tmp_path / "o")
    pattern = {"directory": "is a directory", "fifo": "is not a regular file"}.get(kind, "not a readable .npy array")
    assert_user_error(code, err, f"--embedding {emb}: {pattern}")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", [["train", "{f}"], ["sweep", "{f}"], ["analyze", "{f}", "--context-length", "1"],
                                     ["structure", "{f}"], ["corpus", "{f}"]])
def test_a_fifo_where_a_file_belongs_never_blocks(tmp_path, cli, assert_user_error, command):
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    args = [str(fifo) if a == "{f}" else a for a in command]
    if command[0] in ("train", "sweep", "analyze"):
        args += ["--out", tmp_path / "o"]
    code, _, err = cli(*args)
    assert code == 2 and "ntpbias: error:" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_a_bad_yelp_file_fails_before_any_imdb_work(tmp_path, cli, assert_user_error):
    yelp = tmp_path / "yelp.json"
    yelp.write_text("\n".join(json.dumps({"text": "x" * 1200, "stars": s}) for s in (5, "five", 1)) + "\n")
    code, _, err = cli("reproduce", "attention-imdb", "--yelp", yelp, "--scale", "smoke", "--out", tmp_path / "r",
                       "--quiet")
    assert_user_error(code, err, "line 2: unknown star rating 'five'")
    assert not (tmp_path / "r").exists()


def test_a_preset_that_needs_a_file_is_refused_before_the_output_exists(tmp_path, cli, assert_user_error):
    code, _, err = cli("train", "--preset", "attention-yelp-one-layer", "--out", tmp_path / "r", "--quiet")
    assert_user_error(code, err, "needs the reviews file: set data.path")
    code, _, err = cli("train", "--preset", "attention-yelp-one-layer", "--set", f"data.path={tmp_path}",
                       "--out", tmp_path / "r", "--quiet")
    assert_user_error(code, err, f"data.path {tmp_path}: is a directory")
    assert not (tmp_path / "r").exists()


def test_an_unknown_collect_metric_fails_before_any_cell(tmp_path, cli, assert_user_error):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[base]\npreset = "linear-2d"\n[axes]\nseed = [0, 1]\n[collect]\nmetrics = ["loss", "nope"]\n'
                     '[run]\nexecutor = "inprocess"\n')
    code, _, err = cli("sweep", sweep, "--out", tmp_path / "out")
    assert_user_error(code, err, "'nope' is not a final value of linear runs; available: loss, loss_gap")
    assert not (tmp_path / "out").exists()


def test_a_sweep_cell_that_names_a_missing_file_fails_before_any_cell(tmp_path, cli, assert_user_error):
    sweep = tmp_path / "s.toml"
    sweep.write_text('[base]\npreset = "linear-2d"\n[base.set]\ndata.source = "file"\ndata.context_length = 1\n'
                     f'data.path = "{tmp_path / "ok.txt"}"\n[axes]\n"data.path" = ["{tmp_path / "ok.txt"}", '
                     '"missing.txt"]\n[run]\nexecutor = "inprocess"\n')
    (tmp_path / "ok.txt").write_text("a b c\n")
    code, _, err = cli("sweep", sweep, "--out", tmp_path / "out")
    assert_user_error(code, err, "sweep cell data.path=missing.txt: data.path missing.txt: no such file")
    assert not (tmp_path / "out").exists()


def test_a_diverged_run_is_marked_in_its_summary_and_prints_one_line(tmp_path, cli, assert_user_error):
    out = tmp_path / "run"
    code, _, err = cli("train", "--preset", "attention-fig2", "--scale", "smoke", "--set", "optimizer.lr=1e300",
                       "--set", "train.steps=3", "--out", out, "--quiet")
    assert_user_error(code, err, "the loss became non-finite at step 1")
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["passed"] is False


def test_an_eof_inside_a_command_is_a_bug_not_an_interrupt(tmp_path, cli, monkeypatch):
    import ntpbias.cli.structure as structure

    def broken(_name):
        raise EOFError("unexpected end of data")

    monkeypatch.setattr(structure, "load_sentences", broken)
    code, _, err = cli("structure", "example1")
    assert code == 1 and err.strip().startswith("ntpbias: internal error (a bug, please report it): EOFError")
    assert len(err.strip().splitlines()) == 1


def test_a_run_refused_while_reading_its_data_leaves_no_folder(tmp_path, cli, assert_user_error):
    sentences = tmp_path / "single.txt"
    sentences.write_text("a\nb\n")
    code, _, err = cli("train", "--preset", "transformer-example1", "--set", "data.source=file",
                       "--set", f"data.path={sentences}", "--out", tmp_path / "run", "--quiet")
    assert_user_error(code, err, "every sentence has a single token")
    assert not (tmp_path / "run").exists()
