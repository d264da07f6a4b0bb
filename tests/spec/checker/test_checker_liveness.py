"""Temporal properties with TLC's documented behaviour (Specifying Systems ch. 8 and 14, TLC's liveness
checker): each case is a small spec whose verdict and counterexample shape are derived by hand in
its comment. A violation exits 13 with a lasso: the prefix and cycle, closed by "Back to state k" or
by "Stuttering" when the last state stutters forever."""

from __future__ import annotations

import json

from tla_snippets import write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.report import summary_lines, write_itf, write_json
from kvexact.spec.checker.result import Outcome

COUNTER = """\
VARIABLE x
Init == x = 0
Next == x < 3 /\\ x' = x + 1
Spec == Init /\\ [][Next]_x
FairSpec == Spec /\\ WF_x(Next)
Reaches3 == <>(x = 3)
"""


def values(r, var="x"):
    return [st.values[var] for st in r.violation.trace]


def test_counter_without_fairness_may_stutter_forever(tmp_path):
    """Without fairness a behaviour may stop at any x < 3 and stutter there forever, so <>(x = 3)
    fails; TLC prints the states up to the stop, then "Stuttering"."""
    spec = write_spec(tmp_path, COUNTER, "SPECIFICATION Spec\nPROPERTY Reaches3\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec)
    assert r.outcome is Outcome.LIVENESS and r.exit_code == 13
    v = r.violation
    assert v.kind == "temporal" and v.name == "Reaches3"
    xs = values(r)
    assert xs == list(range(len(xs))) and xs[-1] < 3  # 0, 1, ..., k counted up, then stuck below 3
    assert v.loop == len(v.trace)  # the last state steps back to itself: stuttering
    lines = summary_lines(r)
    assert "Error: Temporal properties were violated." in lines
    assert f"State {len(xs) + 1}: Stuttering" in lines


def test_counter_with_weak_fairness_reaches_3(tmp_path):
    spec = write_spec(tmp_path, COUNTER, "SPECIFICATION FairSpec\nPROPERTY Reaches3\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.exit_code == 0 and r.complete
    assert (r.distinct_states, r.generated_states) == (4, 4)  # liveness does not change TLC's counts


TOGGLE = """\
VARIABLES on, done
vars == <<on, done>>
Init == on = FALSE /\\ done = FALSE
Toggle == on' = ~on /\\ UNCHANGED done
Act == on /\\ ~done /\\ done' = TRUE /\\ UNCHANGED on
Next == Toggle \\/ Act
WFSpec == Init /\\ [][Next]_vars /\\ WF_vars(Toggle) /\\ WF_vars(Act)
SFSpec == Init /\\ [][Next]_vars /\\ WF_vars(Toggle) /\\ SF_vars(Act)
Done == <>done
"""


def test_weak_fairness_lets_a_toggled_guard_be_missed(tmp_path):
    """Act is enabled only while `on`, and Toggle flips `on` forever: Act is never continuously
    enabled, so WF_vars(Act) holds on the toggling cycle and <>done fails on a real cycle."""
    spec = write_spec(tmp_path, TOGGLE, "SPECIFICATION WFSpec\nPROPERTY Done\n")
    r = check_model(spec)
    assert r.outcome is Outcome.LIVENESS, r.violation
    v = r.violation
    assert v.loop is not None and v.loop < len(v.trace)  # "Back to state k", not stuttering
    cycle = [st.values["on"] for st in v.trace[v.loop - 1:]]
    assert set(cycle) == {False, True}  # the cycle toggles
    assert not any(st.values["done"] for st in v.trace)
    assert f"Back to state {v.loop}." in summary_lines(r)


def test_strong_fairness_takes_a_guard_enabled_infinitely_often(tmp_path):
    spec = write_spec(tmp_path, TOGGLE, "SPECIFICATION SFSpec\nPROPERTY Done\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation


CYCLE = """\
VARIABLE x
Init == x = 0
Round == x' = (x + 1) % 3
Loop12 == x' = IF x = 2 THEN 1 ELSE x + 1
RoundSpec == Init /\\ [][Round]_x /\\ WF_x(Round)
LoopSpec == Init /\\ [][Loop12]_x /\\ WF_x(Loop12)
OneThenZero == (x = 1) ~> (x = 0)
"""


def test_leads_to_holds_across_a_cycle_that_returns(tmp_path):
    """0 -> 1 -> 2 -> 0 -> ...: every x = 1 is followed by x = 0 on the way round."""
    spec = write_spec(tmp_path, CYCLE, "SPECIFICATION RoundSpec\nPROPERTY OneThenZero\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.complete


def test_leads_to_fails_on_a_cycle_that_never_returns(tmp_path):
    """0 -> 1 -> 2 -> 1 -> 2 ...: after x = 1, x = 0 never comes; the lasso is 0, 1, 2 and back to 1."""
    spec = write_spec(tmp_path, CYCLE, "SPECIFICATION LoopSpec\nPROPERTY OneThenZero\n")
    r = check_model(spec)
    assert r.outcome is Outcome.LIVENESS
    assert values(r) == [0, 1, 2] and r.violation.loop == 2
    assert "Back to state 2." in summary_lines(r)


def test_lasso_is_written_as_itf_with_its_loop_and_as_json(tmp_path):
    spec = write_spec(tmp_path, CYCLE, "SPECIFICATION LoopSpec\nPROPERTY OneThenZero\n")
    r = check_model(spec)
    assert write_itf(r, tmp_path / "t.itf.json", str(spec))
    doc = json.loads((tmp_path / "t.itf.json").read_text())
    assert [s["x"]["#bigint"] for s in doc["states"]] == ["0", "1", "2"]
    assert doc["loop"] == 1  # 0-based: the last state (x = 2) steps back to x = 1
    write_json(r, tmp_path / "r.json", str(spec))
    d = json.loads((tmp_path / "r.json").read_text())
    assert d["exit_code"] == 13 and d["violation"]["loop"] == 2 and d["violation"]["kind"] == "temporal"


ABSTRACT = """\
---- MODULE Abs ----
EXTENDS Naturals
VARIABLE y
Init == y = 0
Next == y < 2 /\\ y' = y + 1
Spec == Init /\\ [][Next]_y /\\ WF_y(Next)
====
"""

CONCRETE = """\
VARIABLES x, aux
vars == <<x, aux>>
Init == x = 0 /\\ aux = 0
Step == x < 2 /\\ x' = x + 1 /\\ UNCHANGED aux
Tick == aux' = 1 - aux /\\ UNCHANGED x
Reset == x = 2 /\\ x' = 0 /\\ UNCHANGED aux
A == INSTANCE Abs WITH y <- x
Good == Init /\\ [][Step \\/ Tick]_vars /\\ WF_vars(Step)
Lazy == Init /\\ [][Step \\/ Tick]_vars
Wrap == Init /\\ [][Step \\/ Tick \\/ Reset]_vars /\\ WF_vars(Step)
Refines == A!Spec
"""


def test_a_refinement_that_holds(tmp_path):
    """x counts 0..2 (aux ticks on the side): each step is Abs's Next or a stutter of y, and WF on the
    concrete Step gives the abstract WF_y(Next) (A!Spec = A!Init /\\ [][A!Next]_y /\\ WF_y(A!Next))."""
    spec = write_spec(tmp_path, CONCRETE, "SPECIFICATION Good\nPROPERTY Refines\nCHECK_DEADLOCK FALSE\n",
                      extra={"Abs.tla": ABSTRACT})
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation


def test_a_refinement_whose_step_fails_is_an_action_property_violation(tmp_path):
    """Reset takes x from 2 to 0: not a step of Abs's Next and not a stutter of y."""
    spec = write_spec(tmp_path, CONCRETE, "SPECIFICATION Wrap\nPROPERTY Refines\nCHECK_DEADLOCK FALSE\n",
                      extra={"Abs.tla": ABSTRACT})
    r = check_model(spec)
    assert r.outcome is Outcome.LIVENESS and r.exit_code == 13
    v = r.violation
    assert v.kind == "action-property" and v.name == "Refines" and v.loop is None
    assert values(r)[-2:] == [2, 0]
    assert "Error: Action property Refines is violated." in summary_lines(r)


def test_a_refinement_without_the_concrete_fairness_fails_its_abstract_fairness(tmp_path):
    """Without WF on Step, x may stay at 0 while aux ticks forever: A!Next stays enabled and never
    happens, so WF_y(A!Next) is violated on a real cycle."""
    spec = write_spec(tmp_path, CONCRETE, "SPECIFICATION Lazy\nPROPERTY Refines\nCHECK_DEADLOCK FALSE\n",
                      extra={"Abs.tla": ABSTRACT})
    r = check_model(spec)
    assert r.outcome is Outcome.LIVENESS and r.violation.kind == "temporal"
    v = r.violation
    assert all(st.values["x"] == v.trace[-1].values["x"] < 2 for st in v.trace[v.loop - 1:])


def test_property_classes_follow_tlc(tmp_path):
    """TLC sorts PROPERTY conjuncts: a state predicate is checked on initial states (exit 13), []P is
    an invariant (exit 12, named P), [][A]_v an action property (exit 13)."""
    body = COUNTER + "StartsAt1 == x = 1\nSmall == x < 2\nAlwaysSmall == []Small\n"
    cfg = "SPECIFICATION FairSpec\nCHECK_DEADLOCK FALSE\nPROPERTY "
    r = check_model(write_spec(tmp_path, body, cfg + "StartsAt1\n"))
    assert (r.exit_code, r.violation.kind, r.violation.name) == (13, "property-init", "StartsAt1")
    r = check_model(write_spec(tmp_path, body, cfg + "AlwaysSmall\n"))
    assert (r.exit_code, r.violation.kind, r.violation.name) == (12, "invariant", "Small")
    assert values(r) == [0, 1, 2]


def test_enabled_in_an_invariant_and_in_an_action(tmp_path):
    """ENABLED Next fails exactly at x = 3 (no successor); Next2 moves y only while Next is enabled."""
    body = ("VARIABLES x, y\nInit == x = 0 /\\ y = 0\nNext == x < 3 /\\ x' = x + 1 /\\ UNCHANGED y\n"
            "Next2 == Next \\/ (ENABLED Next /\\ y' = 1 - y /\\ UNCHANGED x)\nLive == ENABLED Next\n")
    r = check_model(write_spec(tmp_path, body, "INIT Init\nNEXT Next\nINVARIANT Live\nCHECK_DEADLOCK FALSE\n"))
    assert r.exit_code == 12 and r.violation.name == "Live" and r.violation.trace[-1].values["x"] == 3
    r = check_model(write_spec(tmp_path, body, "INIT Init\nNEXT Next2\nCHECK_DEADLOCK FALSE\n"))
    # states (x, y), x in 0..3, y in 0..1: all 8 reachable; y flips only for x < 3
    assert r.outcome is Outcome.SUCCESS and r.distinct_states == 8
    # generated: x < 3 states (6) have 2 successors each, x = 3 states none: 1 + 12
    assert r.generated_states == 13


def test_an_uncheckable_property_is_an_error_naming_it_never_a_success(tmp_path):
    body = COUNTER + "Plus == (x = 0) -+-> (x = 1)\nActionOnly == x' = x + 1\n"
    for prop, why in (("Plus", "-+->"), ("ActionOnly", "[][A]_v")):
        r = check_model(write_spec(tmp_path, body, f"SPECIFICATION FairSpec\nPROPERTY {prop}\n"))
        assert r.outcome is Outcome.EVALUATION and r.exit_code == 75, prop
        assert r.violation.kind == "unsupported" and f"PROPERTY {prop}" in r.violation.message
        assert why in r.violation.message


def test_a_partial_search_does_not_check_temporal_properties(tmp_path):
    spec = write_spec(tmp_path, COUNTER, "SPECIFICATION FairSpec\nPROPERTY Reaches3\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec, max_states=2)
    assert r.outcome is Outcome.SUCCESS and not r.complete
    assert any("not checked" in m for m in r.messages)


def test_simulation_refuses_a_property(tmp_path):
    from kvexact.spec.checker import simulate

    spec = write_spec(tmp_path, COUNTER, "SPECIFICATION FairSpec\nPROPERTY Reaches3\nCHECK_DEADLOCK FALSE\n")
    r = simulate(spec, num=2, depth=5)
    assert r.exit_code == 75 and "PROPERTY Reaches3" in r.violation.message


def test_quantified_leads_to_is_checked_per_element(tmp_path):
    """\\A i \\in {1, 2} : (x = i) ~> (x = 0): x goes 0 -> 1 -> 0 or 0 -> 2 -> 2 (stuck at 2)."""
    body = ("VARIABLE x\nInit == x = 0\nNext == (x = 0 /\\ x' \\in {1, 2}) \\/ (x = 1 /\\ x' = 0) \\/ "
            "(x = 2 /\\ x' = 2)\nSpec == Init /\\ [][Next]_x /\\ WF_x(Next)\n"
            "Back == \\A i \\in {1, 2} : (x = i) ~> (x = 0)\n")
    r = check_model(write_spec(tmp_path, body, "SPECIFICATION Spec\nPROPERTY Back\n"))
    assert r.outcome is Outcome.LIVENESS and values(r)[-1] == 2


HALF = """\
VARIABLE x
Init == x = 0
Step == x < 4 /\\ x' = x + 1
H == INSTANCE Abs WITH y <- x \\div 2
FairSpec == Init /\\ [][Step]_x /\\ WF_x(Step)
Spec == Init /\\ [][Step]_x
Refines == H!Spec
"""


def test_refinement_fairness_through_a_mapped_expression(tmp_path):
    """y <- x \\div 2 is not a variable: as in TLC, ENABLED of Abs's Next searches Abs's own y' (free)
    from y = x \\div 2, so WF_y(H!Next) holds when x is fairly driven to 4 (y = 2) and fails when x
    may stop below 4 (y < 2 with H!Next enabled forever)."""
    abs_module = {"Abs.tla": ABSTRACT}
    r = check_model(write_spec(tmp_path, HALF, "SPECIFICATION FairSpec\nPROPERTY Refines\nCHECK_DEADLOCK FALSE\n",
                               extra=abs_module))
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    r = check_model(write_spec(tmp_path, HALF, "SPECIFICATION Spec\nPROPERTY Refines\nCHECK_DEADLOCK FALSE\n",
                               extra=abs_module))
    assert r.outcome is Outcome.LIVENESS and r.violation.kind == "temporal"
    assert r.violation.trace[-1].values["x"] < 4 and r.violation.loop == len(r.violation.trace)


IDLE_FIRST = """\
VARIABLES pc, r
vars == <<pc, r>>
Init == pc = "SENT" /\\ r = 0
Receive == \\/ pc = "SENT" /\\ r = 0 /\\ r' = 1 /\\ UNCHANGED pc
           \\/ pc = "SENT" /\\ r = 1 /\\ UNCHANGED vars
Abort == pc = "SENT" /\\ r = 1 /\\ pc' = "ABORT" /\\ UNCHANGED r
Next == Receive \\/ Abort
Spec == Init /\\ [][Next]_vars /\\ WF_vars(Receive \\/ Abort)
IdleOnly == Init /\\ [][Next]_vars /\\ WF_vars(Receive)
Decides == [](pc # "BYZ") => <>(pc = "ABORT")
"""


def test_enabled_under_a_subscript_skips_a_stuttering_disjunct(tmp_path):
    """nbacg_guer01's shape: at r = 1 the fair action's first successor is a stuttering one (Receive's
    UNCHANGED vars), which does not make <<A>>_vars enabled, but Abort's does, so WF forces the abort
    and TLC reports success. Only the stuttering Receive is fair in IdleOnly: <<Receive>>_vars is not
    enabled at r = 1, so stopping there forever is fair and the property fails."""
    r = check_model(write_spec(tmp_path, IDLE_FIRST, "SPECIFICATION Spec\nPROPERTY Decides\nCHECK_DEADLOCK FALSE\n"))
    assert r.outcome is Outcome.SUCCESS and r.complete, r.violation
    r = check_model(write_spec(tmp_path, IDLE_FIRST, "SPECIFICATION IdleOnly\nPROPERTY Decides\nCHECK_DEADLOCK FALSE\n"))
    assert r.outcome is Outcome.LIVENESS and r.violation.trace[-1].values == {"pc": "SENT", "r": 1}
    assert r.violation.loop == len(r.violation.trace)


def test_each_product_node_lists_its_successors_once(tmp_path, monkeypatch):
    """The counter under WF with <>(x = 3): every product node is its own component (x only grows), and
    such a component's only cycle is its stuttering self-loop, which is decided without listing the
    node's successors again: the SCC search lists each node's successors exactly once."""
    from kvexact.spec.checker import liveness
    calls: list[int] = []
    real = liveness._Search.succ

    def counted(self, p):
        calls.append(p)
        return real(self, p)
    monkeypatch.setattr(liveness._Search, "succ", counted)
    spec = write_spec(tmp_path, COUNTER, "SPECIFICATION FairSpec\nPROPERTY Reaches3\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS
    assert calls and len(calls) == len(set(calls))
