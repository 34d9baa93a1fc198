"""The norms study from the command line: ``analyze --norms``, ``reproduce optimizers`` at smoke scale and ``train``
of its presets (docs/optimizers.md), checked for values, not only the exit status."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.margins.program import ntp_svm
from ntpbias.geometry.norms import NORMS, matrix_norm
from ntpbias.results.metrics_table import read_metrics_csv

ENTRY_KEYS = {"norm_W_mm", "margin", "certified", "unique", "solver", "seconds"}


@pytest.fixture
def small_npz(tmp_path):
    data = random_ntp(m=10, d=12, V=5, support_size=2, seed=0)
    path = tmp_path / "small.npz"
    data.save(path)
    return path, data


def test_analyze_norms_writes_every_norm(tmp_path, cli, small_npz):
    path, data = small_npz
    out = tmp_path / "a"
    code, _, err = cli("analyze", path, "--norms", "l2,linf,l1,spectral,nuclear", "--out", out, "--quiet")
    assert code == 0, err
    record = json.loads((out / "analysis.json").read_text())
    arrays = np.load(out / "geometry.npz")
    mm = record["max_margin"]
    assert list(mm) == list(NORMS)
    assert mm["l2"]["norm_W_mm"] == record["norm_W_mm"]  # the existing key keeps the l2 value
    assert mm["l2"]["unique"] is True
    for norm, entry in mm.items():
        assert ENTRY_KEYS <= set(entry)
        assert entry["certified"] is True and entry["solver"] == "clarabel" and entry["seconds"] >= 0
        assert entry["margin"] == pytest.approx(1 / entry["norm_W_mm"], rel=1e-12)
        ref = ntp_svm(data) if norm == "l2" else ntp_svm(data, norm=norm)
        assert entry["norm_W_mm"] == pytest.approx(ref.norm, rel=1e-6)
        W = torch.as_tensor(arrays[f"W_mm_{norm}"])
        assert float(matrix_norm(W, norm)) == pytest.approx(entry["norm_W_mm"], rel=1e-9)
        if norm != "l2":
            assert entry["certificate"]["duality_gap"] <= 1e-6 and entry["unique"] in (True, False, None)
    assert np.array_equal(arrays["W_mm_l2"], arrays["W_mm"])


def test_analyze_without_norms_is_unchanged(tmp_path, cli, small_npz):
    path, _ = small_npz
    code, _, _ = cli("analyze", path, "--out", tmp_path / "b", "--quiet")
    assert code == 0
    assert "max_margin" not in json.loads((tmp_path / "b" / "analysis.json").read_text())
    assert not [k for k in np.load(tmp_path / "b" / "geometry.npz") if k.startswith("W_mm_")]


def test_analyze_not_separable_reports_each_norm(tmp_path, cli):
    path = tmp_path / "ns.npz"
    random_ntp(m=30, d=2, V=4, support_size=2, seed=0).save(path)
    code, _, err = cli("analyze", path, "--norms", "linf,nuclear", "--out", tmp_path / "c", "--quiet")
    assert code == 0, err
    record = json.loads((tmp_path / "c" / "analysis.json").read_text())
    assert record["separable"] is False
    assert {n: e["status"] for n, e in record["max_margin"].items()} == {"linf": "not separable",
                                                                         "nuclear": "not separable"}


@pytest.mark.parametrize("value, pattern", [("l2,l3", "unknown norm 'l3'"), (",", "give one or more"),
                                            ("spectral;nuclear", "unknown norm")])
def test_bad_norms_is_a_user_error(tmp_path, cli, small_npz, assert_user_error, value, pattern):
    path, _ = small_npz
    code, _, err = cli("analyze", path, "--norms", value, "--out", tmp_path / "bad")
    assert_user_error(code, err, pattern)
    assert not (tmp_path / "bad").exists()


def test_list_shows_the_group_after_paper_a(cli):
    code, out, _ = cli("list", "--json")
    assert code == 0
    groups = list(json.loads(out)["groups"])
    assert groups.index("separability") < groups.index("optimizers") < groups.index("attention")  # paper A, then B
    assert "optimizers-onehot" in json.loads(out)["groups"]["optimizers"]["figures"]


@pytest.mark.slow
def test_reproduce_optimizers_smoke(tmp_path, cli, report_matches_summary):
    out = tmp_path / "opt"
    code, _, err = cli("reproduce", "optimizers", "--scale", "smoke", "--out", out, "--quiet")
    assert code == 0, err
    summary = report_matches_summary(out)
    for name in ("onehot", "fig4"):
        assert (out / "figures" / f"optimizers-{name}.png").is_file()
        with np.load(out / "data" / f"{name}_geometry.npz") as g:
            assert {f"W_mm_{n}" for n in NORMS} <= set(g)
    rows = read_metrics_csv(out / "metrics.csv")
    runs = {r["run"] for r in rows}
    assert {"onehot-sign", "onehot-muon", "fig4-adam", "fig4-nsd-spectral"} <= runs
    ratios = [r[f"margin_ratio_{n}"] for r in rows for n in NORMS if f"margin_ratio_{n}" in r]
    assert ratios and max(ratios) <= 1 + 1e-7  # no iterate beats a norm's maximum
    # the sign-descent row of the one-hot table: its linf ratio, recomputed from the saved final iterate's metrics
    table = next(t for t in summary["sections"][0]["tables"] if t["title"].startswith("Optimizer x norm at the last "
                                                                                     "step: one-hot"))
    sign = next(r for r in table["rows"] if r[0].startswith("sign descent"))
    last = max(r["step"] for r in rows if r["run"] == "onehot-sign")
    assert sign[2] == pytest.approx(np.mean([r["margin_ratio_linf"] for r in rows
                                             if r["run"] == "onehot-sign" and r["step"] == last]))
    checks = {c["name"]: c for c in summary["checks"]}
    assert "fig4: NTP-SVMs certified" in checks
    # which norm's maximum sign descent approaches (a theorem check, level-free) and the calibrated level, each with
    # its negative control (the optimizers whose known limit is another norm), computed even at smoke scale
    norm, level = checks["onehot: sign -> linf margin"], checks["onehot: sign linf margin level"]
    assert norm["kind"] == "theorem" and level["kind"] == "calibrated"
    for c in (norm, level):
        assert c["control"] and c["control_passed"] is not None and c["verdict"] == "not graded"
    assert "ngd" in norm["control"] and "muon," not in norm["control"]  # quintic Muon has no known limit
    tables = {t["title"].split(":")[0] for t in summary["sections"][0]["tables"]}
    assert "Which norm's maximum each optimizer's margin approaches" in tables
    config = (out / "config.toml").read_text()
    assert 'name = "sign"' in config and "lr_power = 0.5" in config


@pytest.mark.slow
def test_train_preset_measures_every_norm(tmp_path, cli):
    out = tmp_path / "t"
    code, _, err = cli("train", "--preset", "optimizers-sign", "--scale", "smoke", "--set", "train.steps=200",
                       "--out", out, "--quiet")
    assert code == 0, err
    rows = read_metrics_csv(out / "metrics.csv")
    assert {f"margin_ratio_{n}" for n in NORMS} <= set(rows[-1])
    assert rows[-1]["step"] == 200 and 0 < rows[-1]["margin_ratio_linf"] <= 1
    # the saved config re-runs the same training
    code, _, err = cli("train", out / "config.toml", "--out", tmp_path / "again", "--quiet")
    assert code == 0, err
    again = read_metrics_csv(tmp_path / "again" / "metrics.csv")
    assert again[-1]["margin_ratio_linf"] == pytest.approx(rows[-1]["margin_ratio_linf"], rel=1e-12)
