"""The runtime environment (scripts/runtime-env.sh) as a fixture: built once, cached, reused."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "scripts/runtime-env.sh"


def _registry_reachable() -> bool:
    try:
        socket.create_connection(("pypi.org", 443), timeout=5).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="session")
def runtime_python() -> str:
    """The interpreter of the environment with the real vLLM and SGLang (built by the script if missing).

    Skips only when the registry cannot be reached and the build failed; a build that fails with the
    registry reachable fails the test."""
    run = subprocess.run(["bash", SCRIPT], cwd=ROOT, capture_output=True, text=True)
    if run.returncode != 0:
        if not _registry_reachable():
            pytest.skip(f"{SCRIPT}: the package registry cannot be reached to build the runtime environment")
        raise AssertionError(f"{SCRIPT} failed:\n{run.stderr[-4000:]}")
    return run.stdout.strip().splitlines()[-1]
