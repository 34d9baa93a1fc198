"""Neutral result types shared by experiments, the report and sweeps: theory checks, tables, figure specs, sections,
and the run directory's files (``config.toml``, ``metrics.csv``, ``summary.json``)."""

from .metrics_table import metrics_csv, read_metrics_csv, series
from .records import (
    CHECK_KINDS,
    GRADED_KINDS,
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
    verdict_counts,
    with_control,
)
from .rundir import RunResult, check_earlier_run, check_outputs, claim_run_dir, config_toml, spread, write_run

__all__ = ["CHECK_KINDS", "GRADED_KINDS", "QUOTED_KINDS", "VERDICTS",
           "Check", "Figure", "FigureSpec", "RunResult", "Section", "Table", "check_at_least",
           "check_at_most", "check_earlier_run", "check_outputs", "claim_run_dir", "config_toml", "headline",
           "metrics_csv", "read_metrics_csv", "series", "spread", "tally", "verdict_counts", "with_control",
           "write_run"]
