"""Paper B's fast training paths against the plain computation (float64, small sizes, tight tolerances): the
closed-form rank-2 gradient of model (1) against autograd, the fused in-place AdamW against the plain update, the
length groups of model (17) against one padded batch, and whole trainings (several AdamW steps) path against path."""

import itertools

import numpy as np
import pytest
import torch

from ntpbias.data.tokens import TokenSequences
from ntpbias.geometry.attention.stage_one import loss_and_gradients
from ntpbias.models.attention import (
    OneLayerAttention,
    TwoLayerAttention,
    logistic_loss,
    one_layer_loss_and_grads,
    theory_init,
)
from ntpbias.training.attention import ClassifierProblem, classifier_optimizer
from ntpbias.training.batches import length_groups
from ntpbias.training.config import OptimizerConfig, TrainConfig
from ntpbias.training.loop import Trainer
from ntpbias.training.optimizers import Optimizer

ADAMW = OptimizerConfig(name="adamw", lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-3)


def _ds(n=40, S=15, T=11, seed=0):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, S, size=m).tolist() for m in rng.integers(1, T + 1, size=n)]
    return TokenSequences.from_lists(seqs, rng.choice([-1, 1], size=n), num_tokens=S)


def test_one_layer_closed_form_gradients_equal_autograd_and_the_theory_module():
    ds = _ds(seed=1)
    E, p, v = theory_init(ds.num_tokens, 7, seed=3)
    gen = torch.Generator().manual_seed(0)
    p = p + 2.0 * torch.randn(7, generator=gen, dtype=torch.float64)  # concentrated attention
    model = OneLayerAttention(ds.num_tokens, 7, train_v=True).load_params(E, p, v)
    y = ds.y.to(torch.float64)
    ref = logistic_loss(model(ds.X, ds.mask), y)
    auto = torch.autograd.grad(ref, [model.E, model.p, model.v])
    out = torch.full_like(E, float("nan"))
    loss, gE, gp, gv = one_layer_loss_and_grads(E, p, v, ds.X, ds.mask, y, out_E=out)
    assert gE.data_ptr() == out.data_ptr()
    assert float(loss) == pytest.approx(float(ref.detach()), rel=1e-14)
    for mine, theirs in zip((gE, gp, gv), auto, strict=True):
        assert torch.allclose(mine, theirs, rtol=1e-12, atol=1e-17)
    # the theory module's closed form (Lemma A.1, fixed v) agrees as well
    theory = loss_and_gradients(E, p, v, ds)
    assert torch.allclose(gE, theory.grad_E, rtol=1e-12, atol=1e-17)
    assert torch.allclose(gp, theory.grad_p, rtol=1e-12, atol=1e-17)


