"""``ntpbias sweep`` end to end: a real sweep killed with SIGKILL and resumed, bad input, failed cells, dry run."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time

import pytest

SWEEP = """
[base]
preset = "separability-cover"
[base.set]
m = 8
trials = 6
scan = 1
[axes]
seed = { range = [0, 3] }
V = [2, 3]
"""


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.slow  # starts a Dask cluster or real worker processes
def test_killed_sweep_resumes_to_the_same_table(tmp_path, run_cli):
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(SWEEP, encoding="utf-8")
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    proc = subprocess.Popen([sys.executable, "-m", "ntpbias", "sweep", str(sweep), "--out", str(out),
                             "--executor", "local", "--workers", "2", "--quiet"], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if (out / "results.csv").exists() and len(_rows(out / "results.csv")) >= 1:
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the sweep and its workers, mid-run
    proc.wait()
    before = _rows(out / "results.csv")
    assert 1 <= len(before) <= 6
    done = run_cli("sweep", sweep, "--out", out, "--executor", "local", "--workers", "2")
    assert done.returncode == 0, done.stderr
    rows = _rows(out / "results.csv")
    keys = [r["cell"] for r in rows]
    assert len(keys) == len(set(keys)) == 6 and all(r["status"] == "completed" for r in rows)
    assert [r for r in rows if r["cell"] in {b["cell"] for b in before}] == before  # not rerun
    ref = run_cli("sweep", sweep, "--out", tmp_path / "ref", "--executor", "inprocess", "--json")
    assert ref.returncode == 0, ref.stderr
    strip = lambda rs: [{k: v for k, v in r.items() if k != "seconds"} for r in rs]  # noqa: E731
    assert strip(rows) == strip(_rows(tmp_path / "ref" / "results.csv"))
    assert '"aggregate"' in ref.stdout


@pytest.mark.parametrize(("body", "extra", "message"), [
    ("[axes]\nVV = [2, 3]", [], "unknown setting VV"),
    ("[axes]\nm = [8, \"many\"]", [], "axis 'm' value 'many': m: expected an integer"),
    ("[axes]\nV = [2]", ["--scheduler", "tcp://127.0.0.1:9", "--timeout", "1"], "cannot reach the Dask scheduler"),
    ("[axes]\nV = [2]", ["--set", "trials=0"], "trials = 0: must be >= 1"),
])
def test_bad_input_exits_2_with_one_line(tmp_path, body, extra, message, cli, assert_user_error):
    sweep = tmp_path / "s.toml"
    sweep.write_text("[base]\npreset = \"separability-cover\"\n[base.set]\nm = 8\ntrials = 2\n" + body + "\n")
    code, out, err = cli("sweep", sweep, "--out", tmp_path / "out", *extra)
    assert_user_error(code, err, message)
    assert not (tmp_path / "out" / "results.csv").exists()


def test_missing_sweep_file_and_dry_run(tmp_path, cli, assert_user_error):
    code, _, err = cli("sweep", tmp_path / "nope.toml", "--out", tmp_path / "o")
    assert_user_error(code, err, "nope.toml: no such file")
    sweep = tmp_path / "s.toml"
    sweep.write_text(SWEEP)
    code, out, _ = cli("sweep", sweep, "--out", tmp_path / "o", "--dry-run")
    assert code == 0 and out.startswith("6 cells of preset separability-cover (quick)")
    assert "cells/seed=2_V=3" in out and not (tmp_path / "o").exists()


@pytest.mark.slow
def test_failed_cells_exit_1_and_are_retried_on_request(tmp_path, cli):
    """A cell whose data file is missing fails at run time (in the worker), the others complete."""
    import torch

    from ntpbias.data.ntp import NTPData

    NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]]).save(tmp_path / "a.npz")
    # a file that exists (the door checks that) but cannot be read: its cell fails when it runs
    (tmp_path / "missing.npz").write_bytes(b"not an npz file")
    sweep = tmp_path / "s.toml"
    sweep.write_text(f"""
[base]
preset = "linear-fig4-gd"
[base.set]
train.steps = 20
data.source = "file"
data.path = "{tmp_path / 'a.npz'}"
[axes]
data.path = ["{tmp_path / 'a.npz'}", "{tmp_path / 'missing.npz'}"]
[run]
executor = "inprocess"
""")
    code, out, err = cli("sweep", sweep, "--out", tmp_path / "out")
    assert code == 1 and "1 cell(s) failed" in err and "--retry-failed" in err
    rows = {r["data.path"]: r for r in _rows(tmp_path / "out" / "results.csv")}
    bad = rows[str(tmp_path / "missing.npz")]
    assert bad["status"] == "failed" and "DataError" in bad["error"] and "missing.npz" in bad["error"]
    assert rows[str(tmp_path / "a.npz")]["status"] == "completed"
    NTPData.from_arrays(torch.eye(3), [[0.5, 0.5, 0, 0], [0, 1, 0, 0], [0, 0, 0.5, 0.5]]).save(tmp_path / "missing.npz")
    code, _, _ = cli("sweep", sweep, "--out", tmp_path / "out")
    assert code == 1  # not retried without the flag
    code, out, err = cli("sweep", sweep, "--out", tmp_path / "out", "--retry-failed")
    assert code == 0, err
    assert all(r["status"] == "completed" for r in _rows(tmp_path / "out" / "results.csv"))
