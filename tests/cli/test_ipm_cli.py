"""`ntpbias analyze --solver ipm` through a subprocess, on a trained model's features (tests/fixtures/README.md)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent.parent / "fixtures" / "lm_features_small.npz"


@pytest.mark.slow
def test_analyze_with_the_interior_point_solver(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "ntpbias", "analyze", str(FIXTURE), "--solver", "ipm", "--out",
                           str(out), "--quiet"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    record = json.loads((out / "analysis.json").read_text())
    assert record["separable"] and record["solver"] == "ipm"
    assert max(record["kkt"].values()) <= 1e-6
    bad = subprocess.run([sys.executable, "-m", "ntpbias", "analyze", str(FIXTURE), "--solver", "interior",
                          "--out", str(tmp_path / "bad")], capture_output=True, text=True)
    assert bad.returncode == 2 and "ipm" in bad.stderr and not (tmp_path / "bad").exists()
