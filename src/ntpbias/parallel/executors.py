"""Executors: apply one function to many independent tasks (sweep cells, seeds, trials, corpus shards).

Three kinds, one interface (:func:`map_tasks`, outcomes yielded as tasks finish):

* ``"inprocess"``: one task after the other in this process (debugging: breakpoints and tracebacks work);
* ``"local"`` (default): worker processes on this machine (``workers``, default: every core). Each worker is a
  long-lived process fed one task at a time, so a worker that dies (killed, out of memory, a crash in native
  code) fails exactly the task it was running; a fresh worker replaces it and the other tasks go on;
* ``"dask"``: a Dask cluster, an embedded ``LocalCluster`` of ``workers`` single-threaded worker processes, or
  an existing scheduler at ``scheduler="tcp://host:port"`` (``dask-jobqueue`` on SLURM/PBS, ``dask scheduler``
  + ``dask worker`` by hand). Dask is the optional ``dist`` extra and is imported only here, lazily. A task
  whose worker dies is retried by Dask on another worker and recorded as failed when it kills workers
  repeatedly (``KilledWorker``); the other tasks are unaffected.

Tasks must be picklable and the function importable by name on the workers (a module-level function of an
installed package). Exceptions raised by a task are caught on the worker and returned as failed outcomes with
their traceback; Ctrl-C stops the whole map (workers ignore SIGINT; the parent stops them).

Examples
--------
>>> from ntpbias.parallel import map_tasks, map_values
>>> sorted(o.value for o in map_tasks(abs, [-1, 2, -3], executor="inprocess"))
[1, 2, 3]
>>> map_values(abs, [-1, 2, -3], executor="inprocess")
[1, 2, 3]
"""

from __future__ import annotations

import math
import os
import platform
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from ..config import INT64_MAX
from ..errors import ConfigError, NTPBiasError, SolverError

EXECUTORS = ("inprocess", "local", "dask")
_READY = "ready"  # a local worker's first message: it started


@dataclass(frozen=True)
class ExecutorConfig:
    """Which executor runs the tasks.

    Attributes
    ----------
    kind : "inprocess" | "local" | "dask"
    workers : number of worker processes (``local``, embedded Dask cluster); 0 = every core of this machine
    scheduler : ``dask`` only: address of an existing scheduler (``tcp://host:8786``); "" = an embedded LocalCluster
    connect_timeout : seconds to wait for the scheduler before giving up with a clear error
    """

    kind: str = "local"
    workers: int = 0
    scheduler: str = ""
    connect_timeout: float = 10.0

    def __post_init__(self):
        if not isinstance(self.kind, str) or self.kind not in EXECUTORS:
            raise ConfigError(f"unknown executor {self.kind!r}; choose one of {', '.join(EXECUTORS)}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or not 0 <= self.workers <= INT64_MAX:
            raise ConfigError(f"workers must be >= 0 (an integer; 0 = every core), got {self.workers!r}")
        if not isinstance(self.scheduler, str):
            raise ConfigError(f"scheduler: expected an address such as tcp://host:8786, got {self.scheduler!r}")
        if self.scheduler and self.kind != "dask":
            raise ConfigError(f"a scheduler address ({self.scheduler}) needs the dask executor (--executor dask)")
        timeout = self.connect_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise ConfigError(f"connect_timeout (--timeout) must be a finite number of seconds > 0, got {timeout!r}")

    @property
    def n_workers(self) -> int:
        return self.workers or os.cpu_count() or 1

    def describe(self) -> str:
        if self.kind == "inprocess":
            return "in-process"
        if self.kind == "local":
            return f"{self.n_workers} local worker process(es)"
        if self.scheduler:
            return f"Dask scheduler {self.scheduler}"
        return f"embedded Dask LocalCluster ({self.n_workers} workers)"


@dataclass(frozen=True)
class TaskOutcome:
    """What one task produced: ``value`` when ``ok``, else a one-line ``error`` and its ``traceback``.

    ``user_error`` keeps a task's :class:`~ntpbias.errors.NTPBiasError` (bad data or config in that task), so that
    :func:`map_values` can re-raise it as the user's error rather than as a solver failure.
    """

    index: int
    ok: bool
    value: Any = None
    error: str = ""
    traceback: str = ""
    seconds: float = 0.0
    worker: str = ""
    user_error: NTPBiasError | None = None


def as_executor(executor: ExecutorConfig | str | None) -> ExecutorConfig:
    """An :class:`ExecutorConfig` from a config, a kind name, or None (the default ``local``)."""
    if executor is None:
        return ExecutorConfig()
    if isinstance(executor, str):
        return ExecutorConfig(kind=executor)
    return executor


def map_tasks(fn: Callable[[Any], Any], items: Iterable[Any], *, executor: ExecutorConfig | str | None = None,
              on_start: Callable[[int], None] | None = None) -> Iterator[TaskOutcome]:
    """Apply ``fn`` to every item; yield one :class:`TaskOutcome` per item as it finishes (any order).

    ``on_start(index)`` is called when a task is handed to a worker (Dask: when submitted). Closing the
    iterator early (or Ctrl-C) stops the workers; tasks still running are lost, finished ones were yielded.
    """
    cfg = as_executor(executor)
    items = list(items)
    if not items:
        return iter(())
    if cfg.kind == "inprocess":
        return _inprocess(fn, items, on_start)
    if cfg.kind == "local":
        return _local(fn, items, cfg, on_start)
    return _dask(fn, items, cfg, on_start)


class TaskError(RuntimeError):
    """A task failed with an unexpected exception (not a user error): a bug, never dressed up as a user mistake."""


def map_values(fn: Callable[[Any], Any], items: Iterable[Any], *,
               executor: ExecutorConfig | str | None = None) -> list[Any]:
    """``[fn(x) for x in items]`` on an executor, in input order.

    The first failed task raises: its own :class:`~ntpbias.errors.NTPBiasError` when it had one (a user error),
    else a :class:`TaskError` naming the task and its error.
    """
    items = list(items)
    values: list[Any] = [None] * len(items)
    for outcome in map_tasks(fn, items, executor=executor):
        if outcome.user_error is not None:
            raise outcome.user_error
        if not outcome.ok:  # not a user error: a bug, reported as one (exit status 1)
            raise TaskError(f"task {outcome.index} of {len(items)} failed: {outcome.error}")
        values[outcome.index] = outcome.value
    return values


# ------------------------------------------------------------------------------------------------ the task wrapper
def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text[:500]}"


