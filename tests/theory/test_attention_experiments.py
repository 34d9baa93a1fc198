"""Paper B's experiments through the engine and the experiment layer: stage 2 on A1-base (Thm 4.3, Lemma 4.5)
and its negative control, the Lemma 4.1 sweep against direct stage-1 steps, the Figure-2 pattern at the
CI size for models (1) and (17) (check B-C15 of docs/paper-b-attention.md#theory-checks), and real text from fixture
files through preprocessing to training."""

import csv
import json
from dataclasses import replace

import numpy as np
import pytest
import torch

from ntpbias.api import save_run
from ntpbias.data.config import KLevelLaw, PreprocessConfig, YelpConfig, power_level_sizes
from ntpbias.data.text import stem_words
from ntpbias.data.tokens import relevant_tokens, token_statistics
from ntpbias.errors import ConfigError
from ntpbias.experiments.attention import (
    STAGE2_NGD,
    AttentionConfig,
    AttentionModelConfig,
    AttentionTrainConfig,
    Lemma41Config,
    StageTwoConfig,
    StageTwoModelConfig,
    StageTwoTrainConfig,
    TokenDataConfig,
    lemma41_checks,
    lemma41_sweep,
    pattern_checks,
    read_token_table,
    run_stage_two,
    selection_table,
    stage_two_checks,
    token_table,
    train_attention,
    train_classifier,
)
from ntpbias.experiments.attention.figure3 import statistics
from ntpbias.experiments.base import RunContext
from ntpbias.geometry.attention import selection as gs
from ntpbias.geometry.attention import stage_one as ga


# ------------------------------------------------------------------------------------------ stage 2
def test_stage_two_on_a1_base_selects_the_relevant_tokens_and_the_lemma45_direction(tmp_path):
    """B-C10 (docs/paper-b-attention.md#theory-checks) through the engine: s*_X is the only selected token of every X,
    cos(p_T, p̂) >= 0.999, and every stage-2 check of the report passes."""
    cfg = replace(STAGE2_NGD, seeds=2)
    r = run_stage_two(cfg, RunContext(out=tmp_path), "ngd")
    assert r.history.status == "completed" and r.assumption1 == ""
    ds = r.data.ds
    for st, p, ref in zip(r.stages, r.history.params["p"], r.references, strict=True):
        sel = gs.important_selection(st.E1, p, ds)
        assert sel.all_relevant_selected and sel.all_only_relevant
        imp = gs.important_svm(st.E1, ds)  # solved again, independently of the run's reference
        assert torch.allclose(imp.p_hat, ref.p_hat, rtol=0, atol=1e-9)
        assert float(p @ imp.p_hat / (p.norm() * imp.norm)) >= 0.999
    checks = stage_two_checks(r, "ngd")
    assert {c.name for c in checks} >= {"ngd: only s*_X selected", "ngd: cos with Lemma 4.5's p̂",
                                        "ngd: own max-margin direction", "ngd: loss at its floor"}
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    # every graded check fails on its negative control: the run stopped at 1% of its steps, the sequences reduced to
    # their relevant token, a direction selecting an irrelevant token, Lemma 4.5's nearest alternative
    graded = [c for c in checks if c.kind == "theorem"]
    assert len(graded) == 6 and all(c.control and c.control_passed is False for c in graded), graded
    by = {c.name: c for c in graded}
    assert by["ngd: ||p_t|| grows"].control_measured == 1.0  # nothing drives p where the loss does not depend on it
    assert r.controls.early.step == 40 and by["ngd: own max-margin direction"].control_measured < 0.999
    assert by["ngd: only s*_X selected"].control_measured == 15 / 16  # the alternative ties u in one sequence
    nearest = r.controls.competitors[0]
    assert nearest.norm > r.references[0].norm  # Lemma 4.5's gap: the competitor has the smaller margin
    table = selection_table(r, "ngd")
    assert [row[0] for row in table.rows] == [0, 1]
    for row in table.rows:  # one selected position per sequence, (12) solved with a certificate
        assert row[1] == ds.n and row[2] == "optimal" and row[6] is True and row[7] >= 0.999
    # a final selection that (12) cannot realise is reported as such, not as a number: here one token is both
    # selected (position 0) and not selected (position 1) in sequence 0
    X = ds.X.clone()
    X[0, 1] = X[0, 0]
    first = torch.zeros_like(ds.mask)
    first[:, 0] = True
    clash = gs.max_margin_selection(r.stages[0].E1, type(ds).from_arrays(X, ds.y, num_tokens=ds.num_tokens), first)
    assert clash.status == "infeasible"
    fake = replace(r.own[0], svm=clash)
    failing = stage_two_checks(replace(r, own=[fake, *r.own[1:]]), "ngd")
    own_check = next(c for c in failing if c.name == "ngd: own max-margin direction")
    assert not own_check.passed and own_check.measured.startswith("(12) infeasible")


