"""What the campaign tests share (imported by their conftest and tests): a free local port, a campaign
started in its own process group, a check that a process has exited."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

LEAKY = "kvexact.conformance.faulty_index:faulty_leaky_cancel"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Campaign:
    """A running ``kvexact fuzz`` campaign: its header (counters page, worker pids) read, the rest on demand."""

    HEADER = re.compile(r"\(pids ([\d, ]+)\); counters page (\S+)")

    def __init__(self, args: list[str], cwd: Path) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
        self.proc = subprocess.Popen([sys.executable, "-m", "kvexact.cli", "fuzz", "--dashboard-port", "0",
                                      "--counters-port", "0", *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env, start_new_session=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
        assert self.proc.stdout is not None
        self.seen: list[str] = []
        for line in self.proc.stdout:
            self.seen.append(line)
            m = self.HEADER.search(line)
            if m:
                self.pids = [int(p) for p in m.group(1).split(",")]
                self.page = m.group(2)
                break
        else:
            self.proc.wait()
            pytest.fail(f"the campaign never started; exit {self.proc.returncode}: {''.join(self.seen)[-3000:]}")

    def counters(self) -> dict:
        with urllib.request.urlopen(self.page + "counters.json", timeout=10) as r:
            return json.loads(r.read())

    def wait_for(self, test, what: str, tries: int = 600) -> dict:
        """Poll the counters (every 0.1 s, bounded) until ``test(counters)`` holds."""
        for _ in range(tries):
            c = self.counters()
            if test(c):
                return c
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        pytest.fail(f"counters never showed {what}: {c}")

    def finish(self, timeout: float = 300) -> tuple[int, str]:
        assert self.proc.stdout is not None
        rest = self.proc.stdout.read()
        return self.proc.wait(timeout), "".join(self.seen) + rest

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def gone(pid: int) -> bool:
    """The process has exited (a zombie left for a parent to reap counts as exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status
