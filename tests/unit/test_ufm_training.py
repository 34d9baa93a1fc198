"""The log-bilinear model on the training engine, the planted-support generator, the configs, and the order-of-learning
helpers (docs/ufm.md)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from ntpbias.config import apply_overrides
from ntpbias.data.planted import planted_supports
from ntpbias.errors import ConfigError
from ntpbias.geometry.ufm.logits import finite_logits, project_F
from ntpbias.metrics import DEFINITIONS
from ntpbias.training.history import History
from ntpbias.training.loop import TrainConfig, Trainer
from ntpbias.training.optimizers import Optimizer, OptimizerConfig
from ntpbias.training.ufm import UFMProblem, UFMReference
from ntpbias.training.ufm_path import regularization_path


@pytest.fixture(scope="module")
def planted():
    data = planted_supports(8, (2, 3), (3, 2), seed=0)
    return data, UFMReference.of(data)


def test_planted_generator():
    data = planted_supports(12, (2, 3, 4), (2, 3, 1), seed=5)
    assert (data.m, data.V) == (6, 12) and data.support_sizes.tolist() == [2, 2, 3, 3, 3, 4]
    sets = {tuple(torch.nonzero(r).flatten().tolist()) for r in data.support}
    assert len(sets) == 3 and not set.intersection(*map(set, sets))  # disjoint
    assert torch.equal(data.H, torch.eye(6, dtype=torch.float64))
    again = planted_supports(12, (2, 3, 4), (2, 3, 1), seed=5)
    assert torch.equal(again.P, data.P)
    explicit = planted_supports(6, contexts=2, sets=((0, 1), (1, 2, 5)), seed=0)
    assert explicit.support.nonzero().tolist()[:2] == [[0, 0], [0, 1]] and explicit.m == 4
    with pytest.raises(ValueError, match="sum"):
        planted_supports(5, (3, 3), 1)
    with pytest.raises(ValueError, match="one context count per support set"):
        planted_supports(8, (1, 2), (1, 2, 3))
    with pytest.raises(ValueError, match="token ids"):
        planted_supports(4, sets=((0, 9),))


def test_trainer_batches_seeds_exactly_and_descends(planted):
    data, ref = planted
    problem = UFMProblem(data, ref, d=6, lam=1e-2, init_scale=1e-2)
    cfg = TrainConfig(steps=200, log_points=5)
    both = Trainer(problem, Optimizer(OptimizerConfig(name="gd", lr=1.0)), cfg, seeds=[3, 4]).run()
    one = Trainer(problem, Optimizer(OptimizerConfig(name="gd", lr=1.0)), cfg, seeds=[4]).run()
    torch.testing.assert_close(both.params["W"][1], one.params["W"][0], rtol=0, atol=0)
    assert both["objective"][-1].max() < both["objective"][0].min()
    for name in both.names:  # every logged metric is documented
        assert name in DEFINITIONS or re.sub(r"\d+$", "<i>", name) in DEFINITIONS, name


@pytest.mark.parametrize("name,lr", [("gd", 2.0), ("adam", 0.02)])
def test_training_reaches_the_certified_optimum(planted, name, lr):
    """At a moderate λ the engine's optimizers reach the path's certified optimum from a small initialisation."""
    data, ref = planted
    lam = 0.01
    opt = regularization_path(data, [lam], seeds=[0], d=6)[-1]
    assert opt.certified
    from dataclasses import replace

    ref_t = replace(ref, L_opt=opt.L[0])
    problem = UFMProblem(data, ref_t, d=6, lam=lam, init_scale=1e-3)
    h = Trainer(problem, Optimizer(OptimizerConfig(name=name, lr=lr)), TrainConfig(steps=3000, log_points=10),
                seeds=[0, 1]).run()
    assert max(h.at()["dist_opt"]) < 5e-3
    L_star = finite_logits(data)  # the trained finite part is the optimum's
    expected = float(torch.linalg.matrix_norm(project_F(opt.L[0], data) - L_star) / torch.linalg.matrix_norm(L_star))
    assert max(h.at()["F_error_rel"]) == pytest.approx(expected, rel=0.05)


def test_half_times_and_order_statistics():
    from ntpbias.experiments.ufm.runs import half_times, order_statistics

    steps = np.array([0, 10, 20, 40, 80])
    cols = {"mode_0": np.array([[0.0], [0.6], [1.0], [1.0], [1.0]]),
            "mode_1": np.array([[0.0], [0.1], [0.3], [1.2], [2.0]]),
            "mode_2": np.array([[0.0], [0.0], [0.0], [0.1], [1.0]])}
    h = History(steps=steps, seeds=(0,), columns=cols)
    times, final = half_times(h)
    assert times[:, 0].tolist() == [10, 40, 80] and final[:, 0].tolist() == [1.0, 2.0, 1.0]
    stats = order_statistics(np.array([3.0, 2.0, 1.5]), times)
    assert stats["modes"] == 3 and stats["spearman"][0] == pytest.approx(1.0)
    assert stats["ratios"][0][1] == pytest.approx(40 * 2.0 / (10 * 3.0))


def test_config_rules():
    from ntpbias.experiments.ufm.config import PLANTED_GD, UFMDataConfig, scaled

    assert scaled(PLANTED_GD, "smoke").train.steps == 300
    with pytest.raises(ConfigError, match="sum"):
        UFMDataConfig(V=5, sizes=(3, 3), contexts=(2,))
    with pytest.raises(ConfigError, match="data.path"):
        UFMDataConfig(source="file")
    with pytest.raises(ConfigError, match="lam"):
        apply_overrides(PLANTED_GD, ["model.lam=-1"])
    cfg = apply_overrides(PLANTED_GD, ["data.sizes=[1, 2]", "data.contexts=[3]", "data.V=5"])
    data = cfg.data.build()
    assert (data.m, data.V) == (6, 5)


def test_calibrated_levels_follow_the_calibration_file():
    """The levels cite calibration/ufm.json: its worst values, and the margins of decision U-D9."""
    import json
    from pathlib import Path

    from ntpbias.experiments.ufm.checks import CALIBRATION_SEEDS, CALIBRATION_WORST, LEVELS

    record = json.loads((Path(__file__).resolve().parents[2] / "calibration" / "ufm.json").read_text())
    assert record["data_seeds"] == list(CALIBRATION_SEEDS) and 0 not in CALIBRATION_SEEDS
    worst = record["worst"]
    assert worst["trend_F"] and worst["trend_cos"] and worst["trend_collapse"] and worst["trend_gram"]
    for key, value in CALIBRATION_WORST.items():
        assert value == pytest.approx(worst[key], rel=2e-3), key
        if key.startswith(("path_cos", "path_gram")):
            assert LEVELS[key] == pytest.approx(1 - 2 * (1 - worst[key]), abs=1e-3)
        elif key == "order_concordance":
            assert LEVELS[key] == pytest.approx(worst[key] - 0.15)
        else:
            assert worst[key] < LEVELS[key] <= 2.05 * worst[key]


def test_docs_python_example_runs(capsys):
    """The Python block of docs/ufm.md runs as written."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "ufm.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "docs/ufm.md", "exec"), {})
    assert "tensor(" in capsys.readouterr().out
