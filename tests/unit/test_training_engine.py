"""The training engine: optimizer steps against hand-computed updates and torch.optim, the loop's logging,
checkpoints and exact resume, divergence and interruption handling."""

import math
import signal

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.linear.loss import cross_entropy_grad
from ntpbias.training.config import OptimizerConfig, TrainConfig
from ntpbias.training.init import lecun
from ntpbias.training.linear import LinearNTPProblem
from ntpbias.training.loop import Trainer, log_steps
from ntpbias.training.optimizers import Optimizer


def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


# ------------------------------------------------------------------------------------------ optimizers
def test_gd_step_is_w_minus_lr_grad():
    W, g = _rand(3, 4, 5), _rand(3, 4, 5, seed=1)
    out = Optimizer(OptimizerConfig(name="gd", lr=0.3)).step({"W": W}, {"W": g}, torch.zeros(3))
    assert torch.equal(out["W"], W - 0.3 * g)


def test_ngd_normalizes_each_run_by_its_global_gradient_norm():
    W = {"A": _rand(2, 3), "B": _rand(2, 4, 2, seed=1)}
    g = {"A": _rand(2, 3, seed=2), "B": _rand(2, 4, 2, seed=3)}
    out = Optimizer(OptimizerConfig(name="ngd", lr=0.1)).step(W, g, torch.ones(2))
    for b in range(2):
        norm = math.sqrt(float((g["A"][b] ** 2).sum() + (g["B"][b] ** 2).sum()))
        assert torch.allclose(out["A"][b], W["A"][b] - 0.1 * g["A"][b] / norm, atol=0, rtol=1e-14)
        assert torch.allclose(out["B"][b], W["B"][b] - 0.1 * g["B"][b] / norm, atol=0, rtol=1e-14)


def test_ngd_loss_and_excess_normalizations_and_zero_gradient_guard():
    W, g = _rand(2, 3), _rand(2, 3, seed=1)
    g[1] = 0.0
    loss = torch.tensor([2.0, 1.0], dtype=torch.float64)
    out = Optimizer(OptimizerConfig(name="ngd", lr=0.5, normalize="loss")).step({"W": W}, {"W": g}, loss)
    assert torch.allclose(out["W"][0], W[0] - 0.5 * g[0] / 2.0)
    assert torch.equal(out["W"][1], W[1])
    out = Optimizer(OptimizerConfig(name="ngd", lr=0.5, normalize="excess"), loss_floor=1.5).step(
        {"W": W}, {"W": g}, loss)
    assert torch.allclose(out["W"][0], W[0] - 0.5 * g[0] / 0.5)
    # loss at the floor (excess <= 0) and a non-finite norm are guarded: no step
    nan_g = {"W": torch.full_like(W, float("nan"))}
    assert torch.equal(Optimizer(OptimizerConfig(name="ngd")).step({"W": W}, nan_g, loss)["W"], W)


@pytest.mark.parametrize("name, wd", [("adam", 0.0), ("adam", 0.01), ("adamw", 0.05)])
def test_adam_and_adamw_match_torch_optim(name, wd):
    W0, grads = _rand(4, 6), [_rand(4, 6, seed=s) for s in range(1, 8)]
    cfg = OptimizerConfig(name=name, lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd)
    ours = Optimizer(cfg)
    params = {"W": W0[None].clone()}
    ref = torch.nn.Parameter(W0.clone())
    cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
    opt = cls([ref], lr=0.01, betas=(0.9, 0.99), eps=1e-8, weight_decay=wd)
    for g in grads:
        params = ours.step(params, {"W": g[None]}, torch.zeros(1))
        ref.grad = g.clone()
        opt.step()
    assert torch.allclose(params["W"][0], ref.detach(), atol=1e-15, rtol=1e-12)


def test_adam_first_step_by_hand():
    W, g = _rand(1, 3), _rand(1, 3, seed=1)
    out = Optimizer(OptimizerConfig(name="adam", lr=0.1, betas=(0.9, 0.99), eps=1e-8)).step({"W": W}, {"W": g},
                                                                                                torch.zeros(1))
    # m_hat = g, v_hat = g^2 after bias correction: the first step is -lr * g / (|g| + eps)
    assert torch.allclose(out["W"], W - 0.1 * g / (g.abs() + 1e-8), rtol=1e-14, atol=0)


