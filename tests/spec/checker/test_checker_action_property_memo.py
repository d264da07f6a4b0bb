"""Action properties ``[][A]_v`` read inside an INSTANCE (a refinement) are evaluated once per abstract
step: the values of the instance's variables before and after (temporal.instance_step_memo). The
verdicts and counts below are derived by hand from TLC's semantics, and a many-to-one mapping checks
that the memo never lets a forbidden abstract step through."""

from __future__ import annotations

from pathlib import Path

from tla_snippets import write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.engine import check_loaded
from kvexact.spec.checker.model import load_model
from kvexact.spec.checker.result import Outcome

ABS = """\
---- MODULE Half ----
EXTENDS Naturals
VARIABLES y, z
vars == <<y, z>>
Init == y = 0 /\\ z = 0
Next == y' = y + 1 /\\ z' = z
Spec == Init /\\ [][Next]_vars
OnlyY == Init /\\ [][Next]_y
====
"""

CONC = """\
VARIABLES x, aux
Init == x = 0 /\\ aux = 0
Step == x < 5 /\\ x' = x + 1 /\\ UNCHANGED aux
Back == x = 5 /\\ x' = 2 /\\ UNCHANGED aux
Tick == aux' = 1 - aux /\\ UNCHANGED x
H == INSTANCE Half WITH y <- x \\div 2, z <- 0
HZ == INSTANCE Half WITH y <- x \\div 2, z <- aux
Fwd == Init /\\ [][Step]_<<x, aux>>
Loop == Init /\\ [][Step \\/ Back]_<<x, aux>>
Ticking == Init /\\ [][Step \\/ Tick]_<<x, aux>>
Refines == H!Spec
Outside == H!Init /\\ [][H!Next]_H!vars
RefinesY == HZ!OnlyY
RefinesAll == HZ!Spec
"""


def _run(tmp_path: Path, spec_name: str, prop: str):
    spec = write_spec(tmp_path, CONC, f"SPECIFICATION {spec_name}\nPROPERTY {prop}\nCHECK_DEADLOCK FALSE\n",
                      extra={"Half.tla": ABS})
    model = load_model(spec, spec.with_suffix(".cfg"))
    return check_loaded(model, coverage=False), model


def test_a_many_to_one_refinement_holds_with_one_entry_per_abstract_state(tmp_path):
    """x = 0..5 maps to y = x \\div 2: the steps 0->1, 2->3, 4->5 stutter in Half, 1->2 and 3->4 are
    Half's Next. TLC: 6 distinct states, 6 generated (1 initial + 5 successors). Abstract states:
    y in {0, 1, 2} (z is the constant 0), so 3."""
    r, model = _run(tmp_path, "Fwd", "Refines")
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    assert (r.distinct_states, r.generated_states) == (6, 6)
    (_, fn), = model.plan.implied_actions
    assert len(fn.abstract_states) == 3


def test_the_same_property_written_outside_the_instance(tmp_path):
    """[][H!Next]_H!vars written in the instantiating module: the same verdict and counts."""
    r, model = _run(tmp_path, "Fwd", "Outside")
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (6, 6)
    (_, fn), = model.plan.implied_actions
    assert len(fn.abstract_states) == 3


def test_a_step_back_is_caught_after_the_abstract_steps_were_remembered(tmp_path):
    """Back takes x from 5 to 2, so y from 2 to 1: neither Half's Next nor a stutter. Every earlier
    abstract step (y 0->1, 1->2 and the stutters) was allowed and remembered; this one must fail."""
    for prop in ("Refines", "Outside"):
        r, _ = _run(tmp_path, "Loop", prop)
        assert r.outcome is Outcome.LIVENESS and r.exit_code == 13, prop
        v = r.violation
        assert (v.kind, v.name) == ("action-property", prop)
        assert [st.values["x"] for st in v.trace] == [0, 1, 2, 3, 4, 5, 2]


def test_a_step_that_leaves_the_subscript_unchanged_is_allowed(tmp_path):
    """[][Next]_y with z <- aux: Tick changes z only, which is not Next (it keeps z) but leaves y as it
    was, so it satisfies [Next]_y. x in 0..5 times aux in {0, 1}: 12 states; generated: 1 initial +
    12 Ticks + 10 Steps = 23."""
    r, _ = _run(tmp_path, "Ticking", "RefinesY")
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    assert (r.distinct_states, r.generated_states) == (12, 23)


def test_a_step_that_changes_the_subscript_otherwise_fails(tmp_path):
    """[][Next]_<<y, z>>: Tick from the initial state changes z (0 -> 1) and keeps y: a violation."""
    r, _ = _run(tmp_path, "Ticking", "RefinesAll")
    assert r.outcome is Outcome.LIVENESS and r.violation.kind == "action-property"
    assert [(st.values["x"], st.values["aux"]) for st in r.violation.trace] == [(0, 0), (0, 1)]


def test_an_action_property_outside_any_instance_is_unchanged(tmp_path):
    """No INSTANCE: [][Step]_x is evaluated on every transition as before (the counter's 6 / 6)."""
    body = "VARIABLE x\nInit == x = 0\nNext == x < 5 /\\ x' = x + 1\nP == [][Next]_x\n"
    r = check_model(write_spec(tmp_path, body, "INIT Init\nNEXT Next\nPROPERTY P\nCHECK_DEADLOCK FALSE\n"))
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (6, 6)
