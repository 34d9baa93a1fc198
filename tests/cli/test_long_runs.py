"""Long runs under a scheduler, through real processes: SIGTERM and Ctrl-C stop a training with a checkpoint, a
released run directory and a line naming the command that continues it; SIGKILL loses at most the wall-clock
checkpoint interval; ``--resume`` after either gives an uninterrupted run's numbers bit for bit; a refused resume
names the settings that differ; progress lines reach a log (stderr not a terminal) unless ``--quiet``; a missing file
is refused before numpy and torch are loaded."""

import json
import os
import re
import signal
import subprocess
import sys

import pytest

STEPS = 20_000
TRAIN = ["train", "--preset", "linear-fig4-gd", "--scale", "quick", "--set", f"train.steps={STEPS}"]
#: a progress line of the training loop: what, step/total, percent, elapsed (and the time left)
PROGRESS = re.compile(r"^ntpbias: train: step (\d+)/(\d+) \(\d+%\), \S+ elapsed")


def _start(*args, env=None):
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "NTPBIAS_PROGRESS_SECONDS": "0.2", **(env or {})}
    # Ctrl-C reaches the command as in a terminal even when the tests run as a background job (which starts with
    # SIGINT ignored, and a command keeps a signal its parent ignores)
    return subprocess.Popen([sys.executable, "-m", "ntpbias", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _stop_after_progress(proc, signum):
    """Send ``signum`` once a progress line shows that some steps were made; returns (stderr lines, rest of stderr)."""
    lines = []
    for line in proc.stderr:
        lines.append(line)
        match = PROGRESS.match(line)
        if match and 0 < int(match[1]) < STEPS:
            proc.send_signal(signum)
            break
    _, rest = proc.communicate(timeout=300)
    return lines, rest


def _uninterrupted(run_cli, out):
    run_cli(*TRAIN, "--out", out, "--quiet", check=True)
    return out


def _same_numbers(a, b):
    assert (a / "metrics.csv").read_bytes() == (b / "metrics.csv").read_bytes()
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    for key in ("checks", "tally", "passed", "final", "status"):
        assert sa.get(key) == sb.get(key), key


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "status", "word"), [(signal.SIGTERM, 143, "terminated"),
                                                        (signal.SIGINT, 130, "interrupted")])
def test_a_signal_checkpoints_and_resume_reproduces_the_uninterrupted_run(tmp_path, run_cli, signum, status, word):
    out = tmp_path / "stopped"
    proc = _start(*TRAIN, "--out", out)
    lines, rest = _stop_after_progress(proc, signum)
    assert lines and all(PROGRESS.match(line) for line in lines), lines  # the log got progress lines, nothing else
    assert proc.returncode == status, rest
    message = rest.strip().splitlines()[-1]
    step = re.fullmatch(rf"ntpbias: {word} at step (\d+); continue with: ntpbias (.*)", message)
    assert step is not None, message
    assert 0 < int(step[1]) < STEPS and step[2].split() == [*TRAIN, "--out", str(out), "--resume"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "interrupted"  # the outputs of the part that ran, saying so
    assert not (out / ".ntpbias.lock").exists()  # the run directory is released
    resumed = run_cli(*TRAIN, "--out", out, "--resume", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    _same_numbers(out, _uninterrupted(run_cli, tmp_path / "whole"))


@pytest.mark.slow
def test_sigkill_loses_at_most_the_checkpoint_interval(tmp_path, run_cli):
    out = tmp_path / "killed"
    every = 0.002  # minutes: a checkpoint every 0.12 s of training
    proc = _start(*TRAIN, "--set", f"train.checkpoint_minutes={every}", "--out", out)
    for line in proc.stderr:
        match = PROGRESS.match(line)
        if match and int(match[1]) > 0 and (out / "checkpoints" / "train" / "last.pt").exists():
            proc.kill()
            break
    proc.communicate(timeout=300)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "summary.json").exists()  # nothing but the checkpoint survived the kill
    import torch

    saved = torch.load(out / "checkpoints" / "train" / "last.pt", weights_only=True)
    assert saved["status"] == "running" and 0 < saved["step"] < STEPS
    resumed = run_cli(*TRAIN, "--set", f"train.checkpoint_minutes={every}", "--out", out, "--resume", "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    _same_numbers(out, _uninterrupted(run_cli, tmp_path / "whole"))


def test_quiet_silences_the_progress_lines(tmp_path):
    proc = _start("train", "--preset", "linear-fig4-gd", "--scale", "quick", "--set", "train.steps=3000", "--out",
                  tmp_path / "q", "--quiet", env={"NTPBIAS_PROGRESS_SECONDS": "0.05"})
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and err == ""


def test_a_refused_resume_names_only_the_settings_that_differ(tmp_path, cli, assert_user_error):
    base = ("train", "--preset", "linear-fig4-gd", "--scale", "smoke", "--out", tmp_path / "r", "--quiet")
    assert cli(*base)[0] == 0
    code, _, err = cli(*base, "--resume", "--set", "optimizer.lr=0.1", "--set", "train.steps=50")
    assert_user_error(code, err, "would continue another run (optimizer.lr: 0.5 -> 0.1); only train.steps may change")


_MISSING = [
    (["analyze", "nope.txt", "--context-length", "2", "--out", "o"], "nope.txt: no such file"),
    (["analyze", "data.npz", "--embedding", "nope.npy", "--out", "o"], "--embedding nope.npy: no such file"),
    (["train", "nope.toml", "--out", "o"], "nope.toml: no such config file"),
    (["sweep", "nope.toml", "--out", "o"], "nope.toml: no such file"),
    (["lm", "train", "nope.txt", "--out", "o"], "TEXT nope.txt: no such file or folder (built-in: shakespeare"),
    (["lm", "analyze", "nope", "--out", "o"], "RUN_DIR nope: no such file or folder"),
    (["lm", "analyze", "--hf", "nope", "--out", "o"], "--hf nope: no such file or folder"),
    (["lm", "analyze", ".", "--text", "nope.txt", "--out", "o"], "--text nope.txt: no such file or folder"),
    (["structure", "nope.txt"], "nope.txt: no such file or folder (built-in: example1, prop2-counterexample)"),
    (["corpus", "shakespeare", "nope.txt"], "nope.txt: no such file or folder (built-in: shakespeare)"),
]


@pytest.mark.parametrize(("args", "message"), _MISSING)
def test_a_missing_file_is_refused_before_numpy_and_torch_load(tmp_path, args, message):
    (tmp_path / "data.npz").write_bytes(b"")
    probe = ("import sys\nfrom ntpbias.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n"
             "    print(e.code, sorted(m for m in ('numpy', 'torch') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, cwd=tmp_path,
                         timeout=120, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert out.stdout.split() == ["2", "[]"], (out.stdout, out.stderr)
    assert out.stderr.strip().startswith("ntpbias: error:") and message in out.stderr
