"""The gate on several worker processes (``--jobs``): the same verdicts, reports and exit code as one after
another, in registry order; a worker that dies or cannot load its check fails that check by name; Ctrl-C
interrupts the running checks and starts no other; a check's status lines reach the gate.

The demo checks are module-level functions here, so a spawned worker imports this module to unpickle them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kvexact.gate import checks as gate_checks
from kvexact.gate import framework as gate
from kvexact.gate import packaging, parallel

HERE = Path(__file__).resolve().parent


def passing(ctx):
    return gate.CheckResult(gate.Verdict.PASSED, {"pid": os.getpid()}, examples=3)


def failing(ctx):
    assert ctx.level == "quick" and ctx.seed == 5, "the worker's context is not the gate's"
    return gate.CheckResult(gate.Verdict.FAILED, detail="planted failure")


def cannot(ctx):
    raise gate.CheckCouldNotRun("needs a CUDA device")


def dies(ctx):
    os._exit(7)


def says(ctx):
    ctx.status("halfway")
    return gate.CheckResult(gate.Verdict.PASSED)


DEMO = (gate.GateCheck("demo-pass", "test", "", passing), gate.GateCheck("demo-fail", "test", "", failing),
        gate.GateCheck("demo-cannot", "test", "", cannot), gate.GateCheck("demo-pass-too", "test", "", passing))


@pytest.fixture()
def registry(monkeypatch):
    def use(*demo):
        monkeypatch.setattr(gate_checks, "CHECKS", (*packaging.CHECKS, *demo))

    return use


def _report(kvexact_cli, tmp_path, name, *args):
    code, out, _ = kvexact_cli(["gate", "--seed", "5", "--json", str(tmp_path / name), *args])
    return code, out, json.loads((tmp_path / name).read_text())


def test_two_jobs_give_the_verdicts_order_and_exit_code_of_one(registry, kvexact_cli, tmp_path):
    registry(*DEMO)
    one = _report(kvexact_cli, tmp_path, "one.json", "--jobs", "1")
    two = _report(kvexact_cli, tmp_path, "two.json", "--jobs", "2")
    assert one[0] == two[0] == 1, (one[1], two[1])
    rows = [[(c["name"], c["verdict"], c["examples"]) for c in doc["checks"]] for _, _, doc in (one, two)]
    assert rows[0] == rows[1] == [("packaging-selftest", "passed", 0), ("demo-pass", "passed", 3),
                                  ("demo-fail", "failed", 0), ("demo-cannot", "could not run", 0),
                                  ("demo-pass-too", "passed", 3)]
    assert one[2]["jobs"] == 1 and two[2]["jobs"] == 2 and "2 jobs at once" in two[1]
    pids = {c["figures"]["pid"] for c in two[2]["checks"] if c["name"].startswith("demo-pass")}
    assert os.getpid() not in pids  # ran in workers, not in this process
    assert next(c for c in one[2]["checks"] if c["name"] == "demo-pass")["figures"]["pid"] == os.getpid()


def test_jobs_are_capped_by_the_checks_chosen(registry, kvexact_cli, tmp_path):
    registry(*DEMO)
    code, _, doc = _report(kvexact_cli, tmp_path, "r.json", "--jobs", "8", "--select", "demo-pass,demo-pass-too")
    assert code == 0 and doc["jobs"] == 2
    code, _, doc = _report(kvexact_cli, tmp_path, "r.json", "--jobs", "8", "--select", "demo-pass")
    assert code == 0 and doc["jobs"] == 1


def test_jobs_below_one_is_a_usage_error(kvexact_cli):
    code, _, err = kvexact_cli(["gate", "--jobs", "0"])
    assert code == 2 and "--jobs" in err


def test_a_worker_that_dies_fails_its_check_by_name_and_the_others_run(registry, kvexact_cli, tmp_path):
    registry(gate.GateCheck("demo-dies", "test", "", dies), *DEMO[:1], DEMO[3])
    code, out, doc = _report(kvexact_cli, tmp_path, "r.json", "--jobs", "2")
    assert code == 1, out
    verdicts = {c["name"]: (c["verdict"], c["detail"]) for c in doc["checks"]}
    assert verdicts["demo-dies"] == ("failed", "the worker process running it ended (exit code 7)")
    assert verdicts["demo-pass"][0] == verdicts["demo-pass-too"][0] == verdicts["packaging-selftest"][0] == "passed"


def test_a_check_the_worker_cannot_load_fails_by_name(registry, kvexact_cli, tmp_path):
    """A check built by a closure does not pickle; the worker looks it up in its own registry, where a
    check made up in this process is missing."""
    registry(gate.GateCheck("demo-closure", "test", "", lambda ctx: gate.CheckResult(gate.Verdict.PASSED)),
             DEMO[0])
    code, out, doc = _report(kvexact_cli, tmp_path, "r.json", "--jobs", "2")
    assert code == 1, out
    closure = next(c for c in doc["checks"] if c["name"] == "demo-closure")
    assert closure["verdict"] == "failed"
    assert "no check named 'demo-closure' in the registry; run with --jobs 1" in closure["detail"]


def test_a_registered_closure_check_runs_in_a_worker_by_name():
    """The spec checks are closures: the worker takes them from its own registry."""
    check = next(c for c in gate_checks.load_checks() if c.name == "spec-VirtualMapping")
    outcomes = parallel.run_checks([check, DEMO[0]], gate.GateContext(), 2)
    assert [o.result.verdict for o in outcomes] == [gate.Verdict.PASSED, gate.Verdict.PASSED], outcomes
    assert outcomes[0].result.states > 0


def test_status_lines_reach_the_gate():
    seen: list[tuple[str, str]] = []
    outcomes = parallel.run_checks([gate.GateCheck("demo-says", "test", "", says), DEMO[0]], gate.GateContext(), 2,
                                   status=lambda check, text: seen.append((check.name, text)))
    assert [o.result.verdict for o in outcomes] == [gate.Verdict.PASSED] * 2
    assert seen == [("demo-says", "halfway")]


# Two checks that wait for Ctrl-C, then one that must never start; SIGINT goes to the gate's process group,
# as a terminal's does (the workers lead groups of their own: the gate passes it on).
WAITING = textwrap.dedent("""
    import signal, sys
    sys.path.insert(0, sys.argv[3])
    from kvexact.cli import main
    from kvexact.gate import checks, framework as g
    from test_gate_parallel import after, waits_a, waits_b

    checks.CHECKS = (g.GateCheck("demo-wait-a", "test", "", waits_a), g.GateCheck("demo-wait-b", "test", "", waits_b),
                     g.GateCheck("demo-after", "test", "", after))
    main(["gate", "--jobs", "2", "--json", sys.argv[1], "--junit", sys.argv[2]])
