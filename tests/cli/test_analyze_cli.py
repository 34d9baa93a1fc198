"""``ntpbias analyze`` end to end (its file contract, docs/errors-and-limits.md and the README): outputs checked
against independent numpy/cvxpy computations.

Each subprocess pays the torch import (~3 s), so the success paths use three invocations that each check many
things; the full matrix of bad inputs runs in-process through the same entry point (``ntpbias.cli.main``), and
one of them (a pickled .npz) is repeated in a real subprocess to check the process-level contract (exit 2, one
stderr line, no traceback, the pickle never executed).
"""

from __future__ import annotations

import itertools
import json
import math
import pickle
import re
from collections import Counter, defaultdict

import cvxpy as cp
import numpy as np
import pytest

KKT_KEYS = {"primal_violation", "dual_violation", "complementary_slackness", "stationarity", "duality_gap"}
DESIGN_KEYS = {"m", "V", "d", "entropy", "dim_F", "compatible", "compatibility_residual", "separable", "margin",
               "norm_W_star", "norm_W_mm", "solver", "solve_seconds", "kkt"}


# ============================================================================ independent references
def reference(H: np.ndarray, P: np.ndarray, pi: np.ndarray) -> dict:
    """Entropy, dim F, W* (min-norm lstsq of the full-pair log-odds system) and W^mm (cvxpy, natural form)."""
    m, V = P.shape
    d = H.shape[1]
    eye = np.eye(V)
    rows, b = [], []
    for j in range(m):
        for z, z2 in itertools.combinations(np.flatnonzero(P[j] > 0), 2):
            rows.append(np.kron(eye[z] - eye[z2], H[j]))
            b.append(math.log(P[j, z] / P[j, z2]))
    A, b = np.array(rows).reshape(-1, V * d), np.array(b)
    W_star = np.linalg.lstsq(A, b, rcond=None)[0].reshape(V, d) if len(b) else np.zeros((V, d))
    S = P > 0
    jo, zo, vo = np.nonzero(S[:, :, None] & ~S[:, None, :])
    W = cp.Variable((V, d))
    L = W @ H.T
    cons = [L[zo, jo] - L[vo, jo] >= 1] + ([A @ cp.vec(W, order="C") == 0] if len(b) else [])
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    logs = np.log(np.where(S, P, 1.0))
    return {
        "entropy": float(-(pi * (P * logs).sum(1)).sum()),
        "dim_F": int(np.linalg.matrix_rank(A, tol=1e-10 * np.linalg.norm(A, 2))) if len(b) else 0,
        "W_star": W_star,
        "W_mm": W.value if prob.status == "optimal" else None,
        "residual": float(np.linalg.norm(A @ W_star.reshape(-1) - b)) if len(b) else 0.0,
    }


def assert_rel(x: float, y: float, rel: float = 1e-6):
    assert x == pytest.approx(y, rel=rel, abs=1e-12)


def check_separable_outputs(out, rec: dict, ref: dict, H, P):
    m, V = P.shape
    assert DESIGN_KEYS <= rec.keys()
    assert (rec["m"], rec["V"], rec["d"]) == (m, V, H.shape[1])
    assert_rel(rec["entropy"], ref["entropy"], 1e-12)
    assert rec["dim_F"] == ref["dim_F"]
    assert rec["compatible"] is True and rec["compatibility_residual"] <= 1e-8
    assert rec["separable"] is True
    norm_mm = np.linalg.norm(ref["W_mm"])
    assert_rel(rec["norm_W_star"], np.linalg.norm(ref["W_star"]), 1e-9)
    assert_rel(rec["norm_W_mm"], norm_mm)
    assert_rel(rec["margin"], 1 / norm_mm)  # the max normalized NTP margin γ* = 1/||W^mm||
    assert rec["solver"] == "clarabel" and rec["solve_seconds"] >= 0 and rec["certified"] is True
    assert set(rec["kkt"]) == KKT_KEYS and max(rec["kkt"].values()) <= 1e-6
    assert (rec["n_equalities"], rec["n_inequalities"]) == ((P > 0).sum() - m, m * V - (P > 0).sum())
    with np.load(out / "geometry.npz", allow_pickle=False) as g:
        assert {"W_star", "W_mm"} <= set(g.files)
        np.testing.assert_allclose(g["W_star"], ref["W_star"], atol=1e-9 * np.linalg.norm(ref["W_star"]))
        assert np.linalg.norm(g["W_mm"] - ref["W_mm"]) <= 1e-6 * norm_mm


