"""The ``ntpbias`` command line: the group, shared helpers, and the entry point.

Each command lives in its own module of this package and registers itself on :data:`cli`.

User mistakes print one line ``ntpbias: error: <what, where, how to fix>`` and exit with status 2, without a
traceback (``--debug`` shows it); nothing is half-written because every output goes through
:mod:`ntpbias.io`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import __version__
from ..errors import DataError, NTPBiasError

EXIT_USER_ERROR = 2


# ---------------------------------------------------------------------------------------------- helpers
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


def print_checks(sections) -> None:
    """A table of theory checks (PASS/FAIL) per report section, on stdout."""
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
            table.add_row(c.name, measured, c.threshold, "[green]PASS[/]" if c.passed else "[red]FAIL[/]")
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


# ---------------------------------------------------------------------------------------------- entry point
def _register_commands() -> None:
    # each module adds its command to `cli`
    from . import analyze, corpus, predict, reproduce, structure, sweep, train  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors become one line on stderr and exit status 2."""
    _register_commands()
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    try:
        rv = cli.main(args=args, prog_name="ntpbias", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("ntpbias: interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        if debug:
            raise
        _fail(exc.format_message())
    except NTPBiasError as exc:
        if debug:
            raise
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("ntpbias: interrupted", err=True)
        sys.exit(130)
    sys.exit(rv if isinstance(rv, int) else 0)


def _fail(message: str) -> None:
    click.echo("ntpbias: error: " + " ".join(message.split()), err=True)
    sys.exit(EXIT_USER_ERROR)
