"""Training-loop costs, each against its reference in the same run (CPU seconds of this process: steadier than wall time
on a shared machine):

* ``linear``: GD on paper A's Fig. 4 problem (m=50, d=60, V=10, |S_j|=6): iterations per second with metrics, 64 seeds
  batched against one seed, and a plain PyTorch autograd loop as the reference.
* ``metrics``: Algorithm 1 of paper C on Example 1 (``train --preset transformer-example1``'s training, ``--tf-steps``
  steps per stage): the default logging (metrics at every step) against 50 log-spaced points, and the share of the
  training the default logging takes.

Run: python benchmarks/bench_training.py [linear metrics] [--steps 10000] [--tf-steps 6000]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _common import print_table, timed

from ntpbias.data.synthetic import random_ntp
from ntpbias.training.linear import LinearNTPProblem
from ntpbias.training.loop import TrainConfig, Trainer  # (these paths also run on older checkouts, for "before")
from ntpbias.training.optimizers import Optimizer, OptimizerConfig


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


def algorithm1(task, steps: int, *, log_every: int, log_points: int):
    """Both stages of Algorithm 1 on ``task`` (Example 1's step sizes), ``steps`` steps each."""
    from ntpbias.training.transformer import train_two_stage

    cfg = TrainConfig(steps=steps, log_every=log_every, log_points=log_points)
    return train_two_stage(task, eta0=0.1, eta=0.025, stage1=cfg, stage2=cfg, seeds=[0])


def metrics_rows(steps: int, repeat: int = 3) -> None:
    from ntpbias.data.sentences import example1
    from ntpbias.models.transformer import token_embeddings
    from ntpbias.training.transformer import TransformerTask

    ds = example1()
    task = TransformerTask.build(ds, token_embeddings(ds.V))
    t_all, r_all = timed(lambda: algorithm1(task, steps, log_every=1, log_points=0), repeat=repeat,
                         clock=time.process_time)
    t_log, r_log = timed(lambda: algorithm1(task, steps, log_every=0, log_points=50), repeat=repeat,
                         clock=time.process_time)
    same = all(np.array_equal(a[k][-1], b[k][-1]) for a, b in zip(r_all.histories, r_log.histories, strict=True)
               for k in b.columns)
    rows = [[f"metrics at every step (the default), {2 * steps} logs", f"{t_all:.3g}", f"{2 * steps / t_all:.0f}",
             f"{(t_all - t_log) / t_all:.0%}"],
            [f"50 log-spaced points per stage (reference), {sum(len(h.steps) for h in r_log.histories)} logs",
             f"{t_log:.3g}", f"{2 * steps / t_log:.0f}", "-"]]
    print_table(f"Paper C, Algorithm 1 on Example 1: {steps} + {steps} steps, CPU seconds (best of {repeat})",
                ["logging", "CPU s", "steps/s", "share of the training spent logging"], rows)
    print(f"\nthe last logged values agree between the two: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sections", nargs="*", default=["linear", "metrics"], choices=["linear", "metrics"])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--tf-steps", type=int, default=6000, help="metrics: steps of each stage of Algorithm 1")
    args = parser.parse_args()
    if "metrics" in args.sections:
        metrics_rows(args.tf_steps)
    if "linear" not in args.sections:
        return
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
