"""Training problems of paper B on the engine: stage 2 (closed-form gradient, metrics against naive loops,
the gradient floor) and joint minibatch training of the nn.Modules (autograd gradients against the modules
themselves, epoch permutations, AdamW + step decay against torch.optim, exact resume, seed batching)."""

import math
import signal

import numpy as np
import pytest
import torch

from ntpbias.data.config import KLevelLaw
from ntpbias.data.tokens import TokenSequences, relevant_tokens, sample_assumption1, sample_k_level
from ntpbias.geometry.attention import selection as gs
from ntpbias.geometry.attention import stage_one as ga
from ntpbias.models.attention import OneLayerAttention, TwoLayerAttention
from ntpbias.stats import pearson
from ntpbias.training.attention import (
    ClassifierProblem,
    StageTwoProblem,
    classifier_optimizer,
    train_stage_two,
)
from ntpbias.training.batches import epoch_permutation
from ntpbias.training.config import OptimizerConfig, TrainConfig
from ntpbias.training.loop import Trainer
from ntpbias.training.optimizers import Optimizer

ADAMW = OptimizerConfig(name="adamw", lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-3)


def _variable_ds(n=40, S=15, T=9, seed=0):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, S, size=m).tolist() for m in rng.integers(2, T + 1, size=n)]
    return TokenSequences.from_lists(seqs, rng.choice([-1, 1], size=n), num_tokens=S)


def _small_k_level(n=64, T=12, seed=0):
    law = KLevelLaw(irrelevant_size=8, level_sizes=(2, 3), deltas=(0.3, 0.1), delta_tilde=0.4)
    return sample_k_level(law, n=n, T=T, seed=seed)


# ------------------------------------------------------------------------------------------ stage 2
@pytest.fixture(scope="module")
def stage2():
    ds = sample_assumption1(seed=0)
    stages = [ga.stage_one(ds, d=256, eta0=200.0, seed=s) for s in (0, 1)]
    refs = [gs.important_svm(st.E1, ds).p_hat for st in stages]
    return ds, stages, refs, relevant_tokens(ds)


def test_stage_two_gradient_is_the_closed_form_and_runs_are_independent(stage2):
    ds, stages, refs, rel = stage2
    problem = StageTwoProblem(stages, ds, references=refs, relevant=rel)
    params = problem.init_params([0, 1])
    assert torch.equal(params["p"], torch.stack([st.p1 for st in stages]))
    p = params["p"] + 0.3 * torch.randn(params["p"].shape, generator=torch.Generator().manual_seed(0),
                                        dtype=torch.float64)
    loss, grads = problem.loss_and_grad({"p": p}, 0, [])
    for b, st in enumerate(stages):
        # autograd through the nn.Module with E, v fixed at stage 1 (an independent gradient)
        model = OneLayerAttention(ds.num_tokens, 256).load_params(st.E1, p[b], st.v)
        ref_loss = model.loss(ds)
        ref = torch.autograd.grad(ref_loss, model.p)[0]
        assert float(loss[b]) == pytest.approx(float(ref_loss.detach()), rel=1e-14)
        assert torch.allclose(grads["p"][b], ref, rtol=1e-10, atol=1e-16)


def test_stage_two_metrics_against_naive_loops(stage2):
    ds, stages, refs, rel = stage2
    problem = StageTwoProblem(stages, ds, references=refs, relevant=rel)
    gen = torch.Generator().manual_seed(1)
    p = torch.stack([st.p1 for st in stages]) + 2.0 * torch.randn(2, 256, generator=gen, dtype=torch.float64)
    m = problem.metrics({"p": p})
    for b, st in enumerate(stages):
        scores = st.E1 @ p[b]
        only, worst = 0, math.inf
        for k in range(ds.n):  # naive loop over sequences
            toks = ds.X[k].tolist()
            star = int(rel[k])
            others = [float(scores[t]) for t in toks if t != star]
            only += all(float(scores[star]) > o for o in others)
            worst = min(worst, float(scores[star]) - max(others))
        assert m["selection_accuracy"][b] == pytest.approx(only / ds.n, abs=0)
        assert float(m["margin_mm"][b]) == pytest.approx(worst / float(p[b].norm()) * float(refs[b].norm()),
                                                         rel=1e-12)
        cos = float(p[b] @ refs[b]) / float(p[b].norm() * refs[b].norm())
        assert float(m["cos_mm"][b]) == pytest.approx(cos, rel=1e-12)
        floor = gs.selection_loss_floor(st.E1, st.v, ds)
        loss = float(ga.loss_and_grad_p(st.E1, p[b], st.v, ds)[0])
        assert float(m["loss_above_floor"][b]) == pytest.approx(loss - floor, rel=1e-10)
        assert float(m["p_norm"][b]) == pytest.approx(float(p[b].norm()), rel=1e-15)
    # without references or relevant tokens only the generic metrics are logged
    assert set(StageTwoProblem(stages, ds).metrics({"p": p})) == {"loss", "grad_norm", "p_norm"}


