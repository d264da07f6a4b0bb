"""Ctrl-C during ``check``, ``check --mutants``, ``conform``, ``fuzz`` and ``gate``: exit 130, a line saying
what was done, and no half-written or stale report.

Each command runs in its own session; once it has printed a given line (so it is known to be at work),
SIGINT goes to its whole process group, as a terminal's Ctrl-C does. No test waits a fixed time. Each
command starts with SIGINT ignored, as a shell starts a background job, so the command must install its
own handler: the result is the same whether the test suite itself runs in the foreground or not.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from kvexact.spec import spec_dir


def interrupt_after(command: list[str], ready: str, cwd: Path) -> tuple[int, str]:
    """Start ``command``, send SIGINT to its process group once a line containing ``ready`` is printed;
    its exit code and its whole output (stdout and stderr, interleaved)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                            env=env, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if ready in line:
            break
    else:
        proc.wait()
        pytest.fail(f"{ready!r} never printed; exit {proc.returncode}: {''.join(seen)[-3000:]}")
    os.killpg(proc.pid, signal.SIGINT)
    rest = proc.stdout.read()
    return proc.wait(), "".join(seen) + rest


def kvexact(*args: str) -> list[str]:
    return [sys.executable, "-m", "kvexact.cli", *args]


def leftovers(folder: Path) -> list[str]:
    """Temporary files the atomic writer would leave if it were interrupted mid-write."""
    return sorted(p.name for p in folder.rglob("*.tmp"))


def test_check_stops_with_130_prints_its_statistics_and_a_json_saying_so(tmp_path):
    report = tmp_path / "r.json"
    code, out = interrupt_after(kvexact("check", str(spec_dir() / "KVAllocation.tla"), "--json", str(report)),
                                "Progress:", tmp_path)
    assert code == 130, out
    assert "INCOMPLETE" in out and "distinct states found" in out
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 130 and doc["complete"] is False
    assert "Traceback" not in out and leftovers(tmp_path) == []


def test_check_mutants_stops_with_130_and_no_kill_rate(tmp_path):
    code, out = interrupt_after(kvexact("check", "--mutants"), "killed", tmp_path)
    assert code == 130, out
    assert "Interrupted (Ctrl-C):" in out and "models judged before it" in out
    assert "Mutants killed:" not in out and "Traceback" not in out


def test_conform_stops_with_130_and_names_the_machine(tmp_path):
    code, out = interrupt_after(kvexact("conform", "--spec", "KVAllocation", "--spec", "Radix", "--examples",
                                        "100000", "--no-kernels"), "conform: KVAllocation machine", tmp_path)
    assert code == 130, out
    assert "conform: interrupted (Ctrl-C) in the KVAllocation machine; 0 of 2 machines done" in out
    assert "Traceback" not in out


def test_fuzz_stops_with_130_and_writes_nothing(tmp_path):
    out_dir = tmp_path / "failures"
    code, out = interrupt_after(kvexact("fuzz", "--minutes", "30", "--spec", "Revocation", "--examples-per-round",
                                        "2", "--out", str(out_dir)), "fuzz: round 1 ", tmp_path)
    assert code == 130, out
    assert "fuzz: interrupted (Ctrl-C) in round" in out and "no failure" in out
    assert not out_dir.exists() or list(out_dir.iterdir()) == []
    assert "Traceback" not in out


# One after another (--jobs 1; tests/gate/test_gate_parallel.py interrupts a gate running on two workers):
# a gate whose second check swallows Ctrl-C and reports a failure (as an engine reporting a partial search
# does) and whose third must never start.
GATE_SCRIPT = textwrap.dedent("""
    import signal, sys
    from kvexact.cli import main
    from kvexact.gate import checks, framework as g

    def swallowing(ctx):
        print("demo-swallow: started", flush=True)
        try:
            signal.pause()
        except KeyboardInterrupt:
            return g.CheckResult(g.Verdict.FAILED, detail="the search did not complete")

    def after(ctx):
        print("demo-after: ran", flush=True)
        return g.CheckResult(g.Verdict.PASSED)

    checks.CHECKS = (*checks.CHECKS[:1], g.GateCheck("demo-swallow", "test", "", swallowing),
                     g.GateCheck("demo-after", "test", "", after))
    main(["gate", "--select", "packaging-selftest,demo-swallow,demo-after", "--jobs", "1", "--json", sys.argv[1],
          "--junit", sys.argv[2]])
""")


