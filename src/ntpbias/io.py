"""File input and crash-safe output.

Output: everything ntpbias writes goes to a temporary name and is renamed into place, so an interrupted run never
leaves a half-written file that looks complete. Input: every file a user names goes through :func:`input_file` (a
missing path, a directory, a FIFO or device where a file belongs are one clear error) and is read by
:func:`read_input_text` or :func:`load_npy`, which turn every decoding failure into a :class:`DataError` naming the
file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
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


def input_file(path: str | os.PathLike, what: str = "") -> Path:
    """``path`` checked to be a regular file this process can read; else a :class:`DataError` naming it (prefixed by
    ``what``, e.g. ``"--embedding"``) and saying what stands there instead.

    A FIFO or a device is refused before it is opened: reading one could block forever.
    """
    path = Path(path)
    where = f"{what} {path}".strip()
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DataError(f"{where}: no such file") from None
    except OSError as exc:
        raise DataError(f"{where}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{where}: is a directory; pass a file")
    if not stat.S_ISREG(mode):
        raise DataError(f"{where}: is not a regular file (a FIFO, socket or device); pass a file")
    if not os.access(path, os.R_OK):
        raise DataError(f"{where}: permission denied")
    return path


def read_input_text(path: str | os.PathLike, what: str = "") -> str:
    """The UTF-8 text of a user's file (checked by :func:`input_file`); other encodings are a clear error."""
    path = input_file(path, what)
    where = f"{what} {path}".strip()
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}); convert it to UTF-8") from None
    except OSError as exc:
        raise DataError(f"{where}: cannot read it ({exc.strerror or exc})") from None


def load_npy(path: str | os.PathLike, what: str = ""):
    """A numeric array from a ``.npy`` file (never unpickles); an empty, truncated, renamed (``.npz``, text) or
    object-array file is a :class:`DataError` naming it."""
    import numpy as np

    path = input_file(path, what)
    where = f"{what} {path}".strip()
    try:
        with open(path, "rb") as fh:
            np.lib.format.read_magic(fh)
            fh.seek(0)
            arr = np.lib.format.read_array(fh, allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        detail = str(exc) or type(exc).__name__
        raise DataError(f"{where}: not a readable .npy array file ({detail}); save one with numpy.save") from None
    if arr.dtype.kind not in "fiub":
        raise DataError(f"{where}: expected a numeric array, got dtype {arr.dtype}")
    return arr


def check_output_dir(out: str | os.PathLike, files: tuple[str, ...] = (), dirs: tuple[str, ...] = ()) -> Path:
    """Check, before any work, that ``out`` can hold a command's outputs: it is a directory (or can be created
    there), and none of the ``files`` it will write is a directory, nor any of its ``dirs`` a file. Creates nothing;
    a problem is a :class:`DataError` naming the path."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise DataError(f"output directory {out} is a file; choose another --out")
    parent = out
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise DataError(f"cannot create output directory {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise DataError(f"output directory {out}: {parent} is not writable; choose another --out")
    for name in files:
        target = out / name
        if target.exists() and not target.is_file():
            raise DataError(f"{target} is a directory (or not a regular file) where ntpbias writes a file; remove it "
                            "or choose another --out")
    for name in dirs:
        target = out / name
        if target.exists() and not target.is_dir():
            raise DataError(f"{target} is a file where ntpbias writes a directory; remove it or choose another --out")
    return out
