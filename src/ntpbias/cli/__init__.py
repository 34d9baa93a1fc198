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
import sys
import warnings

import click

from ..errors import NTPBiasError
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

__all__ = ["EXIT_BUG", "EXIT_USER_ERROR", "cli", "main"]

#: exit status of an unexpected exception (a bug in ntpbias or a library), as opposed to a user mistake (2)
EXIT_BUG = 1


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; user errors become one line on stderr and exit status 2."""
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args
    try:
        apply_threads()  # done when ntpbias was imported; raises here when NTPBIAS_THREADS is not a count
        with warnings.catch_warnings(), _quiet_workers(not debug):
            if not debug:
                warnings.simplefilter("ignore")
            rv = cli.main(args=args, prog_name="ntpbias", standalone_mode=False)
    except click.exceptions.Abort as exc:
        if isinstance(exc.__context__, EOFError):  # click turns an EOFError into Abort: a bug, not Ctrl-C
            if debug:
                raise exc.__context__ from None
            _bug(exc.__context__)
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


def _bug(exc: BaseException) -> None:
    message = " ".join(f"{type(exc).__name__}: {exc}".split())
    click.echo(f"ntpbias: internal error (a bug, please report it): {message}; rerun with --debug for the "
               "traceback", err=True)
    sys.exit(EXIT_BUG)


def _fail(message: str) -> None:
    click.echo("ntpbias: error: " + " ".join(message.split()), err=True)
    sys.exit(EXIT_USER_ERROR)
