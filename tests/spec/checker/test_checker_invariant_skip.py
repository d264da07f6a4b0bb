"""An invariant conjunct whose read variables a step left unchanged is not evaluated again on the
successor (it held in the parent, and invariants are state predicates): the read sets are told from
the text (reads.py), through definitions, LET, parameters and INSTANCE substitutions; a conjunct that
reads TLCGet, draws at random or prints is always evaluated. Counts and traces are worked by hand."""

from __future__ import annotations

import pytest
from tla_snippets import NOLOCK, write_spec

from kvexact.spec.checker.engine import check_loaded
from kvexact.spec.checker.model import load_model
from kvexact.spec.checker.result import Outcome

# x counts 0..2 and y 0..3 independently; the first disjunct leaves x unchanged
TWO_COUNTERS = """
CONSTANTS Count(_)
VARIABLES x, y
Init == x = 0 /\\ y = 0
Next == \\/ x' = x /\\ y' = (y + 1) % 4
        \\/ x' = (x + 1) % 3 /\\ y' = y
InvX == Count(x) \\in 0..2
"""


def test_an_invariant_on_unchanged_variables_is_not_evaluated_again(tmp_path):
    # BFS by hand: (0,0) | (0,1) (1,0) | (0,2) (1,1) (2,0) | (0,3) (1,2) (2,1) | (1,3) (2,2) | (2,3).
    # The new states reached by the first disjunct, (0,1) (0,2) (0,3), keep x: 9 of the 12 would
    # evaluate InvX; of those, a state whose x held InvX before ((1,1) (1,2) (2,1) (2,2) (1,3) (2,3))
    # is not evaluated again either: InvX reads only x, so it runs once per value of x, in the order
    # the values are found: (0,0), (1,0), (2,0) (without the skips: 12 calls).
    calls: list = []

    def count(v):
        calls.append(v)
        return v
    spec = write_spec(tmp_path, TWO_COUNTERS, NOLOCK + "INVARIANT InvX\n")
    model = load_model(spec, constant_overrides={"Count": count})
    r = check_loaded(model, coverage=False)
    assert r.outcome is Outcome.SUCCESS and r.distinct_states == 12 and r.generated_states == 25
    assert calls == [0, 1, 2]


VIA_DEFINITIONS = """
VARIABLES x, y
Limit == y
Below(v, n) == LET lim == n IN v < lim
Init == x = 0 /\\ y = 0
Next == \\/ x' = x + 1 /\\ y' = y /\\ x < 3
        \\/ y' = y + 1 /\\ x' = x /\\ y < 3
Inv == /\\ x < 5
       /\\ Below(Limit, 2)
"""


def test_a_change_read_through_definitions_is_checked(tmp_path):
    # y is read only through Limit, Below's parameter and a LET. Levels: (0,0) | (1,0) (0,1) |
    # (2,0) (1,1) (0,2): (0,2) is the first state with y = 2, reached from (0,1) by the y step;
    # distinct states when it is found: 1 + 2 + 3 = 6 (inserted before its invariants are checked).
    spec = write_spec(tmp_path, VIA_DEFINITIONS, NOLOCK + "INVARIANT Inv\n")
    r = check_loaded(load_model(spec), coverage=False)
    assert r.outcome is Outcome.SAFETY and r.violation is not None and r.violation.name == "Inv"
    assert [(t.values["x"], t.values["y"]) for t in r.violation.trace] == [(0, 0), (0, 1), (0, 2)]
    assert r.distinct_states == 6


def test_tlcget_level_is_always_evaluated(tmp_path):
    # x never changes, so only TLCGet("level") can make the invariant false: at level 3, state (0,2)
    body = ("VARIABLES x, y\nInit == x = 0 /\\ y = 0\nNext == x' = x /\\ y' = (y + 1) % 5\n"
            "Inv == TLCGet(\"level\") + x <= 2")
    r = check_loaded(load_model(write_spec(tmp_path, body, NOLOCK + "INVARIANT Inv\n")), coverage=False)
    assert r.outcome is Outcome.SAFETY and r.violation is not None
    assert [t.values["y"] for t in r.violation.trace] == [0, 1, 2]


COUNTER = """
---- MODULE Counter ----
EXTENDS Naturals
VARIABLE c
Small == c < 9
====
"""


@pytest.mark.parametrize(("inv", "reads"), [
    ("x > 0 /\\ y > 0", [{"x"}, {"y"}]),
    ("Limit > 0", [{"y"}]),                                     # through a definition's conjuncts
    ("\\A i \\in 1..x : LET z == y IN i < z", [{"x", "y"}]),
    ("C!Small", [{"x"}]),                                        # INSTANCE Counter WITH c <- x
    ("TLCGet(\"level\") > 0", [None]),
    ("RandomElement({x, y}) > 0", [None]),
    ("PrintT(x) /\\ y > 0", [None, {"y"}]),
    ("ENABLED (x' = x + 1)", [None]),
])
def test_read_sets(tmp_path, inv, reads):
    body = ("VARIABLES x, y\nC == INSTANCE Counter WITH c <- x\nLimit == y\nInit == x = 0 /\\ y = 0\n"
            "Next == x' = x /\\ y' = y\nInv == " + inv)
    model = load_model(write_spec(tmp_path, body, NOLOCK + "INVARIANT Inv\n", extra={"Counter.tla": COUNTER}))
    assert [r if r is None else set(r) for _, r in model.invariant_parts["Inv"][1]] == reads


def test_an_action_property_on_a_step_that_keeps_its_subscript(tmp_path):
    # [][A]_x: the y steps keep x (stuttering, A not evaluated); the x step from (2,0) to (3,0) is not A.
    # Levels: (0,0) | (1,0) (0,1) | (2,0) ...: the violation is found expanding (2,0) at level 3.
    body = ("VARIABLES x, y\nInit == x = 0 /\\ y = 0\nNext == \\/ x' = x + 1 /\\ y' = y /\\ x < 4\n"
            "        \\/ y' = y + 1 /\\ x' = x /\\ y < 4\n"
            "Prop == [][x' = x + 1 /\\ x < 2]_<<x>>")
    r = check_loaded(load_model(write_spec(tmp_path, body, NOLOCK + "PROPERTY Prop\n")), coverage=False)
    assert r.outcome is not Outcome.SUCCESS and r.violation is not None and r.violation.name == "Prop"
    assert [(t.values["x"], t.values["y"]) for t in r.violation.trace] == [(0, 0), (1, 0), (2, 0), (3, 0)]


def test_an_action_property_whose_subscript_changes_only_on_some_steps(tmp_path):
    # v = x + y: the first step keeps the sum (stuttering for [FALSE]_v); the second, enabled at x = 2,
    # changes it: (0,0) -> (1,-1) -> (2,-2) -> (2,-1) is the first step that violates the property.
    body = ("VARIABLES x, y\nInit == x = 0 /\\ y = 0\nNext == \\/ x' = x + 1 /\\ y' = y - 1 /\\ x < 3\n"
            "        \\/ x' = x /\\ y' = y + 1 /\\ x = 2 /\\ y < 5\n"
            "Prop == [][FALSE]_<<x + y>>")
    r = check_loaded(load_model(write_spec(tmp_path, body, NOLOCK + "PROPERTY Prop\n")), coverage=False)
    assert r.outcome is not Outcome.SUCCESS and r.violation is not None and r.violation.name == "Prop"
    assert [(t.values["x"], t.values["y"]) for t in r.violation.trace] == [(0, 0), (1, -1), (2, -2), (2, -1)]
