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


@contextmanager
def atomic_open(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary sibling of ``path`` for writing; on a clean exit it replaces ``path``."""
    path = Path(path)
    binary = "b" in mode
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
    try:
        with os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else encoding) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` (text or bytes) to ``path`` atomically; returns the path."""
    with atomic_open(path, "wb" if isinstance(data, bytes) else "w", encoding) as fh:
        fh.write(data)
    return Path(path)


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
