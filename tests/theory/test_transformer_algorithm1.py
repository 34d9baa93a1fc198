"""Algorithm 1 on the training engine (Trainer + NGD) against the theory of paper C and independent reference values.

Reference values (Example 1, η₀ = 0.1, η = 0.025; |V| = 20 exact stage 1) come from an independent prototype written
before ntpbias (docs/paper-c-transformer.md#theory-checks, C-C4 to C-C8); bounds come from
``ntpbias.geometry.transformer.bounds``.
"""

import math

import numpy as np
import pytest
import torch

from ntpbias.data.generators import generate_samples, generate_sentences
from ntpbias.data.sentences import example1, example2_inputs
from ntpbias.experiments import transformer as ex
from ntpbias.geometry.transformer import bounds as tb
from ntpbias.geometry.transformer import optimum as th
from ntpbias.models.transformer import TransformerInputs, forward_reparam, token_embeddings
from ntpbias.training.loop import TrainConfig
from ntpbias.training.transformer import Stage2Problem, TransformerTask, paper_step_sizes, train_two_stage

EVERY_STEP = TrainConfig(steps=900, log_points=0, log_every=1)


def series(history, metric):
    return history.steps.astype(float), history[metric][:, 0]


@pytest.fixture(scope="module")
def example1_run():
    task = TransformerTask.build(example1(), token_embeddings(4))
    return task, train_two_stage(task, eta0=0.1, eta=0.025, stage1=EVERY_STEP, stage2=EVERY_STEP, seeds=[0])


@pytest.fixture(scope="module")
def random_run():
    task = TransformerTask.build(generate_sentences(20, seed=1), token_embeddings(20))
    eta0, eta = paper_step_sizes(20)
    return task, train_two_stage(task, eta0=eta0, eta=eta, stage1=EVERY_STEP, stage2=EVERY_STEP, seeds=[1])


def test_example1_reference_values(example1_run):
    """C-C6: cos(W_kq^(t), W_kq*) = 0.96476, 0.98600, 0.99540, 0.99826, 0.99903, 0.99952 at t = 1, 10, 100,
    300, 600, 900 and ||W_kq^(900)|| = 22.483; W_kq^(900)'s column P = (0, 0, 7.518, -7.518) (independent prototype)."""
    task, res = example1_run
    steps, cos = series(res.stage2, "cos_kq")
    for t, value in ex.EXAMPLE1_COS.items():
        assert cos[steps == t][0] == pytest.approx(value, abs=1e-5)
    assert float(torch.linalg.vector_norm(res.W_kq[0])) == pytest.approx(22.483, abs=1e-3)
    assert res.W_kq[0][:, 3].tolist() == pytest.approx([0, 0, 7.518, -7.518], abs=1e-3)
    loss, floor = series(res.stage2, "loss")[1], series(res.stage2, "loss_floor")[1]
    assert loss[-1] == pytest.approx(8.1381e-23, rel=1e-4) and floor[-1] == pytest.approx(8.1380e-23, rel=1e-4)


@pytest.mark.parametrize("which", ["example1_run", "random_run"])
def test_stage1_exact_dynamics(which, request):
    """C-C4 (docs/paper-c-transformer.md#objects, object 4): cos = 1, ||W_ov^(t)|| = t η₀,
    L_0 = |V| log(1 + (|V|-1) e^{-tη₀/√(|V|-1)}), and equal wrong-token logits (Lemma 3) at every t; at |V| = 20 the
    closed form gives L_0(W^(900)) = 0.0370843 and margin 9.233805."""
    task, res = request.getfixturevalue(which)
    h = res.stage1
    eta0 = 0.1 if which == "example1_run" else paper_step_sizes(20)[0]
    steps, norm = series(h, "norm_ov")
    exact = th.stage1_exact(steps, eta0=eta0, V=task.V)
    pos = steps >= 1
    assert np.abs(series(h, "cos_ov")[1][pos] - 1).max() < 1e-12
    np.testing.assert_allclose(norm[pos], steps[pos] * eta0, rtol=1e-12)
    np.testing.assert_allclose(series(h, "loss_L0")[1], exact.loss_L0, rtol=1e-10, atol=0)
    np.testing.assert_allclose(series(h, "margin_ov")[1], exact.margin, rtol=1e-10, atol=1e-15)
    assert series(h, "margin_spread_ov")[1].max() <= 1e-12 * max(1.0, exact.margin.max())
    assert float(res.W_ov[0].sum(0).abs().max()) < 1e-12  # column sums 1^T W_ov = 0
    if which == "random_run":
        assert series(h, "loss_L0")[1][-1] == pytest.approx(0.0370843, rel=1e-6)
        assert series(h, "margin_ov")[1][-1] == pytest.approx(9.233805, rel=1e-7)


