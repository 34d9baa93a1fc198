"""Paper A's GD/NGD/Adam claims on small instances through the training engine (A-C11 to A-C17 of
docs/paper-a-linear-ntp.md#theory-checks)."""

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.geometry.linear.loss import cross_entropy, smoothness_bound
from ntpbias.training.config import OptimizerConfig, TrainConfig
from ntpbias.training.linear import LinearNTPProblem
from ntpbias.training.loop import Trainer
from ntpbias.training.optimizers import Optimizer


@pytest.fixture(scope="module")
def instance():
    data = random_ntp(m=12, d=16, V=6, support_size=3, seed=2)
    return data, LinearNTPProblem.reference_for(data)


def _train(instance, opt, steps, seeds=(0,)):
    data, ref = instance
    return Trainer(LinearNTPProblem(data, ref), Optimizer(opt, loss_floor=data.entropy),
                   TrainConfig(steps=steps, log_points=30), seeds=list(seeds)).run()


def series(h, name, seed=0):
    return h.steps, h.seed_column(name, seed)


def test_gd_with_step_below_one_over_2L_decreases_the_loss_at_every_step(instance):
    data, _ = instance
    eta = 1 / (2 * smoothness_bound(data))
    h = _train(instance, OptimizerConfig(name="gd", lr=eta), 3000, seeds=(0, 1))
    assert max(h.max_loss_increase) <= 0.0  # A-C11: monotone (every step, tracked by the loop)
    _, gap = series(h, "loss_gap")
    assert gap[-1] < gap[0] and gap[-1] > 0  # CE > H for every finite W


def test_gd_invariants_hold_exactly(instance):
    data, ref = instance
    h = _train(instance, OptimizerConfig(name="gd", lr=0.5), 2000, seeds=(3,))
    W0 = LinearNTPProblem(data, ref).init_params([3])["W"]
    dW = h.params["W"] - W0
    assert float(dW.sum(dim=1).abs().max()) < 1e-12  # 1^T W_k = 1^T W_0
    Q, _ = torch.linalg.qr(data.H.T)
    assert float((dW - dW @ Q @ Q.T).abs().max()) < 1e-12  # W (I - Π_span h) unchanged


def test_gd_trends_of_lemma2_and_theorem2(instance):
    data, ref = instance
    h = _train(instance, OptimizerConfig(name="gd", lr=0.5), 20_000)
    steps, gap = series(h, "loss_gap")
    late = steps >= 1000
    assert np.all(np.diff(gap[late]) <= 0) and gap[-1] < 5e-3  # CE -> H (Lemma 2)
    _, norm = series(h, "norm")
    assert np.all(np.diff(norm[late]) >= 0) and norm[-1] > 2 * norm[0]  # ||W_k|| -> inf
    _, fnorm = series(h, "F_norm")
    assert abs(fnorm[-1] - ref.F.norm_W_star) / ref.F.norm_W_star < 0.1  # P_F W_k bounded, -> ||W*||
    _, f_err = series(h, "F_error_rel")
    assert f_err[-1] < 0.5 * f_err[np.searchsorted(steps, 1000)]  # P_F W_k -> W* (Thm 2)
    _, cos = series(h, "cos_mm")
    _, cos_c = series(h, "cos_mm_corrected")
    assert cos[-1] > cos[np.searchsorted(steps, 100)] and cos_c[-1] >= 0.9 and cos_c[-1] >= cos[-1]
    _, margin = series(h, "margin_perp")
    assert margin[-1] > margin[np.searchsorted(steps, 1000)]  # A-C14: slowly rising
    _, key = series(h, "key_lemma")
    assert key[-1] > 1.0  # eq. (14) with alpha = 0.5 for large k (A-C15): CE(W_k) / CE(genie) above 1
    # the ratio against a direct evaluation of both sides of eq. (14) at the final iterate
    W = h.params["W"]
    W_F = ref.F.project(W)
    genie = W_F + 1.5 * torch.linalg.vector_norm(W - W_F) * ref.W_mm / torch.linalg.vector_norm(ref.W_mm)
    assert key[-1] == pytest.approx(float(cross_entropy(W, data)[0] / cross_entropy(genie[None], data)[0]), rel=1e-12)


@pytest.mark.parametrize("opt", [OptimizerConfig(name="ngd", lr=0.01), OptimizerConfig(name="adam", lr=0.01)])
def test_ngd_and_adam_are_faster_with_the_same_bias(instance, opt):
    gd = _train(instance, OptimizerConfig(name="gd", lr=0.5), 5000)
    other = _train(instance, opt, 5000)
    assert series(other, "loss_gap")[1][-1] < series(gd, "loss_gap")[1][-1]  # A-C17
    assert series(other, "cos_mm_corrected")[1][-1] >= 0.9
    assert series(other, "F_error_rel")[1][-1] < 0.2
