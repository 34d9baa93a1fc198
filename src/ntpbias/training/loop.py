"""The training loop shared by the three papers: batched seeds, log-spaced metrics, checkpoints, exact resume.

A :class:`Problem` supplies the initial parameters, ``loss_and_grad`` and ``metrics``; :class:`Trainer`
runs an :class:`~ntpbias.training.optimizers.Optimizer` on it. Parameters are batched over runs (seeds) on
the leading dimension. Metrics are computed only at the logged steps (log-spaced by default, so 10^6
iterations stay cheap), one row per (step, seed). A problem whose metrics reuse its loss and gradient also offers
``loss_grad_metrics``: the loop then takes a logged step's metrics from the next step's loss and gradient (one
evaluation instead of two). Logged metrics stay on the device, one (metrics, runs) tensor per logged step, and move
to the host in one transfer at a checkpoint and at the end: no step waits on a host round-trip for its metrics.

Faults: a non-finite loss stops the run (status ``"diverged"``, metrics so far kept); Ctrl-C or SIGTERM stops it
after the step it is in and writes a checkpoint (status ``"interrupted"``, :mod:`ntpbias.signals`); a checkpoint is
also written every ``checkpoint_every`` steps and every ``checkpoint_minutes`` of wall-clock time, so a run killed
outright (SIGKILL, a node that fails) loses at most that much; ``resume=True`` continues from the last checkpoint and
gives the same numbers as an uninterrupted run (every random generator's state is checkpointed, and a step's metrics
are computed the same way whether or not a checkpoint falls on it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from .. import progress
from ..errors import ConfigError, DataError
from ..io import atomic_path
from ..signals import signal_name, stop_at_safe_point
from .config import TrainConfig
from .history import History
from .optimizers import Optimizer

#: On a GPU, how many steps may pass between host checks for a non-finite loss.
NONFINITE_CHECK_EVERY = 64


class Problem(Protocol):
    """What the :class:`Trainer` trains (see the linear NTP problem for an example)."""

    def init_params(self, seeds: list[int]) -> dict[str, torch.Tensor]:
        """Initial parameters, batched over ``seeds`` on dim 0."""

    def loss_and_grad(self, params: dict[str, torch.Tensor], step: int,
                      generators: list[torch.Generator]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Loss (B,) and gradients at ``params`` (``generators[b]`` drives run b's sampling, if any)."""

    def metrics(self, params: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Logged quantities, each (B,)."""


class FusedProblem(Problem, Protocol):
    """A problem that computes its metrics from the loss and gradient of a step (the loop prefers it at logs)."""

    def loss_grad_metrics(self, params: dict[str, torch.Tensor], step: int, generators: list[torch.Generator]
                          ) -> tuple[torch.Tensor, dict[str, torch.Tensor], dict[str, torch.Tensor]]:
        """``loss_and_grad`` and ``metrics`` at ``params`` from one evaluation (the same values as both)."""


def log_steps(config: TrainConfig) -> np.ndarray:
    """Sorted steps at which metrics are logged: 0, the last step, ``log_points`` log-spaced ones, multiples of
    ``log_every``.

    >>> log_steps(TrainConfig(steps=1000, log_points=4)).tolist()
    [0, 1, 10, 100, 1000]
    """
    steps = {0, config.steps}
    if config.log_points:
        steps |= set(np.unique(np.round(np.logspace(0, math.log10(config.steps), config.log_points))).astype(int))
    if config.log_every:
        steps |= set(range(0, config.steps + 1, config.log_every))
    return np.array(sorted(s for s in steps if 0 <= s <= config.steps), dtype=np.int64)


class Trainer:
    """Run an optimizer on a problem for ``config.steps`` steps (see the module docstring).

    ``checkpoint_dir``: where ``last.pt`` goes (None: no checkpoints, no resume).
    ``on_log``: optional callback ``(step, metrics_dict_of_(B,)_tensors)`` after each logged step.
    ``on_snapshot``: optional callback ``(step, params)`` at each logged step (e.g. to keep the parameters of every
    logged step: the language model's checkpoints at log-spaced steps, docs/lm.md#training).
    ``nonfinite_check_every``: steps between host checks for a non-finite loss (default: 1 on the CPU,
    :data:`NONFINITE_CHECK_EVERY` on a GPU); the reported step is exact either way.
    """

    def __init__(self, problem: Problem, optimizer: Optimizer, config: TrainConfig, *, seeds: list[int],
                 checkpoint_dir: str | Path | None = None, progress: bool = False,
                 on_log: Callable[[int, dict], None] | None = None, description: str = "training",
                 nonfinite_check_every: int | None = None,
                 on_snapshot: Callable[[int, dict[str, torch.Tensor]], None] | None = None):
        self.problem = problem
        self.optimizer = optimizer
        self.config = config
        self.seeds = list(seeds)
        self.checkpoint_dir = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.progress = progress
        self.on_log = on_log
        self.on_snapshot = on_snapshot
        self.description = description
        self.nonfinite_check_every = nonfinite_check_every

    # -------------------------------------------------------------------------------- checkpoints
    @property
    def checkpoint_path(self) -> Path | None:
        return None if self.checkpoint_dir is None else self.checkpoint_dir / "last.pt"

    def identity(self, init: dict[str, torch.Tensor]) -> dict:
        """What a resumed run must share with the checkpointed one (only ``steps`` and the logging may change): the
        initial parameters' shapes and dtypes, the optimizer's settings, the seeds, and the loss at the initial
        parameters (12 significant digits), which differs when the data or the model settings do."""
        fresh = [torch.Generator().manual_seed(0) for _ in self.seeds]
        loss = self.problem.loss_and_grad(init, 0, fresh)[0].detach().double().cpu().tolist()
        return {"seeds": list(self.seeds),
                "params": {k: [list(v.shape), str(v.dtype)] for k, v in init.items()},
                "optimizer": {k: list(v) if isinstance(v, tuple) else v
                              for k, v in vars(self.optimizer.config).items()},
                "initial loss": [float(f"{x:.12g}") for x in loss]}

    def _save(self, step: int, params, generators, log: list, status: str) -> None:
        if self.checkpoint_path is None:
            return
        state = {
            "step": step, "seeds": self.seeds, "status": status, "identity": repr(self._identity),
            "params": {k: v.detach().cpu() for k, v in params.items()},
            "optimizer": _to_cpu(self.optimizer.state_dict()),
            "generators": [g.get_state() for g in generators],
            "log": _log_columns(log),
            "monotonicity": _to_cpu(self._monotonicity),
        }
        with atomic_path(self.checkpoint_path) as tmp:
            torch.save(state, tmp)

    def _load(self, template: dict[str, torch.Tensor]) -> dict:
        """The checkpoint, refused with a one-line error when it is unreadable or belongs to another run: a resumed
        run may only train more steps of the same configuration."""
        path = self.checkpoint_path
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            saved, step = state["identity"], int(state["step"])
        except Exception as exc:  # a truncated, empty or foreign file: torch raises several types
            raise DataError(f"{path}: not a readable ntpbias checkpoint ({type(exc).__name__}); delete it (or the "
                            "run directory) to start over without --resume") from None
        mine = self._identity
        if saved != repr(mine):
            import ast

            detail = "; ".join(f"{k}: {a} -> {b}" for k, a, b in _differences(ast.literal_eval(saved), mine))
            raise ConfigError(f"{path}: --resume would continue another run ({detail}); only train.steps may change: "
                              "start over in a new output directory instead")
        if step > self.config.steps:
            raise ConfigError(f"{path}: the checkpoint is at step {step}, beyond train.steps = {self.config.steps}; "
                              "--resume only extends a run")
        return state

    # -------------------------------------------------------------------------------- the loop
    def run(self, *, resume: bool = False) -> History:
        """Train; returns the :class:`History` (also on divergence or Ctrl-C, with the status set)."""
        cfg = self.config
        # (mod 2^64: a torch seed is 64 bits; the same seeds as before for every seed below 1.8e12)
        generators = [torch.Generator().manual_seed((10_000_019 * s + 17) % 2**64) for s in self.seeds]
        start_step, log = 0, []  # log: (step, metric names, (metrics, B) float64 tensor) per logged step
        self._monotonicity = {"prev": None, "max_increase": None}
        template = self.problem.init_params(self.seeds)
        self._identity = self.identity(template) if self.checkpoint_path is not None else None
        if resume and self.checkpoint_path is not None and self.checkpoint_path.exists():
            state = self._load(template)
            start_step = int(state["step"])
            log = _log_entries(state["log"])
            params = {k: state["params"][k].to(device=v.device, dtype=v.dtype) for k, v in template.items()}
            self.optimizer.load_state_dict(_to_device(state["optimizer"], next(iter(params.values())).device))
            for g, s in zip(generators, state["generators"], strict=True):
                g.set_state(s)
            self._monotonicity = _to_device(state["monotonicity"], next(iter(params.values())).device)
        else:
            params = template
        logs = set(log_steps(cfg).tolist())
        status, message = "completed", ""
        t0 = time.perf_counter()
        step = start_step
        fused = hasattr(self.problem, "loss_grad_metrics")
        # due: the metrics of the current parameters are to be logged with the next step's loss and gradient (also
        # at a checkpoint, which then holds no row for its step: a resumed run logs it the same way)
        due = step in logs and not (log and log[-1][0] == step)
        if due and not fused:
            self._log(step, params, log)
            due = False
        # first step with a non-finite loss, per run, tracked on the device; the host looks at it every step on
        # the CPU and every NONFINITE_CHECK_EVERY steps (and at logs) on a GPU, so no step waits on a sync there
        check_every = self.nonfinite_check_every or (
            1 if params[next(iter(params))].device.type == "cpu" else NONFINITE_CHECK_EVERY)
        first_bad = None
        every_seconds, saved_at = 60 * cfg.checkpoint_minutes, time.monotonic()
        with stop_at_safe_point() as stop, \
                progress.task(self.description, cfg.steps, completed=start_step, unit="step",
                              enabled=self.progress) as bar:
            while step < cfg.steps:
                if stop.signum is not None:  # Ctrl-C or SIGTERM, read between two whole steps
                    stop.handled = True
                    status = "interrupted"
                    message = f"{signal_name(stop.signum)} at step {step}; continue with --resume"
                    break
                if due:
                    loss, grads, metrics = self.problem.loss_grad_metrics(params, step, generators)
                    self._record(step, params, metrics, log)
                    due = False
                else:
                    loss, grads = self.problem.loss_and_grad(params, step, generators)
                bad = ~torch.isfinite(loss.detach())
                first_bad = torch.where(bad, step, -1) if first_bad is None else \
                    torch.where(bad & (first_bad < 0), step, first_bad)
                look = step % check_every == 0 or step + 1 in logs or step + 1 == cfg.steps
                if look and bool((first_bad >= 0).any()):
                    status, message = "diverged", self._diverged(first_bad, log)
                    if due:  # the metrics of the step it stopped at
                        self._log(step, params, log)
                    break
                self._track_monotonicity(loss)
                params = self.optimizer.step(params, grads, loss)
                step += 1
                if step in logs:
                    if fused and step < cfg.steps:
                        due = True
                    else:
                        self._log(step, params, log)
                if (cfg.checkpoint_every and step % cfg.checkpoint_every == 0) or \
                        (every_seconds and time.monotonic() - saved_at >= every_seconds):
                    self._save(step, params, generators, log, "running")
                    saved_at = time.monotonic()
                bar.advance()
            self._save(step, params, generators, log, status)
        inc = self._monotonicity["max_increase"]
        host = _on_host(log)
        return History.from_log([s for s, _ in host], self.seeds, [v for _, v in host], params=params, status=status,
                                step=step, seconds=time.perf_counter() - t0, message=message,
                                max_loss_increase=[] if inc is None else inc.double().cpu().tolist())

    def _diverged(self, first_bad: torch.Tensor, log: list) -> str:
        """The message of a run diverged at its first non-finite loss; drops the logs after that step."""
        at = first_bad.cpu()
        k = int(at[at >= 0].min())
        seeds = [self.seeds[i] for i in torch.nonzero(at >= 0).flatten().tolist()]
        log[:] = [entry for entry in log if entry[0] <= k]
        return (f"the loss became non-finite at step {k} (seed(s) {seeds}); the step size is probably too large. "
                "Metrics up to that step were kept")

    def _track_monotonicity(self, loss: torch.Tensor) -> None:
        """Running max over steps of L(W_{k+1}) - L(W_k), per run, without a host sync."""
        mono = self._monotonicity
        loss = loss.detach()
        if mono["prev"] is not None:
            inc = loss - mono["prev"]
            mono["max_increase"] = inc if mono["max_increase"] is None else torch.maximum(mono["max_increase"], inc)
        mono["prev"] = loss

    def _log(self, step: int, params, log: list) -> None:
        with torch.no_grad():
            metrics = self.problem.metrics(params)
        self._record(step, params, metrics, log)

    def _record(self, step: int, params, metrics: dict[str, torch.Tensor], log: list) -> None:
        """Keep ``metrics`` (each (B,)) of ``params`` at ``step`` as one (metrics, B) float64 tensor on their device
        (no host transfer); the callbacks see them (and ``on_snapshot`` the parameters)."""
        values = torch.stack([v.detach() if v.dtype == torch.float64 else v.detach().double()
                              for v in metrics.values()]) if metrics else torch.zeros(0, dtype=torch.float64)
        log.append((step, tuple(metrics), values))
        if self.on_log is not None:
            self.on_log(step, metrics)
        if self.on_snapshot is not None:
            self.on_snapshot(step, params)


def _differences(old, new, prefix: str = "") -> list[tuple[str, object, object]]:
    """The leaves where two nested dicts differ, as ``(dotted key, old, new)`` (a key missing on one side: None).

    >>> _differences({"optimizer": {"lr": 0.5, "name": "gd"}, "seeds": [0]}, {"optimizer": {"lr": 0.1, "name": "gd"},
    ...              "seeds": [0]})
    [('optimizer.lr', 0.5, 0.1)]
    """
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [] if old == new else [(prefix, old, new)]
    return [d for k in sorted(set(old) | set(new), key=str)
            for d in _differences(old.get(k), new.get(k), f"{prefix}.{k}" if prefix else str(k))]


def _log_columns(log: list) -> dict:
    """The log as a checkpoint stores it: the steps, the metric names and one (steps, metrics, B) float64 tensor
    (NaN where a step did not log a metric), a few tensors whatever the number of logged steps."""
    names = list(dict.fromkeys(k for _, keys, _ in log for k in keys))
    runs = next((v.shape[-1] for _, keys, v in log if keys), 0)
    values = torch.full((len(log), len(names), runs), math.nan, dtype=torch.float64)
    for i, (_, keys, v) in enumerate(log):
        if keys:
            values[i, [names.index(k) for k in keys]] = v.cpu()
    return {"steps": torch.tensor([s for s, _, _ in log], dtype=torch.int64), "names": names, "values": values}


def _log_entries(saved) -> list:
    """The log entries of a checkpoint's log (:func:`_log_columns`; also the per-step list of earlier versions)."""
    if isinstance(saved, list):
        return [(int(s), tuple(v), torch.stack(list(v.values())) if v else torch.zeros(0, dtype=torch.float64))
                for s, v in saved]
    names = tuple(saved["names"])
    return [(int(s), names, v) for s, v in zip(saved["steps"].tolist(), saved["values"], strict=True)]


def _on_host(log: list) -> list[tuple[int, dict[str, np.ndarray]]]:
    """The logged metrics as ``(step, {metric: (B,) float64 array})``, moved to the host in one transfer."""
    if not log:
        return []
    host = torch.cat([values.reshape(-1) for _, _, values in log]).cpu().numpy()
    out, at = [], 0
    for step, names, values in log:
        block = host[at:at + values.numel()].reshape(len(names), -1) if names else ()
        out.append((step, dict(zip(names, block, strict=True))))
        at += values.numel()
    return out


def _to_cpu(obj):
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def _to_device(obj, device):
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj
