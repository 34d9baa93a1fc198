"""GD on paper A's Fig. 4 problem (m=50, d=60, V=10, |S_j|=6): iterations per second with metrics, 64 seeds
batched against one seed, and a plain PyTorch autograd loop as the reference.

Run: python benchmarks/bench_training.py [--steps 10000]
"""

from __future__ import annotations

import argparse

import torch
from _common import print_table, timed

from ntpbias.data.synthetic import random_ntp
from ntpbias.training.config import OptimizerConfig, TrainConfig
from ntpbias.training.linear import LinearNTPProblem
from ntpbias.training.loop import Trainer
from ntpbias.training.optimizers import Optimizer


def ntpbias_gd(data, ref, steps: int, seeds: int, log_points: int = 60):
    trainer = Trainer(LinearNTPProblem(data, ref), Optimizer(OptimizerConfig(name="gd", lr=0.5)),
                      TrainConfig(steps=steps, log_points=log_points), seeds=list(range(seeds)))
    return trainer.run()


def autograd_gd(data, steps: int):
    """The reference: nn.Parameter + autograd + torch.optim.SGD on the distinct-context CE, loss every step."""
    W = torch.nn.Parameter(torch.randn(data.V, data.d, dtype=torch.float64) / data.d ** 0.5)
    opt = torch.optim.SGD([W], lr=0.5)
    for _ in range(steps):
        opt.zero_grad()
        logp = torch.log_softmax(data.H @ W.T, dim=-1)
        loss = -(data.pi * (data.P * logp).sum(-1)).sum()
        loss.backward()
        opt.step()
    return float(loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    data = random_ntp(seed=0)
    ref = LinearNTPProblem.reference_for(data)
    steps = args.steps
    t_ref, _ = timed(lambda: autograd_gd(data, steps), repeat=2)
    t_one, _ = timed(lambda: ntpbias_gd(data, ref, steps, 1), repeat=2)
    t_64, _ = timed(lambda: ntpbias_gd(data, ref, steps, 64), repeat=1)
    t_nolog, _ = timed(lambda: ntpbias_gd(data, ref, steps, 1, log_points=0), repeat=2)
    rows = [
        ["autograd + torch.optim.SGD (reference), 1 seed, no metrics", 1, t_ref, steps / t_ref, 1.0],
        ["ntpbias Trainer, closed-form gradient, 1 seed, 62 metric logs", 1, t_one, steps / t_one, t_ref / t_one],
        ["ntpbias Trainer, 1 seed, metrics only at start and end", 1, t_nolog, steps / t_nolog, t_ref / t_nolog],
        ["ntpbias Trainer, 64 seeds batched, 62 metric logs", 64, t_64, 64 * steps / t_64, 64 * t_ref / t_64],
    ]
    print_table(f"GD on the Fig. 4 problem, {steps} iterations, {torch.get_num_threads()} thread(s)",
                ["method", "seeds", "seconds", "seed-iterations/s", "speed-up vs reference"], rows)
    print(f"\n64 seeds batched take {t_64 / t_one:.2f}x the time of one seed (target: < 10x; "
          f"64 sequential runs would take 64x).")


if __name__ == "__main__":
    main()
