"""``ntpbias lm train`` and ``ntpbias lm analyze`` end to end: the exported NTP data reproduce, through ``ntpbias
analyze``, the W^mm and F numbers of analysis.json; Hugging Face models from a local folder; the error contract."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from ntpbias.data.ntp import NTPData

TINY = ["--set", "train.steps=40", "--set", "train.log_points=5", "--set", "data.lines=300", "--set", "model.d=24"]


@pytest.fixture(scope="module")
def planted_run(tmp_path_factory):
    """A short planted run and its analysis at T = 1 (shared by the tests of this module)."""
    from ntpbias.cli import main

    root = tmp_path_factory.mktemp("lm")
    for args in (["lm", "train", "--preset", "lm-planted", *TINY, "--out", root / "run", "--quiet"],
                 ["lm", "analyze", root / "run", "--out", root / "geo", "--quiet"]):
        with pytest.raises(SystemExit) as info:
            main([str(a) for a in args])
        assert info.value.code == 0
    return root


@pytest.mark.slow
def test_exported_data_reproduce_the_analysis(planted_run, cli):
    geo = planted_run / "geo"
    record = json.loads((geo / "analysis.json").read_text())
    lm = record["lm"]
    assert len(lm["steps"]) == 6 and lm["steps"][-1] == 40
    for key in ("finite_rel_error", "svm_norm", "cos_perp_mm", "margin", "logit_cos_perp_mm", "cos_word_gram",
                "within_angle", "separated_fraction"):
        assert len(lm[key]) == len(lm["steps"]), key
    data = NTPData.load(geo / "ntp_data.npz")
    with np.load(geo / "ntp_data.npz") as f:
        assert f["W"].shape == (data.V, data.d) and data.V == 16 and data.m == 16
    assert data.contexts[:2] == ("t0", "t1") and record["m"] == data.m
    code, out, err = cli("analyze", geo / "ntp_data.npz", "--out", planted_run / "again", "--json")
    assert code == 0, err
    again = json.loads(out)
    assert again["separable"] and lm["separable"][-1]
    assert again["norm_W_mm"] == pytest.approx(lm["svm_norm"][-1], rel=1e-6)
    assert again["dim_F"] == lm["dim_F"][-1] == record["dim_F"]
    assert again["compatible"] == lm["compatible"][-1]
    assert again["norm_W_star"] == pytest.approx(record["norm_W_star"], rel=1e-8)
    assert (geo / "report.html").is_file() and (geo / "figures" / "lm-curves.png").is_file()


@pytest.mark.slow
def test_analyze_another_text_and_options(planted_run, cli, tmp_path):
    text = tmp_path / "chain.txt"
    text.write_text("t0 t1 t2 t3\nt3 t2 t1 t0 t5\n", encoding="utf-8")
    code, out, err = cli("lm", "analyze", planted_run / "run", "--text", text, "--context-length", 2,
                         "--vocab", "text", "--no-nuclear", "--checkpoints", 3, "--out", tmp_path / "o", "--json")
    assert code == 0, err
    record = json.loads(out)
    assert record["m"] == 5 and record["V"] == 5 and record["lm"]["context_length"] == 2
    assert record["lm"]["steps"] == [0, 3, 40]  # the first, a middle one and the last of the 6 checkpoints
    assert "logit_cos_perp_mm" not in record["lm"]


def _tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def test_train_into_a_directory_holding_another_run_is_refused(cli, assert_user_error, tmp_path):
    """The run-directory rules of ``ntpbias train`` (docs/errors-and-limits.md): an --out that holds another run is
    refused, one line and nothing written, unless --overwrite; --overwrite with --resume is refused too."""
    out = tmp_path / "out"
    assert cli("train", "--preset", "linear-2d", "--scale", "smoke", "--quiet", "--out", out)[0] == 0
    before = _tree(out)
    lm_train = ["lm", "train", "--preset", "lm-planted", *TINY, "--quiet", "--out", out]
    code, _, err = cli(*lm_train)
    assert_user_error(code, err, f"{out} already holds an earlier run (summary.json, config.toml, metrics.csv, "
                                 "report.html); pass --overwrite to replace it, --resume to continue it")
    code, _, err = cli(*lm_train, "--overwrite", "--resume")
    assert_user_error(code, err, "--overwrite starts the run over and --resume continues it: give one of them")
    code, _, err = cli("lm", "train", tmp_path / "missing.txt", "--out", out)
    assert_user_error(code, err, "missing.txt")
    code, _, err = cli("lm", "train", "--preset", "lm-planted", "--set", "model.layers=0", "--out", out)
    assert_user_error(code, err, "model.layers")
    code, _, err = cli("lm", "analyze", tmp_path, "--out", out)
    assert_user_error(code, err, "already holds an earlier run")
    assert _tree(out) == before


@pytest.mark.slow
def test_overwrite_replaces_another_run(planted_run, cli, assert_user_error, tmp_path):
    out = tmp_path / "out"
    assert cli("train", "--preset", "linear-2d", "--scale", "smoke", "--quiet", "--out", out)[0] == 0
    analyze = ["lm", "analyze", planted_run / "run", "--checkpoints", 2, "--no-nuclear", "--quiet", "--out", out]
    code, _, err = cli(*analyze)
    assert_user_error(code, err, "already holds an earlier run")
    code, _, err = cli(*analyze, "--overwrite")
    assert code == 0, err
    assert (out / "analysis.json").is_file() and not (out / "summary.json").exists()
    assert not (out / "geometry.npz").exists() and not (out / ".ntpbias.lock").exists()
    code, _, err = cli("lm", "train", "--preset", "lm-planted", *TINY, "--quiet", "--out", out)
    assert_user_error(code, err, "already holds an earlier run (report.html, analysis.json)")
    code, _, err = cli("lm", "train", "--preset", "lm-planted", *TINY, "--quiet", "--out", out, "--overwrite")
    assert code == 0, err
    assert not (out / "analysis.json").exists() and not (out / "ntp_data.npz").exists()
    assert (out / "tokenizer.json").is_file() and (out / "checkpoints").is_dir()


def test_user_errors(cli, assert_user_error, tmp_path):
    code, _, err = cli("lm", "train", "--out", tmp_path / "x")
    assert_user_error(code, err, "give the TEXT to train on")
    code, _, err = cli("lm", "train", "--preset", "linear-fig4-gd", "--out", tmp_path / "x")
    assert_user_error(code, err, "not a language-model preset")
    code, _, err = cli("lm", "train", "--preset", "lm-planted", "--set", "model.heads=5", "--out", tmp_path / "x")
    assert_user_error(code, err, "divisible by model.heads")
    code, _, err = cli("lm", "train", tmp_path / "missing.txt", "--out", tmp_path / "x")
    assert_user_error(code, err, "missing.txt")
    code, _, err = cli("lm", "analyze", "--out", tmp_path / "y")
    assert_user_error(code, err, "exactly one of RUN_DIR")
    code, _, err = cli("lm", "analyze", tmp_path, "--out", tmp_path / "y")
    assert_user_error(code, err, "config.toml")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or __import__("torch").cuda.is_available(),
                    reason="a GPU is present: --device cuda is accepted there")
def test_device_cuda_without_a_gpu_is_one_line_and_writes_nothing(planted_run, cli, assert_user_error, tmp_path):
    code, _, err = cli("lm", "train", "--preset", "lm-planted", "--device", "cuda", "--out", tmp_path / "x")
    assert_user_error(code, err, "no CUDA GPU is available; use --device cpu")
    code, _, err = cli("lm", "analyze", planted_run / "run", "--device", "cuda", "--out", tmp_path / "y")
    assert_user_error(code, err, "no CUDA GPU is available; use --device cpu")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


@pytest.mark.slow
def test_compare_groups_runs_by_setting(planted_run, cli, tmp_path):
    """Two analyses of one run at T = 1 (the same setting twice) and one at T = 2: two settings, the first with two
    runs whose spread is 0, the baselines beside them."""
    code, _, err = cli("lm", "analyze", planted_run / "run", "--context-length", 2, "--checkpoints", 1, "--no-prefix",
                       "--out", tmp_path / "t2", "--quiet")
    assert code == 0, err
    code, out, err = cli("lm", "compare", planted_run / "geo", planted_run / "geo" / "analysis.json", tmp_path / "t2",
                         "--out", tmp_path / "cmp", "--json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert [(e["T"], e["runs"]) for e in summary] == [(1, 2), (2, 1)]
    assert summary[0]["logit_cos_perp_S_sd"] == 0.0 and summary[1]["logit_cos_perp_S_sd"] is None
    assert summary[0]["baselines"]["add_1"]["logit_cos_perp_S"] is not None
    assert (tmp_path / "cmp" / "figures" / "lm-across.png").is_file()
    code, _, err = cli("lm", "compare", tmp_path / "nothing", "--out", tmp_path / "cmp2")
    assert code == 2 and "does not exist" in err and not (tmp_path / "cmp2").exists()


def test_train_report_summarizes_what_was_trained(planted_run):
    """The report and summary.json of `lm train` say what was trained and the loss it reached, not a zero tally."""
    summary = json.loads((planted_run / "run" / "summary.json").read_text())
    section = summary["sections"][0]
    assert "trained on planted" in section["description"] and "steps of adam" in section["description"]
    assert section["title"].endswith("2 blocks, d = 24")
    table = section["tables"][0]
    assert table["title"] == "Training" and len(table["rows"]) == 1
    assert table["rows"][0][2] < table["rows"][0][1]  # the loss fell
    page = (planted_run / "run" / "report.html").read_text()
    assert "states no checks" in page and "0 theorem checks passed" not in page


def _tiny_hf(folder, kind: str):
    """A randomly initialised tiny causal LM (GPT-2, or Phi whose output layer has a bias) and a word-level tokenizer,
    written to ``folder`` (nothing downloaded)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PhiConfig, PhiForCausalLM, PreTrainedTokenizerFast

    words = ["[UNK]", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "."]
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    torch.manual_seed(0)
    if kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(words), n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                           bos_token_id=0, eos_token_id=0))
    else:
        model = PhiForCausalLM(PhiConfig(vocab_size=len(words), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16,
                                         bos_token_id=0, eos_token_id=0))
    model.save_pretrained(folder)
    PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]").save_pretrained(folder)
    return folder


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("transformers") is None, reason="the hf extra is not installed")
@pytest.mark.parametrize("kind", ["gpt2", "phi"])
def test_hugging_face_model_from_a_local_folder(run_cli, tmp_path, kind):
    model = _tiny_hf(tmp_path / "model", kind)
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat .\na dog ran .\nthe dog sat .\nthe cat ran on a mat .\n", encoding="utf-8")
    proc = run_cli("lm", "analyze", "--hf", model, "--text", text, "--out", tmp_path / "geo", "--json")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    lm = record["lm"]
    assert record["V"] == 10 and record["d"] == 16 + (kind == "phi")  # Phi: the bias as a constant feature
    assert lm["logit_reconstruction_error"][-1] < 1e-10
    assert record["m"] == 8 and len(lm["finite_rel_error"]) == 1
    data = NTPData.load(tmp_path / "geo" / "ntp_data.npz")
    assert data.vocab[1] == "the" and "the" in data.contexts
    proc = run_cli("analyze", tmp_path / "geo" / "ntp_data.npz", "--out", tmp_path / "again", "--json")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
def test_reproduce_the_planted_control_at_smoke_scale(cli, tmp_path, report_matches_summary):
    """``reproduce lm-planted lm-frozen`` (the graded part of the group) at smoke scale: every certificate passes,
    nothing is graded, the figures and the analysis record are written."""
    code, out, err = cli("reproduce", "lm-planted", "lm-frozen", "--scale", "smoke", "--out", tmp_path / "g", "--quiet")
    assert code == 0, err
    summary = report_matches_summary(tmp_path / "g")
    kinds = {c["kind"] for c in summary["checks"]}
    assert kinds == {"sanity"} and summary["passed"]
    names = [c["name"] for c in summary["checks"]]
    assert "planted: supports" in names and "frozen features: invariant 1^T W" in names
    figures = {p.name for p in (tmp_path / "g" / "figures").iterdir()}
    assert {"lm-planted-curves.png", "lm-planted-spectra.png", "lm-planted-collapse.png", "lm-frozen.png"} <= figures
    record = json.loads((tmp_path / "g" / "data" / "planted_analysis.json").read_text())
    assert record["lm"]["context_length"] == 1 and record["m"] == 16