def test_stage_two_ngd_steps_by_hand_and_the_gradient_floor(stage2):
    ds, stages, _, _ = stage2
    h = train_stage_two(stages[0], ds, method="ngd", lr=0.5, steps=3, log_points=0)
    p = stages[0].p1.clone()
    for _ in range(3):
        _, g = ga.loss_and_grad_p(stages[0].E1, p, stages[0].v, ds)
        p = p - 0.5 * g / g.norm()
    assert torch.allclose(h.params["p"][0], p, rtol=1e-13, atol=0)
    # a floor above the gradient norm freezes the iterate
    frozen = train_stage_two(stages[0], ds, steps=5, grad_floor=1e10, log_points=0)
    assert torch.equal(frozen.params["p"][0], stages[0].p1)
    with pytest.raises(ValueError, match="1 stage-1 result"):
        StageTwoProblem(stages[:1], ds).init_params([0, 1])
    with pytest.raises(ValueError, match="'gd' or 'ngd'"):
        train_stage_two(stages[0], ds, method="adam")


# ------------------------------------------------------------------------------------------ joint training
def test_epoch_permutations_cover_the_data_and_leave_the_generator_untouched():
    g = torch.Generator().manual_seed(3)
    state = g.get_state().clone()
    perms = [epoch_permutation(g, e, 10) for e in range(4)]
    assert torch.equal(g.get_state(), state)
    for perm in perms:
        assert sorted(perm.tolist()) == list(range(10))
    assert len({tuple(p.tolist()) for p in perms}) == 4
    other = torch.Generator().manual_seed(4)
    assert not torch.equal(epoch_permutation(other, 0, 10), perms[0])
    # the batches of an epoch partition the data; the last one may be smaller
    problem = ClassifierProblem(_variable_ds(n=23), d=4, batch_size=5)
    assert problem.steps_per_epoch == 5
    batches = [problem.batch_indices(t, [g])[0] for t in range(5, 10)]  # epoch 1
    assert [len(b) for b in batches] == [5, 5, 5, 5, 3]
    assert torch.equal(torch.cat(batches), epoch_permutation(g, 1, 23))


@pytest.mark.parametrize("model, train_v", [("one_layer", False), ("one_layer", True), ("two_layer", False)])
def test_classifier_gradients_are_the_modules_autograd_gradients(model, train_v):
    ds = _variable_ds()
    problem = ClassifierProblem(ds, model=model, d=6, train_v=train_v, batch_size=8)
    params = problem.init_params([5])
    gens = [torch.Generator().manual_seed(0)]
    loss, grads = problem.loss_and_grad(params, 3, gens)
    idx = problem.batch_indices(3, gens)[0]
    cls = OneLayerAttention if model == "one_layer" else TwoLayerAttention
    module = cls(ds.num_tokens, 6, train_v=train_v, seed=5)
    batch = TokenSequences.from_arrays(ds.X[idx], ds.y[idx], mask=ds.mask[idx], num_tokens=ds.num_tokens)
    ref_loss = module.loss(batch)  # full-width padded batch (the problem trims all-padding columns)
    names = [k for k, _ in module.named_parameters()]
    assert sorted(names) == sorted(grads)
    ref = torch.autograd.grad(ref_loss, [p for _, p in module.named_parameters()])
    assert float(loss[0]) == pytest.approx(float(ref_loss.detach()), rel=1e-13)
    for name, g in zip(names, ref, strict=True):
        assert torch.allclose(grads[name][0], g, rtol=1e-10, atol=1e-15), name
    assert ("v" in grads) == train_v


def test_classifier_metrics_against_direct_computations():
    ds = _small_k_level()
    problem = ClassifierProblem(ds, d=8, batch_size=16, chunk=7)
    params = problem.init_params([0, 1])
    m = problem.metrics(params)
    from ntpbias.data.tokens import token_statistics

    st = token_statistics(ds)
    present = st.present
    pd = st.posterior_difference[present].numpy()
    for b, seed in enumerate((0, 1)):
        module = OneLayerAttention(ds.num_tokens, 8, seed=seed)
        f = module(ds.X, ds.mask).detach()
        assert float(m["loss"][b]) == pytest.approx(float(torch.nn.functional.softplus(-ds.y * f).mean()), rel=1e-13)
        assert float(m["class_accuracy"][b]) == pytest.approx(float((torch.sign(f) == ds.y).double().mean()), abs=0)
        zp, zv = (t[present].numpy() for t in module.embedding_dots())
        assert float(m["pearson_v_pd"][b]) == pytest.approx(np.corrcoef(zv, pd)[0, 1], rel=1e-10)
        assert float(m["pearson_p_abs_pd"][b]) == pytest.approx(np.corrcoef(zp, np.abs(pd))[0, 1], rel=1e-10)
        assert float(m["p_norm"][b]) == pytest.approx(float(module.p.detach().norm()), rel=1e-14)
    x = torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64)
    assert float(pearson(x, 2 * x + 1)[0]) == pytest.approx(1.0, abs=1e-15)


