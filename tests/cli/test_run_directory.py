"""A run directory holds one run, written by one process, in files a group can share (docs/errors-and-limits.md):
a second writer is refused with the holder's pid (a dead holder's lock is taken over), an --out that holds another run
is refused unless --overwrite (which clears it) or --resume, and every file gets the process's umask."""

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from ntpbias.io import LOCK_NAME

TRAIN = ["train", "--preset", "linear-2d", "--scale", "smoke", "--quiet"]
SWEEP = '[base]\npreset = "linear-2d"\nscale = "smoke"\n[axes]\nseed = [0]\n[run]\nexecutor = "inprocess"\n'


def _inputs(tmp_path, command):
    """``command`` with ``{data}`` and ``{sweep}`` replaced by a small sequences file and sweep file."""
    (tmp_path / "s.txt").write_text("a b c a\nb c a b\n")
    (tmp_path / "sw.toml").write_text(SWEEP)
    return [str(tmp_path / "s.txt") if a == "{data}" else str(tmp_path / "sw.toml") if a == "{sweep}" else a
            for a in command]


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.fixture
def holder(tmp_path):
    """A second process that holds the lock of a directory until it is stopped: ``holder(path)`` -> its pid."""
    procs = []

    def hold(path):
        code = textwrap.dedent(f"""
            import sys, time
            from ntpbias.io import locked_dir
            with locked_dir({str(path)!r}):
                print("held", flush=True)
                time.sleep(120)
        """)
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        assert proc.stdout.readline().strip() == "held"
        return proc.pid

    yield hold
    for proc in procs:
        proc.kill()
        proc.wait()


# ------------------------------------------------------------------------------------------------ one writer
@pytest.mark.parametrize("command", [TRAIN, ["reproduce", "linear-fig2", "--scale", "smoke", "--quiet"],
                                     ["analyze", "{data}", "--context-length", "1"], ["sweep", "{sweep}"],
                                     ["corpus", "{data}", "-T", "1"]])
def test_a_second_writer_is_refused_with_the_holders_pid(tmp_path, cli, assert_user_error, holder, command):
    out = tmp_path / "out"
    pid = holder(out)
    args = _inputs(tmp_path, command)
    code, _, err = cli(*args, "--out", out)
    assert_user_error(code, err, f"{out} is being written by another ntpbias process (pid {pid} on ")
    assert _tree(out) == [LOCK_NAME]


def test_a_lock_left_by_a_killed_process_is_taken_over(tmp_path, cli):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    proc.kill()
    proc.wait()
    out.mkdir()
    (out / LOCK_NAME).write_text(f"{proc.pid} {os.uname().nodename}\n")  # what a killed writer leaves
    code, _, err = cli(*TRAIN, "--out", out)
    assert code == 0, err
    assert (out / "summary.json").is_file() and not (out / LOCK_NAME).exists()


def test_two_trainings_into_one_directory_at_once_leave_one_run(tmp_path, run_cli):
    """The issue's case: two processes, one --out; one run wins, the other is refused, the directory is that run's."""
    import json

    out = tmp_path / "out"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    cmds = [[sys.executable, "-m", "ntpbias", *TRAIN, "--set", f"seed={s}", "--out", str(out)] for s in (1, 2)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for c in cmds]
    results = [(p.wait(timeout=600), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) == [0, 2], results
    err = next(e for c, e in results if c == 2)  # refused by the lock, or because the other run had finished
    assert "is being written by another ntpbias process" in err or "already holds an earlier run" in err
    seed = json.loads((out / "summary.json").read_text())["config"]["seed"]
    assert f"seed = {seed}" in (out / "config.toml").read_text()


# ------------------------------------------------------------------------------------------------ one run per directory
def test_an_out_holding_another_run_is_refused_replaced_or_resumed(tmp_path, cli, assert_user_error):
    out = tmp_path / "out"
    assert cli(*TRAIN, "--out", out)[0] == 0
    assert (out / "geometry.npz").is_file()
    before = _tree(out)
    transformer = ["train", "--preset", "transformer-example1", "--scale", "smoke", "--quiet", "--out", out]
    code, _, err = cli(*transformer)
    assert_user_error(code, err, f"{out} already holds an earlier run (summary.json, config.toml, metrics.csv, "
                                 "report.html); pass --overwrite to replace it, --resume to continue it")
    assert _tree(out) == before
    code, _, err = cli(*transformer, "--overwrite")
    assert code == 0, err
    assert not (out / "geometry.npz").exists()  # the linear run's files are gone
    assert "transformer" in (out / "config.toml").read_text()
    code, _, err = cli(*transformer, "--resume")
    assert code == 0, err
    code, _, err = cli(*transformer, "--overwrite", "--resume")
    assert_user_error(code, err, "--overwrite starts the run over and --resume continues it: give one of them")


def test_overwrite_removes_ntpbias_outputs_only(tmp_path, cli):
    out = tmp_path / "out"
    assert cli(*TRAIN, "--out", out)[0] == 0
    (out / "notes.txt").write_text("mine")
    assert cli(*TRAIN, "--set", "seed=3", "--out", out, "--overwrite")[0] == 0
    assert (out / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("command", [["analyze", "{data}", "--context-length", "1"],
                                     ["reproduce", "linear-fig2", "--scale", "smoke", "--quiet"],
                                     ["corpus", "{data}", "-T", "1"], ["sweep", "{sweep}"]])
def test_every_writer_of_a_directory_refuses_another_run(tmp_path, cli, assert_user_error, command):
    out = tmp_path / "out"
    assert cli(*TRAIN, "--out", out)[0] == 0
    (out / "figures" / "earlier.png").write_bytes(b"")  # a file of the earlier run that no command writes again
    args = _inputs(tmp_path, command)
    code, _, err = cli(*args, "--out", out)
    assert_user_error(code, err, "already holds an earlier run")
    code, _, err = cli(*args, "--out", out, "--overwrite")
    assert code == 0, err
    assert not (out / "figures" / "earlier.png").exists()


def test_a_sweep_continues_its_own_directory(tmp_path, cli):
    sweep = tmp_path / "sw.toml"
    sweep.write_text(SWEEP)
    assert cli("sweep", sweep, "--out", tmp_path / "out", "--quiet")[0] == 0
    code, out, _ = cli("sweep", sweep, "--out", tmp_path / "out", "--quiet")
    assert code == 0 and "ran 0" in out


# ------------------------------------------------------------------------------------------------ permissions
@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_get_the_umask(tmp_path, cli, mask, mode):
    old = os.umask(mask)
    try:
        code, _, err = cli(*TRAIN, "--out", tmp_path / "out")
    finally:
        os.umask(old)
    assert code == 0, err
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert files and {stat.S_IMODE(p.stat().st_mode) for p in files} == {mode}
