"""``ntpbias reproduce``: the papers' experiments, figures and theory checks."""

from __future__ import annotations

from pathlib import Path

import click

from ..config import INT64_MAX
from ..experiments.base import SCALES
from ._common import _console, cli, command_line, exit_status, overwrite_option, print_checks, resource_options


@cli.command()
@click.argument("ids", nargs=-1)
@click.option("--out", required=True, type=click.Path(file_okay=False), help="Output directory.")
@click.option("--scale", type=click.Choice(SCALES), default="quick", show_default=True,
              help="smoke: seconds (a plumbing test: checks are computed, not graded); quick: minutes on a laptop "
                   "CPU; paper: the papers' sizes.")
@click.option("--seeds", type=click.IntRange(1, INT64_MAX), default=1, show_default=True,
              help="Independent seeds per training run (mean and spread in the figures).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--resume", is_flag=True, help="Continue interrupted trainings from their checkpoints.")
@overwrite_option
@click.option("--executor", type=click.Choice(["inprocess", "local", "dask"]), default="inprocess", show_default=True,
              help="Where independent runs that cannot share a batch (per-seed datasets) go: this process, local "
                   "worker processes, or Dask.")
@click.option("--workers", type=click.IntRange(0, INT64_MAX), default=0,
              help="local/dask: worker processes (0 = all cores).")
@click.option("--scheduler", default="", help="dask: address of an existing scheduler (tcp://host:8786).")
@click.option("--yelp", type=click.Path(dir_okay=False), default="",
              help="attention-imdb: a Yelp Open Dataset reviews file (JSON lines) to add the Yelp rows.")
@click.option("--regrade", is_flag=True, help="Recompute the checks, tables, figures and report of the finished run "
              "in OUT from its saved outputs, without training (attention-imdb).")
@click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout.")
@click.option("--quiet", is_flag=True, help="No progress display.")
@resource_options
def reproduce(ids, out, scale, seeds, device, resume, overwrite, executor, workers, scheduler, yelp, regrade, as_json,
              quiet):
    """Reproduce experiments and figures: trainings, theory checks, figures and report.html.

    IDS are experiment groups or figure IDs (see `ntpbias list`); default: all. One group writes its run
    directory into OUT; several write OUT/<group>/ each plus a combined OUT/report.html and OUT/summary.json.

    Exit status: 0 when every graded check passed (smoke scale grades nothing); 3 when the run completed but a graded
    check failed (every group still runs, and the outputs and report.html are written first); 2 for a usage or data
    error (nothing half-written).

    \b
    Examples:
      ntpbias reproduce all --out runs/all                 # every experiment at quick scale
      ntpbias reproduce linear --out runs/linear --seeds 5
      ntpbias reproduce linear-fig4 linear-fig5 --out runs/fig45 --scale paper
      ntpbias reproduce transformer --seeds 20 --executor local --out runs/tf20   # seeds on all cores
      ntpbias reproduce attention-imdb --yelp yelp_academic_dataset_review.json --out runs/real
      ntpbias reproduce attention-imdb --regrade --out runs/real   # this version's checks on a finished run
    """
    from ..errors import DataError
    from ..experiments.catalog import resolve_ids

    if regrade:
        from ..api import regrade as regrade_run
        from ..results import headline

        sections = regrade_run(out, command=command_line())
        print_checks(sections)
        click.echo(f"{headline(c for s in sections for c in s.checks)}; report: {Path(out) / 'report.html'}")
        return exit_status(sections)
    resolve_ids(list(ids))  # unknown IDs fail before anything is created (and before torch is imported)
    if yelp and not Path(yelp).is_file():
        raise DataError(f"--yelp {yelp}: no such file")

    from .._tensor import resolve_device
    from ..api import run_groups
    from ..experiments import RunContext
    from ..parallel import ExecutorConfig
    from ..results import headline

    resolve_device(device)
    console = _console(quiet)
    ctx = RunContext(out=Path(out), scale=scale, seeds=seeds, device=device, progress=not quiet, resume=resume,
                     overwrite=overwrite, say=lambda msg: console.log(msg),
                     executor=ExecutorConfig(executor, workers=workers, scheduler=scheduler), yelp=yelp)
    sections = run_groups(list(ids), ctx, command=command_line(), say=lambda msg: console.log(msg))
    if as_json:
        click.echo((Path(out) / "summary.json").read_text(encoding="utf-8"))
    else:
        print_checks(sections)
        click.echo(f"{headline(c for s in sections for c in s.checks)}; report: {Path(out) / 'report.html'}")
    return exit_status(sections)