@pytest.mark.parametrize("train_v", [False, True])
def test_classifier_closed_form_step_equals_the_autograd_step(train_v):
    ds = _ds()
    fast = ClassifierProblem(ds, d=6, train_v=train_v, batch_size=8)
    plain = ClassifierProblem(ds, d=6, train_v=train_v, batch_size=8, gradient="autograd", group_lengths=False)
    assert fast.gradient == "closed_form" and plain.gradient == "autograd"
    params = fast.init_params([2, 5])
    plain.init_params([2, 5])
    gens = [torch.Generator().manual_seed(s) for s in (0, 1)]
    for step in (0, 3, 7):
        loss_f, g_f = fast.loss_and_grad(params, step, gens)
        g_f = {k: v.clone() for k, v in g_f.items()}  # the E buffer is reused by the next call
        loss_p, g_p = plain.loss_and_grad(params, step, gens)
        assert torch.allclose(loss_f, loss_p, rtol=1e-14, atol=0)
        assert list(g_f) == list(g_p) == list(params)
        for k in g_p:
            assert torch.allclose(g_f[k], g_p[k], rtol=1e-12, atol=1e-17), k
    m_f, m_p = fast.metrics(params), plain.metrics(params)
    for k in m_p:
        assert torch.allclose(m_f[k], m_p[k], rtol=1e-13, atol=1e-15), k


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_fused_adam_equals_the_plain_update_and_shares_its_state(name):
    cfg = OptimizerConfig(name=name, lr=0.05, betas=(0.9, 0.99), eps=1e-8, weight_decay=1e-2, milestones=(3,))
    gen = torch.Generator().manual_seed(0)
    start = {"E": torch.randn(2, 5, 3, generator=gen, dtype=torch.float64),
             "p": torch.randn(2, 3, generator=gen, dtype=torch.float64)}
    grads = [{k: torch.randn(v.shape, generator=gen, dtype=torch.float64) for k, v in start.items()} for _ in range(6)]
    plain, fused = Optimizer(cfg), Optimizer(cfg, fused=True)
    assert fused.fused and not plain.fused
    a = {k: v.clone() for k, v in start.items()}
    b = {k: v.clone() for k, v in start.items()}
    for g in grads[:4]:
        a = plain.step(a, g, torch.ones(2))
        out = fused.step(b, g, torch.ones(2))
        assert out["E"] is b["E"]  # in place
    for k in start:
        assert torch.allclose(a[k], b[k], rtol=1e-14, atol=1e-16), k
        assert not torch.allclose(a[k], start[k])
    # the states are interchangeable: each continues from the other's state dict
    plain2, fused2 = Optimizer(cfg), Optimizer(cfg, fused=True)
    plain2.load_state_dict(fused.state_dict())
    fused2.load_state_dict(plain.state_dict())
    a2, b2 = {k: v.clone() for k, v in b.items()}, {k: v.clone() for k, v in a.items()}
    for g in grads[4:]:
        a2 = plain2.step(a2, g, torch.ones(2))
        b2 = fused2.step(b2, g, torch.ones(2))
    for k in start:
        assert torch.allclose(a2[k], b2[k], rtol=1e-14, atol=1e-16), k
    assert not Optimizer(OptimizerConfig(name="gd"), fused=True).fused  # only Adam/AdamW have a fused form


@pytest.mark.parametrize("model, train_v", [("one_layer", True), ("one_layer", False), ("two_layer", True)])
def test_a_fast_training_equals_the_plain_training(model, train_v):
    """Several epochs of AdamW with step decay: the default path (closed form or length groups, fused AdamW) against
    autograd on one padded batch with the plain AdamW, same seeds and batches."""
    ds = _ds(n=30)
    spe = 4

    def train(fast: bool):
        problem = ClassifierProblem(ds, model=model, d=5, train_v=train_v, batch_size=8,
                                    gradient="auto" if fast else "autograd", group_lengths=fast)
        problem.group_overhead = 10.0  # several length groups even in batches this small
        opt = Optimizer(classifier_optimizer(ADAMW, steps_per_epoch=spe, decay_epochs=(2,)), fused=fast)
        return Trainer(problem, opt, TrainConfig(steps=3 * spe, log_points=4), seeds=[0, 4]).run()

    fast, plain = train(True), train(False)
    for k in plain.params:
        assert torch.allclose(fast.params[k], plain.params[k], rtol=1e-11, atol=1e-14), k
    for r_f, r_p in zip(fast.rows(), plain.rows(), strict=True):
        assert r_f.keys() == r_p.keys()
        for k in r_p:
            assert r_f[k] == pytest.approx(r_p[k], rel=1e-10, abs=1e-13), k


