"""`ntpbias reproduce ufm`, `train --preset ufm-*` and `analyze --ufm` end to end, with values checked against
independent computations (docs/ufm.md)."""

from __future__ import annotations

import itertools
import json

import cvxpy as cp
import numpy as np
import pytest

from ntpbias.results import read_metrics_csv


def independent_svm_value(P: np.ndarray) -> float:
    """||L^mm||_* by the explicit PSD block SDP with pairwise constraints (cvxpy + Clarabel)."""
    S = (P > 0).T
    V, m = S.shape
    Z = cp.Variable((V + m, V + m), PSD=True)
    L = Z[:V, V:]
    cons = []
    for j in range(m):
        ins, outs = np.flatnonzero(S[:, j]), np.flatnonzero(~S[:, j])
        cons += [L[a, j] == L[b, j] for a, b in zip(ins[:-1], ins[1:], strict=True)]
        cons += [L[a, j] - L[b, j] >= 1 for a, b in itertools.product(ins, outs)]
    prob = cp.Problem(cp.Minimize(cp.trace(Z) / 2), cons)
    prob.solve(solver=cp.CLARABEL, tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return float(prob.value)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_reproduce_ufm_smoke_in_a_real_process(tmp_path, run_cli, report_matches_summary):
    out = tmp_path / "ufm"
    proc = run_cli("reproduce", "ufm", "--out", out, "--scale", "smoke", "--seeds", "4", "--quiet")
    assert proc.returncode == 0, proc.stderr
    summary = report_matches_summary(out)
    figures = {f["id"] for f in summary["sections"][0]["figures"]}
    assert figures == {"ufm-path", "ufm-training", "ufm-modes", "ufm-geometry", "ufm-support", "ufm-shakespeare"}
    for fig in figures:
        assert (out / "figures" / f"{fig}.png").stat().st_size > 1000
    checks = {c["name"]: c for c in summary["checks"]}
    for name in ("planted: SVM certificate", "planted: SDP and first-order agree", "planted: L^mm = S̃",
                 "path planted: first-order conditions", "path planted: global optimality",
                 "path planted: variational identity", "path overlap: the limit follows L^mm",
                 "one-hot balanced: simplex ETF", "shakespeare: SVM certificate"):
        # smoke scale grades nothing (verdict "not graded"); the certificates must still hold
        assert checks[name]["verdict"] == "not graded" and checks[name]["passed"], (name, checks[name])
    assert "overlap: L^mm = S̃" not in checks  # its premise (the polar factor <= 0 off the supports) fails there
    assert {c["kind"] for c in summary["checks"]} >= {"theorem", "sanity", "calibrated"}
    assert all(c["threshold_source"] for c in summary["checks"])
    # the SVM's value against an independent SDP on the saved data
    with np.load(out / "data" / "planted.npz", allow_pickle=False) as f:
        P = f["P"]
    facts = summary["sections"][0]["facts"]
    assert facts["planted: ||L^mm||_* (nuclear-norm NTP-SVM)"] == pytest.approx(independent_svm_value(P), rel=1e-6)
    with np.load(out / "data" / "planted_geometry.npz", allow_pickle=False) as g:
        S = (P > 0).T.astype(float)
        np.testing.assert_allclose(g["L_mm"], S - S.mean(0), atol=1e-7)  # disjoint planted sets: L^mm = S̃
        assert abs(np.linalg.svd(g["L_mm"], compute_uv=False).sum() - facts[
            "planted: ||L^mm||_* (nuclear-norm NTP-SVM)"]) < 1e-9
    rows = read_metrics_csv(out / "metrics.csv")
    runs = {r["run"] for r in rows}
    assert {"path-planted", "path-overlap", "path-shakespeare", "planted-gd", "planted-adam", "planted-ngd",
            "shakespeare-adam"} <= runs
    path = sorted((r for r in rows if r["run"] == "path-planted" and r["seed"] == 0), key=lambda r: r["step"])
    lams = [r["lam"] for r in path]
    assert lams == sorted(lams, reverse=True) and len(lams) == 3  # smoke: 3 points
    assert all(r["grad_rel"] <= 1e-8 and r["op_ratio"] <= 1 + 1e-6 for r in path)
    assert [r["F_error_rel"] for r in path] == sorted((r["F_error_rel"] for r in path), reverse=True)
    assert {r["seed"] for r in rows if r["run"] == "planted-gd"} == {0, 1, 2, 3}  # --seeds 4 (the default is 3)


def test_list_shows_the_group_after_paper_a(cli):
    code, out, _ = cli("list")
    assert code == 0
    assert out.index("  separability ") < out.index("  ufm ") < out.index("  attention ")
    for name in ("ufm-path", "ufm-modes", "ufm-shakespeare", "ufm-planted-gd", "ufm-shakespeare-adam"):
        assert name in out


@pytest.mark.slow
def test_train_preset(tmp_path, cli, report_matches_summary):
    out = tmp_path / "run"
    code, _, err = cli("train", "--preset", "ufm-planted-gd", "--scale", "smoke", "--set", "train.steps=200",
                       "--set", "model.lam=0.01", "--set", "seeds=2", "--out", out, "--quiet")
    assert code == 0, err
    summary = report_matches_summary(out)
    final = summary["final"]
    assert len(final["dist_opt"]) == 2 and max(final["dist_opt"]) < 0.5
    assert summary["sections"][0]["facts"]["optimum at λ: certified"] is True
    # the level was calibrated for 20,000 steps at λ = 1e-3: not graded here, the settings that differ named; its
    # negative control (the distance to the certified optimum at λ/10) is computed all the same
    (check,) = [c for c in summary["checks"] if c["name"] == "train: reaches the optimum"]
    assert check["verdict"] == "not graded" and check["kind"] == "calibrated"
    assert "model.lam" in check["ungraded_reason"] and "train.steps" in check["ungraded_reason"]
    assert "λ = 0.001" in check["control"] and check["control_measured"] > check["measured"]
    rows = read_metrics_csv(out / "metrics.csv")
    assert rows[-1]["step"] == 200 and {"F_error_rel", "cos_perp_mm", "mode_0", "sub_collapse_ratio"} <= set(rows[0])
    with np.load(out / "ufm.npz", allow_pickle=False) as f:
        assert f["W"].shape[0] == 2 and f["L_mm"].shape == f["S_tilde"].shape


@pytest.mark.parametrize("args, pattern", [
    (["--set", "data.sizes=[9, 9]"], "data.contexts needs one value or one per set"),
    (["--set", "data.sizes=[9, 9]", "--set", "data.contexts=[2]"], "disjoint sets need sum(data.sizes)"),
    (["--set", "model.lam=-1"], "model.lam"),
    (["--set", "data.source=file"], "needs data.path"),
    (["--set", "data.source=overlap", "--set", "data.V=6"], "data.V must be >= 12"),
    (["--set", "path.tol=0.5"], "path.tol"),
])
def test_bad_settings_are_one_line_errors(tmp_path, cli, assert_user_error, args, pattern):
    code, _, err = cli("train", "--preset", "ufm-planted-gd", *args, "--out", tmp_path / "run", "--quiet")
    assert_user_error(code, err, pattern)
    assert not (tmp_path / "run").exists()


@pytest.mark.filterwarnings("ignore:Solution may be inaccurate")
def test_analyze_ufm(tmp_path, cli):
    rng = np.random.default_rng(0)
    sets = [[0, 1], [1, 2, 3], [4], [0, 4, 5]]
    P = np.zeros((8, 6))
    for j in range(8):
        s = sets[j % 4]
        P[j, s] = rng.dirichlet(np.ones(len(s)))
    data = tmp_path / "d.npz"
    np.savez(data, H=rng.standard_normal((8, 5)), P=P)
    code, stdout, err = cli("analyze", data, "--ufm", "--out", tmp_path / "a", "--json", "--quiet")
    assert code == 0, err
    rec = json.loads((tmp_path / "a" / "analysis.json").read_text())
    assert json.loads(stdout)["ufm"] == rec["ufm"]
    u = rec["ufm"]
    assert u["svm"]["certified"] and u["svm"]["gap_rel"] <= 1e-8 and u["support_sets"] == 4
    assert u["svm"]["value"] == pytest.approx(independent_svm_value(P), rel=1e-6)
    S = (P > 0).T.astype(float)
    sigma = np.linalg.svd(S - S.mean(0), compute_uv=False)
    assert u["support_matrix_singular_values"] == pytest.approx(sigma[:u["support_matrix_rank"]].tolist(), rel=1e-10)
    assert u["same_support_column_spread"] <= 1e-8
    with np.load(tmp_path / "a" / "geometry.npz", allow_pickle=False) as g:
        assert {"ufm_L_mm", "ufm_Lambda", "ufm_S_tilde", "ufm_L_star", "W_star"} <= set(g.files)
        assert np.linalg.norm(g["ufm_Lambda"], 2) <= 1 + 1e-12
    code, _, err = cli("analyze", data, "--out", tmp_path / "b", "--quiet")
    assert code == 0 and "ufm" not in json.loads((tmp_path / "b" / "analysis.json").read_text())
