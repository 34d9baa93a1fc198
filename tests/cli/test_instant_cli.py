"""Help, listings, settings and argument errors answer without importing torch, numpy, scipy, matplotlib, cvxpy or
rich: each command runs in a fresh interpreter that reports the modules it loaded."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "numpy", "scipy", "matplotlib", "cvxpy", "rich", "sklearn", "dask")
#: runs the command line, then prints the top-level packages it loaded (stdout and the exit status as usual)
WRAPPER = """
import atexit, sys
atexit.register(lambda: sys.__stderr__.write("LOADED " + " ".join(sorted({m.split(".")[0] for m in sys.modules}))))
from ntpbias.cli import main
main(sys.argv[1:])
"""
COMMANDS = ["analyze", "corpus", "list", "predict", "reproduce", "settings", "structure", "sweep", "train"]


def _loaded(*args, code=0, tmp_path):
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert proc.returncode == code, proc.stderr
    return set(proc.stderr.rsplit("LOADED ", 1)[1].split())


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("list",), ("list", "--json"), ("settings",),
                                  ("settings", "linear"), ("settings", "attention-fig2"),
                                  ("settings", "transformer-fig2"), *((c, "--help") for c in COMMANDS)])
def test_help_list_and_settings_load_no_heavy_library(args, tmp_path):
    assert not _loaded(*args, tmp_path=tmp_path) & set(HEAVY), args


@pytest.mark.parametrize("args", [("train", "--preset", "linear-fig4-gd"),  # no --out
                                  ("train", "--preset", "nope", "--out", "x"),
                                  ("train", "--preset", "linear-fig4-gd", "--set", "optimizer.lr=-1", "--out", "x"),
                                  ("reproduce", "nope", "--out", "x"),
                                  ("reproduce", "--scale", "huge", "--out", "x"),
                                  ("settings", "nope"), ("nope",)])
def test_argument_errors_load_no_heavy_library(args, tmp_path):
    assert not _loaded(*args, code=2, tmp_path=tmp_path) & set(HEAVY), args
    assert not (tmp_path / "x").exists()
