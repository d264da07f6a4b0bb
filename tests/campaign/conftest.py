"""Fixtures of the campaign tests: a free-port finder, a Redis-protocol server, campaigns stopped after
the test."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
from campaign_helpers import Campaign, free_port

from kvexact.conformance.campaign_db import CampaignDatabaseError, redis_database


@pytest.fixture(autouse=True)
def keep_profile():
    """An in-process ``kvexact fuzz`` loads the fuzz profile: the tests after it get theirs back."""
    from hypothesis import settings

    before = settings.get_current_profile_name()
    yield
    settings.load_profile(before)


@pytest.fixture(name="free_port")
def free_port_fixture():
    return free_port


@pytest.fixture
def redis_url(tmp_path):
    """A Redis-protocol server (Valkey, else Redis) on a free local port: (url, process); stopped after."""
    server = shutil.which("valkey-server") or shutil.which("redis-server")
    if server is None:
        pytest.fail("no valkey-server or redis-server: scripts/system-deps.sh installs one")
    port = free_port()
    proc = subprocess.Popen([server, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                             "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(200):
        try:
            redis_database(url)
            break
        except CampaignDatabaseError:
            time.sleep(0.05)
    yield url, proc
    proc.kill()
    proc.wait()


@pytest.fixture
def campaign(tmp_path):
    started: list[Campaign] = []

    def start(*args: str) -> Campaign:
        started.append(Campaign(list(args), tmp_path))
        return started[-1]

    yield start
    for c in started:
        c.stop()
