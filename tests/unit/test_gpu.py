"""The GPU paths against the CPU (skipped without CUDA; on a GPU: ``python -m pytest tests/unit/test_gpu.py``).

Each test runs the same computation on the CPU and on ``cuda`` from the same seeds, in float64, and compares:
paper B's training paths (model (1)'s closed-form gradient, model (17)'s length groups, fused AdamW), paper A's
trainer, the workset and dual max-margin solvers (certificate computed on the GPU), paper C's Algorithm 1.
"""

import numpy as np
import pytest
import torch

from ntpbias.data.synthetic import random_ntp
from ntpbias.data.tokens import TokenSequences
from ntpbias.geometry.margins.program import ntp_svm
from ntpbias.training.attention import ClassifierProblem, classifier_optimizer
from ntpbias.training.loop import TrainConfig, Trainer
from ntpbias.training.optimizers import Optimizer, OptimizerConfig

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

ADAMW = OptimizerConfig(name="adamw", lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-3)


def _tokens(n=60, S=25, T=17, seed=0):
    rng = np.random.default_rng(seed)
    seqs = [rng.integers(0, S, size=m).tolist() for m in rng.integers(1, T + 1, size=n)]
    return TokenSequences.from_lists(seqs, rng.choice([-1, 1], size=n), num_tokens=S)


@pytest.mark.parametrize("model, train_v", [("one_layer", True), ("one_layer", False), ("two_layer", True)])
def test_attention_training_on_the_gpu_equals_the_cpu(model, train_v):
    """Three epochs of AdamW with step decay, the default (fast) path on both devices, two seeds batched."""
    ds = _tokens()

    def train(device):
        problem = ClassifierProblem(ds, model=model, d=8, train_v=train_v, batch_size=16, device=device)
        assert problem.device.type == device
        opt = Optimizer(classifier_optimizer(ADAMW, steps_per_epoch=problem.steps_per_epoch, decay_epochs=(2,)),
                        fused=True)
        return Trainer(problem, opt, TrainConfig(steps=3 * problem.steps_per_epoch, log_points=4), seeds=[0, 3]).run()

    cpu, gpu = train("cpu"), train("cuda")
    for k in cpu.params:
        assert torch.allclose(gpu.params[k].cpu(), cpu.params[k], rtol=1e-9, atol=1e-12), k
    assert len(gpu.rows()) == len(cpu.rows())


@pytest.mark.parametrize("solver", ["workset", "dual"])
def test_max_margin_solvers_on_the_gpu_equal_the_cpu(solver):
    data = random_ntp(120, 60, 12, 3, seed=5)
    cpu = ntp_svm(data, solver=solver)
    gpu = ntp_svm(data.to("cuda"), solver=solver, device="cuda")
    assert cpu.certified and gpu.certified
    assert gpu.W.device.type == "cuda"
    assert gpu.certificate.worst <= 1e-6
    assert abs(gpu.norm - cpu.norm) <= 1e-7 * cpu.norm
    assert float((gpu.W.cpu() - cpu.W).norm() / cpu.W.norm()) <= 1e-5


def test_linear_training_on_the_gpu_equals_the_cpu():
    from ntpbias.training.linear import LinearNTPProblem

    data = random_ntp(20, 30, 8, 3, seed=1)

    def train(device):
        on_device = data.to(device)
        problem = LinearNTPProblem(on_device, LinearNTPProblem.reference_for(on_device, solver="workset"))
        opt = Optimizer(OptimizerConfig(name="gd", lr=0.5))
        return Trainer(problem, opt, TrainConfig(steps=200, log_points=5), seeds=[0, 1]).run()

    cpu, gpu = train("cpu"), train("cuda")
    for k in cpu.params:
        assert torch.allclose(gpu.params[k].cpu(), cpu.params[k], rtol=1e-10, atol=1e-12), k
