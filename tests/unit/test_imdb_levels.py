"""The IMDB levels of Figs. 1/3 follow their stated rule from the calibration runs: the worst calibration value minus
0.05 (plus 0.05 for the irrelevant tokens' spread, an upper level), rounded outwards to two decimals."""

import json
import math
from pathlib import Path

import pytest

from ntpbias.experiments.attention.imdb_grade import LEVELS

CALIBRATION = Path(__file__).resolve().parents[2] / "calibration"
FILES = {"quick": "attention.json", "paper": "attention_imdb.json"}


@pytest.mark.parametrize("scale", sorted(FILES))
def test_levels_follow_the_calibration_rule(scale):
    worst = json.loads((CALIBRATION / FILES[scale]).read_text(encoding="utf-8"))["worst"]
    assert set(LEVELS[scale]) == {"one_layer", "two_layer"}
    for model, levels in LEVELS[scale].items():
        w = worst[f"imdb_{model}"]
        for key, level in levels.items():
            if key == "irrelevant_spread":
                expected = math.ceil(round((w[key] + 0.05) * 100, 9)) / 100
            else:
                expected = math.floor(round((w[key] - 0.05) * 100, 9)) / 100
            assert level == pytest.approx(expected, abs=1e-12), (scale, model, key, w[key])