def test_gate_stops_at_the_running_check_exits_130_and_replaces_the_old_reports(tmp_path):
    json_path, junit_path = tmp_path / "g.json", tmp_path / "g.xml"
    json_path.write_text('{"exit_code": 0, "stale": true}')
    junit_path.write_text("<testsuites/>")
    code, out = interrupt_after([sys.executable, "-c", GATE_SCRIPT, str(json_path), str(junit_path)],
                                "demo-swallow: started", tmp_path)
    assert code == 130, out
    assert "demo-after: ran" not in out
    assert "gate: interrupted (Ctrl-C) after 2 of 3 checks; not run: demo-after" in out and "-> exit 130" in out
    doc = json.loads(json_path.read_text())
    assert "stale" not in doc and doc["exit_code"] == 130 and doc["interrupted"] is True
    assert {c["name"]: c["verdict"] for c in doc["checks"]} == {"packaging-selftest": "passed",
                                                                 "demo-swallow": "interrupted"}
    assert doc["not_run"] == ["demo-after"]
    suite = ET.parse(junit_path).getroot().find("testsuite")
    assert suite is not None and (suite.get("tests"), suite.get("errors"), suite.get("skipped")) == ("3", "1", "1")
    assert leftovers(tmp_path) == []


def test_gate_interrupted_in_a_real_model_check_does_not_go_on(tmp_path):
    """The embedded checker turns Ctrl-C into a partial result; the gate must still stop there (one after
    another: with two workers, the check after it would already be running)."""
    json_path = tmp_path / "g.json"
    code, out = interrupt_after(kvexact("gate", "--level", "full", "--jobs", "1", "--select",
                                        "packaging-selftest,spec-KVAllocation,negative-registry",
                                        "--json", str(json_path)), "passed  packaging-selftest", tmp_path)
    assert code == 130, out
    doc = json.loads(json_path.read_text())
    assert doc["exit_code"] == 130 and doc["interrupted"] is True and doc["not_run"][-1] == "negative-registry"
    verdicts = {c["name"]: c["verdict"] for c in doc["checks"]}
    assert verdicts["packaging-selftest"] == "passed" and "negative-registry" not in verdicts
    # the signal lands in the model check (which must then not count as failed) or just before it starts
    assert verdicts.get("spec-KVAllocation", "interrupted") == "interrupted"
    assert len(doc["checks"]) + len(doc["not_run"]) == 3


def test_a_killed_gate_leaves_no_previous_report(tmp_path):
    """A run that dies without writing (SIGKILL) must not leave the last run's report looking current."""
    json_path = tmp_path / "g.json"
    json_path.write_text('{"exit_code": 0, "stale": true}')
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(kvexact("gate", "--level", "full", "--select", "packaging-selftest,spec-KVAllocation",
                                    "--json", str(json_path)), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=tmp_path, env=env)
    assert proc.stdout is not None
    for line in proc.stdout:
        if "passed  packaging-selftest" in line:
            break
    proc.kill()
    proc.communicate()
    assert not json_path.exists()


def test_check_removes_a_counterexample_left_by_an_earlier_run(tmp_path):
    """--itf names this run's counterexample or nothing: a clean run leaves no earlier file behind."""
    itf = tmp_path / "cex.itf.json"
    itf.write_text('{"states": []}')
    done = subprocess.run(kvexact("check", str(spec_dir() / "VirtualMapping.tla"), "--itf", str(itf)),
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not itf.exists()
