"""Figures (matplotlib, PNG + SVG) and the self-contained HTML report, built from saved results only.

Importing this package registers every paper's drawing functions in :data:`.plots.PLOTS`.
"""

from . import attention, linear, lm, optimizers, separability, structure, transformer, ufm  # noqa: F401
from .html import render
from .plots import PLOTS, draw, plot

__all__ = ["PLOTS", "draw", "plot", "render"]
