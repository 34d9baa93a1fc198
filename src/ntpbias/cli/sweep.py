"""``ntpbias sweep``: a grid of trainings (seeds x settings) on this machine or a Dask cluster."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from ..config import INT64_MAX
from ._common import _console, cli, overwrite_option, resource_options


@cli.command()
@click.argument("sweep_file", type=click.Path(dir_okay=False))
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Sweep directory (results.csv, cells/).")
@click.option("--executor", type=click.Choice(["inprocess", "local", "dask"]), default=None,
              help="Where cells run (default: the file's [run] executor, else local).")
@click.option("--workers", type=click.IntRange(0, INT64_MAX), default=None,
              help="Worker processes (local, embedded Dask cluster); 0 = every core.")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Address of an existing Dask scheduler (implies --executor dask).")
@click.option("--timeout", "connect_timeout", type=float, default=None,
              help="Seconds to wait for the Dask scheduler (default 10).")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a value of the base config, e.g. --set train.steps=500 (repeatable).")
@click.option("--retry-failed", is_flag=True, help="Rerun the cells that failed in an earlier run.")
@overwrite_option
@click.option("--dry-run", is_flag=True, help="Check the sweep file and list the cells; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the sweep's summary.json to stdout.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@resource_options
def sweep(sweep_file, out, executor, workers, scheduler, connect_timeout, overrides, retry_failed, overwrite, dry_run,
          as_json, quiet):
    """Run every cell of SWEEP_FILE (a base preset or config x axes of settings and seeds).

    Each cell trains into OUT/cells/<cell>/ (a normal run directory); OUT/results.csv gets one row per cell
    (axis values, seed, final metrics, checks, status, time), rewritten after every cell; OUT/report.html and
    OUT/figures/ show mean and min-max bands over seeds. Running the same command again resumes: finished
    cells are skipped, failed ones are retried only with --retry-failed; --overwrite starts over. An OUT that holds
    another kind of run is refused. Exit status 1 when cells failed.

    \b
    Examples:
      ntpbias sweep examples/sweep_linear_seeds.toml --out runs/seeds           # local processes
      ntpbias sweep examples/sweep_linear_seeds.toml --out runs/seeds --executor dask --workers 8
      ntpbias sweep examples/sweep_linear_seeds.toml --out runs/seeds --scheduler tcp://node01:8786
      ntpbias sweep examples/sweep_linear_seeds.toml --out runs/seeds --dry-run
    """
    from ..io import input_file

    input_file(sweep_file)  # a missing file is refused before numpy and torch are loaded (seconds)

    from ..sweep import load_sweep, run_sweep

    spec = load_sweep(sweep_file, overrides=overrides,
                      executor={"kind": executor, "workers": workers, "scheduler": scheduler,
                                "connect_timeout": connect_timeout})
    if dry_run:
        _dry_run(spec)
        return
    from ..progress import task

    console = _console(quiet)
    command = "ntpbias " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "ntpbias sweep"
    with task("sweep", unit="cell", enabled=not quiet) as cells:
        def show(state: dict) -> None:
            cells.update(total=state["total"], completed=state["done"] + state["failed"],
                         description=f"sweep (running {state['running']}, failed {state['failed']})")

        result = run_sweep(spec, out, retry_failed=retry_failed, overwrite=overwrite, progress=show, say=console.log,
                           command=command)
    if as_json:
        click.echo((Path(out) / "summary.json").read_text(encoding="utf-8"))
    else:
        counts = ", ".join(f"{n} {s}" for s, n in result.counts.items() if n)
        click.echo(f"{len(result.rows)} cells ({counts or 'none'}); ran {result.ran} in {result.seconds:.1f} s; "
                   f"results: {Path(out) / 'results.csv'}, report: {Path(out) / 'report.html'}")
    if result.failed:
        click.echo(f"ntpbias: {result.failed} cell(s) failed; see the error column of results.csv and "
                   "cells/<cell>/error.txt; rerun with --retry-failed", err=True)
        return 1
    return 0


#: ``--dry-run`` lists (and checks) every cell of a grid up to this size; a larger grid is counted, and its first and
#: last cells are listed and checked
DRY_RUN_LIST = 10_000
DRY_RUN_ENDS = 10


def _dry_run(spec) -> None:
    n = spec.size
    click.echo(f"{n:,} cells of {spec.base_label} on {spec.executor.describe()}:")
    if n <= DRY_RUN_LIST:
        shown = spec.iter_cells()
    else:
        shown = spec.iter_cells([*range(DRY_RUN_ENDS), *range(n - DRY_RUN_ENDS, n)])
    for i, cell in enumerate(shown):
        if n > DRY_RUN_LIST and i == DRY_RUN_ENDS:
            click.echo(f"  ... {n - 2 * DRY_RUN_ENDS:,} more cells (counted, not listed) ...")
        click.echo(f"  {cell.directory:<40} {cell.key}")