def test_stage_two_checks_fail_when_the_theory_conditions_are_violated(tmp_path):
    """Negative control (B-C11 of docs/paper-b-attention.md#theory-checks): one irrelevant token at d = 256 breaks
    condition (ii) for this seed: p selects the irrelevant token in half of the sequences and the checks say so."""
    cfg = StageTwoConfig(model=StageTwoModelConfig(d=256), seed=1,
                         data=TokenDataConfig(source="assumption1", n=16, T=6, n_irr=1, seed=1))
    r = run_stage_two(cfg, RunContext(out=tmp_path), "bad")
    failed = {c.name for c in stage_two_checks(r, "bad") if not c.passed}
    assert {"bad: only s*_X selected", "bad: s*_X selected", "bad: cos with Lemma 4.5's p̂"} <= failed


def test_stage_two_on_data_violating_assumption_1_runs_the_general_checks(tmp_path):
    cfg = StageTwoConfig(model=StageTwoModelConfig(d=64), train=StageTwoTrainConfig(steps=200),
                         data=TokenDataConfig(n=32, T=8, law=KLevelLaw(irrelevant_size=6, level_sizes=(2, 2),
                                                                       deltas=(0.3, 0.1), delta_tilde=0.5)))
    r = run_stage_two(cfg, RunContext(out=tmp_path), "kl")
    assert "violates Assumption 1" in r.assumption1 and r.references is None and r.relevant is None
    names = {c.name for c in stage_two_checks(r, "kl")}
    assert names == {"kl: ||p_t|| grows", "kl: own max-margin direction"}
    assert r.history.run == "kl" and r.history.names == ["loss", "grad_norm", "p_norm"]


# ------------------------------------------------------------------------------------------ Lemma 4.1
def test_lemma41_sweep_matches_direct_steps_and_its_checks_pass_and_can_fail():
    cfg = Lemma41Config(dims=(256, 1024, 4096), seeds=2)
    arrays = lemma41_sweep(cfg)
    ds = cfg.data.build().ds
    assert ds.num_tokens == 140
    st = ga.stage_one(ds, d=1024, eta0=100.0, seed=1)  # (η₀ index 1, d index 1, seed index 1)
    assert arrays["error"][1, 1, 1] == pytest.approx(st.max_error, rel=1e-12)
    assert arrays["bound"][1, 1] == pytest.approx(11 * 100 * 1024 ** -0.25, rel=1e-14)
    # the error is exactly linear in η₀ (E¹ - E⁰ = -η₀ ∇L(E⁰, p⁰))
    assert np.allclose(arrays["error"][1], 100 * arrays["error"][0], rtol=1e-10, atol=0)
    checks = lemma41_checks(arrays)
    assert all(c.passed for c in checks), [c for c in checks if not c.passed]
    assert float(arrays["d_condition"]) == pytest.approx((2 * np.log(140 ** 2 / 0.01)) ** 2)
    broken = dict(arrays, error=arrays["error"] * 1e4, correlation=arrays["correlation"] - 0.1)
    failed = {c.name for c in lemma41_checks(broken) if not c.passed}
    assert failed == {"Lemma 4.1: error bound (7)", "Lemma 4.1: alignment with α"}
    # bound (7) is vacuous here: the step's error with the whole (η₀/2) α_s v term deleted is still below it
    by = {c.name: c for c in checks}
    assert by["Lemma 4.1: error bound (7)"].kind == "vacuous"
    direct = max(float((st.E1 - st.E0).norm(dim=1).max()), float((st.p1 - st.p0).norm())) / st.bound
    assert arrays["error_unshifted"][1, 1, 1] / arrays["bound"][1, 1] == pytest.approx(direct, rel=1e-12)
    assert (arrays["error_unshifted"] / arrays["bound"][:, :, None]).max() < 1
    # the init event once per draw (d, seed), and every graded check fails on its control
    assert arrays["init_event"].shape == (3, 2) and arrays["init_event_unscaled"].sum() == 0
    graded = [c for c in checks if c.kind == "theorem"]
    assert len(graded) == 3 and all(c.control_passed is False for c in graded)
    assert abs(by["Lemma 4.1: alignment with α"].control_measured) < 0.2  # α of permuted labels
    assert by["Lemma 4.1: slope η₀/2"].control_measured == pytest.approx(
        float(np.abs(arrays["slope_ratio"] / 2 - 1).max()))