@pytest.mark.parametrize("which", ["example1_run", "random_run"])
def test_norm_growth_bounds(which, request):
    """Prop. 1 (stage 1) and Theorem 1 / Lemma 6 (stage 2): t η/(2||W*||) <= ||W^(t)|| <= t η (Lemma 6's weaker
    t η/(2 L_max ||W*||) is what is proven for W_kq; the stated version held here too)."""
    task, res = request.getfixturevalue(which)
    eta0, eta = (0.1, 0.025) if which == "example1_run" else paper_step_sizes(20)
    steps, norm = series(res.stage1, "norm_ov")
    lo, hi = tb.ngd_norm_bounds(steps[steps >= 2], eta0, task.W_ov_star.norm)
    assert (lo <= norm[steps >= 2] + 1e-12).all() and (norm[steps >= 2] <= hi + 1e-12).all()
    steps, norm = series(res.stage2, "norm_kq")
    for L_max in (task.samples.L_max, 1):
        lo, hi = tb.ngd_norm_bounds(steps, eta, task.W_kq_star.norm, L_max=L_max)
        assert (lo <= norm + 1e-12).all() and (norm <= hi + 1e-12).all()


@pytest.mark.parametrize("which", ["example1_run", "random_run"])
def test_loss_monotone_above_its_floor(which, request):
    """C-C5: both stages decrease their loss at every step; L(θ^(t)) > L* throughout."""
    _, res = request.getfixturevalue(which)
    assert max(res.stage1.max_loss_increase) < 0 and max(res.stage2.max_loss_increase) < 0
    assert (series(res.stage2, "loss_excess")[1] > 0).all()
    assert (np.diff(series(res.stage2, "loss")[1]) < 0).all()


def test_random_dataset_direction_rate_and_lemmas(random_run):
    """C-C5, C-C6 at |V| = 20: cos(900) >= 0.95 and > cos(100); log(L - L*) linear on [600, 900];
    min φ_+ non-decreasing and above Theorem 2's bound; Lemma 6's alignment bound at every step."""
    task, res = random_run
    h = res.stage2
    steps, cos = series(h, "cos_kq")
    assert cos[-1] >= 0.95 and cos[-1] > cos[steps == 100][0]
    excess = series(h, "loss_excess")[1]
    late = steps >= 600
    slope, icpt = np.polyfit(steps[late], np.log(excess[late]), 1)
    resid = np.log(excess[late]) - slope * steps[late] - icpt
    assert slope < 0 and 1 - resid.var() / np.log(excess[late]).var() > 0.95
    phi = series(h, "attn_opt_min")[1]
    assert (np.diff(phi) >= -1e-12).all() and phi.min() >= 1 / task.samples.L_max - 1e-15
    _, C1 = tb.thm2_constants(*paper_step_sizes(20), task.W_ov_star.norm, task.W_kq_star.norm, task.samples.L_max)
    assert (phi >= tb.thm2_attention_lower(steps, C1, task.samples.L_max) - 1e-12).all()
    assert (series(h, "cos_grad_kq_star")[1] <= tb.lemma6_direction_upper(phi, task.W_kq_star.norm) + 1e-12).all()
    assert series(h, "accuracy")[1][-1] == pytest.approx(1.0, abs=1e-12)


