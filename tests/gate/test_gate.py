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
        gate.GateCheck("demo-optional", "test", "full level or when selected", _passing, level="full"),
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
    assert "demo-optional" in [c.name for c in gate.select_checks(checks, level="full")]
    assert "demo-optional" in [c.name for c in gate.select_checks(checks, level="deep")]
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
    assert doc["level"] == "quick" and doc["interrupted"] is False and doc["not_run"] == []
    fail = next(c for c in doc["checks"] if c["name"] == "demo-fail")
    assert {"states", "examples", "seconds", "level"} <= set(fail) and fail["level"] == "quick"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "r.xml"]  # no temporary file left
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
    for empty in ("", "demo-pass,", " "):
        code, out, err = kvexact_cli(["gate", "--select", empty])
        assert code == 2 and err.count("\n") == 1 and "--select got an empty check name" in err, (empty, err)
        assert "verdict" not in out  # nothing ran
    code, _, err = kvexact_cli(["gate", "--skip", ""])
    assert code == 2 and "--skip got an empty check name" in err
    code, _, err = kvexact_cli(["gate", "--level", "nightly"])
    assert code == 2 and "nightly" in err
    code, _, err = kvexact_cli(["gate", "--json", str(tmp_path / "missing" / "r.json")])
    assert code == 2 and err.count("\n") == 1 and "cannot write report" in err
    code, _, err = kvexact_cli(["gate", "--junit", str(tmp_path)])
    assert code == 2 and "directory" in err


def test_duplicate_check_names_rejected(monkeypatch):
    monkeypatch.setattr(gate_checks, "CHECKS", (gate.GateCheck("same", "t", "", _passing),
                                           gate.GateCheck("same", "t", "", _passing)))
    with pytest.raises(ValueError, match="duplicate gate check names: same"):
        gate_checks.load_checks()


def test_level_chooses_the_checks_and_the_report_says_which(demo_module, kvexact_cli, tmp_path):
    code, out, _ = kvexact_cli(["gate", "--level", "full", "--skip", "demo-fail,demo-cannot",
                                "--json", str(tmp_path / "r.json")])
    assert code == 0, out
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["level"] == "full"
    assert [c["name"] for c in doc["checks"]] == ["packaging-selftest", "demo-pass", "demo-optional"]
    pass_row = next(c for c in doc["checks"] if c["name"] == "demo-pass")
    assert pass_row["states"] == 0 and pass_row["examples"] == 0 and pass_row["seconds"] >= 0


def test_list_shows_each_checks_level(demo_module, kvexact_cli):
    code, out, _ = kvexact_cli(["gate", "--list"])
    assert code == 0
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip()}
    assert rows["demo-optional"] == "full" and rows["demo-pass"] == "quick"


def test_states_and_examples_reach_the_report(monkeypatch, kvexact_cli, tmp_path):
    def counted(ctx):
        return gate.CheckResult(gate.Verdict.PASSED, states=1234, examples=56)

    monkeypatch.setattr(gate_checks, "CHECKS", (gate.GateCheck("demo-counted", "test", "", counted),))
    code, out, _ = kvexact_cli(["gate", "--json", str(tmp_path / "r.json"), "--junit", str(tmp_path / "r.xml")])
    assert code == 0 and "1,234" in out
    row = json.loads((tmp_path / "r.json").read_text())["checks"][0]
    assert (row["states"], row["examples"]) == (1234, 56)


def test_a_previous_report_is_replaced_never_left_beside_a_new_run(demo_module, kvexact_cli, tmp_path):
    (tmp_path / "r.json").write_text('{"stale": true}')
    (tmp_path / "r.xml").write_text("stale")
    code, _, _ = kvexact_cli(["gate", "--select", "demo-pass", "--json", str(tmp_path / "r.json"),
                              "--junit", str(tmp_path / "r.xml")])
    assert code == 0
    assert json.loads((tmp_path / "r.json").read_text())["exit_code"] == 0
    assert ET.parse(tmp_path / "r.xml").getroot().find("testsuite") is not None


def test_gate_script_writes_a_relative_report_in_the_callers_folder(tmp_path):
    """scripts/gate.sh runs from anywhere; --json rel.json lands in the folder it was called from."""
    import subprocess
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "gate.sh"
    done = subprocess.run(["bash", str(script), "--select", "packaging-selftest", "--json", "rel.json"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads((tmp_path / "rel.json").read_text())["exit_code"] == 0
    assert not (script.parents[1] / "rel.json").exists()