# ------------------------------------------------------------------------------------------ Figures 1-3 pattern
CI_LAW = KLevelLaw(irrelevant_size=128, level_sizes=power_level_sizes(4), deltas=(0.4, 0.3, 0.2, 0.05),
                   delta_tilde=0.3)
CI_DATA = TokenDataConfig(n=1024, T=32, law=CI_LAW)
CI = AttentionConfig(model=AttentionModelConfig(d=64), train=AttentionTrainConfig(epochs=20, decay_epochs=()),
                     data=CI_DATA,
                     optimizer=replace(AttentionConfig().optimizer, lr=1e-3))


@pytest.fixture(scope="module")
def ci_runs(tmp_path_factory):
    """B-C15 (CI size): models (1) and (17) on the small K-level data (T = 32, n = 1024, d = 64, 20 epochs)."""
    data = CI_DATA.build()
    out = {}
    for model in ("one_layer", "two_layer"):
        ctx = RunContext(out=tmp_path_factory.mktemp(model))
        history, problem = train_classifier(replace(CI, model=replace(CI.model, kind=model)), data, ctx, model)
        out[model] = (history, token_table(data, problem, history))
    return data, out


def test_figure2_pattern_at_ci_size_for_both_models(ci_runs):
    data, runs = ci_runs
    h1, t1 = runs["one_layer"]
    h2, t2 = runs["two_layer"]
    # B-C15 (docs/paper-b-attention.md#theory-checks): Pearson >= 0.85 for model (1), >= 0.75 for model (17); the
    # report's level-order and accuracy checks are calibrated on the larger quick-scale data (this CI size reaches
    # 98.5% accuracy with model (1))
    for name, (h, t), bound in (("one", runs["one_layer"], 0.85), ("two", runs["two_layer"], 0.75)):
        checks = pattern_checks(name, t, h, levels={"pearson_v_pd": bound, "pearson_p_abs_pd": bound},
                                min_accuracy=0.95)
        core = [c for c in checks if "level means" not in c.name and "near zero" not in c.name]
        assert len(core) == 4 and all(c.passed for c in core), [c for c in core if not c.passed]
    assert h2.last("loss")[-1] < h1.last("loss")[-1]  # model (17) fits better
    # the per-token table against the data's own statistics
    st = token_statistics(data.ds)
    ids = t1["token_id"]
    assert np.array_equal(t1["count"], st.count.numpy()[ids]) and np.allclose(t1["pd"], st.posterior_difference[ids])
    assert np.array_equal(t1["level"], CI_LAW.level.numpy()[ids])
    assert list(t1["token"][:2]) == [data.ds.vocab[i] for i in ids[:2]]


def test_pattern_checks_fail_on_scrambled_embeddings(ci_runs):
    _, runs = ci_runs
    history, table = runs["one_layer"]
    rng = np.random.default_rng(0)
    scrambled = dict(table, e_dot_v=rng.permutation(table["e_dot_v"]), e_dot_p=rng.permutation(table["e_dot_p"]))
    levels = {"pearson_v_pd": 0.85, "spearman_v_pd": 0.85, "pearson_p_abs_pd": 0.8, "spearman_p_abs_pd": 0.7}
    failed = {c.name.split(": ")[1] for c in pattern_checks("x", scrambled, history, min_accuracy=0.95,
                                                             levels=levels) if not c.passed}
    assert failed == {"pearson_v_pd", "spearman_v_pd", "pearson_p_abs_pd", "spearman_p_abs_pd",
                      "level means of <E_s, v>", "level means of <E_s, p>", "irrelevant tokens near zero"}


