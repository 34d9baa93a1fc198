"""Paper A's runs: the reference objects (F, W*, W^mm) of a dataset, one batched training run, and ``ntpbias train``."""

from __future__ import annotations

from dataclasses import replace

import torch

from ..._tensor import DTYPES, resolve_device
from ...data.ntp import NTPData
from ...geometry.linear.loss import smoothness_bound
from ...io import ensure_dir, write_npz
from ...results import FigureSpec, RunResult, Section
from ...training.history import History
from ...training.linear import LinearNTPProblem, LinearReference
from ...training.loop import Trainer
from ...training.optimizers import Optimizer
from ..base import RunContext, register_trainer
from .checks import run_checks
from .config import LinearConfig


def reference(data: NTPData, solver: str = "auto") -> tuple[LinearReference, dict]:
    """F, W*, W^mm of ``data`` (:meth:`LinearNTPProblem.reference_for`) and the dataset facts shown in reports."""
    ref = LinearNTPProblem.reference_for(data, solver=solver)
    F, W_mm = ref.F, ref.W_mm
    L = smoothness_bound(data)
    facts = {
        "contexts m": data.m, "vocabulary V": data.V, "embedding dim d": data.d,
        "entropy H (nats)": data.entropy, "dim F": F.dim, "V d": data.V * data.d,
        "NTP_H-compatible": F.compatible, "NTP-separable": W_mm is not None,
        "||W*||": F.norm_W_star, "||W^mm||": None if W_mm is None else float(torch.linalg.vector_norm(W_mm)),
        "smoothness bound L": L, "1/(2L)": 1 / (2 * L),
    }
    return ref, facts


def train_run(cfg: LinearConfig, data: NTPData, ref: LinearReference, ctx: RunContext, run: str) -> History:
    """Train ``cfg`` (batched over its seeds) and return the history; rows carry ``run``."""
    problem = LinearNTPProblem(data, ref, init=cfg.model.init, batch_size=cfg.train.batch_size,
                               sample_over=cfg.train.sample_over)
    optimizer = Optimizer(cfg.optimizer, loss_floor=data.entropy)
    seeds = [cfg.seed + b for b in range(cfg.seeds)]
    trainer = Trainer(problem, optimizer, cfg.train, seeds=seeds, checkpoint_dir=ctx.out / "checkpoints" / run,
                      progress=ctx.progress, description=run)
    history = trainer.run(resume=ctx.resume)
    history.run = run
    return history


def prepare(cfg: LinearConfig, ctx: RunContext) -> LinearConfig:
    """Apply the invocation's seeds/device to a preset config."""
    resolve_device(ctx.device)
    return replace(cfg, seeds=max(cfg.seeds, ctx.seeds), device=ctx.device)


def data_for(cfg: LinearConfig) -> NTPData:
    data = cfg.data.build(DTYPES[cfg.dtype])
    return data.to(device=resolve_device(cfg.device))


def train_linear(cfg: LinearConfig, ctx: RunContext) -> RunResult:
    """``ntpbias train`` for a linear config: one run directory with its metrics, panels and checks."""
    out = ensure_dir(ctx.out)
    data = data_for(cfg)
    ctx.say("computing W*, W^mm")
    ref, facts = reference(data, cfg.model.solver)
    history = train_run(cfg, data, ref, ctx, "train")
    section = Section("train", f"Linear NTP: {cfg.optimizer.name} on {cfg.data.source} data", facts=facts,
                      seconds=history.seconds)
    section.plots.append(FigureSpec(
        "training", "Training dynamics", "CE against the entropy floor, parameter norm, correlation with W^mm, and the "
        "F-component's distance to W*.", "linear.training",
        {"rows": history.rows(), "run": "train", "entropy": data.entropy}))
    if history.status == "completed":
        section.checks.extend(run_checks("train", cfg, history, data, ref))
    else:
        section.notes.append(history.message)
    write_npz(out / "geometry.npz", W_star=ref.F.W_star, W_mm=ref.W_mm, W_final=history.params["W"])
    return RunResult(section, cfg, [history],
                     {"status": history.status, "message": history.message, "final": history.at()}, failure=history)


register_trainer("linear", LinearConfig, train_linear)