def test_lemma5_per_sample_on_the_engine(monkeypatch):
    """Lemma 5 per sample (not only the minimum): every φ_+^(n,t) is non-decreasing along the engine's iterates,
    and every optimal weight >= every non-optimal weight of its sample."""
    task = TransformerTask.build(generate_samples(8, seed=2), token_embeddings(8))
    opt = task.structure.optimal
    seen = []
    original = Stage2Problem.metrics

    def recording(self, params):
        seen.append(params["W_kq"][0].clone())
        return original(self, params)

    monkeypatch.setattr(Stage2Problem, "metrics", recording)
    eta0, eta = paper_step_sizes(8)
    cfg = TrainConfig(steps=300, log_points=0, log_every=1)
    train_two_stage(task, eta0=eta0, eta=eta, stage1=cfg, stage2=cfg, seeds=[0])
    from ntpbias.models.transformer import attention

    phi = torch.stack([attention(W, task.inputs) for W in seen])  # (T, N, L)
    plus = (phi * opt).sum(-1)
    assert len(seen) == 301 and bool((plus[1:] >= plus[:-1] - 1e-12).all())
    lo = phi.masked_fill(~opt, math.inf).amin(-1)
    hi = phi.masked_fill(opt | ~task.samples.mask, -math.inf).amax(-1)
    assert bool((lo >= hi - 1e-15).all())


def test_example2_predictions(example1_run):
    """C-C7 (Example 2, Sec. 6 of paper C): SP -> V, OSP -> P, VP -> O (not P), each with probability > 0.99;
    attention on S in SP = 0.99946 (independent prototype)."""
    task, res = example1_run
    ex2 = example2_inputs()
    probs = forward_reparam(res.W_ov[0], res.W_kq[0], TransformerInputs.from_samples(ex2, task.E))
    assert probs.argmax(1).tolist() == ex2.y.tolist() and bool((probs.max(1).values > 0.99).all())
    run = ex.SeedRun(0, task, 0.1, 0.025, "zeros", two_stage=res)
    checks, table = ex.example2(run)
    assert all(c.passed for c in checks)
    assert table.rows[0][5] == pytest.approx(0.99946, abs=1e-5)


@pytest.mark.parametrize("make", [lambda: generate_sentences(12, L_max=6, seed=3),
                                  lambda: generate_samples(10, seed=4)], ids=["sentences", "samples"])
def test_theorem3_generalization_on_random_data(make):
    """C-C8 (Theorem 3 of paper C): unseen inputs [x_0, non-optimal tokens, q] predict n(x_0) and [u, x_0, q] predict
    n(u); after training the scores rank optimal > non-comparable > non-optimal under every query."""
    task = TransformerTask.build(make(), token_embeddings(make().V))
    eta0, eta = paper_step_sizes(task.d)
    res = train_two_stage(task, eta0=eta0, eta=eta, stage1=TrainConfig(steps=900, log_points=0),
                          stage2=TrainConfig(steps=900, log_points=0), seeds=[0])
    run = ex.SeedRun(0, task, eta0, eta, "zeros", two_stage=res)
    unseen = ex.theorem3_inputs(task.structure, seed=0)
    assert unseen.M > 0
    ev = ex.evaluate_unseen(run, unseen)
    assert (ev["pred"] == unseen.expected.numpy()).all()
    assert ex.extended_order_gap(run) > 0


def test_orthonormal_embeddings_give_the_one_hot_curves():
    """C-C3 on the engine (rotation invariance): a random orthogonal E gives the same loss and cosine curves (1e-10)."""
    curves = []
    for E in (token_embeddings(4), token_embeddings(4, kind="orthonormal", seed=9)):
        task = TransformerTask.build(example1(), E)
        cfg = TrainConfig(steps=200, log_points=0, log_every=1)
        res = train_two_stage(task, eta0=0.1, eta=0.025, stage1=cfg, stage2=cfg, seeds=[0])
        curves.append(np.stack([series(res.stage2, m)[1][1:] for m in ("loss", "cos_kq", "norm_kq", "attn_opt_min")]))
    np.testing.assert_allclose(curves[0], curves[1], rtol=1e-10, atol=1e-14)


def test_unit_norm_embeddings_break_exact_stage1_alignment():
    """Decision C-D2 (the `unit` ablation): with non-orthonormal (unit-norm) embeddings stage 1 is no longer aligned
    from t = 1, but still moves toward W_ov* (the full QP)."""
    ds = generate_sentences(20, seed=0)
    task = TransformerTask.build(ds, token_embeddings(20, kind="unit", seed=0))
    cfg = TrainConfig(steps=900, log_points=0, log_every=1)
    eta0, eta = paper_step_sizes(20)
    res = train_two_stage(task, eta0=eta0, eta=eta, stage1=cfg, stage2=TrainConfig(steps=1), seeds=[0])
    steps, cos = series(res.stage1, "cos_ov")
    assert cos[1] < 0.99 and cos[-1] > cos[1] + 0.02