def test_step_decay_schedule():
    opt = Optimizer(OptimizerConfig(name="gd", lr=1.0, milestones=(2, 5), lr_decay=0.1))
    assert [opt.lr_at(t) for t in (0, 1, 2, 4, 5, 9)] == pytest.approx([1, 1, 0.1, 0.1, 0.01, 0.01], rel=1e-12)


@pytest.mark.parametrize("bad", [{"name": "sgdx"}, {"normalize": "foo"}, {"lr": 0.0}, {"betas": (0.9, 1.0)}])
def test_optimizer_config_validation(bad):
    with pytest.raises(ValueError):
        OptimizerConfig(**bad)


def test_state_dict_round_trip_continues_identically():
    cfg = OptimizerConfig(name="adam", lr=0.01)
    a, b = Optimizer(cfg), Optimizer(cfg)
    p = {"W": _rand(1, 5)}
    for s in range(3):
        p = a.step(p, {"W": _rand(1, 5, seed=s + 1)}, torch.zeros(1))
    b.load_state_dict(a.state_dict())
    g = {"W": _rand(1, 5, seed=9)}
    assert torch.equal(a.step(p, g, torch.zeros(1))["W"], b.step(p, g, torch.zeros(1))["W"])


# ------------------------------------------------------------------------------------------ init
def test_lecun_init_statistics_and_per_seed_independence():
    W = lecun((200, 300), [0, 1], scheme="lecun_normal")
    assert W.shape == (2, 200, 300)
    assert abs(float(W.var()) - 1 / 300) < 0.05 / 300
    U = lecun((200, 300), [3], scheme="lecun_uniform")
    assert float(U.abs().max()) <= math.sqrt(3 / 300)
    assert abs(float(U.var()) - 1 / 300) < 0.05 / 300
    assert torch.equal(lecun((4, 5), [7, 8])[1], lecun((4, 5), [8])[0])
    with pytest.raises(ValueError):
        lecun((2, 2), [0], scheme="xavier")


# ------------------------------------------------------------------------------------------ loop
def test_log_steps_are_log_spaced_and_include_ends():
    steps = log_steps(TrainConfig(steps=10_000, log_points=5))
    assert steps.tolist() == [0, 1, 10, 100, 1000, 10000]
    steps = log_steps(TrainConfig(steps=10, log_points=0, log_every=4))
    assert steps.tolist() == [0, 4, 8, 10]


@pytest.fixture(scope="module")
def small():
    data = random_ntp(m=8, d=10, V=5, support_size=3, seed=3)
    return data, LinearNTPProblem.reference_for(data)


def _run(small, tmp_path, *, steps=200, seeds=(0, 1), opt=None, resume=False, ckpt=0):
    data, ref = small
    problem = LinearNTPProblem(data, ref)
    trainer = Trainer(problem, Optimizer(opt or OptimizerConfig(name="gd", lr=0.5)),
                      TrainConfig(steps=steps, log_points=10, checkpoint_every=ckpt), seeds=list(seeds),
                      checkpoint_dir=tmp_path)
    return trainer.run(resume=resume)


def test_batched_seeds_equal_sequential_runs(small, tmp_path):
    batched = _run(small, tmp_path / "b", seeds=(0, 1, 2))
    for s in (0, 1, 2):
        alone = _run(small, tmp_path / f"s{s}", seeds=(s,))
        assert np.array_equal(batched.steps, alone.steps) and alone.seeds == (s,)
        assert batched.names == alone.names
        for k in alone.names:
            np.testing.assert_allclose(batched.seed_column(k, s), alone[k][:, 0], rtol=1e-10, atol=1e-13, err_msg=k)


class _InterruptAt(LinearNTPProblem):
    """A scheduler's SIGTERM arrives while computing the gradient of step ``stop`` (the handler in place runs, as Python
    runs it when the signal arrives; ``os.kill`` would leave the moment to the interpreter, and SIGINT may be ignored
    in a background job): the loop finishes that step and stops before the next one."""

    stop = -1

    def loss_and_grad(self, params, step, generators):
        if step == self.stop:
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
        return super().loss_and_grad(params, step, generators)


