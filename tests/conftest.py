"""Test-wide settings (one BLAS/torch thread on 2-core machines, float64, no hypothesis deadlines) and the shared
helpers of the command-line tests: ``run_cli`` (a real process), ``cli`` (in-process), ``assert_user_error`` and
``report_matches_summary``.

Two tiers: ``python -m pytest -m "not slow"`` while working (tests over about 4 s are marked ``slow``); plain
``python -m pytest`` runs everything, the doctests of ``src/ntpbias`` included.
"""

import os
import re

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

torch.set_num_threads(1)
# derandomized: every run (CI's included) draws the same examples, so a pass or failure is reproducible; explore other
# examples with `pytest --hypothesis-seed=N -p no:cacheprovider` after setting derandomize=False here
settings.register_profile("ntpbias", deadline=None, max_examples=25, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ntpbias")


@pytest.fixture
def run_cli(tmp_path):
    """Run ``python -m ntpbias ARGS`` in a subprocess; returns the CompletedProcess (text mode)."""
    import subprocess
    import sys

    def _run(*args, check=False, timeout=600):
        env = dict(os.environ, PYTHONWARNINGS="ignore")
        return subprocess.run([sys.executable, "-m", "ntpbias", *map(str, args)], capture_output=True, text=True,
                              cwd=tmp_path, env=env, check=check, timeout=timeout)

    return _run


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """Run ``ntpbias ARGS`` in-process (``ntpbias.cli.main``) from ``tmp_path``; returns (exit status, stdout, stderr).

    Saves the interpreter start-up of :func:`run_cli`; the process-level contract is checked by the tests that use
    ``run_cli``.
    """
    from ntpbias.cli import main

    monkeypatch.chdir(tmp_path)

    def _run(*args):
        with pytest.raises(SystemExit) as info:
            main([str(a) for a in args])
        captured = capsys.readouterr()
        return info.value.code, captured.out, captured.err

    return _run


def _assert_user_error(code, err, pattern):
    """A user error: exit status 2, exactly one ``ntpbias: error:`` line on stderr, no traceback; the line contains
    ``pattern`` (a str) or matches it (a compiled ``re.Pattern``, with ``search``)."""
    assert code == 2, (code, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ntpbias: error:"), err
    assert (pattern.search(lines[0]) if isinstance(pattern, re.Pattern) else pattern in lines[0]), lines[0]
    assert "Traceback" not in err


@pytest.fixture
def assert_user_error():
    """The check of a user error's exit status and one-line message (see ``_assert_user_error``)."""
    return _assert_user_error


_CHECK_ROW = re.compile(r'<tr><td>([^<]*)</td><td>.*?</td><td class="num">[^<]*</td>\s*<td>.*?</td>'
                        r'<td class="(?:pass|fail|shown)">([^<]*)(?:<br>.*?)?</td><td>([^<]*)</td>')


def _report_matches_summary(out):
    """Assert that ``out/report.html`` shows the checks of ``out/summary.json`` (same names, order, verdicts and
    kinds, the same number of failures in the headline) and that ``summary["passed"]`` means no check failed;
    returns the summary."""
    import html
    import json

    summary = json.loads((out / "summary.json").read_text())
    page = (out / "report.html").read_text()
    checks = [(c["name"], c["verdict"], c["kind"]) for c in summary["checks"]]
    shown = [(html.unescape(name), word.lower(), kind) for name, word, kind in _CHECK_ROW.findall(page)]
    assert shown == checks
    failed = sum(verdict == "fail" for _, verdict, _ in checks)
    assert summary["passed"] == (failed == 0)
    if checks and all(verdict == "not graded" for _, verdict, _ in checks):  # smoke scale: nothing is graded
        assert "Checks: not graded (smoke scale" in page
        return summary
    headline = re.search(r"Checks: (.*?); (\d+) failed", page)
    assert headline is not None and int(headline[2]) == failed
    return summary


def _paper_vs_ntpbias(out):
    """The rows of the "Paper vs ntpbias" tables (the paper's numbers beside ours) of the run directory ``out``,
    asserting that its summary.json and report.html both have at least one."""
    import json

    summary = json.loads((out / "summary.json").read_text())
    tables = [t for s in summary["sections"] for t in s["tables"] if t["title"].startswith("Paper vs ntpbias")]
    assert tables and "Paper vs ntpbias" in (out / "report.html").read_text(), "no paper-vs-ntpbias table"
    return [[str(cell) for cell in row] for t in tables for row in t["rows"]]


@pytest.fixture
def paper_vs_ntpbias():
    """The rows of a run directory's paper-vs-ntpbias tables (see ``_paper_vs_ntpbias``)."""
    return _paper_vs_ntpbias


@pytest.fixture
def report_matches_summary():
    """The consistency check of a run directory's report.html and summary.json (see ``_report_matches_summary``)."""
    return _report_matches_summary


def _pair_generators(data):
    """Every generator vec((e_z - e_z') h_j^T), z < z' in S_j, of the subspace F (eq. (4) of paper A), written out by a
    loop, and its log-odds log p_z / p_z': an independent basis of F and the right-hand side of W*'s equations."""
    import itertools

    import numpy as np

    H, P = data.H.numpy(), data.P.numpy()
    rows, b = [], []
    for j in range(data.m):
        for z, zp in itertools.combinations(np.flatnonzero(P[j]), 2):
            E = np.zeros((data.V, data.d))
            E[z] += H[j]
            E[zp] -= H[j]
            rows.append(E.ravel())
            b.append(np.log(P[j, z] / P[j, zp]))
    return np.array(rows).reshape(-1, data.V * data.d), np.array(b)


@pytest.fixture
def pair_generators():
    """F's pair generators and their log-odds, by a loop (see ``_pair_generators``)."""
    return _pair_generators