def test_two_layer_length_groups_give_the_padded_batchs_loss_gradient_and_outputs():
    ds = _ds(n=24, T=13, seed=2)
    grouped = ClassifierProblem(ds, model="two_layer", d=6, train_v=True, batch_size=0)
    padded = ClassifierProblem(ds, model="two_layer", d=6, train_v=True, batch_size=0, group_lengths=False)
    params = grouped.init_params([1])
    padded.init_params([1])
    gens = [torch.Generator().manual_seed(0)]
    grouped.group_overhead = 10.0
    assert len(length_groups(grouped._extent, overhead=10.0)) > 3
    loss_g, g_g = grouped.loss_and_grad(params, 0, gens)
    loss_p, g_p = padded.loss_and_grad(params, 0, gens)
    assert torch.allclose(loss_g, loss_p, rtol=1e-14, atol=0)
    for k in g_p:
        assert torch.allclose(g_g[k], g_p[k], rtol=1e-11, atol=1e-15), k
    # whole-data outputs in small length-sorted chunks equal one module call on the full padded data
    grouped.chunk, grouped.chunk_elements = 5, 6 * 13 * 3
    full = padded._call({k: v[0] for k, v in params.items()}, 0, ds.X, ds.mask)
    assert torch.allclose(grouped.outputs(params, 0), full, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("train_v", [False, True])
def test_two_layer_gradient_through_the_embedded_sequences_equals_autograd_through_the_module(train_v):
    """Model (17)'s step (gradient with respect to each group's E_X, added into one buffer; no mask on unpadded
    groups) against plain autograd through :class:`TwoLayerAttention` on the padded batch (a dense E gradient)."""
    ds = _ds(n=30, T=9, seed=4)
    problem = ClassifierProblem(ds, model="two_layer", d=5, train_v=train_v, batch_size=10)
    problem.group_overhead = 10.0  # several groups, some without padding
    seeds = [0, 3]
    params = problem.init_params(seeds)
    gens = [torch.Generator().manual_seed(s) for s in (1, 2)]
    loss, grads = problem.loss_and_grad(params, 1, gens)
    assert any(not padded for _, groups in problem._plans for batch in groups for *_, padded in batch)
    for b, idx in enumerate(problem.batch_indices(1, gens)):
        model = TwoLayerAttention(ds.num_tokens, 5, train_v=train_v, seed=seeds[b])  # (its v when v is fixed)
        with torch.no_grad():
            for name, value in model.named_parameters():
                value.copy_(params[name][b])
        ref = logistic_loss(model(ds.X[idx], ds.mask[idx]), ds.y[idx].to(torch.float64))
        auto = torch.autograd.grad(ref, [value for _, value in model.named_parameters()])
        assert float(loss[b]) == pytest.approx(float(ref.detach()), rel=1e-13)
        for (name, _), theirs in zip(model.named_parameters(), auto, strict=True):
            assert torch.allclose(grads[name][b], theirs, rtol=1e-11, atol=1e-15), name


def test_two_layer_mixed_precision_is_close_in_float32_and_refused_elsewhere():
    ds = _ds(n=20, T=9, seed=5)
    exact, low = (ClassifierProblem(ds, model="two_layer", d=8, batch_size=0, dtype=torch.float32,
                                    mixed_precision=mixed) for mixed in (False, True))
    params = exact.init_params([0])
    low.init_params([0])
    gens = [torch.Generator().manual_seed(0)]
    (loss_e, g_e), (loss_l, g_l) = exact.loss_and_grad(params, 0, gens), low.loss_and_grad(params, 0, gens)
    assert float(loss_l[0]) == pytest.approx(float(loss_e[0]), rel=1e-2)  # bfloat16: about 3 significant digits
    for k in g_e:
        assert float((g_l[k] - g_e[k]).abs().max()) <= 3e-2 * float(g_e[k].abs().max()), k
    with pytest.raises(ValueError, match="two-layer model"):
        ClassifierProblem(ds, d=4, mixed_precision=True)
    with pytest.raises(ValueError, match="float32"):
        ClassifierProblem(ds, model="two_layer", d=4, mixed_precision=True)


def test_length_groups_partition_the_batch_optimally():
    rng = np.random.default_rng(0)
    for _ in range(20):
        extent = torch.as_tensor(rng.integers(1, 60, size=int(rng.integers(1, 8))))
        overhead, linear = float(rng.uniform(0, 3000)), float(rng.uniform(0, 50))
        groups = length_groups(extent, overhead=overhead, linear=linear)
        assert sorted(torch.cat(groups).tolist()) == list(range(len(extent)))

        widths = [float(extent[g].max()) for g in groups]
        mine = sum(len(g) * w * (w + linear) + overhead for g, w in zip(groups, widths, strict=True))
        w = np.sort(extent.numpy())
        best = min(  # brute force over every cut of the sorted lengths into contiguous groups
            sum((b - a) * w[b - 1] * (w[b - 1] + linear) + overhead for a, b in itertools.pairwise((0, *cuts, len(w))))
            for r in range(len(w)) for cuts in itertools.combinations(range(1, len(w)), r))
        assert mine == pytest.approx(best, rel=1e-12)


def test_gradient_choice_is_checked():
    ds = _ds(n=6)
    with pytest.raises(ValueError, match="one-layer model"):
        ClassifierProblem(ds, model="two_layer", gradient="closed_form")
    with pytest.raises(ValueError, match="gradient must be one of"):
        ClassifierProblem(ds, gradient="finite_differences")
    assert ClassifierProblem(ds, model="two_layer", d=3).gradient == "autograd"


def test_model_17_at_paper_scale_on_a_cpu_is_the_documented_reduced_setting_and_its_checks_say_so():
    from dataclasses import replace

    from ntpbias.experiments.attention.config import IMDB_ONE_LAYER, IMDB_TWO_LAYER
    from ntpbias.experiments.attention.config import real_text_scaled as scaled
    from ntpbias.experiments.attention.imdb import (
        TWO_LAYER_CPU,
        cpu_reduced,
        reduced_note,
    )
    from ntpbias.experiments.attention.imdb_grade import _loss_checks, at_paper_settings

    paper = scaled(IMDB_TWO_LAYER, "paper")
    cpu = cpu_reduced(paper)
    assert (cpu.model.d, cpu.train.epochs, cpu.train.decay_epochs) == (
        TWO_LAYER_CPU["d"], TWO_LAYER_CPU["epochs"], TWO_LAYER_CPU["decay_epochs"])
    assert cpu.data == paper.data and cpu.optimizer == paper.optimizer and cpu.dtype == paper.dtype
    assert cpu.model.kind == "two_layer" and paper.model.d == 2048 and paper.train.epochs == 500
    assert "d = 256" in reduced_note(paper) and "--device cuda" in reduced_note(paper)
    assert at_paper_settings(paper) and not at_paper_settings(cpu)
    assert not at_paper_settings(replace(paper, model=replace(paper.model, train_v=False)))  # the theory's variant
    configs = {"imdb-one-layer": IMDB_ONE_LAYER, "imdb-two-layer": cpu}
    checks = {c.name: c for c in _loss_checks("imdb", _losses(0.12, 0.05), configs)}
    # model (17)'s reduced run reaches 0.05, of the same order as model (1)'s: the one-layer order cannot tell the two
    # apart here (its control, the other model's loss, passes too), so its pass counts for nothing
    one = checks["imdb: one-layer loss order"]
    assert one.premise_met and one.passed and one.verdict == "control passed"
    assert not checks["imdb: two-layer loss order"].premise_met
    assert checks["imdb: two-layer loss order"].verdict == "inconsistent"  # 0.05 is not of order 1e-5
    assert not checks["imdb: two-layer loss below one-layer"].premise_met
    assert all(c.quote and c.metric and not c.missing for c in checks.values())


def _losses(one: float, two: float, start: float = 0.6931):
    """Histories of the two models' runs: the loss at step 0 and at the end."""
    import numpy as np

    from ntpbias.training.history import History

    return {run: History.from_log([0, 100], [0], [{"loss": np.array([start])}, {"loss": np.array([loss])}])
            for run, loss in (("imdb-one-layer", one), ("imdb-two-layer", two))}


def test_the_loss_checks_of_sec5_fail_on_their_controls():
    """Sec. 5's stated orders at the paper's numbers: each check passes, and fails on its control (model (17) before
    training for the comparison; the other model's loss for each order)."""
    from ntpbias.experiments.attention.config import IMDB_ONE_LAYER, IMDB_TWO_LAYER
    from ntpbias.experiments.attention.imdb_grade import _loss_checks

    configs = {"imdb-one-layer": IMDB_ONE_LAYER, "imdb-two-layer": IMDB_TWO_LAYER}
    checks = _loss_checks("imdb", _losses(0.0626, 2e-5), configs)
    assert [c.verdict for c in checks] == ["pass"] * 3
    assert [c.control_passed for c in checks] == [False] * 3
    # the untrained loss log 2 is of the order of 1e-1 too: the one-layer order tells only the two models apart
    assert _loss_checks("imdb", _losses(0.6931, 2e-5), configs)[1].verdict == "pass"
