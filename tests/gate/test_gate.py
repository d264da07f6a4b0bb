"""The gate's verdict and exit-code logic with real registered checks, and its reports."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET

import pytest

from kvexact.gate import checks as gate_checks
from kvexact.gate import framework as gate
from kvexact.gate import packaging


def _passing(ctx):
    return gate.CheckResult(gate.Verdict.PASSED, {"states": 7})


def _failing(ctx):
    assert 1 + 1 == 3, "arithmetic broke"


def _cannot(ctx):
    raise gate.CheckCouldNotRun("needs a CUDA device")


@pytest.fixture()
def demo_module(monkeypatch):
    """Three real checks (pass, fail, could-not-run) and an optional one beside the packaging self-test,
    in the gate's list of checks."""
    demo = (
        gate.GateCheck("demo-pass", "test", "passes", _passing),
        gate.GateCheck("demo-fail", "test", "fails", _failing),
        gate.GateCheck("demo-cannot", "test", "cannot run", _cannot),
        gate.GateCheck("demo-optional", "test", "only when selected", _passing, default=False),
    )
    monkeypatch.setattr(gate_checks, "CHECKS", (*packaging.CHECKS, *demo))
    return demo



def test_exit_code_ordering():
    c = gate.GateCheck("x", "t", "", _passing)
    ok = gate.CheckOutcome(c, gate.CheckResult(gate.Verdict.PASSED), 0.0)
    bad = gate.CheckOutcome(c, gate.CheckResult(gate.Verdict.FAILED), 0.0)
    cnr = gate.CheckOutcome(c, gate.CheckResult(gate.Verdict.COULD_NOT_RUN), 0.0)
    assert gate.exit_code([ok]) == 0
    assert gate.exit_code([ok, cnr]) == 3
    assert gate.exit_code([ok, cnr, bad]) == 1
    assert gate.exit_code([]) == 0


def test_crash_is_a_failure_and_could_not_run_is_separate(demo_module):
    checks = {c.name: c for c in gate_checks.load_checks()}
    assert gate.run_check(checks["demo-pass"], gate.GateContext()).result.verdict is gate.Verdict.PASSED
    failed = gate.run_check(checks["demo-fail"], gate.GateContext()).result
    assert failed.verdict is gate.Verdict.FAILED and "arithmetic broke" in failed.detail
    cnr = gate.run_check(checks["demo-cannot"], gate.GateContext()).result
    assert cnr.verdict is gate.Verdict.COULD_NOT_RUN and "CUDA" in cnr.detail


def test_select_and_skip(demo_module):
    checks = gate_checks.load_checks()
    default = [c.name for c in gate.select_checks(checks)]
    assert "demo-optional" not in default and "demo-pass" in default
    assert [c.name for c in gate.select_checks(checks, ["demo-optional"])] == ["demo-optional"]
    assert "demo-fail" not in [c.name for c in gate.select_checks(checks, skip=["demo-fail"])]
    with pytest.raises(gate.UnknownCheck, match="nope"):
        gate.select_checks(checks, ["nope"])


@pytest.mark.parametrize(
    "select, expected",
    [("demo-pass", 0), ("demo-pass,demo-cannot", 3), ("demo-pass,demo-cannot,demo-fail", 1)],
)
def test_gate_command_exit_codes(demo_module, kvexact_cli, tmp_path, select, expected):
    code, out, _ = kvexact_cli(["gate", "--select", select, "--json", str(tmp_path / "r.json"),
                            "--junit", str(tmp_path / "r.xml")])
    assert code == expected
    assert "check" in out and "verdict" in out  # the summary table


def test_reports_contents(demo_module, kvexact_cli, tmp_path):
    code, _, _ = kvexact_cli(["gate", "--skip", "demo-pass", "--seed", "41", "--json", str(tmp_path / "r.json"),
                          "--junit", str(tmp_path / "r.xml")])
    assert code == 1
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["schema_version"] == 1 and doc["exit_code"] == 1 and doc["seeds"]["base"] == 41
    assert doc["versions"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert doc["versions"]["dependencies"]["attrs"]
    verdicts = {c["name"]: c["verdict"] for c in doc["checks"]}
    assert verdicts == {"packaging-selftest": "passed", "demo-fail": "failed", "demo-cannot": "could not run"}
    suite = ET.parse(tmp_path / "r.xml").getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["demo-fail"].find("failure") is not None
    assert cases["demo-cannot"].find("skipped") is not None
    assert cases["packaging-selftest"].find("failure") is None


def test_bad_gate_input_is_one_line(demo_module, kvexact_cli, tmp_path):
    code, _, err = kvexact_cli(["gate", "--select", "no-such-check"])
    assert code == 2 and err.count("\n") == 1 and "no-such-check" in err
    code, _, err = kvexact_cli(["gate", "--json", str(tmp_path / "missing" / "r.json")])
    assert code == 2 and err.count("\n") == 1 and "cannot write report" in err
    code, _, err = kvexact_cli(["gate", "--junit", str(tmp_path)])
    assert code == 2 and "directory" in err


def test_duplicate_check_names_rejected(monkeypatch):
    monkeypatch.setattr(gate_checks, "CHECKS", (gate.GateCheck("same", "t", "", _passing),
                                           gate.GateCheck("same", "t", "", _passing)))
    with pytest.raises(ValueError, match="duplicate gate check names: same"):
        gate_checks.load_checks()
