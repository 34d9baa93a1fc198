"""``ntpbias settings``: every config key of an experiment or preset, with its type, allowed range and default."""

from __future__ import annotations

import json
import re

import click

from ..errors import ConfigError
from ._common import cli


def settings_rows(name: str | None):
    """``[(title, rows)]`` for an experiment, a preset (its values as defaults), or every experiment (``None``)."""
    from ..config import describe
    from ..experiments.catalog import EXPERIMENTS, PRESETS

    if name is None:
        return [(kind, describe(e.config_class)) for kind, e in EXPERIMENTS.items()]
    if name in EXPERIMENTS:
        return [(name, describe(EXPERIMENTS[name].config_class))]
    if name in PRESETS:
        return [(f"preset {name} (paper scale)", describe(PRESETS[name].make("paper")))]
    raise ConfigError(f"unknown experiment or preset {name!r}; experiments: {', '.join(EXPERIMENTS)}; presets: "
                      "see `ntpbias list`")


def _plain(text: str) -> str:
    """Text that Markdown shows as written: underscores and stars escaped (no italics)."""
    return re.sub(r"([_*])", r"\\\1", text)


def settings_markdown(sections) -> str:
    """The tables of docs/settings.md."""
    lines = []
    for title, rows in sections:
        lines += [f"## {title}", "", "| key | allowed | default | meaning |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in (f"`{k}`", _plain(a), f"`{d}`", _plain(doc))) + " |"
                  for k, a, d, doc in rows]
        lines.append("")
    return "\n".join(lines)


@cli.command()
@click.argument("name", required=False)
@click.option("--markdown", is_flag=True, help="Markdown tables (docs/settings.md is this output).")
@click.option("--json", "as_json", is_flag=True, help="A JSON list of {key, allowed, default, doc} per experiment.")
def settings(name, markdown, as_json):
    """Every config key (for TOML files, `train --set` and sweep axes): its type, allowed values and default.

    NAME is an experiment (linear, separability, attention, attention-stage2, transformer) or a preset (then its
    values are the defaults shown); without NAME, every experiment. A value outside what is allowed is refused
    before any work starts, naming the key, the value given and what is allowed.

    \b
    Examples:
      ntpbias settings linear
      ntpbias settings attention-fig2
      ntpbias settings --markdown > docs/settings.md
    """
    sections = settings_rows(name)
    if as_json:
        click.echo(json.dumps({title: [dict(zip(("key", "allowed", "default", "doc"), r, strict=True)) for r in rows]
                               for title, rows in sections}, indent=2))
    elif markdown:
        click.echo(settings_markdown(sections), nl=False)
    else:
        for title, rows in sections:
            click.echo(f"{title}:")
            for key, admits, default, doc in rows:
                click.echo(f"  {key} = {default}    # {admits}; {doc}")
            click.echo("")
