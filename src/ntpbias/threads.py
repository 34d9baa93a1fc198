"""How many threads ntpbias computes with: decided here, once, before any work (docs/errors-and-limits.md#threads).

Every problem of the papers' experiments is small (matrices of a few hundred rows): there, threaded BLAS and torch's
intra-op pool cost more than they save, and on a busy machine their idle threads spin-wait for a descheduled peer, so a
run costs 10-20x the CPU of the same run on one thread (benchmarks/bench_threads.py measures it). So ntpbias computes
with **one thread** unless told otherwise, and lets idle OpenMP threads sleep instead of spinning
(``OMP_WAIT_POLICY=PASSIVE``) when more are asked for.

The count, first that is set: ``--threads N`` (every command that does work), the environment variable
``NTPBIAS_THREADS``, the user's ``OMP_NUM_THREADS`` (or ``MKL_NUM_THREADS``), else 1. ``--threads`` and
``NTPBIAS_THREADS`` set every library's variable; without them a variable the user set for one library
(``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OMP_WAIT_POLICY``) is left as it is.

When: :func:`apply_threads` runs when ``ntpbias`` is imported (the command line, the Python API and every worker
process import it first), which is before numpy or torch is loaded unless the caller loaded them already: OpenBLAS
reads its variables when it is loaded and cannot be changed afterwards without a helper library, which ntpbias does
not depend on. Torch's count is also set directly when torch is loaded already. The choice is exported as
``NTPBIAS_THREADS``, so worker processes (local executors, an embedded Dask cluster, whose nanny would otherwise force
one thread) inherit it.

>>> choose_threads(3, environ={})
3
>>> choose_threads(None, environ={"NTPBIAS_THREADS": "2", "OMP_NUM_THREADS": "8"})
2
>>> choose_threads(None, environ={"OMP_NUM_THREADS": "8"}), choose_threads(None, environ={})
(8, 1)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from .errors import ConfigError

#: the environment variable that sets ntpbias's thread count (and carries the choice into worker processes)
ENV = "NTPBIAS_THREADS"
#: the variables each threaded library reads when it is loaded: OpenMP (torch's intra-op pool), OpenBLAS, MKL
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: idle OpenMP threads sleep at once instead of spinning (GNU OpenMP, which torch's CPU wheels use, spins for a while
#: by default; on a busy machine that spinning is most of a multithreaded run's CPU time)
WAIT_POLICY = ("OMP_WAIT_POLICY", "PASSIVE")
#: the count where nothing says otherwise: every quick-scale experiment is small (benchmarks/bench_threads.py)
DEFAULT_THREADS = 1


def parse_threads(value, where: str = ENV) -> int:
    """A thread count (an integer >= 1) from ``value``; anything else is a :class:`~ntpbias.errors.ConfigError`
    naming ``where``.

    >>> parse_threads("4")
    4
    """
    text = str(value).strip()
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"{where}={value!r}: expected a number of threads >= 1 (e.g. {where}=1)")
    return int(text)


def choose_threads(requested: int | None = None, *, environ: Mapping[str, str] | None = None) -> int:
    """The thread count: ``requested`` (``--threads``), else ``NTPBIAS_THREADS``, else ``OMP_NUM_THREADS`` or
    ``MKL_NUM_THREADS`` as the user set them, else :data:`DEFAULT_THREADS`."""
    env = os.environ if environ is None else environ
    if requested is not None:
        return parse_threads(requested, "--threads")
    if env.get(ENV, "").strip():
        return parse_threads(env[ENV])
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        text = env.get(var, "").strip()
        if text.isdigit() and int(text) >= 1:
            return int(text)
    return DEFAULT_THREADS


#: the count this process applied (None: not yet)
_applied: int | None = None


def apply_threads(requested: int | None = None) -> int:
    """Make this process (and the processes it starts) compute with :func:`choose_threads` threads; returns the count.
    Without ``requested``, a second call keeps what the first applied.

    Sets the libraries' variables in ``os.environ`` (read by OpenMP, OpenBLAS and MKL when they are loaded; an
    explicit ``requested`` or ``NTPBIAS_THREADS`` overrides the user's, otherwise they are kept), the passive wait
    policy unless the user chose one, ``NTPBIAS_THREADS`` for worker processes, and torch's intra-op count when torch
    is loaded already.
    """
    global _applied
    if requested is None and _applied is not None:
        return _applied
    n = choose_threads(requested)
    explicit = requested is not None or bool(os.environ.get(ENV, "").strip())
    for var in THREAD_VARS:
        if explicit:
            os.environ[var] = str(n)
        else:
            os.environ.setdefault(var, str(n))
    os.environ.setdefault(*WAIT_POLICY)
    os.environ[ENV] = str(n)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "set_num_threads") and torch.get_num_threads() != n:
        torch.set_num_threads(n)
    _applied = n
    return n