def run_task(index: int, fn: Callable[[Any], Any], item: Any) -> TaskOutcome:
    """Run one task, catching its exception (Ctrl-C propagates)."""
    t0 = time.perf_counter()
    worker = f"{platform.node()}:{os.getpid()}"
    try:
        value = fn(item)
    except Exception as exc:  # noqa: BLE001  (a failed task is a result, not a crash of the map)
        return TaskOutcome(index, False, None, _one_line(exc), traceback.format_exc(), time.perf_counter() - t0, worker,
                           exc if isinstance(exc, NTPBiasError) else None)
    return TaskOutcome(index, True, value, "", "", time.perf_counter() - t0, worker)


def _inprocess(fn, items, on_start) -> Iterator[TaskOutcome]:
    for i, item in enumerate(items):
        if on_start is not None:
            on_start(i)
        yield run_task(i, fn, item)


# ------------------------------------------------------------------------------------------------ local processes
def _worker_main(conn) -> None:
    """Loop of a local worker process: receive (index, fn, item), send back the outcome; None stops it."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    # threads: importing ntpbias (to unpickle this function) applied the parent's count, inherited as NTPBIAS_THREADS
    conn.send(_READY)
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        conn.send(run_task(*msg))


class _Worker:
    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_worker_main, args=(child,), daemon=True)
        self.process.start()
        child.close()
        self.task: int | None = None
        self.ready = False

    def stop(self, timeout: float = 2.0) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.terminate()
            self.process.join(timeout)
        self.conn.close()


def _local(fn, items, cfg: ExecutorConfig, on_start) -> Iterator[TaskOutcome]:
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")  # fork + torch threads is unsafe; spawn imports ntpbias once per worker
    queue = deque(range(len(items)))
    workers = [_Worker(ctx) for _ in range(min(cfg.n_workers, len(items)))]
    try:
        while queue or any(w.task is not None for w in workers):
            for w in workers:
                if w.task is None and queue:
                    w.task = queue.popleft()
                    w.conn.send((w.task, fn, items[w.task]))
                    if on_start is not None:
                        on_start(w.task)
            busy = [w for w in workers if w.task is not None]
            ready = set(wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for k, w in enumerate(workers):
                if w.task is None or (w.conn not in ready and w.process.sentinel not in ready):
                    continue
                outcome = None
                try:
                    while outcome is None and w.conn.poll():
                        msg = w.conn.recv()
                        w.ready = w.ready or msg == _READY
                        outcome = None if msg == _READY else msg
                except (EOFError, OSError):
                    outcome = None
                if outcome is None and w.process.is_alive():
                    continue  # only the start-up message
                if outcome is None and not w.ready:
                    w.process.join(1.0)
                    raise SolverError(f"a local worker process died while starting (exit code "
                                      f"{w.process.exitcode}); the task function must be importable from an "
                                      "installed module (not a script read from stdin): see the worker's error "
                                      "above, or run with --executor inprocess")
                if outcome is None:  # the worker died while running this task
                    w.process.join(1.0)
                    code = w.process.exitcode
                    outcome = TaskOutcome(w.task, False, None, f"WorkerDied: the worker process running this task "
                                          f"died (exit code {code})", "", 0.0, f"pid {w.process.pid}")
                    w.stop(0.1)
                    workers[k] = _Worker(ctx)
                else:
                    w.task = None
                yield outcome
    finally:
        for w in workers:
            if w.task is not None:  # interrupted while running: do not wait for it
                w.process.terminate()
            w.stop()


# ------------------------------------------------------------------------------------------------ dask
def dask_client(cfg: ExecutorConfig):
    """A ``distributed.Client``: connected to ``cfg.scheduler`` or to a new embedded LocalCluster.

    Raises
    ------
    ConfigError
        When Dask is not installed, or the scheduler cannot be reached within ``cfg.connect_timeout`` seconds.
    """
    import logging

    Client, LocalCluster = _distributed().Client, _distributed().LocalCluster
    if cfg.scheduler:
        try:
            return Client(cfg.scheduler, timeout=f"{cfg.connect_timeout}s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConfigError(f"cannot reach the Dask scheduler at {cfg.scheduler} within {cfg.connect_timeout:g} s "
                              f"({_one_line(exc)}); check --scheduler (tcp://host:8786) and that `dask scheduler` "
                              "is running there") from None
    # the workers inherit NTPBIAS_THREADS (ntpbias.threads), which their import of ntpbias applies over the nanny's
    # one-thread defaults
    cluster = LocalCluster(n_workers=cfg.n_workers, threads_per_worker=1, processes=True, dashboard_address=None,
                           silence_logs=logging.ERROR)
    return Client(cluster)


def check_reachable(executor: ExecutorConfig | str | None) -> None:
    """At the door: the executor can run (Dask installed; an existing scheduler answers within its
    ``connect_timeout``), else a :class:`~ntpbias.errors.ConfigError`, before any output is written."""
    cfg = as_executor(executor)
    if cfg.kind == "dask" and cfg.scheduler:
        dask_client(cfg).close()
    elif cfg.kind == "dask":
        _distributed()


def _distributed():
    """The ``distributed`` module (the optional ``dist`` extra), or a ConfigError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ConfigError("the dask executor needs dask[distributed]: pip install 'ntpbias[dist]' "
                          "(or use --executor local)") from None
    return distributed


def _dask(fn, items, cfg: ExecutorConfig, on_start) -> Iterator[TaskOutcome]:
    import uuid

    client = dask_client(cfg)
    futures: dict = {}
    try:
        from distributed import as_completed

        tag = uuid.uuid4().hex[:8]
        for i, item in enumerate(items):
            futures[client.submit(run_task, i, fn, item, pure=False, key=f"ntpbias-{tag}-{i}")] = i
            if on_start is not None:
                on_start(i)
        for future in as_completed(futures):
            i = futures[future]
            try:
                outcome = future.result()
            except Exception as exc:  # noqa: BLE001  KilledWorker, CancelledError, unpicklable results, ...
                name = type(exc).__name__
                what = ("the task killed its workers repeatedly (worker died)" if name == "KilledWorker"
                        else _one_line(exc))
                outcome = TaskOutcome(i, False, None, f"{name}: {what}", traceback.format_exc(), 0.0, "dask")
            yield outcome
    finally:
        cluster = getattr(client, "cluster", None)
        try:
            client.cancel(list(futures))
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
