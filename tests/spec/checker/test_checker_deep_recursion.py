"""Deep recursion: a recursive operator thousands of levels deep evaluates (TLC evaluates it given the
stack), so an invariant violation behind it is found; runaway recursion (F(n) == F(n + 1)) ends in a
TLA+-style error naming the operator and the bound (exit 75), within the configured bound, never a hang
or a Python RecursionError."""

from __future__ import annotations

from click.testing import CliRunner

from kvexact.cli.check import check
from kvexact.spec.checker.deepstack import ENV, RecursionTooDeep
from kvexact.spec.checker.engine import check_model
from kvexact.spec.checker.model import evaluate
from kvexact.spec.checker.result import Outcome

SPEC = """---- MODULE R ----
EXTENDS Naturals
CONSTANT N
RECURSIVE Sum(_), Up(_)
Sum(n) == IF n = 0 THEN 0 ELSE n + Sum(n - 1)
Up(n) == Up(n + 1)
VARIABLE x
Init == x = 0
Next == x < 3 /\\ x' = x + 1
Small == Sum(N + x) < Sum(N + 2)
Runaway == x < 1 \\/ Up(x) = 0
====
"""


def _write(tmp_path, n: int, invariant: str):
    (tmp_path / "R.tla").write_text(SPEC)
    (tmp_path / "R.cfg").write_text(f"CONSTANT N = {n}\nINIT Init\nNEXT Next\nINVARIANT {invariant}\n"
                                    f"CHECK_DEADLOCK FALSE\n")
    return tmp_path / "R.tla"


def test_recursion_thousands_deep_finds_the_violation(tmp_path):
    """Sum(6000 + x): the invariant fails in the third state (x = 2), as plain arithmetic says."""
    res = check_model(_write(tmp_path, 6000, "Small"))
    assert res.outcome is Outcome.SAFETY and res.violation.name == "Small"
    assert [s.values["x"] for s in res.violation.trace] == [0, 1, 2]


def test_runaway_recursion_is_a_named_error_with_exit_75(tmp_path):
    spec = _write(tmp_path, 1, "Runaway")
    res = CliRunner().invoke(check, [str(spec), "--engine", "embedded"], standalone_mode=False)
    assert res.return_value == 75
    assert "the recursive operator Up was applied more than 20000 levels deep" in res.output
    assert "RecursionError" not in res.output


def test_the_bound_is_configurable(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "500")
    res = check_model(_write(tmp_path, 600, "Small"))  # Sum(600) needs 600 levels: over the bound
    assert res.outcome is Outcome.EVALUATION
    assert "Sum was applied more than 500 levels deep" in res.violation.message
    monkeypatch.setenv(ENV, "700")
    assert check_model(_write(tmp_path, 600, "Small")).outcome is Outcome.SAFETY


def test_evaluate_runaway_raises_the_named_error():
    try:
        evaluate("Up(0)", defs="RECURSIVE Up(_)\nUp(n) == Up(n + 1)")
    except RecursionTooDeep as exc:
        assert "Up" in str(exc)
    else:
        raise AssertionError("runaway recursion evaluated")