# ============================================================================ success paths (subprocess)
def test_analyze_npz_json(tmp_path, run_cli):
    rng = np.random.default_rng(3)
    m, d, V = 6, 8, 5
    H = rng.standard_normal((m, d))
    P = np.zeros((m, V))
    for j, s in enumerate([1, 2, 3, 4, 2, 3]):
        supp = rng.choice(V, s, replace=False)
        P[j, supp] = rng.dirichlet(np.ones(s))
    pi = rng.dirichlet(np.ones(m))
    np.savez(tmp_path / "data.npz", H=H, P=P, pi=pi)
    ref = reference(H, P, pi)

    proc = run_cli("analyze", "data.npz", "--out", "out", "--json")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    out = tmp_path / "out"
    assert json.loads((out / "analysis.json").read_text()) == rec  # --json prints the written record
    check_separable_outputs(out, rec, ref, H, P)
    assert rec["input"]["path"] == "data.npz" and len(rec["input"]["sha256"]) == 64
    assert sorted(p.name for p in out.iterdir()) == ["analysis.json", "geometry.npz"]  # no temporary left


def test_analyze_sequences_file(tmp_path, run_cli):
    rng = np.random.default_rng(0)
    lines = [list(rng.choice(list("abcde"), size=rng.integers(2, 6), p=[0.4, 0.25, 0.2, 0.1, 0.05]))
             for _ in range(30)]
    (tmp_path / "corpus.txt").write_text("\n".join(" ".join(line) for line in lines) + "\n", encoding="utf-8")
    counts = defaultdict(Counter)  # bigram statistics by hand (K = 1)
    for line in lines:
        for a, b in itertools.pairwise(line):
            counts[(a,)][b] += 1
    contexts = sorted(counts)
    vocab = sorted({t for line in lines for t in line})
    n = sum(sum(c.values()) for c in counts.values())
    P = np.array([[counts[c][v] / sum(counts[c].values()) for v in vocab] for c in contexts])
    pi = np.array([sum(counts[c].values()) / n for c in contexts])
    H = rng.standard_normal((len(contexts), len(contexts) + 2))  # d > m: separable
    np.save(tmp_path / "emb.npy", H)
    ref = reference(H, P, pi)

    proc = run_cli("analyze", "corpus.txt", "--context-length", "1", "--embedding", "emb.npy", "--out", "res")
    assert proc.returncode == 0, proc.stderr
    assert "NTP geometry" in proc.stdout and "wrote" in proc.stdout  # the table, not JSON
    out = tmp_path / "res"
    rec = json.loads((out / "analysis.json").read_text())
    check_separable_outputs(out, rec, ref, H, P)
    assert rec["n_samples"] == n
    assert rec["input"]["context_length"] == 1 and rec["input"]["embedding"] == "emb.npy"


def test_analyze_non_separable_data_is_a_finding(tmp_path, run_cli):
    H = np.array([[1.0, 0.5], [1.0, 0.5], [0.0, 1.0]])  # contexts 0, 1 share h but not their supports
    P = np.array([[0.5, 0.5, 0.0], [0.0, 0.3, 0.7], [0.2, 0.0, 0.8]])
    pi = np.full(3, 1 / 3)
    np.savez(tmp_path / "data.npz", H=H, P=P)
    ref = reference(H, P, pi)
    assert ref["W_mm"] is None  # cvxpy: infeasible

    proc = run_cli("analyze", "data.npz", "--out", "out", "--json", "--quiet")
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(proc.stdout)
    assert DESIGN_KEYS <= rec.keys()
    assert rec["separable"] is False and rec["separability_certificate"]["certified"] is True
    assert rec["norm_W_mm"] is None and rec["margin"] is None and rec["kkt"] is None and rec["solver"] is None
    assert rec["dim_F"] == ref["dim_F"] and rec["compatible"] is True
    assert_rel(rec["entropy"], ref["entropy"], 1e-12)
    assert_rel(rec["norm_W_star"], np.linalg.norm(ref["W_star"]), 1e-9)
    assert any("not NTP-separable" in note for note in rec["notes"])
    with np.load(tmp_path / "out" / "geometry.npz", allow_pickle=False) as g:
        assert "W_mm" not in g.files and "W_star" in g.files
        y = g["gordan_y"]
        assert y.min() >= -1e-12 and y.sum() == pytest.approx(1.0)


