"""The adapter guard in campaigns: an adapter that ends the process fails a Dask campaign and a fuzz run
with a shared Redis database (exit 1, the call named, a reproduction), as it fails a plain run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

DIES = textwrap.dedent("""\
    import os
    from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
    class Dies(SimpleRuntimeAllocator):
        def start(self, request_id, prompt):
            if len(prompt) >= 3:
                os._exit(0)
            return super().start(request_id, prompt)
    def factory(config):
        return Dies(config)
    """)
FEW = ["--spec", "KVAllocation", "--no-kernels", "--examples-per-round", "10", "--steps", "10"]


def _dying_module(tmp_path, name: str) -> None:
    (tmp_path / f"{name}.py").write_text(DIES, encoding="utf-8")


def _assert_named_death(code: int, out: str, name: str, out_dir) -> None:
    assert code == 1, out
    line = next((ln for ln in out.splitlines() if ln.startswith("AdapterFaultError: ")), "")
    assert "PROCESS_ENDED" in line and f"--adapter {name}:factory" in line and "start('r" in line, out
    assert list(out_dir.glob("test_repro_KVAllocation_*.py")), out
    assert "KilledWorker" not in out and "Traceback" not in out, out


def test_an_adapter_that_ends_a_campaign_workers_process_fails_the_campaign(campaign, tmp_path, monkeypatch):
    """Before the guard reached campaign workers, Dask lost the worker four times and gave up: exit 3,
    KilledWorker, no call named."""
    _dying_module(tmp_path, "dies_in_worker")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])))
    out_dir = tmp_path / "failures"
    run = campaign("--minutes", "2", "--workers", "1", "--adapter", "dies_in_worker:factory", *FEW,
                   "--db", str(tmp_path / "db"), "--out", str(out_dir))
    code, out = run.finish()
    _assert_named_death(code, out, "dies_in_worker", out_dir)
    assert "0 restarts" in out, out


def test_an_adapter_that_ends_the_process_fails_fuzz_with_a_shared_database(tmp_path, redis_url):
    """Before, a run whose database was the shared Redis one was not forked: the adapter's ``os._exit(0)``
    ended ``kvexact fuzz`` with exit 0 and no output."""
    url, _ = redis_url
    _dying_module(tmp_path, "dies_shared")
    out_dir = tmp_path / "failures"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-m", "kvexact.cli", "fuzz", "--minutes", "1", "--adapter",
                        "dies_shared:factory", *FEW, "--db", str(tmp_path / "db"), "--shared-db", url,
                        "--out", str(out_dir)], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env)
    _assert_named_death(r.returncode, r.stdout + r.stderr, "dies_shared", out_dir)


def test_a_spawned_run_reaches_the_shared_database_and_a_gone_one_stays_gone(tmp_path, redis_url, monkeypatch):
    """With a CUDA context open the run is spawned: the shared database travels as its address (the child
    connects again) and the failure the child finds is in Redis; a shared database already gone travels as
    its error. A bare Redis database (Python API) cannot travel, so such a run is not spawned."""
    import pickle

    import redis
    from hypothesis import settings
    from hypothesis.extra.redis import RedisExampleDatabase

    from kvexact.conformance import guard
    from kvexact.conformance.campaign_db import campaign_database
    from kvexact.conformance.fork_state import can_fork_with
    from kvexact.conformance.runner import run_machine

    url, server = redis_url
    (tmp_path / "raises_spawned.py").write_text(DIES.replace("os._exit(0)", "raise ValueError('no room')"),
                                                encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(guard, "cuda_open", lambda: True)
    database, shared = campaign_database(tmp_path / "local", shared=url)
    few = settings(max_examples=10, stateful_step_count=10, deadline=None, database=database)
    run = run_machine("KVAllocation", "raises_spawned:factory", few, seed=3, check_kernels=False)
    assert not run.passed and run.error.startswith("ValueError: no room"), run.error
    assert shared is not None and shared.error == ""
    assert redis.Redis.from_url(url).dbsize() > 0  # the spawned child wrote the failure there
    server.kill()
    server.wait()
    shared.error = "ConnectionError: gone"
    again = pickle.loads(pickle.dumps(shared))
    assert again.error == "ConnectionError: gone" and list(again.fetch(b"k")) == []
    assert not can_fork_with(RedisExampleDatabase(redis.Redis.from_url(url)), spawn=True)
    assert can_fork_with(RedisExampleDatabase(redis.Redis.from_url(url)), spawn=False)