def test_resume_equals_uninterrupted(small, tmp_path):
    data, ref = small
    cfg, opt = TrainConfig(steps=300, log_points=20), OptimizerConfig(name="adam", lr=0.01)
    full = Trainer(LinearNTPProblem(data, ref), Optimizer(opt), cfg, seeds=[0, 1], checkpoint_dir=tmp_path / "f").run()
    problem = _InterruptAt(data, ref)
    problem.stop = 120
    first = Trainer(problem, Optimizer(opt), cfg, seeds=[0, 1], checkpoint_dir=tmp_path / "p").run()
    assert first.status == "interrupted" and first.step == 121
    resumed = Trainer(LinearNTPProblem(data, ref), Optimizer(opt), cfg, seeds=[0, 1],
                      checkpoint_dir=tmp_path / "p").run(resume=True)
    assert resumed.status == "completed"
    assert torch.equal(resumed.params["W"], full.params["W"])
    assert resumed.rows() == full.rows()
    assert resumed.max_loss_increase == full.max_loss_increase


def test_resume_with_sgd_sampling_is_exact(small, tmp_path):
    data, ref = small

    def run(steps, d, resume):
        problem = LinearNTPProblem(data, ref, batch_size=4, sample_over="samples")
        return Trainer(problem, Optimizer(OptimizerConfig(name="gd", lr=0.2)), TrainConfig(steps=steps, log_points=5),
                       seeds=[0, 5], checkpoint_dir=tmp_path / d).run(resume=resume)

    full = run(80, "f", False)
    run(30, "p", False)
    assert torch.equal(run(80, "p", True).params["W"], full.params["W"])


def test_divergence_is_reported_and_metrics_kept(small, tmp_path):
    h = _run(small, tmp_path, steps=2000, opt=OptimizerConfig(name="gd", lr=1e308))
    assert h.status == "diverged"
    assert "non-finite" in h.message and len(h.steps) and h.step < 2000
    assert np.isfinite(h["loss"][0]).all() and h.steps[0] == 0


def test_deferred_nonfinite_check_reports_the_exact_step_and_drops_later_rows(small, tmp_path):
    data, ref = small

    class NaNFrom(LinearNTPProblem):
        def loss_and_grad(self, params, step, generators):
            loss, grads = super().loss_and_grad(params, step, generators)
            if step >= 37:
                loss = loss + float("nan")
            return loss, grads

    h = Trainer(NaNFrom(data, ref), Optimizer(OptimizerConfig()), TrainConfig(steps=200, log_points=0, log_every=5),
                seeds=[0], nonfinite_check_every=50).run()
    assert h.status == "diverged" and "at step 37" in h.message
    assert h.steps[-1] == 35  # rows after the first bad step are dropped


def test_a_stop_signal_writes_a_checkpoint(small, tmp_path):
    data, ref = small
    problem = _InterruptAt(data, ref)
    problem.stop = 50
    h = Trainer(problem, Optimizer(OptimizerConfig()), TrainConfig(steps=100), seeds=[0], checkpoint_dir=tmp_path).run()
    assert h.status == "interrupted" and h.step == 51 and "terminated at step 51" in h.message
    assert "--resume" in h.message
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert state["step"] == 51 and state["status"] == "interrupted"
    assert torch.equal(state["params"]["W"], h.params["W"])


def test_sgd_gradients_are_unbiased(small):
    data, ref = small
    W = lecun((data.V, data.d), [0])
    _, full = cross_entropy_grad(W, data)
    for over in ("contexts", "samples"):
        problem = LinearNTPProblem(data, ref, batch_size=20_000, sample_over=over)
        _, g = problem.loss_and_grad({"W": W}, 0, [torch.Generator().manual_seed(1)])
        assert float((g["W"] - full).norm() / full.norm()) < 0.05, over
        # and the estimate is not trivially the full gradient
        assert not torch.allclose(g["W"], full)
    assert np.isfinite(float(ref.F.norm_W_star))


def test_a_signal_after_the_last_step_is_delivered_when_the_loop_ends(small, tmp_path):
    data, ref = small

    class InterruptLast(LinearNTPProblem):
        def loss_and_grad(self, params, step, generators):
            if step == 9:  # during the last step: no safe point follows, so the loop cannot stop for it
                signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
            return super().loss_and_grad(params, step, generators)

    trainer = Trainer(InterruptLast(data, ref), Optimizer(OptimizerConfig()), TrainConfig(steps=10), seeds=[0],
                      checkpoint_dir=tmp_path)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own Ctrl-C, whatever ran before
    try:
        with pytest.raises(KeyboardInterrupt):
            trainer.run()
    finally:
        signal.signal(signal.SIGINT, before)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert state["step"] == 10 and state["status"] == "completed"  # the finished training was saved first
