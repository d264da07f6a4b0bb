"""The example database of a fuzzing campaign: Hypothesis' own classes, chosen from the command line.

Invariant: a campaign always writes to a local directory database, so a failure found is kept on the host
that found it whatever happens to a shared server; a shared Redis-protocol database (``redis://``) is
written too while it answers (:class:`SharedDatabase`), and once it stops answering the error is recorded,
not raised into the run. A read-only shared database (``--read-db``) is only ever read, through
``MultiplexedDatabase(local, ReadOnlyDatabase(shared))``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from hypothesis.database import (
    DirectoryBasedExampleDatabase,
    ExampleDatabase,
    InMemoryExampleDatabase,
    MultiplexedDatabase,
    ReadOnlyDatabase,
)

SHARED_EXPIRY = timedelta(days=90)  # a shared failure outlives a quarter's campaigns


class CampaignDatabaseError(Exception):
    """The shared database cannot be used (bad address, missing client library, server unreachable)."""


def redis_database(url: str) -> ExampleDatabase:
    """``RedisExampleDatabase`` on the server at ``url`` (``redis://HOST:PORT[/DB]``), checked with a ping.

    Raises :class:`CampaignDatabaseError` when the address is not a redis URL, the ``redis`` client is not
    installed (the ``campaign`` extra brings it) or the server does not answer."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        raise CampaignDatabaseError(f"shared database {url!r}: expected redis://HOST:PORT[/DB]")
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise CampaignDatabaseError("a shared database needs the redis client: pip install 'kvexact[campaign]'"
                                    ) from None
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise CampaignDatabaseError(f"shared database {url} does not answer: {exc}") from None
    return RedisExampleDatabase(client, expire_after=SHARED_EXPIRY)


class SharedDatabase(ExampleDatabase):
    """A shared database that never raises into a run: the first error (the server went away) is kept in
    :attr:`error` and the database is left alone from then on; reads then return nothing."""

    def __init__(self, inner: ExampleDatabase, url: str) -> None:
        super().__init__()
        self.inner, self.url, self.error = inner, url, ""

    def _guard(self, call: Any, *args: Any) -> Any:
        if self.error:
            return None
        try:
            return call(*args)
        except Exception as exc:  # redis.ConnectionError, TimeoutError, OSError: all mean "gone"
            self.error = f"{type(exc).__name__}: {exc}"
            return None

    def __reduce__(self) -> Any:
        """Pickled as its address and error (a spawned machine run connects again)."""
        return (_reopen_shared, (self.url, self.error))

    def fetch(self, key: bytes) -> Iterable[bytes]:
        return self._guard(lambda: list(self.inner.fetch(key))) or []

    def save(self, key: bytes, value: bytes) -> None:
        self._guard(self.inner.save, key, value)

    def delete(self, key: bytes, value: bytes) -> None:
        self._guard(self.inner.delete, key, value)

    def move(self, src: bytes, dest: bytes, value: bytes) -> None:
        self._guard(self.inner.move, src, dest, value)


def _reopen_shared(url: str, error: str) -> SharedDatabase:
    """A :class:`SharedDatabase` on ``url`` again (in another process); one that cannot connect carries
    the error, as a server gone in a run does."""
    try:
        inner = redis_database(url) if not error else InMemoryExampleDatabase()
    except CampaignDatabaseError as exc:
        inner, error = InMemoryExampleDatabase(), str(exc)
    shared = SharedDatabase(inner, url)
    shared.error = error
    return shared


def shared_gone(url: str, error: str, local: Path) -> str:
    """The one line for a shared database that stopped answering."""
    return (f"the shared database {url} stopped answering ({error}); the failures found are kept in the "
            f"local database {local} and in their reproductions")


def campaign_database(local: Path, shared: str | None = None, read_only: str | None = None, strict: bool = True
                      ) -> tuple[ExampleDatabase, SharedDatabase | None]:
    """The database a slice runs with, and its shared part (None without ``shared``): the local directory,
    plus ``shared`` written as well, plus ``read_only`` read only. A shared server that does not answer
    raises :class:`CampaignDatabaseError` when ``strict``; otherwise (a slice started after the server went
    away) the slice runs on the local database and the shared part carries the error."""
    parts: list[ExampleDatabase] = [DirectoryBasedExampleDatabase(str(local))]
    kept = None
    for url, writable in ((shared, True), (read_only, False)):
        if not url:
            continue
        try:
            part = SharedDatabase(redis_database(url), url)
        except CampaignDatabaseError as exc:
            if strict:
                raise
            part = SharedDatabase(ReadOnlyDatabase(parts[0]), url)  # never used: the error is set
            part.error = str(exc)
        kept = part if writable or kept is None else kept
        parts.append(part if writable else ReadOnlyDatabase(part))
    return (parts[0] if len(parts) == 1 else MultiplexedDatabase(*parts)), kept