""")


def _waits(name):
    print(f"{name}: started", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        return gate.CheckResult(gate.Verdict.FAILED, detail="the search did not complete")
    return gate.CheckResult(gate.Verdict.PASSED)


def waits_a(ctx):
    return _waits("demo-wait-a")


def waits_b(ctx):
    return _waits("demo-wait-b")


def after(ctx):
    print("demo-after: ran", flush=True)
    return gate.CheckResult(gate.Verdict.PASSED)


def test_ctrl_c_interrupts_the_running_checks_and_starts_no_other(tmp_path):
    json_path, junit_path = tmp_path / "g.json", tmp_path / "g.xml"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    proc = subprocess.Popen([sys.executable, "-c", WAITING, str(json_path), str(junit_path), str(HERE)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=env,
                            start_new_session=True)
    assert proc.stdout is not None
    seen: list[str] = []
    for line in proc.stdout:
        seen.append(line)
        if sum(": started" in s for s in seen) == 2:
            break
    else:
        proc.wait()
        pytest.fail(f"both checks never started; exit {proc.returncode}: {''.join(seen)[-3000:]}")
    # a SIGINT landing before signal.pause() interrupts the check as well: its verdict is the same
    os.killpg(proc.pid, signal.SIGINT)
    out = "".join(seen) + proc.stdout.read()
    assert proc.wait() == 130, out
    assert "demo-after: ran" not in out
    assert "gate: interrupted (Ctrl-C) after 2 of 3 checks; not run: demo-after" in out
    doc = json.loads(json_path.read_text())
    assert doc["interrupted"] is True and doc["exit_code"] == 130 and doc["not_run"] == ["demo-after"]
    assert {c["name"]: c["verdict"] for c in doc["checks"]} == {"demo-wait-a": "interrupted",
                                                                 "demo-wait-b": "interrupted"}


def test_bench_gate_times_each_jobs_setting_and_prints_the_ratio(kvexact_cli, tmp_path):
    report = tmp_path / "bench.json"
    code, out, err = kvexact_cli(["bench", "gate", "--select", "formulas-golden,reference-seed", "--jobs", "1,2",
                                  "--rounds", "1", "--json", str(report)])
    assert code == 0, out + err
    doc = json.loads(report.read_text())
    assert [r["jobs"] for r in doc["runs"]] == [1, 2]
    assert all(r["exit_code"] == 0 and r["verdicts"] == {"passed": 2} and r["wall_s"] > 0 for r in doc["runs"])
    assert doc["ratio"]["1"] == 1.0 and "ratio to --jobs 1" in out


def test_bench_gate_rejects_a_jobs_list_by_name(kvexact_cli):
    code, _, err = kvexact_cli(["bench", "gate", "--jobs", "1,0"])
    assert code == 2 and "Invalid value for '--jobs'" in err and "at least 1" in err


def test_checks_left_when_every_worker_is_gone_fail_by_name():
    """One worker that dies on its first check: the checks after it cannot run, and must not pass unnoticed."""
    outcomes = parallel.run_checks([gate.GateCheck("demo-dies", "test", "", dies), *DEMO[:1]], gate.GateContext(), 1)
    assert [(o.check.name, o.result.verdict, o.result.detail) for o in outcomes] == [
        ("demo-dies", gate.Verdict.FAILED, "the worker process running it ended (exit code 7)"),
        ("demo-pass", gate.Verdict.FAILED, "no worker was left to run it")]
