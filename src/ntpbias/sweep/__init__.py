"""Sweeps over seeds and settings, on this machine or a Dask cluster (``ntpbias sweep``).

* :mod:`.executors`: :func:`map_tasks` / :func:`map_values` apply a picklable function to many tasks with the
  ``inprocess``, ``local`` (worker processes) or ``dask`` executor (:class:`ExecutorConfig`). Experiment groups
  use them to spread seeds, trials or cells over workers.
* :mod:`.spec`: sweep files (a base preset/config, axes over any config key, what to collect, the executor).
* :mod:`.runner`: :func:`run_sweep` trains each cell into its own run directory and keeps ``results.csv``
  (resumable, failed cells recorded and retried on request).
* :mod:`.report`: mean and spread over seeds (:func:`aggregate`), banded figures and report.html.

This package sits at the experiments level: it may import :mod:`ntpbias.experiments` (lazily, inside functions,
so that experiment modules can import the executors), never the CLI.
"""

from .executors import EXECUTORS, ExecutorConfig, TaskOutcome, map_tasks, map_values
from .report import aggregate
from .runner import SweepResult, read_results, run_sweep
from .spec import Axis, Cell, SweepSpec, load_sweep, parse_sweep

__all__ = ["EXECUTORS", "Axis", "Cell", "ExecutorConfig", "SweepResult", "SweepSpec", "TaskOutcome", "aggregate",
           "load_sweep", "map_tasks", "map_values", "parse_sweep", "read_results", "run_sweep"]
