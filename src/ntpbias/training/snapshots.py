"""The parameters of a run at every logged step (``checkpoints/steps/step_<k>.pt``), for measurements made after
training: the language model's geometry at log-spaced steps (docs/lm.md#training).

:func:`snapshot_writer` gives the :class:`~ntpbias.training.loop.Trainer`'s ``on_snapshot`` callback; each file holds
``{"step", "seeds", "params"}`` (parameters batched over seeds, on the CPU), written atomically, and is read back with
``weights_only=True`` (a checkpoint must not be able to run code). A resumed run rewrites the steps it logs again, with
the same numbers.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import torch

from ..errors import DataError
from ..io import atomic_path, ensure_dir

_NAME = re.compile(r"step_(\d+)\.pt")


def snapshot_writer(folder: str | Path, seeds: list[int]) -> Callable[[int, dict[str, torch.Tensor]], None]:
    """A callback ``(step, params)`` that writes ``folder/step_<step>.pt``."""
    folder = Path(folder)

    def write(step: int, params: dict[str, torch.Tensor]) -> None:
        ensure_dir(folder)
        state = {"step": int(step), "seeds": list(seeds), "params": {k: v.detach().cpu() for k, v in params.items()}}
        with atomic_path(folder / f"step_{step:09d}.pt") as tmp:
            torch.save(state, tmp)

    return write


def snapshot_steps(folder: str | Path) -> list[tuple[int, Path]]:
    """The snapshots in ``folder`` as (step, path), by step.

    >>> snapshot_steps("no-such-folder")
    []
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := _NAME.fullmatch(p.name))]
    return sorted(found)


def load_snapshot(path: str | Path) -> dict:
    """A snapshot written by :func:`snapshot_writer` (``weights_only``: it cannot run code)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        state["step"], state["params"], state["seeds"]  # noqa: B018  (the keys every snapshot has)
    except Exception as exc:  # a truncated or foreign file: torch raises several types
        raise DataError(f"{path}: not a readable ntpbias snapshot ({type(exc).__name__}); retrain, or delete "
                        "it") from None
    return state
