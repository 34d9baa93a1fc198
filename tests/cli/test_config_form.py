"""One config form: ``--set train.steps=N`` means N optimizer steps for every trainer preset, and a key an earlier
ntpbias wrote names its new place in one line."""

import pytest

import ntpbias as nb
from ntpbias.experiments import PRESETS

#: presets that train a model (the separability presets count datasets, not steps; Yelp needs a user's file)
TRAINED = [p for p in PRESETS if not p.startswith(("separability-", "attention-yelp-"))]


@pytest.mark.slow
@pytest.mark.parametrize("preset", TRAINED)
def test_train_steps_sets_the_number_of_optimizer_steps(tmp_path, monkeypatch, preset):
    monkeypatch.setenv("NTPBIAS_CACHE", str(tmp_path / "cache"))
    run = nb.train(preset, out=tmp_path / "run", scale="smoke", set={"train.steps": 3})
    last = {name: int(h.steps[-1]) for name, h in run.histories.items()}
    if preset == "transformer-joint":  # the ablation trains T + T_1 steps at once
        assert last == {"joint": 6}
    elif preset.startswith("transformer-"):  # each stage of Algorithm 1 runs train.steps
        assert last == {"stage1": 3, "stage2": 3}
    else:
        assert set(last.values()) == {3}, last


@pytest.mark.parametrize("preset, key, new", [
    ("linear-fig4-gd", "batch_size=8", "train.batch_size"),
    ("attention-fig2", "epochs=3", "train.epochs"),
    ("attention-stage2", "method=gd", "optimizer.name"),
    ("transformer-fig2", "steps1=30", "stage1.steps"),
    ("transformer-fig2", "eta0=0.1", "stage1.lr"),
])
def test_an_old_key_names_its_new_place(tmp_path, cli, assert_user_error, preset, key, new):
    code, _, err = cli("train", "--preset", preset, "--set", key, "--out", tmp_path / "run", "--quiet")
    assert_user_error(code, err, f"has moved to {new}")
    assert not (tmp_path / "run").exists()


def test_an_old_config_file_is_refused_with_the_new_key(tmp_path, cli, assert_user_error):
    old = tmp_path / "old.toml"
    old.write_text('experiment = "transformer"\nsteps1 = 900\nsteps2 = 900\n')
    code, _, err = cli("train", old, "--out", tmp_path / "run", "--quiet")
    assert_user_error(code, err, "setting steps1 has moved to stage1.steps")
