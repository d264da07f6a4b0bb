"""``kvexact fuzz --workers`` / ``--scheduler``: a real Dask campaign, its counters in headless Chromium,
Ctrl-C, a killed worker, a shared Redis database across two campaigns, and life without the extra."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from campaign_helpers import LEAKY, gone

from kvexact.conformance.campaign_db import redis_database

FAST = ["--no-kernels", "--steps", "20"]


def chromium():
    """Headless Chromium from the Debian packages, driven by Selenium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path="/usr/bin/chromedriver"), options=options)


def page_number(driver, element_id: str) -> float:
    return float(driver.find_element("id", element_id).text or 0)


def wait_in_browser(driver, test, what: str, tries: int = 600) -> None:
    for _ in range(tries):
        if test():
            return
        time.sleep(0.1)
    pytest.fail(f"the page never showed {what}: {driver.find_element('tag name', 'body').text}")


@pytest.mark.slow
def test_counters_move_in_a_real_browser_and_ctrl_c_stops_every_worker(campaign, tmp_path):
    import signal

    report = tmp_path / "report.json"
    run = campaign("--minutes", "10", "--workers", "2", "--spec", "Revocation", "--examples-per-round", "5",
                   "--db", str(tmp_path / "db"), "--report", str(report), *FAST)
    driver = chromium()
    try:
        driver.get(run.page)
        assert driver.title == "kvexact fuzzing campaign"
        wait_in_browser(driver, lambda: page_number(driver, "examples") > 0, "examples")
        first_examples, first_steps = page_number(driver, "examples"), page_number(driver, "steps")
        wait_in_browser(driver, lambda: page_number(driver, "examples") > first_examples
                        and page_number(driver, "steps") > first_steps, "the counters moving")
        wait_in_browser(driver, lambda: "Revocation" in driver.find_element("id", "machines").text,
                        "the Revocation machine's rules")
        row = driver.find_element("id", "machine-Revocation").text
        assert "/2" in row, row  # Revocation's two rules
        assert page_number(driver, "failures") == 0 and page_number(driver, "steps_per_second") >= 0
    finally:
        driver.quit()
    import os

    os.killpg(run.proc.pid, signal.SIGINT)
    code, out = run.finish()
    assert code == 130, out
    assert "fuzz: campaign interrupted (Ctrl-C)" in out and "Traceback" not in out
    doc = json.loads(report.read_text())
    assert doc["interrupted"] is True and doc["examples"] >= first_examples
    for _ in range(100):
        if all(gone(pid) for pid in run.pids):
            break
        time.sleep(0.1)
    assert all(gone(pid) for pid in run.pids), run.pids


@pytest.mark.slow
def test_a_killed_worker_and_a_lost_shared_database_lose_no_failure(campaign, tmp_path, redis_url):
    """Two faults at once: a worker dies with its slice in flight (Dask runs the slice again, the report
    counts the restart) and the shared database goes away (named in one line; the local database keeps the
    failure). The failure is still found and written."""
    import os
    import signal

    url, server = redis_url
    out_dir = tmp_path / "failures"
    report = tmp_path / "report.json"
    run = campaign("--minutes", "5", "--workers", "2", "--spec", "Radix", "--adapter", LEAKY, "--no-shrink",
                   "--examples-per-round", "200", "--db", str(tmp_path / "db"), "--shared-db", url, "--out",
                   str(out_dir), "--report", str(report), *FAST)
    counters = run.wait_for(lambda c: c["slices"] >= 2 and c["failures"] == 0, "two slices running")
    assert counters["restarts"] == 0
    server.kill()
    os.kill(run.pids[0], signal.SIGKILL)  # one worker dies with its slice in flight
    code, out = run.finish()
    assert code == 1, out
    assert "1 restarts" in out and "restarted after a lost worker: slice" in out, out
    assert json.loads(report.read_text())["restarts"] == 1
    assert list(out_dir.glob("test_repro_Radix_*.py"))  # one per distinct failing example
    assert "faulty-leaky-cancel" in out
    assert f"the shared database {url} stopped answering" in out and "ConnectionError" in out, out
    assert [p for p in (tmp_path / "db").rglob("*") if p.is_file()]  # the failure, kept locally


