"""The registry of drawing functions: a :class:`~ntpbias.results.FigureSpec` names one (``plot="linear.training"``)
and carries its keyword arguments; :func:`draw` turns a section's specs into PNG + SVG files.

Each paper's module registers its functions with :func:`plot`; importing :mod:`ntpbias.report` loads them all.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..results import Section
from .figures import save

#: plot name -> function(**data) returning a matplotlib figure
PLOTS: dict[str, Callable] = {}


def plot(name: str) -> Callable[[Callable], Callable]:
    """Register a drawing function under ``name`` (``"<paper>.<figure>"``)."""

    def register(fn: Callable) -> Callable:
        if name in PLOTS:
            raise ValueError(f"plot {name!r} is registered twice")
        PLOTS[name] = fn
        return fn

    return register


def draw(section: Section, out: str | Path) -> None:
    """Draw every figure spec of ``section`` into ``out/figures/`` and record the files in ``section.figures``."""
    for spec in section.plots:
        fig = PLOTS[spec.plot](**spec.data)
        section.figures.append(save(fig, out, spec.id, spec.title, spec.caption))
