"""``ntpbias list``: the experiments, ``reproduce`` groups and figure IDs, and the presets, from the catalog
(:mod:`ntpbias.experiments.catalog`; reading it imports no experiment code)."""

from __future__ import annotations

import json
import shutil
import textwrap

import click

from ._common import cli


def columns(rows: list[tuple[str, str]], indent: int, *, name_width: int | None = None,
            width: int | None = None) -> list[str]:
    """Two columns: the names padded to ``name_width`` (default: the longest name), the descriptions wrapped to the
    terminal's width (``width``), at least 20 characters of description a line.

    >>> columns([("a", "one"), ("long-name", "two words and then some more")], 2, width=20)
    ['  a          one', '  long-name  two words and then', '             some more']
    """
    width = width or shutil.get_terminal_size((100, 24)).columns
    name_width = name_width or max((len(name) for name, _ in rows), default=0)
    pad = " " * (indent + name_width + 2)
    lines = []
    for name, text in rows:
        head = " " * indent + name.ljust(name_width + 2)
        lines += textwrap.wrap(text, width=max(width, len(pad) + 20), initial_indent=head, subsequent_indent=pad,
                               break_on_hyphens=False) or [head.rstrip()]
    return lines


@cli.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def list_(as_json):
    """List the experiment/figure IDs (for `reproduce`), the presets (for `train --preset`) and the experiments
    (the `experiment` key of a config file) with the code that trains them.

    \b
    Examples:
      ntpbias list
      ntpbias list --json
    """
    from ..experiments.catalog import EXPERIMENTS, GROUPS, PRESETS

    if as_json:
        click.echo(json.dumps({
            "presets": {p.name: p.description for p in PRESETS.values()},
            "groups": {g.id: {"title": g.title, "figures": g.figures, "presets": list(g.presets)}
                       for g in GROUPS.values()},
            "experiments": {e.name: {"config": e.config, "trainer": e.trainer, "checks": e.checks, "report": e.report,
                                     "doc": e.doc} for e in EXPERIMENTS.values()},
        }, indent=2))
        return
    click.echo("Experiments and figures (ntpbias reproduce ID ...):")
    groups = [(g.id, g.title) for g in GROUPS.values()]
    figures = [(fid, desc) for g in GROUPS.values() for fid, desc in g.figures.items()]
    width = max(max(len(n) for n, _ in groups), max(len(n) for n, _ in figures) + 2)
    for g in GROUPS.values():  # a group's figures indented below it, one column of descriptions
        click.echo("\n".join(columns([(g.id, g.title)], 2, name_width=width)))
        click.echo("\n".join(columns(list(g.figures.items()), 4, name_width=width - 2)))
    click.echo("\nPresets (ntpbias train --preset NAME; their settings: ntpbias settings NAME):")
    click.echo("\n".join(columns([(p.name, p.description) for p in PRESETS.values()], 2)))
    click.echo("\nExperiments (the `experiment` key of a config file; ntpbias settings NAME):")
    click.echo("\n".join(columns([(e.name, f"{e.trainer.removeprefix('ntpbias.')}; {e.doc}")
                                  for e in EXPERIMENTS.values()], 2)))
