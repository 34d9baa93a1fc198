"""Executors: apply one picklable function to many independent tasks in this process, in worker processes on this
machine, or on a Dask cluster (:mod:`.executors`). Experiment groups (per-seed runs, separability trials), sweeps and
distributed corpus counting all use them.
"""

from .executors import EXECUTORS, ExecutorConfig, TaskOutcome, check_reachable, map_tasks, map_values

__all__ = ["EXECUTORS", "ExecutorConfig", "TaskOutcome", "check_reachable", "map_tasks", "map_values"]
