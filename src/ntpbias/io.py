"""File input and crash-safe output.

Output: everything ntpbias writes goes to a temporary name and is renamed into place, so an interrupted run never
leaves a half-written file that looks complete; the file gets the permissions of any file this process creates (0644
under the usual umask 022, so a group sharing a run directory can read it). An output directory is written by one
process at a time (:func:`locked_dir`: a second writer is refused with the holder's pid).

Input: every file a user names goes through :func:`input_file` (a missing path, a directory, a FIFO or device where a
file belongs are one clear error) and is read by :func:`read_input_text` or :func:`load_npy`, which turn every
decoding failure into a :class:`DataError` naming the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import ArgumentTypeError, DataError, describe_value


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``, on error delete it."""
    path = Path(path)
    ensure_dir(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, FILE_MODE & ~umask())  # mkstemp creates 0600: give the mode open() would give
    finally:
        os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


#: the mode of a new file before the umask (what ``open(path, "w")`` asks for)
FILE_MODE = 0o666


def umask() -> int:
    """This process's umask (read without changing it where Linux exposes it; else set and restored at once)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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


def as_path(path: str | os.PathLike, what: str = "path") -> Path:
    """``path`` as a :class:`~pathlib.Path`; anything but a string or path-like object is an
    :class:`~ntpbias.errors.ArgumentTypeError` naming ``what``."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(path, bytes):
        raise ArgumentTypeError(f"{what} = {describe_value(path)}: expected a path (a string or a pathlib.Path)")
    return Path(path)


def ensure_dir(path: str | os.PathLike) -> Path:
    """Create ``path`` (and parents); an unwritable location is a :class:`DataError` with a clear message."""
    path = as_path(path, "out")
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
    path = as_path(path, what or "path")
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
    out = as_path(out, "out")
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


# ---------------------------------------------------------------------------------------------- one writer at a time
#: the lock file of an output directory (removed when its writer ends; one left by a killed process is taken over)
LOCK_NAME = ".ntpbias.lock"


@contextlib.contextmanager
def locked_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Hold ``path`` (an output directory, created if needed) for this process alone while the body runs.

    The lock is ``path/.ntpbias.lock`` with an exclusive ``flock`` on it and the holder's pid and host inside: a
    second ntpbias process is refused with an :class:`~ntpbias.errors.OutputInUseError` naming that pid. The kernel
    drops the lock of a process that dies, so a lock file left by a killed run is taken over. When the body fails in
    a directory this call created, the folders left empty (and the directory itself, when empty) are removed: a
    refused run leaves nothing behind.
    """
    path = Path(path)
    created = not path.exists()
    ensure_dir(path)
    lock = path / LOCK_NAME
    fd = _acquire(lock)
    try:
        with no_empty_leftovers(path, created=created):
            yield path
    finally:
        lock.unlink(missing_ok=True)
        os.close(fd)
        if created and path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def _acquire(lock: Path) -> int:
    """An open descriptor of ``lock`` holding its exclusive flock, with this process's pid written in it."""
    import fcntl
    import platform

    from .errors import OutputInUseError

    for _ in range(5):  # the previous holder may unlink the file between our open and our flock: open it again
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, FILE_MODE & ~umask())
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 256).decode("utf-8", "replace").split()
            os.close(fd)
            pid = f"pid {holder[0]}" + (f" on {holder[1]}" if len(holder) > 1 else "") if holder else "pid unknown"
            raise OutputInUseError(f"{lock.parent} is being written by another ntpbias process ({pid}); wait for it "
                                   "to finish or choose another --out") from None
        except OSError:  # a file system without locks (some network mounts): the lock is the pid in the file
            _claim_by_pid(fd, lock)
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {platform.node()}\n".encode(), 0)
            return fd
        os.close(fd)
    raise OutputInUseError(f"cannot lock {lock}: other processes keep taking it; choose another --out")


def _claim_by_pid(fd: int, lock: Path) -> None:
    """Without flock: the lock is free when its file is empty or names a process of this host that is gone (else an
    :class:`~ntpbias.errors.OutputInUseError`)."""
    import platform

    from .errors import OutputInUseError

    holder = os.pread(fd, 256, 0).decode("utf-8", "replace").split()
    if not holder:
        return
    if len(holder) > 1 and holder[1] != platform.node():
        os.close(fd)
        raise OutputInUseError(f"{lock.parent} is locked by pid {holder[0]} on {holder[1]}; wait for it, or delete "
                               f"{lock} if that process is gone")
    pid = int(holder[0]) if holder[0].isdigit() else 0
    if pid and pid != os.getpid() and _alive(pid):
        os.close(fd)
        raise OutputInUseError(f"{lock.parent} is being written by another ntpbias process (pid {pid}); wait for it "
                               "to finish or choose another --out")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def no_empty_leftovers(path: str | os.PathLike, *, created: bool | None = None) -> Iterator[None]:
    """When the body fails in a directory that did not exist before (``created``; default: whether ``path`` exists
    now), remove the folders under it that are left empty, and ``path`` itself when empty (never a file)."""
    path = Path(path)
    created = not path.exists() if created is None else created
    try:
        yield
    except BaseException:
        if created and path.is_dir():
            for folder in sorted((p for p in path.rglob("*") if p.is_dir() and not p.is_symlink()),
                                 key=lambda p: -len(p.parts)):
                if not any(folder.iterdir()):
                    folder.rmdir()
            if not any(path.iterdir()):
                path.rmdir()
        raise
