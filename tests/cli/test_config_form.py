"""One config form: ``--set train.steps=N`` means N optimizer steps for every trainer preset, and a key an earlier
ntpbias wrote names its new place in one line."""

import pytest

import ntpbias as nb
from ntpbias.experiments import PRESETS
from ntpbias.results import read_metrics_csv

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


def test_resume_refuses_another_run_and_accepts_more_steps(tmp_path, cli, assert_user_error):
    out = tmp_path / "run"
    base = ["train", "--preset", "linear-fig4-gd", "--set", "data.m=8", "--set", "data.d=10", "--out", out, "--quiet"]
    code, _, err = cli(*base, "--set", "train.steps=40")
    assert code == 0, err
    for change, differs in (("optimizer.lr=0.1", "run (optimizer.lr: 0.5 -> 0.1); only"),  # only what differs
                            ("data.seed=3", "run (initial loss: ["), ("data.d=11", "; params.W: [[1, 10, 10], ")):
        code, _, err = cli(*base, "--set", "train.steps=80", "--set", change, "--resume")
        assert_user_error(code, err, "would continue another run")
        assert differs in err
    code, _, err = cli(*base, "--set", "train.steps=20", "--resume")
    assert_user_error(code, err, "beyond train.steps = 20")
    code, _, err = cli(*base, "--set", "train.steps=80", "--resume")
    assert code == 0, err
    fresh = tmp_path / "fresh"
    cli(*base[:-3], "--out", fresh, "--quiet", "--set", "train.steps=80")
    resumed = {r["step"]: r for r in read_metrics_csv(out / "metrics.csv")}
    straight = {r["step"]: r for r in read_metrics_csv(fresh / "metrics.csv")}
    common = sorted(set(resumed) & set(straight))  # the log-spaced points depend on train.steps at the start
    assert common[-1] == 80 and all(resumed[k] == straight[k] for k in common)  # resumed == uninterrupted


def test_a_damaged_checkpoint_gives_one_line(tmp_path, cli, assert_user_error):
    out = tmp_path / "run"
    base = ["train", "--preset", "linear-fig4-gd", "--set", "data.m=8", "--set", "data.d=10", "--out", out, "--quiet"]
    assert cli(*base, "--set", "train.steps=20")[0] == 0
    checkpoint = next(out.rglob("last.pt"))
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    code, _, err = cli(*base, "--set", "train.steps=40", "--resume")
    assert_user_error(code, err, "not a readable ntpbias checkpoint")


def test_a_bug_exits_1_with_one_line_not_a_user_error(tmp_path, cli, monkeypatch):
    import ntpbias.api

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(ntpbias.api, "save_run", broken)
    code, _, err = cli("train", "--preset", "linear-fig4-gd", "--set", "train.steps=5", "--set", "data.m=8",
                       "--set", "data.d=10", "--out", tmp_path / "run", "--quiet")
    assert code == 1 and err.count("\n") == 1 and "internal error (a bug" in err and "RuntimeError: boom" in err
    assert "Traceback" not in err