def test_figure2_checks_fail_on_the_model_trained_with_permuted_labels(ci_runs, tmp_path):
    """The control of Fig. 2's pattern checks: the same model trained on the same sequences with the labels
    permuted, graded against the true PD: every graded check fails there, and only App. D's setting meets the
    premise (paper numbers), only the calibrated schedule grades the correlations."""
    from ntpbias.experiments.attention.checks import fig2_premise, pattern_levels
    from ntpbias.experiments.attention.config import FIG2, FIG2_QUICK

    data, runs = ci_runs
    history, table = runs["one_layer"]
    cfg = replace(CI, data=replace(CI.data, permute_labels=True))
    permuted = cfg.data.build()
    assert not torch.equal(permuted.ds.y, data.ds.y) and torch.equal(permuted.ds.X, data.ds.X)
    assert sorted(permuted.ds.y.tolist()) == sorted(data.ds.y.tolist())
    h, problem = train_classifier(cfg, permuted, RunContext(out=tmp_path), "control")
    control = token_table(data, problem, h)  # scores of the control model, PD of the true labels
    levels = {"pearson_v_pd": 0.85, "pearson_p_abs_pd": 0.75}
    checks = pattern_checks("one", table, history, control=("labels permuted", control), levels=levels,
                            premise=fig2_premise(FIG2), min_accuracy=0.95)
    graded = {c.name: c for c in checks if c.kind in ("calibrated", "paper-number")}
    assert len(graded) == 5 and all(c.control_passed is False for c in graded.values()), graded
    # at this CI size the level orderings need not hold (B-C15); the correlations and the cloud do
    for name in ("one: pearson_v_pd", "one: pearson_p_abs_pd", "one: irrelevant tokens near zero"):
        assert graded[name].verdict == "pass", graded[name]
    assert fig2_premise(FIG2)[1] and not fig2_premise(FIG2_QUICK)[1]
    assert not fig2_premise(replace(FIG2, model=replace(FIG2.model, train_v=False)))[1]  # the theory's variant
    assert pattern_levels(FIG2_QUICK) is not None and pattern_levels(FIG2) is None


# ------------------------------------------------------------------------------------------ real text fixtures
POSITIVE = ["great", "wonderful", "superb", "brilliant", "loved"]
NEGATIVE = ["awful", "boring", "terrible", "dreadful", "hated"]
NEUTRAL = ["movie", "plot", "actor", "scene", "story", "director", "camera", "music", "ending", "cast"]


def _reviews(n, seed=0):
    """Synthetic sentiment reviews: neutral words plus words whose frequency depends on the label."""
    rng = np.random.default_rng(seed)
    docs, labels = [], []
    for k in range(n):
        label = 1 if k % 2 == 0 else -1
        own, other = (POSITIVE, NEGATIVE) if label > 0 else (NEGATIVE, POSITIVE)
        words = list(rng.choice(NEUTRAL, 12)) + list(rng.choice(own, 3)) + list(rng.choice(other, 1))
        rng.shuffle(words)
        docs.append("The " + " ".join(words) + " !")
        labels.append(label)
    return docs, labels


def write_imdb_csv(path, n=120, seed=0):
    docs, labels = _reviews(n, seed)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["review", "sentiment"])
        w.writerows((d, "positive" if y > 0 else "negative") for d, y in zip(docs, labels, strict=True))
    return path


def write_yelp_jsonl(path, n=120, seed=1):
    docs, labels = _reviews(n, seed)
    lines = [json.dumps({"text": d, "stars": 5 if y > 0 else 1}) for d, y in zip(docs, labels, strict=True)]
    lines.append(json.dumps({"text": "fine, just fine", "stars": 3}))  # 3 stars: dropped
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


WORD = PreprocessConfig(tokenizer="word", min_count=2)


