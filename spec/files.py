"""Writing reports, traces and reproductions atomically (every layer writes its files through here).

Invariant: a reader of ``path`` sees the previous complete file or the new complete file, never a part of
one: the content goes to a temporary file in the same folder (same file system), which is renamed over
``path`` only once it is complete; an exception or a Ctrl-C while writing removes the temporary file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


class WriteFailed(OSError):
    """A report, trace or reproduction could not be written: the command fails (exit 3) naming the path."""


def _failed(path: Path, exc: OSError) -> WriteFailed:
    return WriteFailed(f"cannot write {path}: {exc.strerror or exc}")


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on a clean exit it replaces ``path``. A device or a
    FIFO (``/dev/null``, ``/dev/full``) is written in place, never replaced. A failed write (a full disk, a
    missing or read-only folder) raises :class:`WriteFailed` and leaves no temporary file."""
    path = Path(path)
    binary = "b" in mode
    if path.exists() and not path.is_file() and not path.is_dir():
        try:
            with open(path, "wb" if binary else "w", encoding=None if binary else encoding) as fh:
                yield fh
        except OSError as exc:
            raise _failed(path, exc) from None
        return
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
    except OSError as exc:
        raise _failed(path, exc) from None
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise _failed(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text or bytes) to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", encoding) as fh:
        fh.write(data)
    return Path(path)


def remove_stale(path: str | Path) -> None:
    """Remove an earlier run's report at ``path`` (a file or a link); a device or FIFO such as ``/dev/null``
    is left alone (removing it would replace the device by a plain file)."""
    path = Path(path)
    if path.is_symlink() or path.is_file():
        path.unlink(missing_ok=True)


def check_writable(path: str | Path) -> str | None:
    """Why a report could not be written at ``path`` (None when it can), without creating ``path``."""
    path = Path(path)
    if path.is_dir():
        return f"report path {path} is a directory"
    try:
        write_atomic(path.with_name(f".{path.name}.probe"), "").unlink()
    except OSError as exc:
        return f"cannot write report {path}: {exc.strerror or exc}"
    return None
