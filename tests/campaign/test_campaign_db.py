"""The campaign's example database: the key keeps failures apart per machine, adapter and profile; a stored
failure is replayed first; a shared database that goes away leaves an error and the local copy."""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis.database import DirectoryBasedExampleDatabase, InMemoryExampleDatabase

from kvexact.conformance.campaign_db import (
    CampaignDatabaseError,
    SharedDatabase,
    campaign_database,
    redis_database,
)
from kvexact.conformance.runner import machine_settings, run_machine

LEAKY = "kvexact.conformance.faulty_index:faulty_leaky_cancel"
RADIX = "kvexact.reference.index:radix_factory"
SGLANG = "kvexact.reference.peers.sglang_protocol:sglang_factory"


class SpyDatabase(InMemoryExampleDatabase):
    """Records the keys Hypothesis reads and writes."""

    def __init__(self) -> None:
        super().__init__()
        self.fetched: set[bytes] = set()
        self.saved: set[bytes] = set()

    def fetch(self, key):
        self.fetched.add(key)
        return super().fetch(key)

    def save(self, key, value):
        self.saved.add(key)
        super().save(key, value)


def radix_run(adapter, db, seed, examples):
    s = settings(machine_settings("fuzz", examples, 20, shrink=False), database=db)
    return run_machine("Radix", adapter, s, seed, check_kernels=False, profile="fuzz")


def test_a_failure_is_replayed_first_and_only_for_its_own_adapter():
    db = SpyDatabase()
    found = radix_run(LEAKY, db, seed=0, examples=60)
    assert not found.passed and "faulty-leaky-cancel" in found.error
    failure_keys = {k for k in db.saved if db.data.get(k)}
    assert failure_keys
    # the control: one example of this seed, with no database, does not find the bug
    assert radix_run(LEAKY, None, seed=12345, examples=1).passed
    # with the database the very first example is the stored failure
    again = radix_run(LEAKY, db, seed=12345, examples=1)
    assert not again.passed and again.examples <= 2  # the replay, and Hypothesis reruns it to report it
    # another adapter on the same machine (the normative index, the SGLang profile) reads other keys
    for other in (RADIX, SGLANG):
        db.fetched.clear()
        assert radix_run(other, db, seed=1, examples=1).passed
        assert db.fetched and not (db.fetched & failure_keys), other


def test_a_shared_database_that_goes_away_leaves_an_error_and_the_local_failure(tmp_path, redis_url):
    url, server = redis_url
    database, shared = campaign_database(tmp_path / "local", shared=url)
    assert isinstance(shared, SharedDatabase) and shared.error == ""
    server.kill()
    server.wait()
    run = radix_run(LEAKY, database, seed=0, examples=60)
    assert not run.passed and run.error.startswith("ConformanceFailure"), run.error  # not a ConnectionError
    assert "ConnectionError" in shared.error
    stored = [p for p in (tmp_path / "local").rglob("*") if p.is_file()]
    assert stored  # the failure is kept on this host
    replay = radix_run(LEAKY, DirectoryBasedExampleDatabase(str(tmp_path / "local")), seed=12345, examples=1)
    assert not replay.passed and replay.examples <= 2  # the replay, and Hypothesis reruns it to report it


def test_an_unreachable_or_malformed_shared_database_is_a_named_error(free_port):
    with pytest.raises(CampaignDatabaseError, match="does not answer"):
        redis_database(f"redis://127.0.0.1:{free_port()}")
    with pytest.raises(CampaignDatabaseError, match="expected redis://HOST:PORT"):
        redis_database("/tmp/some-folder")


class WorkerDied(BaseException):
    """Stands for the worker process dying (SIGKILL) at the moment of the first save."""


class DyingDatabase(InMemoryExampleDatabase):
    """Stores the first failing example, then "dies" before shrinking or the slice's return can happen."""

    def save(self, key, value):
        super().save(key, value)
        raise WorkerDied()


def test_a_failure_is_in_the_database_the_moment_it_is_found():
    db = DyingDatabase()
    with pytest.raises(WorkerDied):
        radix_run(LEAKY, db, seed=0, examples=60)
    kept = InMemoryExampleDatabase()
    kept.data = db.data  # what survived the death
    again = radix_run(LEAKY, kept, seed=12345, examples=1)
    assert not again.passed and "faulty-leaky-cancel" in again.error
