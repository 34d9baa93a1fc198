"""What every ``ntpbias`` command shares: the click group, the exit status for user errors, and small helpers.

Each command lives in its own module of this package and registers itself on :data:`cli`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import __version__
from ..errors import DataError

EXIT_USER_ERROR = 2


def _console(quiet: bool = False):
    """A stderr console for status and progress; silent when ``quiet`` or not a terminal."""
    from rich.console import Console

    return Console(stderr=True, quiet=quiet or not sys.stderr.isatty())


def command_line() -> str:
    """The command as typed (recorded in summary.json and the report)."""
    import shlex

    return "ntpbias " + shlex.join(sys.argv[1:]) if sys.argv[1:] else "ntpbias"


def load_ntp_data(path: str, *, context_length: int | None, autoregressive: bool, max_context: int | None,
                  embedding: str):
    """Read ``.npz`` NTP data or a sequences ``.txt`` file (with a context rule and an embedding)."""
    from ..data.ntp import NTPData
    from ..data.sequences import load_sequences

    p = Path(path)
    if not p.exists():
        raise DataError(f"{p}: no such file")
    if p.suffix == ".npz":
        if context_length is not None or autoregressive:
            raise DataError(f"{p}: --context-length/--autoregressive apply to sequence files, not to .npz data")
        return NTPData.load(p)
    if context_length is None and not autoregressive:
        raise DataError(f"{p}: a sequences file needs --context-length K or --autoregressive "
                        "(or pass an .npz NTP dataset)")
    return load_sequences(p, context_length=context_length, autoregressive=autoregressive,
                          max_context=max_context, embedding=embedding)


#: how each check verdict prints (see :attr:`ntpbias.results.Check.verdict`)
VERDICT_STYLE = {"pass": "[green]PASS[/]", "fail": "[red]FAIL[/]", "consistent": "[green]consistent[/]",
                 "inconsistent": "[yellow]inconsistent[/]", "shown": "[dim]shown[/]"}


def print_checks(sections) -> None:
    """A table of checks and their verdicts per report section, on stdout."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for section in sections:
        if not section.checks:
            continue
        table = Table(title=section.title, title_justify="left")
        for col in ("check", "measured", "threshold", "verdict"):
            table.add_column(col)
        for c in section.checks:
            measured = f"{c.measured:.4g}" if isinstance(c.measured, float) else str(c.measured)
            table.add_row(c.name, measured, c.threshold, VERDICT_STYLE[c.verdict])
        console.print(table)


# ---------------------------------------------------------------------------------------------- commands
@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="ntpbias")
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
def cli(debug: bool) -> None:
    """ntpbias: what gradient descent converges to in next-token prediction and attention training.

    \b
    Examples:
      ntpbias analyze data.npz --out runs/analysis
      ntpbias analyze corpus.txt --context-length 2 --embedding gaussian:d=64 --out runs/a
    """


