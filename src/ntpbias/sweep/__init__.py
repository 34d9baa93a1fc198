"""Sweeps over seeds and settings, on this machine or a Dask cluster (``ntpbias sweep``).

* :mod:`.spec`: sweep files (a base preset/config, axes over any config key, what to collect, the executor).
* :mod:`.runner`: :func:`run_sweep` trains each cell into its own run directory and keeps ``results.csv``
  (resumable, failed cells recorded and retried on request).
* :mod:`.report`: mean and spread over seeds (:func:`aggregate`), banded figures and report.html.

This package sits at the experiments level: it may import :mod:`ntpbias.experiments` (lazily, inside functions,
so that experiment modules can import the executors), never the CLI.
"""

from .report import aggregate
from .runner import run_sweep
from .spec import Axis, Cell, SweepSpec, load_sweep, parse_sweep
from .table import SweepResult, read_results

__all__ = ["Axis", "Cell", "SweepResult", "SweepSpec", "aggregate", "load_sweep", "parse_sweep", "read_results",
           "run_sweep"]
