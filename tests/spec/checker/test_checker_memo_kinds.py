"""Memoized calls (a definition that reads only its parameters, a LET that reads only bound names) must
tell TRUE from 1: Python holds them equal and hashes them alike, TLA+ does not (issue 16)."""

from __future__ import annotations

import pytest
from tla_snippets import write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.result import Outcome

CASES = {
    # one call site, argument 1 then TRUE: the second call must not get the first one's <<1>>
    "definition": "F(a) == <<a>>\nInit == x = [i \\in 1..2 |-> F(<<1, TRUE>>[i])[1]]",
    "two parameters": "G(a, b) == <<a, b>>\nInit == x = [i \\in 1..2 |-> G(<<1, TRUE>>[i], 0)[1]]",
    "let": "Init == x = [i \\in 1..2 |-> LET v == <<1, TRUE>>[i] IN LET w == <<v>> IN w[1]]",
    "operator in an action": "F(a) == <<a>>\nInit == x = <<0, TRUE>>\n"
                             "Next == \\E i \\in 1..2 : x' = <<i, F(<<1, TRUE>>[i])[1]>>",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_memoized_call_tells_true_from_one(tmp_path, name):
    body = "VARIABLE x\n" + CASES[name]
    if "Next" not in body:
        body += "\nNext == UNCHANGED x"
    # x[2] is TRUE, except in the action case's <<1, 1>>
    body += "\nInv == x[2] \\/ FALSE" if "Next" not in CASES[name] else "\nInv == x[1] = 1 \\/ (x[2] \\/ FALSE)"
    spec = write_spec(tmp_path, body, "INIT Init\nNEXT Next\nINVARIANT Inv\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec)
    assert r.outcome == Outcome.SUCCESS, r.violation
    assert r.distinct_states == (3 if "action" in name else 1)
