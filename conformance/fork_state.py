"""What crosses between a forked machine run and its parent besides the result: the example database's
in-process state, the run's live counters, and a request to stop.

Invariants: after a forked run, the parent's example database is as if the run had happened here (an
in-memory database holds what the child saved; a shared database whose server stopped answering in the
child carries that error here too); while it runs, the parent sees the child's counters at most
:data:`STATS_SECONDS` old, and a stop requested here reaches the child before its next example.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    InMemoryExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

from kvexact.conformance.campaign_db import SharedDatabase

STATS_SECONDS = 0.25  # how often a forked run writes its counters for the parent
STATS_FILE, STOP_FILE = "stats.json", "stop"


def _leaves(db: Any) -> Iterator[Any]:
    """The databases ``db`` is made of (a multiplexed or read-only wrapper is opened; a shared one is a leaf)."""
    if isinstance(db, MultiplexedDatabase):
        for part in getattr(db, "_wrapped", None) or [object()]:
            yield from _leaves(part)
    elif isinstance(db, ReadOnlyDatabase):
        yield from _leaves(getattr(db, "_wrapped", object()))
    else:
        yield db


def can_fork_with(db: ExampleDatabase | None, spawn: bool = False) -> bool:
    """Whether a run with ``db`` may go to a forked child: every part is absent or exactly a directory, in-memory
    (entries handed back by :func:`database_state`), shared (its error handed back) or Redis database (whose
    client opens a new connection in the child; not for ``spawn``, where it would have to be pickled); a
    subclass of one may keep state of its own here."""
    known: tuple[type, ...] = (DirectoryBasedExampleDatabase, InMemoryExampleDatabase, SharedDatabase)
    try:
        from hypothesis.extra.redis import RedisExampleDatabase

        known += () if spawn else (RedisExampleDatabase,)
    except ImportError:  # no redis client: no such database either
        pass
    return all(leaf is None or type(leaf) in known for leaf in _leaves(db))  # a subclass may keep more state


def database_state(db: ExampleDatabase | None) -> list[Any]:
    """In the child, after the run: per part of ``db``, what the parent's copy lacks (an in-memory
    database's entries, a shared database's error, else None)."""
    state: list[Any] = []
    for leaf in _leaves(db):
        if isinstance(leaf, InMemoryExampleDatabase):
            state.append(leaf.data)
        elif isinstance(leaf, SharedDatabase):
            state.append(leaf.error)
        else:
            state.append(None)
    return state


def restore_database_state(db: ExampleDatabase | None, state: Iterable[Any]) -> None:
    """In the parent: apply what :func:`database_state` handed back (the child started from this process's
    copy, so its entries are a superset)."""
    for leaf, part in zip(_leaves(db), state, strict=True):
        if isinstance(leaf, InMemoryExampleDatabase) and part is not None:
            leaf.data = part
        elif isinstance(leaf, SharedDatabase) and part and not leaf.error:
            leaf.error = part


class StopFile:
    """A stop flag a forked run reads as a ``threading.Event``: set once the parent created the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def is_set(self) -> bool:
        return self.path.exists()


@contextlib.contextmanager
def publishing_stats(channel: Path) -> Iterator[list[dict[str, int]]]:
    """In the child: a one-slot list; once the run puts its live counters dict there, a helper thread writes
    them to ``channel`` every :data:`STATS_SECONDS` (and once at the end)."""
    slot: list[dict[str, int]] = []
    done = threading.Event()
    target = channel / STATS_FILE

    def write() -> None:
        if slot:
            part = channel / (STATS_FILE + ".part")
            part.write_text(json.dumps(dict(slot[0])), encoding="utf-8")
            os.replace(part, target)

    def loop() -> None:
        while not done.wait(STATS_SECONDS):
            write()

    thread = threading.Thread(target=loop, name="kvexact-run-stats", daemon=True)
    thread.start()
    try:
        yield slot
    finally:
        done.set()
        thread.join()
        write()


def read_stats(channel: Path) -> dict[str, int]:
    """In the parent: the child's latest counters ({} before the first write)."""
    try:
        return dict(json.loads((channel / STATS_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


def request_stop(channel: Path) -> None:
    """In the parent: ask the child to stop after the example in progress."""
    (channel / STOP_FILE).touch()