@pytest.mark.slow
def test_a_failure_shared_through_redis_is_replayed_first_by_the_next_campaign(campaign, tmp_path, redis_url,
                                                                               free_port):
    """Two "hosts": a scheduler and a worker started as the docs say, and a second campaign with an empty
    local database; then a developer reads the shared failures read-only."""
    url, _ = redis_url
    port = free_port()
    cluster = [subprocess.Popen([sys.executable, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port",
                                 str(port), "--dashboard-address", ":0"], cwd=tmp_path,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    cluster.append(subprocess.Popen([sys.executable, "-m", "dask", "worker", f"tcp://127.0.0.1:{port}", "--nworkers",
                                     "1", "--nthreads", "1", "--no-dashboard"], cwd=tmp_path,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    try:
        time.sleep(1)
        common = ["--spec", "Radix", "--adapter", LEAKY, "--no-shrink", "--minutes", "5", "--shared-db", url, *FAST]
        first = campaign("--scheduler", f"tcp://127.0.0.1:{port}", "--db", str(tmp_path / "hostA"),
                         "--examples-per-round", "200", "--out", str(tmp_path / "outA"), *common)
        code, out = first.finish()
        assert code == 1 and "faulty-leaky-cancel" in out, out
        shared = redis_database(url)
        stored = shared.redis.dbsize()  # type: ignore[attr-defined]
        assert stored > 0
        # the second campaign: an empty local database, a seed whose single example finds nothing by itself
        second = campaign("--scheduler", f"tcp://127.0.0.1:{port}", "--db", str(tmp_path / "hostB"), "--seed",
                          "12345", "--examples-per-round", "1", "--out", str(tmp_path / "outB"), *common)
        code, out = second.finish()
        assert code == 1 and "faulty-leaky-cancel" in out and "examples=2 " in out, out
    finally:
        for proc in reversed(cluster):
            proc.terminate()
            proc.wait(30)
    # a developer: a local database plus the shared one read only (this seed's single example finds nothing
    # by itself: test_campaign_db's control)
    dev = [sys.executable, "-m", "kvexact.cli", "fuzz", "--spec", "Radix", "--adapter", LEAKY, "--no-shrink",
           "--minutes", "2", "--seed", "12345", "--examples-per-round", "1", *FAST]
    replay = subprocess.run([*dev, "--db", str(tmp_path / "dev"), "--read-db", url, "--out", str(tmp_path / "outD")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert replay.returncode == 1 and "faulty-leaky-cancel" in replay.stdout + replay.stderr
    assert shared.redis.dbsize() == stored  # type: ignore[attr-defined]  # read only: nothing written there


def test_without_dask_workers_and_scheduler_name_the_extra_and_plain_fuzz_runs(kvexact_cli, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    for option in (["--workers", "2"], ["--scheduler", "tcp://127.0.0.1:8786"]):
        code, text = kvexact_cli(["fuzz", "--minutes", "1", "--spec", "Revocation", *option]).code_and_text
        assert code == 2, text
        assert text.strip().count("\n") == 0 and "pip install 'kvexact[campaign]'" in text, text
    code, text = kvexact_cli(["fuzz", "--minutes", "0.02", "--spec", "Revocation", "--examples-per-round", "1",
                              "--db", str(tmp_path / "db"), *FAST]).code_and_text
    assert code == 0 and "fuzz: no failure" in text, text


def test_workers_and_scheduler_together_and_a_dead_shared_database_are_one_line_errors(kvexact_cli, free_port):
    code, text = kvexact_cli(["fuzz", "--minutes", "1", "--workers", "2", "--scheduler", "tcp://x:1"]).code_and_text
    assert code == 2 and "give one" in text
    dead = f"redis://127.0.0.1:{free_port()}"
    code, text = kvexact_cli(["fuzz", "--minutes", "1", "--spec", "Revocation", "--shared-db", dead]).code_and_text
    assert code == 3 and f"shared database {dead} does not answer" in text and text.strip().count("\n") == 0, text
