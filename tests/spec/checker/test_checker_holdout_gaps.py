"""Gaps found by running public tlaplus/Examples models that are not in tla-examples (the holdout):
each reproduced in a few lines, with the result TLC's semantics give."""

from __future__ import annotations

from tla_snippets import NOLOCK

from kvexact.spec.checker import check_model, engine, evaluate
from kvexact.spec.checker.result import Outcome


def _spec(folder, body: str, cfg: str):
    spec = folder / "M.tla"
    spec.write_text(f"---- MODULE M ----\nEXTENDS Naturals\n{body}\n====\n")
    (folder / "M.cfg").write_text(cfg)
    return spec


def test_theorem_body_selector_in_an_assumption(tmp_path):
    """``ASSUME T!:`` asserts the statement of THEOREM T (Paxos MCVoting does this): true passes, false
    is an assumption failure."""
    body = "THEOREM T == \\A y \\in 1..3 : y > {k}\nASSUME T!:\nVARIABLE x\nInit == x = 0\nNext == UNCHANGED x"
    assert check_model(_spec(tmp_path, body.format(k=0), NOLOCK)).outcome is Outcome.SUCCESS
    assert check_model(_spec(tmp_path, body.format(k=1), NOLOCK)).outcome is Outcome.ASSUMPTION


def test_theorem_body_selector_as_an_invariant(tmp_path):
    """``Small!:`` is a state predicate when the theorem's statement is one: x < 3 fails at x = 3."""
    body = ("VARIABLE x\nTHEOREM Small == x < 3\nInit == x = 0\nNext == x < 5 /\\ x' = x + 1\n"
            "Inv == /\\ Small!:\n       /\\ TRUE")
    r = check_model(_spec(tmp_path, body, NOLOCK + "INVARIANT Inv\n"))
    assert r.outcome is Outcome.SAFETY and r.violation.name == "Inv" and len(r.violation.trace) == 4


def test_action_composition(tmp_path):
    """``A \\cdot B``: B starts from A's successor, and A's successor is not a state of its own
    (FiniteMonotonic MCReplicatedLog): from 1, (x' = x + 1) . (x' = 2 * x) goes to 4, 10, 22."""
    body = "VARIABLE x\nInit == x = 1\nNext == x < 20 /\\ ((x' = x + 1) \\cdot (x' = 2 * x))\nInv == x # {k}"
    never = check_model(_spec(tmp_path, body.format(k=2), NOLOCK + "INVARIANT Inv\n"))
    assert never.outcome is Outcome.SUCCESS and never.distinct_states == 4
    # TLC counts A's successor as generated: 1 initial + (1 intermediate + 1 successor) from 1, 4, 10
    assert never.generated_states == 7
    r = check_model(_spec(tmp_path, body.format(k=22), NOLOCK + "INVARIANT Inv\n"))
    assert r.outcome is Outcome.SAFETY and [st.values["x"] for st in r.violation.trace] == [1, 4, 10, 22]


def test_tlcget_of_the_composition_setting():
    """A spec asserts that TLC runs with action composition on (-Dtlc2.tool.impl.Tool.cdot=true)."""
    assert evaluate('TLCGet("-Dtlc2.tool.impl.Tool.cdot")', extends="TLC") == "true"


def test_action_composition_generated_count(tmp_path, monkeypatch):
    """TLC's rule (Tool.java, A \\cdot B): the successors of A are added to the generated count, but a
    \\cdot nested in the first action of another adds nothing (TLC's ChainedCdots: 9 generated).
    By hand, from x = 0: the inner \\cdot's 2 successors of A (1, 2) are not counted; the outer one's
    4 (11, 21, 12, 22) are; its 4 successors (22, 42, 24, 44) and the plain step to 7 are. Generated:
    1 initial + 4 + 5 = 10; distinct: 0, 22, 42, 24, 44, 7 = 6."""
    body = ("VARIABLE x\nInit == x = 0\n"
            "Next == \\/ x = 0 /\\ (((x' \\in {1, 2}) \\cdot (x' \\in {x + 10, x + 20})) \\cdot (x' = 2 * x))\n"
            "        \\/ x = 0 /\\ x' = 7\n"
            "Inv == x # 3")
    r = check_model(_spec(tmp_path, body, NOLOCK + "INVARIANT Inv\n"))
    assert r.outcome is Outcome.SUCCESS
    assert (r.distinct_states, r.generated_states) == (6, 10)
    monkeypatch.setattr(engine, "PARALLEL_MIN_BATCH", 1)  # the worker path, even for one state per level
    two = check_model(_spec(tmp_path, body, NOLOCK + "INVARIANT Inv\n"), workers=2)
    assert (two.distinct_states, two.generated_states) == (6, 10)
