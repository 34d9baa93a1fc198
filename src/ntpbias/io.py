"""Crash-safe file output: everything ntpbias writes goes to a temporary name and is renamed into place.

An interrupted run therefore never leaves a half-written file that looks complete.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import DataError


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``, on error delete it."""
    path = Path(path)
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON atomically (NaN/inf are written as null: JSON has no such numbers)."""
    write_text(path, json.dumps(_finite(obj), indent=2) + "\n")


def _finite(obj):
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_npz(path: str | os.PathLike, **arrays) -> None:
    """Write arrays (tensors on any device or array-likes; None values skipped) to an ``.npz`` atomically."""
    import numpy as np

    from ._tensor import to_numpy

    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, **{k: to_numpy(v) for k, v in arrays.items() if v is not None})


def sha256_file(path: str | os.PathLike) -> str:
    """SHA-256 hex digest of a file's bytes (read in 1 MiB blocks)."""
    import hashlib

    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    except OSError as exc:
        raise DataError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return h.hexdigest()


def ensure_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and parents); an unwritable location is a :class:`DataError` with a clear message."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DataError(f"cannot create output directory {path}: {exc.strerror or exc}") from None
    if not os.access(path, os.W_OK):
        raise DataError(f"output directory {path} is not writable; choose another --out")
    return path
