"""Stopping on a signal: Ctrl-C (SIGINT) and a scheduler's SIGTERM stop a run the same way (docs/errors-and-limits.md).

The command line makes SIGTERM raise :class:`Terminated`, a ``KeyboardInterrupt``, so that every path that handles
Ctrl-C (checkpoints, the run directory's lock, the outputs written so far) handles it too; the exit status is 143
instead of 130. A training loop goes further: inside :func:`stop_at_safe_point` either signal only sets a flag that
the loop reads between two steps, so the checkpoint it then writes is the state after a whole step (a signal that
lands inside an optimizer's update could otherwise leave half-updated state). A second signal while the first one
waits stops at once.

>>> with stop_at_safe_point() as stop:
...     stop.signum is None
True
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler's stop), raised where Ctrl-C would raise ``KeyboardInterrupt``."""


class Stopped(KeyboardInterrupt):
    """A run stopped by a signal after writing its checkpoint and outputs; ``where`` says where (``"at step 1200"``)."""

    def __init__(self, where: str = ""):
        super().__init__(where)
        self.where = where


#: the last stop signal this process received (``signal.SIGINT`` or ``signal.SIGTERM``), None when none did
_received: int | None = None


def received() -> int | None:
    """The last stop signal this process received (None: none)."""
    return _received


def _raise(signum: int, _frame) -> None:
    global _received
    _received = signum
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


@contextlib.contextmanager
def terminate_like_interrupt() -> Iterator[None]:
    """While the body runs, SIGTERM raises :class:`Terminated` (and Ctrl-C is recorded for :func:`received`, which
    starts from None); the previous handlers come back after. Outside the main thread (where Python cannot set
    handlers) it does nothing."""
    global _received
    _received = None
    with _handlers(_raise):
        yield


class StopRequest:
    """The signal that asked a loop to stop (``signum``; None while none did); the loop sets ``handled`` when it
    stopped for it."""

    signum: int | None = None
    handled: bool = False


@contextlib.contextmanager
def stop_at_safe_point() -> Iterator[StopRequest]:
    """While the body runs, SIGINT and SIGTERM set ``request.signum`` instead of raising: the body reads it at its
    safe points (between two training steps), stops there and sets ``request.handled``. A second signal raises at once;
    a signal the body did not handle (it arrived after the last safe point) is delivered again when the body ends."""
    request = StopRequest()

    def defer(signum: int, frame) -> None:
        global _received
        if request.signum is not None:
            _raise(signum, frame)
        _received = request.signum = signum

    with _handlers(defer) as before:
        yield request
    if request.signum is not None and not request.handled:
        _deliver(request.signum, before.get(request.signum, signal.SIG_DFL))


def _deliver(signum: int, handler) -> None:
    """Act on ``signum`` as ``handler`` (the one in place before a deferral) would, here and now: call it (Python's
    default raises ``KeyboardInterrupt``), ignore it, or let the default action happen."""
    if callable(handler):
        handler(signum, None)
    elif handler != signal.SIG_IGN:
        signal.raise_signal(signum)


@contextlib.contextmanager
def _handlers(handler) -> Iterator[dict]:
    """``handler`` for SIGINT and SIGTERM while the body runs; yields the handlers it replaced. A signal the process
    ignores stays ignored (a background job of a non-interactive shell starts with SIGINT ignored), and outside the
    main thread, where Python cannot set handlers, nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield {}
        return
    before = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)
              if signal.getsignal(s) != signal.SIG_IGN}
    try:
        yield before
    finally:
        for s, h in before.items():
            signal.signal(s, h)


def signal_name(signum: int | None) -> str:
    """``"terminated"`` for SIGTERM, ``"interrupted"`` otherwise (Ctrl-C).

    >>> signal_name(signal.SIGTERM), signal_name(signal.SIGINT)
    ('terminated', 'interrupted')
    """
    return "terminated" if signum == signal.SIGTERM else "interrupted"