# ============================================================================ bad input -> exit 2
class Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _write_bad_input(tmp_path, case: str):
    """Create the input of ``case``; return the argument list for ``analyze`` (minus --out)."""
    good_H, good_P = np.eye(3), np.array([[0.5, 0.5, 0.0], [0.0, 0.2, 0.8], [1.0, 0.0, 0.0]])
    npz = tmp_path / "data.npz"
    txt = tmp_path / "corpus.txt"
    if case == "missing":
        return [tmp_path / "nope.npz"]
    if case == "garbage":
        npz.write_bytes(b"not an npz")
    elif case == "transposed":
        np.savez(npz, H=np.ones((2, 3)), P=good_P)
    elif case == "nan":
        np.savez(npz, H=np.where(good_H == 0, np.nan, 1.0), P=good_P)
    elif case == "negative":
        np.savez(npz, H=good_H, P=good_P * [[1, 1, 1], [1, -1, 1], [1, 1, 1]] + [[0, 0, 0], [0.4, 0, 0], [0, 0, 0]])
    elif case == "row-sum":
        np.savez(npz, H=good_H, P=good_P * 1.1)
    elif case == "pi-sum":
        np.savez(npz, H=good_H, P=good_P, pi=np.array([0.5, 0.5, 0.5]))
    elif case == "m=0":
        np.savez(npz, H=np.ones((0, 2)), P=np.ones((0, 3)))
    elif case == "V<2":
        np.savez(npz, H=good_H, P=np.ones((3, 1)))
    elif case == "pickle":
        np.savez(npz, H=good_H, P=np.array([Payload(tmp_path / "code_ran")] * 3, dtype=object))
    elif case == "pickle-stream":
        npz.write_bytes(pickle.dumps(Payload(tmp_path / "code_ran")))
    elif case == "empty-seq":
        txt.write_text("\n \n", encoding="utf-8")
        return [txt, "--context-length", "1"]
    elif case == "short-seq":
        txt.write_text("a b\nb c\n", encoding="utf-8")
        return [txt, "--context-length", "2"]
    elif case == "no-rule":
        txt.write_text("a b c\n", encoding="utf-8")
        return [txt]
    elif case == "rule-on-npz":
        np.savez(npz, H=good_H, P=good_P)
        return [npz, "--autoregressive"]
    elif case == "bad-embedding":
        txt.write_text("a b c\n", encoding="utf-8")
        return [txt, "--context-length", "1", "--embedding", "word2vec"]
    elif case == "embedding-shape":
        txt.write_text("a b c\n", encoding="utf-8")
        np.save(tmp_path / "emb.npy", np.ones((5, 2)))
        return [txt, "--context-length", "1", "--embedding", tmp_path / "emb.npy"]
    return [npz]


BAD_CASES = {
    "missing": r"nope\.npz: no such file",
    "garbage": r"not a readable \.npz file",
    "transposed": r"H has 2 rows but P has 3.*transpose",
    "nan": r"H contains NaN or inf",
    "negative": r"negative probability at row 1, column 1",
    "row-sum": r"row 0 of P sums to 1\.1, not 1",
    "pi-sum": r"pi sums to 1\.5, not 1",
    "m=0": r"m = 0",
    "V<2": r"at least 2 tokens",
    "pickle": r"pickled Python objects",
    "pickle-stream": r"not a readable \.npz file",
    "empty-seq": r"the sequences file is empty",
    "short-seq": r"every line is too short for --context-length 2",
    "no-rule": r"needs --context-length K or --autoregressive",
    "rule-on-npz": r"apply to sequence files, not to \.npz data",
    "bad-embedding": r"--embedding 'word2vec'",
    "embedding-shape": r"m = 2 rows.*got shape \(5, 2\)",
}


def _check_failure(tmp_path, code, stderr: str, pattern: str, assert_user_error):
    assert_user_error(code, stderr, re.compile(pattern))
    out = tmp_path / "out"
    assert not (out / "analysis.json").exists() and not (out / "geometry.npz").exists()
    assert not (tmp_path / "code_ran").exists()  # no pickle was ever executed


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_exits_2_with_one_line(tmp_path, case, cli, assert_user_error):
    args = _write_bad_input(tmp_path, case)
    code, out, err = cli("analyze", *args, "--out", tmp_path / "out")
    _check_failure(tmp_path, code, err, BAD_CASES[case], assert_user_error)
    assert out == ""


def test_bad_input_in_a_real_process(tmp_path, run_cli, assert_user_error):
    args = _write_bad_input(tmp_path, "pickle")
    proc = run_cli("analyze", *args, "--out", tmp_path / "out")
    _check_failure(tmp_path, proc.returncode, proc.stderr, BAD_CASES["pickle"], assert_user_error)
