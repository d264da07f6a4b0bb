"""Bad input is reported with file:line:col, the right TLC exit code, and (for evaluation errors) the trace
that reached the error."""

from __future__ import annotations

import re

import pytest
from tla_snippets import NOLOCK, write_spec  # noqa: E402

from kvexact.spec.checker import check_model
from kvexact.spec.checker.cfg import ConfigError, parse_cfg_text
from kvexact.spec.checker.result import Outcome


def test_parse_error_has_location(tmp_path):
    spec = tmp_path / "Bad.tla"
    spec.write_text("---- MODULE Bad ----\nVARIABLE x\nInit == x = = 1\n====\n")
    (tmp_path / "Bad.cfg").write_text("INIT Init\nNEXT Init\n")
    r = check_model(spec)
    assert r.outcome is Outcome.PARSE and r.exit_code == 150
    assert f"{spec}:3:13" in r.violation.message


def test_undefined_identifier(tmp_path):
    r = check_model(write_spec(tmp_path, "VARIABLE x\nInit == x = Missing\nNext == UNCHANGED x", NOLOCK))
    assert r.exit_code == 150
    assert re.search(r"M\.tla:4:13: undefined identifier Missing", r.violation.message)


def test_unsupported_construct_is_named(tmp_path):
    r = check_model(write_spec(tmp_path, "VARIABLE x\nInit == x = CHOOSE y : y = 1\nNext == UNCHANGED x", NOLOCK))
    assert r.exit_code == 75 and r.violation.kind == "unsupported"
    assert "unbounded CHOOSE" in r.violation.message and "M.tla:4:13" in r.violation.message


@pytest.mark.parametrize("cfg,message", [
    ("INIT Init\nNEXT Next\nINVARIANT Missing\n", "cfg:3:11: INVARIANT Missing is not defined"),
    ("INIT Init\nNEXT Next\nCONSTANT Foo <- Bar\n", "Bar is not defined"),
    ("INIT Nope\nNEXT Next\n", "INIT Nope is not defined"),
])
def test_config_errors(tmp_path, cfg, message):
    r = check_model(write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x", cfg))
    assert r.outcome is Outcome.CONFIG and r.exit_code == 151
    assert message in r.violation.message


def test_cfg_grammar():
    cfg = parse_cfg_text("\\* comment\n(* block *)\nCONSTANTS\n  N = 3 S = {a, {b}} T = \"t\" B = TRUE\n"
                         "  Seq <- Bounded\nINVARIANTS I1 I2\nINVARIANT I3\nSPECIFICATION Spec\n"
                         "CHECK_DEADLOCK FALSE\n")
    assert cfg.constants["N"] == 3 and cfg.constants["T"] == "t" and cfg.constants["B"] is True
    assert cfg.overrides == {"Seq": "Bounded"} and cfg.invariants == ["I1", "I2", "I3"]
    assert cfg.check_deadlock is False and cfg.specification == "Spec"
    with pytest.raises(ConfigError, match="excludes INIT"):
        parse_cfg_text("SPECIFICATION S\nINIT I\n")
    with pytest.raises(ConfigError, match=r"<cfg>:1:1: unexpected"):
        parse_cfg_text("Foo\n")


def test_incomplete_successor_with_trace(tmp_path):
    r = check_model(write_spec(tmp_path, "VARIABLES x, y\nInit == x = 0 /\\ y = 0\nNext == x' = 1", NOLOCK))
    assert r.exit_code == 75
    assert "not completely specified" in r.violation.message and "no value for y" in r.violation.message
    assert len(r.violation.trace) == 1


@pytest.mark.parametrize("next_body,message", [
    ("x' = CHOOSE v \\in 1..3 : v > 5", "CHOOSE: no element"),
    ("x' = [i \\in 0..1 |-> i][x + 1]", "outside its domain"),
    ("x' = x + 1 /\\ x = \"a\"", "attempted to compare"),
])
def test_evaluation_error_with_trace(tmp_path, next_body, message):
    """The error happens when x = 1 is expanded (depth 2): the trace shows the 2 states that reach it."""
    body = f"VARIABLE x\nInit == x = 0\nNext == IF x = 0 THEN x' = 1 ELSE ({next_body})"
    r = check_model(write_spec(tmp_path, body, NOLOCK))
    assert r.outcome is Outcome.EVALUATION and r.exit_code == 75
    assert message in r.violation.message
    assert re.search(r"M\.tla:\d+:\d+", r.violation.message)
    assert [s.values["x"] for s in r.violation.trace] == [0, 1]


def test_false_assumption_exit_10(tmp_path):
    r = check_model(write_spec(tmp_path, "CONSTANT N\nASSUME N > 5\nVARIABLE x\nInit == x = N\nNext == UNCHANGED x",
                               NOLOCK + "CONSTANT N = 3\n"))
    assert r.outcome is Outcome.ASSUMPTION and r.exit_code == 10


def test_undefined_identifier_in_an_unused_definition(tmp_path):
    """SANY rejects the module even if the definition is never used by the model."""
    r = check_model(write_spec(tmp_path, "VARIABLE x\nInit == x = 0\nNext == UNCHANGED x\nUnused == y + 1", NOLOCK))
    assert r.exit_code == 150 and "undefined identifier y" in r.violation.message and "M.tla:6:11" in r.violation.message


def test_assert_failure_exit_14(tmp_path):
    """Assert(FALSE, msg) in an action: TLC's exit 14, with the message and the trace (x = 0, 1)."""
    body = "VARIABLE x\nInit == x = 0\nNext == x' = x + 1 /\\ Assert(x < 1, \"x too big\")"
    r = check_model(write_spec(tmp_path, body, NOLOCK))
    assert r.outcome is Outcome.ASSERT and r.exit_code == 14
    assert "Assert failed: x too big" in r.violation.message
    assert [s.values["x"] for s in r.violation.trace] == [0, 1]
