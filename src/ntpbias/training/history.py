"""What a training run produced: its metrics as columns (metric -> array over logged steps and seeds) and its state.

Every consumer (theory checks, figures, tests, ``metrics.csv``) reads the same columns: ``history["loss"]`` is an
``(n_steps, n_seeds)`` float64 array, ``history.steps`` the logged steps and ``history.seeds`` the seeds.

>>> h = History(steps=np.array([0, 10]), seeds=(0, 1),
...             columns={"loss": np.array([[2.0, 2.5], [1.0, 1.5]])}, run="demo")
>>> h["loss"][-1].tolist(), h.last("loss").tolist()
([1.0, 1.5], [1.0, 1.5])
>>> h.rows()[1]
{'run': 'demo', 'step': 0, 'seed': 1, 'loss': 2.5}
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from .._repr import short_repr
from ..errors import UnknownNameError, describe_value

STATUSES = ("completed", "diverged", "interrupted")


@short_repr
@dataclass
class History:
    """Metric columns of one run (``columns[name]``: (n_steps, n_seeds)) and its final state.

    Attributes
    ----------
    steps : (n_steps,) int64, the logged steps in increasing order
    seeds : the seeds of the runs (columns of every metric, in this order)
    columns : metric name -> (n_steps, n_seeds) float64
    run : the run's name inside a group (the ``run`` column of ``metrics.csv``)
    params : final parameters, batched over seeds on dim 0
    status : "completed" | "diverged" | "interrupted"; ``message`` says why when not completed
    step : the last step reached; ``seconds``: training time
    max_loss_increase : per seed, max_k L(W_{k+1}) - L(W_k) (monotonicity of the loss)
    """

    steps: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seeds: tuple[int, ...] = ()
    columns: dict[str, np.ndarray] = field(default_factory=dict)
    run: str = ""
    params: dict[str, torch.Tensor] = field(default_factory=dict)
    status: str = "completed"
    step: int = 0
    seconds: float = 0.0
    message: str = ""
    max_loss_increase: list[float] = field(default_factory=list)

    def _summary(self) -> dict:
        """What ``repr`` shows: the run, its logged steps, seeds, metric names and status."""
        out = {"run": self.run} if self.run else {}
        return {**out, "steps": f"{len(self.steps)} logged, last {int(self.steps[-1]) if len(self.steps) else '-'}",
                "seeds": self.seeds, "metrics": tuple(self.columns), "status": self.status}

    def __getitem__(self, name: str) -> np.ndarray:
        """(n_steps, n_seeds) values of one metric; an unknown name is an
        :class:`~ntpbias.errors.UnknownNameError` (a ``KeyError``) listing the metrics there are."""
        if name not in self.columns:
            close = difflib.get_close_matches(name, list(self.columns), n=1) if isinstance(name, str) else []
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UnknownNameError(f"no metric {name!r} in the history{' of ' + self.run if self.run else ''}"
                                   f"{hint}; its metrics: {', '.join(self.columns) or '(none)'}")
        return self.columns[name]

    def __contains__(self, name: str) -> bool:
        return name in self.columns

    @property
    def names(self) -> list[str]:
        return list(self.columns)

    def last(self, name: str) -> np.ndarray:
        """(n_seeds,) values of ``name`` at the last logged step."""
        return self[name][-1]

    def at(self, step: int | None = None) -> dict[str, list[float]]:
        """Metric name -> values (one per seed, in seed order) at a logged ``step`` (default: the last one)."""
        if not len(self.steps):
            return {}
        hits = np.flatnonzero(self.steps == (self.steps[-1] if step is None else step))
        if not len(hits):
            raise UnknownNameError(f"step {step} was not logged; logged steps: {describe_value(self.steps.tolist())}")
        return {k: v[hits[0]].tolist() for k, v in self.columns.items()}

    def seed_column(self, name: str, seed: int) -> np.ndarray:
        """(n_steps,) values of ``name`` for one seed."""
        return self[name][:, self.seeds.index(seed)]

    def rows(self) -> list[dict]:
        """One dict per (step, seed), step-major: ``run`` (when named), ``step``, ``seed`` and every metric."""
        head = {"run": self.run} if self.run else {}
        names = list(self.columns)
        return [{**head, "step": int(s), "seed": seed, **{k: float(self.columns[k][i, b]) for k in names}}
                for i, s in enumerate(self.steps.tolist()) for b, seed in enumerate(self.seeds)]

    def truncate(self, last_step: int) -> None:
        """Drop the rows logged after ``last_step`` (a diverged run keeps its metrics up to the first bad step)."""
        keep = self.steps <= last_step
        self.steps = self.steps[keep]
        self.columns = {k: v[keep] for k, v in self.columns.items()}

    @classmethod
    def from_log(cls, steps: Iterable[int], seeds: Iterable[int], values: list[dict[str, np.ndarray]],
                 **state) -> History:
        """Columns from per-step logs: ``values[i][name]`` is the (n_seeds,) array logged at ``steps[i]``."""
        steps, seeds = np.asarray(list(steps), dtype=np.int64), tuple(int(s) for s in seeds)
        names = list(dict.fromkeys(k for v in values for k in v))
        columns = {k: np.array([v.get(k, np.full(len(seeds), np.nan)) for v in values], dtype=np.float64)
                   .reshape(len(steps), len(seeds)) for k in names}
        return cls(steps=steps, seeds=seeds, columns=columns, **state)

    @classmethod
    def from_rows(cls, rows: list[dict], run: str = "") -> History:
        """The columns of one run from ``metrics.csv`` rows (``run`` selects the run; "" = rows without a run)."""
        sel = [r for r in rows if r.get("run", "") == run]
        steps = sorted({r["step"] for r in sel})
        seeds = sorted({r["seed"] for r in sel})
        names = list(dict.fromkeys(k for r in sel for k in r if k not in ("run", "step", "seed")))
        index = {(r["step"], r["seed"]): r for r in sel}
        columns = {k: np.array([[index.get((s, b), {}).get(k, np.nan) for b in seeds] for s in steps], dtype=float)
                   for k in names}
        return cls(steps=np.asarray(steps, dtype=np.int64), seeds=tuple(seeds), columns=columns, run=run)

    @classmethod
    def stack(cls, histories: list[History]) -> History:
        """Histories of the same run for different seeds (same logged steps), side by side as one history."""
        first = histories[0]
        for h in histories[1:]:
            if not np.array_equal(h.steps, first.steps):
                raise ValueError("cannot stack histories logged at different steps")
        names = list(dict.fromkeys(k for h in histories for k in h.columns))
        columns = {k: np.concatenate([h.columns.get(k, np.full((len(h.steps), len(h.seeds)), np.nan))
                                      for h in histories], axis=1) for k in names}
        return cls(steps=first.steps, seeds=tuple(s for h in histories for s in h.seeds), columns=columns,
                   run=first.run, status=next((h.status for h in histories if h.status != "completed"), "completed"),
                   step=min(h.step for h in histories), seconds=sum(h.seconds for h in histories),
                   message="; ".join(h.message for h in histories if h.message),
                   max_loss_increase=[x for h in histories for x in h.max_loss_increase])
