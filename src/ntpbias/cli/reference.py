"""The command-line reference (docs/cli.md), generated from the commands' own help texts.

``python -m ntpbias.cli.reference > docs/cli.md`` rewrites the page; a test fails when the page and the commands
disagree, so the reference never drifts from ``--help``.
"""

from __future__ import annotations

import re

import click

from ..config import INT64_MAX
from . import cli

#: a fixed width, so the page is the same on every terminal
WIDTH = 100

HEADER = """# Command-line reference

Every command of `ntpbias`, generated from its `--help` (`python -m ntpbias.cli.reference > docs/cli.md`). Exit
status: 0 done, 1 a bug, 2 a user mistake (one line `ntpbias: error: ...`, nothing written), 3 a completed
`reproduce` with a failing graded check (every output written first), 130 interrupted (Ctrl-C), 143 terminated
(SIGTERM); both name the command that continues the run.
"""


def _commands(group: click.Group, ctx: click.Context, prefix: str):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is None or command.hidden:
            continue
        path = f"{prefix} {name}"
        yield path, command, ctx
        if isinstance(command, click.Group):
            sub = click.Context(command, info_name=name, parent=ctx, **command.context_settings)
            yield from _commands(command, sub, path)


def _readable(help_text: str) -> str:
    """A command's help as the page shows it: a range with no upper limit (``1<=x<=9223372036854775807``, the int64
    bound the options are checked against) written ``x>=1``."""
    return re.sub(rf"(-?\d+)<=x<={INT64_MAX}\b", r"x>=\1", help_text)


def markdown() -> str:
    """The whole reference as Markdown: the top-level help, then one section per command (and subcommand).

    Contexts get each command's own ``context_settings`` (``-h, --help``), as when the command runs, so the page
    does not depend on which help was printed before."""
    settings = {**cli.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    root = click.Context(cli, info_name="ntpbias", **settings)
    parts = [HEADER, "## ntpbias\n", "```text", _readable(cli.get_help(root)), "```\n"]
    for path, command, parent in _commands(cli, root, "ntpbias"):
        ctx = click.Context(command, info_name=path.rsplit(" ", 1)[1], parent=parent, **command.context_settings)
        parts += [f"## {path}\n", "```text", _readable(command.get_help(ctx)), "```\n"]
    return "\n".join(parts)


if __name__ == "__main__":  # pragma: no cover - the documented way to regenerate docs/cli.md
    click.echo(markdown(), nl=False)
