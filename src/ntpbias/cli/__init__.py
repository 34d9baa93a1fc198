"""The ``ntpbias`` command line: the entry point.

The click group and the helpers the commands share are in :mod:`ntpbias.cli._common`; each command lives in its own
module of this package and registers itself on the group.

User mistakes print one line ``ntpbias: error: <what, where, how to fix>`` and exit with status 2, without a
traceback (``--debug`` shows it); nothing is half-written because every output goes through :mod:`ntpbias.io`. An
unexpected exception is a bug, not a user mistake: one line saying so, exit status 1 (``--debug`` shows the
traceback). Library warnings (numpy, torch) are shown only with ``--debug``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings

import click

from ..errors import NTPBiasError
from ..signals import received, signal_name, terminate_like_interrupt
from ..threads import apply_threads
from . import (  # noqa: F401  (each registers its command)
    analyze,
    corpus,
    listing,
    lm,
    predict,
    reproduce,
    settings,
    structure,
    sweep,
    train,
)
from ._common import EXIT_USER_ERROR, cli

__all__ = ["EXIT_BUG", "EXIT_INTERRUPTED", "EXIT_TERMINATED", "EXIT_USER_ERROR", "cli", "main"]

#: exit status of an unexpected exception (a bug in ntpbias or a library), as opposed to a user mistake (2)
EXIT_BUG = 1
#: exit statuses of a run stopped by Ctrl-C (SIGINT) and by SIGTERM (a scheduler), as a shell reports a signal's death
EXIT_INTERRUPTED, EXIT_TERMINATED = 130, 143


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors become one line on stderr and exit status 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    try:
        apply_threads()  # done when ntpbias was imported; raises here when NTPBIAS_THREADS is not a count
        with warnings.catch_warnings(), _quiet_workers(not debug), terminate_like_interrupt():
            if not debug:
                warnings.simplefilter("ignore")
            rv = cli.main(args=args, prog_name="ntpbias", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, EOFError):  # click turns an EOFError into Abort: a bug, not Ctrl-C
            if debug:
                raise exc.__context__ from None
            _bug(exc.__context__)
        _stopped(exc, args)
    except click.ClickException as exc:
        if debug:
            raise
        _fail(exc.format_message())
    except NTPBiasError as exc:
        if debug:
            raise
        _fail(str(exc))
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM (ntpbias.signals.Terminated)
        _stopped(exc, args)
    except Exception as exc:  # a bug: never dressed up as a user error
        if debug:
            raise
        _bug(exc)
    sys.exit(rv if isinstance(rv, int) else 0)


@contextlib.contextmanager
def _quiet_workers(quiet: bool):
    """Worker processes started by the command (local executors, Dask) show library warnings only with --debug."""
    before = os.environ.get("PYTHONWARNINGS")
    if quiet:
        os.environ["PYTHONWARNINGS"] = "ignore"
    try:
        yield
    finally:
        if quiet:
            if before is None:
                os.environ.pop("PYTHONWARNINGS", None)
            else:
                os.environ["PYTHONWARNINGS"] = before


def _stopped(exc: BaseException, args: list[str]) -> None:
    """Ctrl-C (exit 130) or SIGTERM (exit 143): one line saying where the run stopped and the command that continues
    it (the outputs and the checkpoint were written, and the run directory released, on the way out)."""
    signum = received()
    where = getattr(exc, "where", "") or getattr(exc.__context__, "where", "")  # click's Abort wraps it
    line = f"ntpbias: {signal_name(signum)}{' ' + where if where else ''}"
    again = continue_command(args)
    if again:
        line += f"; continue with: {again}"
    click.echo(line, err=True)
    sys.exit(EXIT_TERMINATED if signum == signal.SIGTERM else EXIT_INTERRUPTED)


def continue_command(args: list[str]) -> str:
    """The command that continues an interrupted ``ntpbias ARGS``: with ``--resume`` (and without ``--overwrite``)
    for a command that has it, the same command for ``sweep`` (which resumes by itself), "" for the others.

    >>> continue_command(["train", "--preset", "linear-fig4-gd", "--out", "runs/gd", "--overwrite"])
    'ntpbias train --preset linear-fig4-gd --out runs/gd --resume'
    >>> continue_command(["analyze", "data.npz", "--out", "a"])
    ''
    """
    import shlex

    command: click.Command = cli
    for word in (a for a in args if not a.startswith("-")):
        if not isinstance(command, click.Group):
            break
        command = command.commands.get(word)
        if command is None:
            return ""
    names = {p.name for p in command.params}
    if "resume" not in names and command.name != "sweep":
        return ""
    again = [a for a in args if a != "--overwrite"]
    if "resume" in names and "--resume" not in again:
        again.append("--resume")
    return "ntpbias " + shlex.join(again)


def _bug(exc: BaseException) -> None:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    click.echo(f"ntpbias: internal error (a bug, please report it): {message}; rerun with --debug for the "
               "traceback", err=True)
    sys.exit(EXIT_BUG)


def _fail(message: str) -> None:
    click.echo("ntpbias: error: " + " ".join(message.split()), err=True)
    sys.exit(EXIT_USER_ERROR)
