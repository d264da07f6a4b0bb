"""Constant-level parts of temporal formulas and definitions under a prime (issue 17, MCInnerSerial).

TLC evaluates a constant-level formula when it builds the tableau, so ``(i # j) => WF_v(A(i, j))`` over
pairs of processes is, per pair, either TRUE or the fairness condition itself: the spec's fairness is
a conjunction of conditions and the tableau stays one node. A definition read under a prime is
memoized by the values of the variables it read, and a hit passes those reads on to an enclosing
definition, so the enclosing memo is not keyed on too few variables."""

from __future__ import annotations

from tla_snippets import write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.compiler import Primed, _per_state
from kvexact.spec.checker.liveness import as_condition, conjuncts, negate
from kvexact.spec.checker.model import load_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.checker.tableau import build
from kvexact.spec.checker.temporal import plan_properties

PAIRS = """\
P == 1..3
VARIABLE pc
Init == pc = [i \\in P |-> "a"]
Go(i, j) == i # j /\\ pc[i] = "a" /\\ pc' = [pc EXCEPT ![i] = "b"]
Next == \\E i, j \\in P : Go(i, j)
Distinct == Init /\\ [][Next]_pc /\\ \\A i, j \\in P : (i # j) => WF_pc(Go(i, j))
Same == Init /\\ [][Next]_pc /\\ \\A i, j \\in P : (i = j) => WF_pc(Go(i, j))
AllDone == (\\A i \\in P : <>(pc[i] = "b")) /\\ \\A i \\in P : (pc[i] = "a") ~> (pc[i] = "b")
"""


def test_constant_implications_leave_only_fairness_conditions(tmp_path):
    """Six pairs i # j keep their WF, the three i = j pairs drop out: every conjunct of the fairness
    is a []<>/<>[] condition, and the rest of the formula checked with AllDone is a small tableau."""
    spec = write_spec(tmp_path, PAIRS, "SPECIFICATION Distinct\nPROPERTY AllDone\nCHECK_DEADLOCK FALSE\n")
    plan = plan_properties(load_model(spec))
    parts = conjuncts(plan.fairness)
    assert len(parts) == 6 and all(as_condition(c) is not None for c in parts)
    first = conjuncts(plan.temporal[0][1])[0]  # <>(pc[1] = "b"): its negation []~(...) is one node
    assert build(negate(first)).size == 1


def test_fairness_of_distinct_pairs_finishes_every_process(tmp_path):
    spec = write_spec(tmp_path, PAIRS, "SPECIFICATION Distinct\nPROPERTY AllDone\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec)
    assert r.outcome is Outcome.SUCCESS and r.complete and r.distinct_states == 8


def test_fairness_only_of_equal_pairs_asks_nothing(tmp_path):
    """Go(i, i) is never enabled, so WF of it holds on every behaviour: the processes may stop."""
    spec = write_spec(tmp_path, PAIRS, "SPECIFICATION Same\nPROPERTY AllDone\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec)
    assert r.outcome is Outcome.LIVENESS and r.exit_code == 13


def test_a_primed_definition_is_evaluated_once_per_values_it_read():
    calls: list = []

    def body(s, n, e):
        calls.append(s["x"])
        return s["x"] * 10
    g = _per_state(body)
    assert g(Primed({"x": 1, "y": 1}), None, {}) == 10
    assert g(Primed({"x": 1, "y": 2}), None, {}) == 10  # y was not read: the same evaluation
    assert g(Primed({"x": 2, "y": 2}), None, {}) == 20
    assert calls == [1, 2]


def test_a_memo_hit_inside_a_definition_counts_as_its_reads():
    """outer reads y only through inner; inner's memo hit must still make outer depend on y."""
    inner = _per_state(lambda s, n, e: s["y"])
    outer = _per_state(lambda s, n, e: (s["x"], inner(s, n, e)))
    inner(Primed({"x": 0, "y": 5}), None, {})  # inner's memo now holds y = 5
    assert outer(Primed({"x": 1, "y": 5}), None, {}) == (1, 5)
    assert outer(Primed({"x": 1, "y": 6}), None, {}) == (1, 6)
    assert outer(Primed({"x": 1, "y": 5}), None, {}) == (1, 5)