@pytest.mark.parametrize("source", ["imdb", "yelp"])
def test_text_fixture_through_preprocessing_and_training(tmp_path, source):
    path = (write_imdb_csv(tmp_path / "reviews.csv") if source == "imdb"
            else write_yelp_jsonl(tmp_path / "reviews.jsonl"))
    data_cfg = TokenDataConfig(source=source, path=str(path), preprocess=WORD, cache=False,
                               yelp=YelpConfig(min_chars=10, max_chars=2000, size=0))
    cfg = AttentionConfig(model=AttentionModelConfig(d=16),
                          train=AttentionTrainConfig(epochs=15, batch_size=16, decay_epochs=()), data=data_cfg,
                          optimizer=replace(AttentionConfig().optimizer, lr=0.01))
    result = train_attention(cfg, RunContext(out=tmp_path / "run"))
    save_run(tmp_path / "run", result)
    section = result.section
    table = read_token_table(tmp_path / "run" / "tokens-train.csv")
    assert set(table) >= {"token", "count", "alpha", "pd", "e_dot_p", "e_dot_v"}
    tokens = list(table["token"])
    stem = dict(zip(POSITIVE + NEGATIVE + NEUTRAL, stem_words(POSITIVE + NEGATIVE + NEUTRAL), strict=True))
    assert set(tokens) == set(stem.values())  # stop words ("the") and punctuation are gone
    # count and PD of every token against a direct count on the raw reviews
    docs, labels = _reviews(120, 0 if source == "imdb" else 1)
    for word in POSITIVE + NEGATIVE + NEUTRAL:
        per_doc = np.array([d.split().count(word) for d in docs])
        i = tokens.index(stem[word])
        assert table["count"][i] == per_doc.sum()
        assert table["pd"][i] == pytest.approx(float(per_doc @ np.array(labels)) / per_doc.sum(), rel=1e-14)
    # the learned embeddings follow the labels: every positive word above every negative word along v
    e_v = dict(zip(tokens, table["e_dot_v"], strict=True))
    assert min(e_v[stem[w]] for w in POSITIVE) > max(e_v[stem[w]] for w in NEGATIVE)
    stats = next(iter(statistics(table).values()))
    assert stats["sign_agreement"] == 1.0 and stats["pearson_v_pd"] > 0.5  # Fig. 3's pattern on the fixture
    assert any(c.name == "train: Fig. 3 <E_s, v> rises with PD" for c in section.checks)


def test_yelp_without_a_file_is_a_config_error():
    with pytest.raises(ConfigError, match="needs the reviews file"):
        TokenDataConfig(source="yelp").build()
    with pytest.raises(ValueError, match="source = .amazon.: unknown value"):
        TokenDataConfig(source="amazon")


def test_relevant_tokens_of_the_stage2_data_are_the_a1_tokens():
    ds = STAGE2_NGD.data.build().ds
    s_star = relevant_tokens(ds)
    assert bool((s_star < 8).all()) and ds.n == 16 and ds.T == 6 and ds.num_tokens == 20


@pytest.mark.slow
def test_every_graded_check_of_the_quick_group_fails_on_its_negative_control(tmp_path):
    """Issue 37's rule on `reproduce attention` at quick scale: every theorem, paper-number, calibrated and erratum
    check names a control on which it comes out false; the constructed bounds are vacuous; Fig. 2's paper numbers
    are outside their setting premise at quick scale; the errata are refuted."""
    from ntpbias.experiments.attention.group import run_group
    from ntpbias.results import GRADED_KINDS

    section = run_group(RunContext(out=tmp_path, scale="quick")).section
    graded = [c for c in section.checks if c.kind in GRADED_KINDS]
    assert len(graded) >= 40
    for c in graded:
        assert c.missing == () and c.control_passed is False, (c.name, c.control, c.control_measured)
    by = {c.name: c for c in section.checks}
    assert by["Lemma 4.1: error bound (7)"].kind == by["Step 1: norms (Lemma B.1)"].kind == "vacuous"
    assert by["fig2: level means of <E_s, v>"].verdict == "consistent"  # quick scale is not App. D's setting
    assert by["fig2: irrelevant tokens near zero"].verdict == "consistent"
    errata = [c for c in section.checks if c.kind == "erratum"]
    assert len(errata) == 7 and {c.verdict for c in errata} == {"refuted"}
    assert by["Lemma 4.5: margin gap"].verdict == "pass"
