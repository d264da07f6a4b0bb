"""``--engine both`` when TLC cannot parse the model: each engine's own error, SANY's message included (not
"Parsing or semantic analysis failed." alone, and no state counts compared)."""

from __future__ import annotations

from kvexact.spec.checker.result import Outcome
from kvexact.spec.tlc import parse_tool_output, sany_error

# TLC 2026.04's -tool output for a module whose last definition ends in a bare \E (recorded from a run)
RECORDED = """@!@!@STARTMSG 2220:0 @!@!@
Starting SANY...
@!@!@ENDMSG 2220 @!@!@
***Parse Error***
Encountered "====" at line 8, column 1 and token "\\\\E"

Residual stack trace follows:
Quantified form starting at line 7, column 18.
Definition starting at line 7, column 1.


Fatal errors while parsing TLA+ spec in file P

In module P

Could not parse module P from file P.tla
*** Errors: 1

@!@!@STARTMSG 2219:0 @!@!@
SANY finished.
@!@!@ENDMSG 2219 @!@!@
@!@!@STARTMSG 3002:1 @!@!@
Parsing or semantic analysis failed.
@!@!@ENDMSG 3002 @!@!@
"""

SPEC = """---- MODULE P ----
EXTENDS Naturals
CONSTANT N
VARIABLE x
Init == x = 0
Next == x < N /\\ x' = x + 1
Inv == x <= N /\\ \\E
====
"""
UNDEFINED = SPEC.replace("MODULE P", "MODULE S").replace("Inv == x <= N /\\ \\E", "Inv == x <= Foo")
CFG = "CONSTANT N = 3\nINIT Init\nNEXT Next\nINVARIANT Inv\nCHECK_DEADLOCK FALSE\n"


def test_the_tlc_result_of_a_parse_error_carries_sanys_message():
    result = parse_tool_output(RECORDED, 150)
    assert result.outcome is Outcome.PARSE
    expected = 'SANY: Encountered "====" at line 8, column 1 and token "\\\\E": Could not parse module P from file P.tla'
    assert sany_error(RECORDED) == expected
    assert result.violation is not None and result.violation.message.splitlines()[0] == expected
    assert sany_error("@!@!@STARTMSG 2262:0 @!@!@\nTLC2\n@!@!@ENDMSG 2262 @!@!@\n") == ""


def test_engine_both_shows_tlcs_own_parse_and_semantic_errors(kvexact_cli, tmp_path, tla2tools_jar):
    cases = {"P": (SPEC, 'tlc: parse error (exit 150): SANY: Encountered "====" at line 8, column 1'),
             "S": (UNDEFINED, "tlc: parse error (exit 150): SANY: line 7, col 13 to line 7, col 15 of module S: "
                              "Unknown operator: `Foo'.")}
    for name, (text, says) in cases.items():
        (tmp_path / f"{name}.tla").write_text(text)
        (tmp_path / f"{name}.cfg").write_text(CFG)
        code, text = kvexact_cli(["check", str(tmp_path / f"{name}.tla"), "--engine", "both",
                                  "--tlc-jar", str(tla2tools_jar)]).code_and_text
        assert code == 150, text
        assert says in text and "embedded: parse error (exit 150)" in text, text
        assert "states generated" not in text