def _torch_reference(ds, *, d, seed, batch_size, epochs, decay_epochs, gen_seed, model="one_layer"):
    """The same training written with torch.optim.AdamW + MultiStepLR stepped per epoch, on the same batches."""
    cls = OneLayerAttention if model == "one_layer" else TwoLayerAttention
    module = cls(ds.num_tokens, d, seed=seed)
    opt = torch.optim.AdamW(module.parameters(), lr=ADAMW.lr, betas=ADAMW.betas, eps=ADAMW.eps,
                            weight_decay=ADAMW.weight_decay)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(decay_epochs), gamma=0.1)
    g = torch.Generator().manual_seed(gen_seed)
    for epoch in range(epochs):
        perm = epoch_permutation(g, epoch, ds.n)
        for start in range(0, ds.n, batch_size):
            idx = perm[start:start + batch_size]
            batch = TokenSequences.from_arrays(ds.X[idx], ds.y[idx], mask=ds.mask[idx], num_tokens=ds.num_tokens)
            opt.zero_grad()
            module.loss(batch).backward()
            opt.step()
        sched.step()
    return module


@pytest.mark.parametrize("model", ["one_layer", "two_layer"])
def test_adamw_with_step_decay_matches_torch_optim(model):
    ds = _variable_ds(n=30)
    problem = ClassifierProblem(ds, model=model, d=5, batch_size=8)
    spe = problem.steps_per_epoch
    opt = Optimizer(classifier_optimizer(ADAMW, steps_per_epoch=spe, decay_epochs=(2, 3)))
    assert opt.config.milestones == (2 * spe, 3 * spe)
    seed = 7
    h = Trainer(problem, opt, TrainConfig(steps=4 * spe, log_points=0), seeds=[seed]).run()
    ref = _torch_reference(ds, d=5, seed=seed, batch_size=8, epochs=4, decay_epochs=(2, 3),
                           gen_seed=10_000_019 * seed + 17, model=model)  # the Trainer's generator seed
    for name, p in ref.named_parameters():
        assert torch.allclose(h.params[name][0], p.detach(), rtol=1e-9, atol=1e-12), name
    assert torch.equal(problem._fixed["v"][0], ref.v)  # the fixed v is never updated (nor decayed)


def test_seed_batching_does_not_change_a_run():
    ds = _variable_ds(n=20)
    cfg = TrainConfig(steps=7, log_points=0)
    both = Trainer(ClassifierProblem(ds, d=4, batch_size=6), Optimizer(ADAMW), cfg, seeds=[0, 3]).run()
    alone = Trainer(ClassifierProblem(ds, d=4, batch_size=6), Optimizer(ADAMW), cfg, seeds=[3]).run()
    for name in alone.params:
        assert torch.allclose(both.params[name][1], alone.params[name][0], rtol=1e-14, atol=0)
    assert not torch.allclose(both.params["E"][0], both.params["E"][1])


class _Interrupting:
    """Wrap a problem so that SIGTERM (a scheduler's stop, handled as Ctrl-C) arrives during ``loss_and_grad`` at one
    step (mid-epoch; the handler in place runs): the loop finishes that step and stops before the next."""

    def __init__(self, problem, at):
        self.problem, self.at = problem, at

    def init_params(self, seeds):
        return self.problem.init_params(seeds)

    def loss_and_grad(self, params, step, generators):
        if step == self.at:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        return self.problem.loss_and_grad(params, step, generators)

    def metrics(self, params):
        return self.problem.metrics(params)


@pytest.mark.parametrize("fused", [False, True])
def test_resume_after_an_interrupt_mid_epoch_equals_the_uninterrupted_run(tmp_path, fused):
    ds = _small_k_level(n=50)
    spe = math.ceil(50 / 16)
    cfg = TrainConfig(steps=5 * spe, log_points=6, log_every=spe)

    def trainer(problem, where):
        opt = Optimizer(classifier_optimizer(ADAMW, steps_per_epoch=spe, decay_epochs=(2,)), fused=fused)
        return Trainer(problem, opt, cfg, seeds=[0, 1], checkpoint_dir=where)

    full = trainer(ClassifierProblem(ds, d=6, batch_size=16), tmp_path / "full").run()
    stop = 2 * spe + 1  # in the middle of epoch 2, after the decay
    first = trainer(_Interrupting(ClassifierProblem(ds, d=6, batch_size=16), stop), tmp_path / "part").run()
    assert first.status == "interrupted" and first.step == stop + 1
    resumed = trainer(ClassifierProblem(ds, d=6, batch_size=16), tmp_path / "part").run(resume=True)
    assert resumed.status == "completed" and resumed.step == 5 * spe
    for name in full.params:
        assert torch.equal(full.params[name], resumed.params[name]), name
    assert resumed.rows() == full.rows()


def test_classifier_problem_rejects_bad_settings():
    ds = _variable_ds(n=6)
    with pytest.raises(ValueError, match="model must be one of"):
        ClassifierProblem(ds, model="three_layer")
    with pytest.raises(ValueError, match="batch_size"):
        ClassifierProblem(ds, batch_size=-1)
    assert ClassifierProblem(ds, d=3, batch_size=0).steps_per_epoch == 1  # full batch
