"""Memory preflight: an estimate from the shapes, checked before anything large is allocated.

Every command that allocates (``analyze``, ``train``, ``reproduce``, ``sweep``, ``corpus``, ``structure``,
``predict``) runs inside :func:`memory_budget`, and the code that is about to build a large object first calls
:func:`check_memory` with the bytes each part will take (computed from the shapes in Python integers, so a size of
10^20 cannot overflow). A total above the budget is refused before the allocation with one line giving the estimate,
its largest parts and the memory available, and how to go past it. The budget is the memory available now
(``MemAvailable`` of ``/proc/meminfo``, else ``sysconf``), or what ``--max-memory`` says (``16G``, ``500M``, or
``none`` for no check). See docs/errors-and-limits.md.

>>> with memory_budget("1G"):
...     check_memory({"H (m x d)": nbytes(1000, 1000)}, "the data")
8000000
>>> with memory_budget("1M"):
...     check_memory({"H (m x d)": nbytes(1000, 1000)}, "the data")
Traceback (most recent call last):
...
ntpbias.errors.LimitError: the data would take about 8.0 MB (H (m x d) 8.0 MB) but --max-memory allows 1.0 MB; ...
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import os
import re
from collections.abc import Iterator

from .errors import ConfigError, LimitError

#: the budget of the running command: None = the memory available now; math.inf = no check
_BUDGET: contextvars.ContextVar[float | None] = contextvars.ContextVar("ntpbias_memory_budget", default=None)
_UNITS = {"": 1, "B": 1, "K": 1e3, "KB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9, "T": 1e12, "TB": 1e12,
          "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
#: the environment variable that carries --max-memory into worker processes
ENV = "NTPBIAS_MAX_MEMORY"
#: what --max-memory accepts, in words
SIZE_HELP = "a size such as 16G, 500M, 2T (bytes without a unit), or none (no memory check)"


def parse_size(text: str | int | float | None) -> float | None:
    """Bytes from ``16G``, ``500MB``, ``1.5T``, ``2GiB`` or a number; ``none``/``off`` -> ``math.inf`` (no check);
    ``None`` -> ``None`` (the memory available).

    >>> parse_size("16G"), parse_size("512MiB"), parse_size("none")
    (16000000000.0, 536870912.0, inf)
    """
    if text is None:
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        s = str(text).strip().upper()
        if s in ("NONE", "OFF", "UNLIMITED"):
            return math.inf
        match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:E[+-]?[0-9]+)?)\s*([KMGT]I?B?|B)?", s)
        if match is None or (match[2] or "") not in _UNITS:
            raise ConfigError(f"--max-memory {text!r}: expected {SIZE_HELP}")
        value = float(match[1]) * _UNITS[match[2] or ""]
    if not value > 0 or math.isnan(value):
        raise ConfigError(f"--max-memory {text!r}: must be positive ({SIZE_HELP})")
    return value


def available_memory() -> int:
    """Bytes of memory available to a new allocation now: the machine's ``MemAvailable`` (Linux; else its free
    physical pages), lowered to what this process's memory cgroup (a container's or a batch job's limit) and its
    address-space limit (``ulimit -v``) leave."""
    candidates = [_meminfo_available()]
    candidates += [limit - used for limit, used in (_cgroup_memory(),) if limit is not None]
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            candidates.append(soft - _vm_size())
    except (ImportError, OSError, ValueError):
        pass
    return max(0, min(candidates))


def _meminfo_available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 2**63 - 1  # unknown: do not refuse


def _read_int(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as fh:
            text = fh.read().strip()
        return None if text in ("max", "") else int(text)
    except (OSError, ValueError):
        return None


def _cgroup_memory() -> tuple[int | None, int]:
    """(limit, usage) of this process's memory cgroup (v2, else v1); limit None when there is none."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        limit = _read_int(limit_file)
        if limit is not None and limit < 2**60:  # v1 writes a huge number for "no limit"
            return limit, _read_int(usage_file) or 0
    return None, 0


def _vm_size() -> int:
    """Bytes of this process's address space (``VmSize``), 0 when unknown."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


@contextlib.contextmanager
def memory_budget(max_memory: str | float | None) -> Iterator[None]:
    """Run the body under a memory budget (``--max-memory``; None = the memory available when checked). Worker
    processes started inside the body inherit it (through the environment variable ``NTPBIAS_MAX_MEMORY``)."""
    limit = parse_size(max_memory)
    token = _BUDGET.set(limit)
    before = os.environ.get(ENV)
    if max_memory is not None:
        os.environ[ENV] = str(max_memory)
    try:
        yield
    finally:
        _BUDGET.reset(token)
        if max_memory is not None:
            if before is None:
                os.environ.pop(ENV, None)
            else:
                os.environ[ENV] = before


def budget(device=None) -> tuple[float, str]:
    """The budget in bytes and where it comes from (for messages); on a GPU ``device``, its free memory."""
    explicit = _BUDGET.get()
    if explicit is None and os.environ.get(ENV):
        explicit = parse_size(os.environ[ENV])
    if explicit is not None:
        return explicit, "--max-memory allows"
    if device is not None and getattr(device, "type", str(device).split(":")[0]) == "cuda":
        import torch

        return float(torch.cuda.mem_get_info(device)[0]), f"the GPU ({device}) has free"
    return float(available_memory()), "this machine has available"


def nbytes(*shape: int, itemsize: int = 8) -> int:
    """Bytes of a dense array of ``shape`` (exact Python integer: no overflow for any size)."""
    return math.prod(int(s) for s in shape) * itemsize


def format_bytes(n: float) -> str:
    """``1.2 GB`` (decimal units).

    >>> format_bytes(1.5e9), format_bytes(2e21)
    ('1.5 GB', '2e+21 B')
    """
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}" if n < 1e3 * 1e12 else f"{n:.3g} B"
    return f"{int(n)} B"


def check_memory(parts: dict[str, int], what: str, *, hint: str = "", device=None) -> int:
    """Refuse (:class:`~ntpbias.errors.LimitError`) when ``parts`` (name -> bytes) add up to more than the budget;
    returns the total. Call it before allocating, with the shapes the work will build (on ``device``, when it is a
    GPU, against the GPU's free memory)."""
    total = sum(int(v) for v in parts.values())
    limit, source = budget(device)
    if total > limit:
        largest = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        detail = ", ".join(f"{k} {format_bytes(v)}" for k, v in largest if v)
        how = hint + "; or " if hint else ""
        raise LimitError(f"{what} would take about {format_bytes(total)} ({detail}) but {source} "
                         f"{format_bytes(limit)}; {how}pass --max-memory SIZE to try anyway (--max-memory none: "
                         "no check)")
    return total
