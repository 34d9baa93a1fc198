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
#: exit status of a run that completed (every output and the report written) with a failing graded check
EXIT_CHECK_FAILED = 3


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
    from ..io import input_file

    p = input_file(path)
    if embedding.endswith(".npy"):
        input_file(embedding, "--embedding")
    if p.suffix == ".npz":
        if context_length is not None or autoregressive:
            raise DataError(f"{p}: --context-length/--autoregressive apply to sequence files, not to .npz data")
        return NTPData.load(p)
    if context_length is None and not autoregressive:
        raise DataError(f"{p}: a sequences file needs --context-length K or --autoregressive "
                        "(or pass an .npz NTP dataset)")
    return load_sequences(p, context_length=context_length, autoregressive=autoregressive,
                          max_context=max_context, embedding=embedding)


def resource_options(command):
    """The ``--max-memory`` and ``--threads`` options of a command that does work: its body runs with that many
    threads (:func:`ntpbias.threads.apply_threads`, set before the body imports numpy or torch) and under that memory
    budget (:func:`ntpbias.limits.memory_budget`; default: the memory available when each estimate is checked)."""
    import functools

    @functools.wraps(command)
    def run(*args, max_memory=None, threads=None, **kwargs):
        from ..limits import memory_budget
        from ..threads import apply_threads

        if threads is not None:
            apply_threads(threads)
        with memory_budget(max_memory):
            return command(*args, **kwargs)

    run = click.option("--threads", type=click.IntRange(1, 4096), default=None, metavar="N",
                       help="Threads for torch and BLAS (default 1, or NTPBIAS_THREADS, or OMP_NUM_THREADS; "
                            "docs/errors-and-limits.md#threads); more threads pay off only on large dense "
                            "problems.")(run)
    return click.option("--max-memory", default=None, metavar="SIZE",
                        help="Memory this command may take, e.g. 16G or 500M (default: what is available now; "
                             "none: no check). Work whose estimate exceeds it is refused before it starts "
                             "(docs/errors-and-limits.md).")(run)


def overwrite_option(command):
    """The ``--overwrite`` flag of a command that writes an output directory (docs/errors-and-limits.md)."""
    return click.option("--overwrite", is_flag=True,
                        help="Replace an earlier run in --out (its outputs are deleted first); without it, an --out "
                             "that holds another run is refused.")(command)


def run_dir_options(command):
    """The options of a command that trains into a run directory (``train``, ``lm train``): ``--out``, ``--resume``,
    ``--overwrite``, ``--json`` (summary.json to stdout), ``--quiet``, ``--max-memory`` and ``--threads``."""
    options = [click.option("--out", required=True, type=click.Path(file_okay=False), help="Run directory."),
               click.option("--resume", is_flag=True, help="Continue from the last checkpoint in --out."),
               overwrite_option,
               click.option("--json", "as_json", is_flag=True, help="Print summary.json to stdout."),
               click.option("--quiet", is_flag=True, help="No progress display."),
               resource_options]
    for option in reversed(options):  # the help lists them in this order
        command = option(command)
    return command


def refuse_missing_source(name: str, builtins: tuple[str, ...], what: str = "") -> None:
    """A data source (a file, a folder, or a built-in name) that is neither a built-in name nor an existing path,
    refused before the command loads numpy and torch (seconds): a one-line :class:`DataError` naming the built-ins."""
    if name not in builtins and not Path(name).exists():
        named = f" (built-in: {', '.join(builtins)})" if builtins else ""
        raise DataError(f"{f'{what} {name}'.strip()}: no such file or folder{named}")


def check_output_file(path: str | Path, what: str) -> Path:
    """An output file's path checked before any work: not a directory, in a folder that can be created/written."""
    from ..io import check_output_dir

    path = Path(path)
    if path.is_dir():
        raise DataError(f"{what} {path}: is a directory; give a file name")
    check_output_dir(path.parent)
    return path


#: how each check verdict prints (see :attr:`ntpbias.results.Check.verdict`)
VERDICT_STYLE = {"pass": "[green]PASS[/]", "fail": "[red]FAIL[/]", "consistent": "[green]consistent[/]",
                 "inconsistent": "[yellow]inconsistent[/]", "shown": "[dim]shown[/]",
                 "by construction": "[dim]by construction[/]", "holds": "[dim]holds (erratum)[/]",
                 "refuted": "[yellow]refuted (erratum)[/]", "not graded": "[dim]not graded[/]",
                 "control passed": "[yellow]control passed[/]"}


def exit_status(sections) -> int:
    """0, or :data:`EXIT_CHECK_FAILED` when a graded check of ``sections`` failed (smoke scale grades nothing)."""
    return EXIT_CHECK_FAILED if any(c.verdict == "fail" for s in sections for c in s.checks) else 0


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


