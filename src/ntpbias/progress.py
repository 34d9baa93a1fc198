"""Progress on long work, on a terminal and in a log (docs/errors-and-limits.md#progress-in-logs).

Long work opens a :func:`task` (a training's steps, ``reproduce``'s groups, a sweep's cells, an analysis). Where it is
shown depends on stderr:

* a terminal: a live display with one row per open task (a bar when the total is known), advanced at most 20 times a
  second and erased when the task ends;
* anything else (a CI log, a batch job's output file, ``| tee``): one short line every :func:`log_interval` seconds
  (30 by default, ``NTPBIAS_PROGRESS_SECONDS`` to change it) while a task is open, naming every open task, its
  count, the time since it started and, when its total is known, the estimated time left::

      ntpbias: reproduce optimizers (3/9 done) | adam: step 1200/4000 (30%), 1m02s elapsed, about 2m25s left

A task opened with ``enabled=False`` (``--quiet``) shows nothing. The lines come from a background thread, so they
keep their pace through work that does not report (a solver, a long step).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Iterator

#: the environment variable that sets the seconds between two progress lines in a log
ENV = "NTPBIAS_PROGRESS_SECONDS"
DEFAULT_INTERVAL = 30.0


def log_interval() -> float:
    """Seconds between two progress lines when stderr is not a terminal (``NTPBIAS_PROGRESS_SECONDS``, default 30;
    a value that is not a positive number is ignored)."""
    try:
        value = float(os.environ.get(ENV, ""))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if 0 < value < float("inf") else DEFAULT_INTERVAL


class Task:
    """One piece of long work: ``description``, ``completed`` of ``total`` (None: unknown), ``unit`` of the count."""

    def __init__(self, description: str, total: int | None, completed: int = 0, unit: str = ""):
        self.description, self.total, self.completed, self.unit = description, total, completed, unit
        self.started = time.monotonic()
        self._first = completed
        self._row = None  # its row on the terminal display

    def advance(self, n: int = 1) -> None:
        self.completed += n
        _display.refresh(self)

    def update(self, *, completed: int | None = None, description: str | None = None, total: int | None = None) -> None:
        if completed is not None:
            self.completed = completed
        if description is not None:
            self.description = description
        if total is not None:
            self.total = total
        _display.refresh(self, force=description is not None or total is not None)

    def line(self, now: float) -> str:
        """``what: step n/N (p%), elapsed, about t left`` (the count only when there is a total, the time left only
        once some work is done)."""
        elapsed = now - self.started
        text = self.description
        if self.total is None:
            return f"{text}, {_duration(elapsed)} elapsed"
        unit = f"{self.unit} " if self.unit else ""
        pct = 100 * self.completed / self.total if self.total else 100
        text += f": {unit}{self.completed}/{self.total} ({pct:.0f}%), {_duration(elapsed)} elapsed"
        done = self.completed - self._first
        if 0 < done and self.completed < self.total:
            text += f", about {_duration(elapsed / done * (self.total - self.completed))} left"
        return text

    def brief(self) -> str:
        """An outer task in a line: ``what (n/N done)``."""
        if self.total is None:
            return self.description
        return f"{self.description} ({self.completed}/{self.total} done)"


def _duration(seconds: float) -> str:
    """``45s``, ``3m05s``, ``2h03m``.

    >>> _duration(45.2), _duration(185), _duration(7385)
    ('45s', '3m05s', '2h03m')
    """
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class _Display:
    """The open tasks and how they are shown: the rich display on a terminal, the heartbeat thread in a log."""

    def __init__(self):
        self.tasks: list[Task] = []
        self.lock = threading.Lock()
        self.live = None  # rich Progress (terminal)
        self.stop: threading.Event | None = None  # set to end the running heartbeat thread
        self.last_push = 0.0

    def open(self, task: Task) -> None:
        with self.lock:
            self.tasks.append(task)
            if sys.stderr.isatty():
                self._open_row(task)
            elif self.stop is None:
                self.stop = threading.Event()
                threading.Thread(target=self._beat, args=(self.stop,), name="ntpbias-progress", daemon=True).start()

    def close(self, task: Task) -> None:
        with self.lock:
            self.tasks.remove(task)
            if self.live is not None and task._row is not None:
                self.live.remove_task(task._row)
            if not self.tasks:
                if self.live is not None:
                    self.live.stop()
                    self.live = None
                if self.stop is not None:
                    self.stop.set()
                    self.stop = None

    def refresh(self, task: Task, force: bool = False) -> None:
        """Push the counts to the terminal display (at most 20 times a second unless ``force``)."""
        if self.live is None or task._row is None:
            return
        now = time.monotonic()
        if force or now - self.last_push > 0.05:
            self.last_push = now
            self.live.update(task._row, completed=task.completed, description=task.description, total=task.total)

    def _open_row(self, task: Task) -> None:
        if self.live is None:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                SpinnerColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.live = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), transient=True,
                                 console=Console(stderr=True))
            self.live.start()
        task._row = self.live.add_task(task.description, total=task.total, completed=task.completed)

    def _beat(self, stop: threading.Event) -> None:
        interval = log_interval()
        while not stop.wait(interval):
            with self.lock:
                tasks = list(self.tasks)
            if not tasks:
                return
            now = time.monotonic()
            text = " | ".join([t.brief() for t in tasks[:-1]] + [tasks[-1].line(now)])
            try:
                sys.stderr.write(f"ntpbias: {text}\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # stderr closed: nothing to tell
                return


_display = _Display()


@contextlib.contextmanager
def task(description: str, total: int | None = None, *, completed: int = 0, unit: str = "",
         enabled: bool = True) -> Iterator[Task]:
    """A piece of long work shown while the body runs (see the module docstring); ``enabled=False`` shows nothing.

    >>> with task("counting", total=3, enabled=False) as t:
    ...     t.advance(2)
    >>> t.line(t.started + 90)
    'counting: 2/3 (67%), 1m30s elapsed, about 45s left'
    """
    t = Task(description, total, completed, unit)
    if not enabled:
        yield t
        return
    _display.open(t)
    try:
        yield t
    finally:
        _display.close(t)
