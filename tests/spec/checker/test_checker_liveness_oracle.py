"""The liveness checker against a brute-force oracle on random three-state specs.

Each example draws two actions A and B (sets of steps over x in 0..2), a fairness (none, WF or SF of
A and/or B) and a property (<>P, []<>P, <>[]P, P ~> Q). The oracle enumerates every lasso of up to
eight states from x = 0 (steps of A, B or stuttering) and decides by the definitions of Specifying
Systems ch. 8: a violation exists iff some lasso satisfies the fairness and violates the property.
The checker must agree, and its own lasso must be such a behaviour."""

from __future__ import annotations

import itertools
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
from tla_snippets import write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.result import Outcome

sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))  # as check_model sets it, before Hypothesis runs

STATES = (0, 1, 2)
PAIRS = [(a, b) for a in STATES for b in STATES]
MAX_LASSO = 8


def action_text(steps) -> str:
    if not steps:
        return "FALSE"
    return " \\/ ".join(f"(x = {a} /\\ x' = {b})" for a, b in sorted(steps))


def prop_text(kind: str, p: int, q: int) -> str:
    return {"ev": f"<>(x = {p})", "inf": f"[]<>(x = {p})", "stable": f"<>[](x = {p})",
            "leads": f"(x = {p}) ~> (x = {q})"}[kind]


def holds(kind: str, p: int, q: int, lasso: list[int], loop: int) -> bool:
    cycle = lasso[loop:]
    if kind == "ev":
        return p in lasso
    if kind == "inf":
        return p in cycle
    if kind == "stable":
        return all(s == p for s in cycle)
    for i, s in enumerate(lasso):  # every x = p is followed (now or later) by x = q
        if s == p and q not in lasso[i:] and q not in cycle:
            return False
    return True


def fair(fairness: tuple, actions: dict, lasso: list[int], loop: int) -> bool:
    cycle = lasso[loop:]
    steps = list(zip(cycle, cycle[1:] + cycle[:1], strict=True))
    for strength, name in fairness:
        act = actions[name]
        enabled = [any(a == s and b != s for a, b in act) for s in cycle]
        taken = any((a, b) in act and a != b for a, b in steps)
        if taken:
            continue
        if strength == "WF" and all(enabled):
            return False
        if strength == "SF" and any(enabled):
            return False
    return True


def lassos(moves: set):
    """Every lasso (states, loop index) from x = 0 along moves (stuttering included)."""
    for k in range(1, MAX_LASSO + 1):
        for tail in itertools.product(STATES, repeat=k - 1):
            seq = [0, *tail]
            if all((a, b) in moves for a, b in zip(seq, seq[1:], strict=False)):
                for loop in range(k):
                    if (seq[-1], seq[loop]) in moves:
                        yield seq, loop


@settings(max_examples=60, deadline=None)
@given(a=st.sets(st.sampled_from(PAIRS)), b=st.sets(st.sampled_from(PAIRS)),
       fairness=st.sets(st.tuples(st.sampled_from(["WF", "SF"]), st.sampled_from(["A", "B"])), max_size=2),
       kind=st.sampled_from(["ev", "inf", "stable", "leads"]), p=st.sampled_from(STATES), q=st.sampled_from(STATES))
def test_checker_agrees_with_brute_force_lassos(tmp_path_factory, a, b, fairness, kind, p, q):
    fairness = tuple(sorted(fairness))
    actions = {"A": a, "B": b}
    moves = a | b | {(s, s) for s in STATES}
    body = (f"VARIABLE x\nInit == x = 0\nA == {action_text(a)}\nB == {action_text(b)}\nNext == A \\/ B\n"
            f"Spec == Init /\\ [][Next]_x" + "".join(f" /\\ {s}_x({n})" for s, n in fairness)
            + f"\nProp == {prop_text(kind, p, q)}\n")
    spec = write_spec(tmp_path_factory.mktemp("m"), body, "SPECIFICATION Spec\nPROPERTY Prop\nCHECK_DEADLOCK FALSE\n")
    violated = any(fair(fairness, actions, seq, loop) and not holds(kind, p, q, seq, loop)
                   for seq, loop in lassos(moves))
    r = check_model(spec)
    assert r.outcome is (Outcome.LIVENESS if violated else Outcome.SUCCESS), (body, r.violation)
    if violated:
        seq = [s.values["x"] for s in r.violation.trace]
        loop = r.violation.loop - 1
        assert seq[0] == 0 and all((x, y) in moves for x, y in zip(seq, seq[1:], strict=False))
        assert (seq[-1], seq[loop]) in moves
        assert fair(fairness, actions, seq, loop) and not holds(kind, p, q, seq, loop), (body, seq, loop)
