"""Deep recursion against real TLC: given a large stack (``-Xss1g``; its default overflows a few hundred levels
down), TLC evaluates a recursive operator 6,000 levels deep and finds the invariant violation behind it, and so
does the embedded engine, with the same trace; runaway recursion is an evaluation error (exit 75) in both."""

from __future__ import annotations

import subprocess

from test_checker_deep_recursion import SPEC

from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import java_executable, parse_tool_output


def _model(tmp_path, n: int, invariant: str):
    (tmp_path / "R.tla").write_text(SPEC)
    (tmp_path / "R.cfg").write_text(f"CONSTANT N = {n}\nINIT Init\nNEXT Next\nINVARIANT {invariant}\n"
                                    f"CHECK_DEADLOCK FALSE\n")
    return tmp_path / "R.tla"


def _tlc(tmp_path, jar: str, stack: str = "-Xss1g"):
    done = subprocess.run([java_executable(), stack, "-cp", jar, "tlc2.TLC", "-tool", "-workers", "1",
                           "-metadir", str(tmp_path / "meta"), "-noTE", "-nowarning", "R.tla"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    return parse_tool_output(done.stdout, done.returncode)


def test_six_thousand_levels_deep_both_engines_find_the_same_violation(tmp_path, tlc_jar):
    spec = _model(tmp_path, 6000, "Small")
    tlc, embedded = _tlc(tmp_path, tlc_jar), check_model(spec)
    assert tlc.outcome is embedded.outcome is Outcome.SAFETY
    assert tlc.violation.name == embedded.violation.name == "Small"
    assert [s.values["x"] for s in tlc.violation.trace] == [s.values["x"] for s in embedded.violation.trace] == [0, 1, 2]
    assert tlc.distinct_states == embedded.distinct_states == 3


def test_runaway_recursion_is_an_evaluation_error_in_both(tmp_path, tlc_jar, monkeypatch):
    monkeypatch.setenv("KVEXACT_MAX_RECURSION", "2000")
    spec = _model(tmp_path, 1, "Runaway")
    tlc, embedded = _tlc(tmp_path, tlc_jar, "-Xss1m"), check_model(spec)  # a big stack takes TLC minutes to fill
    assert tlc.outcome is embedded.outcome is Outcome.EVALUATION and tlc.exit_code == embedded.exit_code == 75
    assert "StackOverflowError" in tlc.violation.message
    assert "the recursive operator Up was applied more than 2000 levels deep" in embedded.violation.message
