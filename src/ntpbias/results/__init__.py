"""Neutral result types shared by experiments, the report and sweeps: theory checks, tables, figure specs, sections,
and the run directory's files (``config.toml``, ``metrics.csv``, ``summary.json``)."""

from .metrics_table import metrics_csv, read_metrics_csv, series
from .records import (
    CHECK_KINDS,
    QUOTED_KINDS,
    VERDICTS,
    Check,
    Figure,
    FigureSpec,
    Section,
    Table,
    check_at_least,
    check_at_most,
    headline,
    tally,
)
from .rundir import RunResult, check_outputs, config_toml, spread, write_run

__all__ = ["CHECK_KINDS", "QUOTED_KINDS", "VERDICTS",
           "Check", "Figure", "FigureSpec", "RunResult", "Section", "Table", "check_at_least",
           "check_at_most", "check_outputs", "config_toml", "headline", "metrics_csv", "read_metrics_csv", "series",
           "spread", "tally", "write_run"]
