"""Loop-invariant code in generated bodies (codegen.py ``_hoist``): a part of a quantifier, set-of, filter,
function or CHOOSE body that no binder of the loop changes is computed at most once per run of that loop,
lazily, and never reused across runs of an enclosing loop, across operator calls or across states.
Values are worked out by hand; ``Count`` is a Python operator that records each call."""

from __future__ import annotations

from pathlib import Path

import pytest
from tla_snippets import write_spec

from kvexact.spec.checker import check_model
from kvexact.spec.checker.binders import _bind
from kvexact.spec.checker.codegen import _quant2, _quantn
from kvexact.spec.checker.compiler import Compiler
from kvexact.spec.checker.result import Outcome
from kvexact.spec.checker.values import ProductSet, ordered_elements


def run(expr: str, defs: str = "") -> tuple[object, list]:
    """The value of ``expr`` and the arguments ``Count`` was called with, in order."""
    calls: list = []

    def count(v):
        calls.append(v)
        return v
    comp = Compiler(Path("."), {"Count": count})
    text = (f"---- MODULE Expr ----\nEXTENDS Naturals, FiniteSets\nCONSTANTS Count(_)\n{defs}\n"
            f"Value__ == {expr}\n====\n")
    root = comp.load_root(Path("<expr>"), text)
    b = root.lookup("Value__")
    assert b is not None
    fn, _ = comp.def_fn(b[1])
    return fn(None, None, {}), calls


def test_an_invariant_call_runs_once_per_run_of_the_inner_loop():
    # without hoisting: x = 1 stops at y = 1 (1 call), x = 2 at y = 2 (2), x = 3 (3), x = 4 (3): 9 calls
    value, calls = run("{x \\in 1..4 : \\A y \\in 1..3 : Count(x) > 0 /\\ x > y}")
    assert value == frozenset({4})
    assert sorted(calls) == [1, 2, 3, 4]


def test_a_call_invariant_in_every_loop_runs_once_per_evaluation():
    value, calls = run("F(2)", "F(a) == \\A x \\in 1..3 : \\A y \\in 1..2 : Count(a) > x + y - 10")
    assert value is True and calls == [2]


@pytest.mark.parametrize("defs", [
    "F(a) == \\A x \\in {} : Count(a) > x",                 # no iteration
    "F(a) == \\A x \\in 1..3 : x > 5 => Count(a) > 0",       # no iteration reaches it
    "F(a) == \\E x \\in 1..3 : x = 1 \\/ Count(a) > 0",      # the first iteration decides
])
def test_a_hoisted_call_is_lazy(defs):
    value, calls = run("F(7)", defs)
    assert value is True and calls == []


def test_each_run_of_an_enclosing_loop_gets_a_fresh_value():
    # Count(x + y) is invariant in the z loop only: {x : some y with x + y > 5} = {3}
    value, calls = run("{x \\in 1..3 : \\E y \\in 1..3 : \\A z \\in 1..2 : Count(x + y) > z + 3}")
    assert value == frozenset({3})
    assert len(calls) == 9  # once per (x, y), not once per x and not once in all


def test_each_call_of_an_operator_gets_a_fresh_value():
    defs = "Sq(v) == v * v\nG(a) == {x \\in 1..3 : \\A y \\in 1..2 : Sq(Count(a)) > x + y}"
    value, calls = run("<<G(1), G(2), G(3)>>", defs)
    assert value == (frozenset(), frozenset({1}), frozenset({1, 2, 3}))
    assert calls == [1, 2, 3]  # once per call of G: invariant in both loops, never in G's argument


def test_a_self_recursive_operator_without_state_is_memoized_by_its_arguments():
    defs = "RECURSIVE R(_)\nR(k) == IF k = 0 THEN Count(k) ELSE R(k - 1) + 1"
    value, calls = run("\\A x \\in 1..3 : R(3 + x - x) = 3", defs)  # the argument names x: not hoisted
    assert value is True and calls == [0]  # the second and third R(3) are the first one's value
    value, calls = run("<<R(2), R(1)>>", defs)
    assert value == (2, 1)
    mutual = "RECURSIVE A(_), B(_)\nA(k) == IF k = 0 THEN Count(k) ELSE B(k - 1)\nB(k) == A(k)"
    value, calls = run("\\A x \\in 1..3 : A(2 + x - x) = 0", mutual)
    assert value is True and len(calls) == 3  # mutual recursion: never memoized (as before)


def test_an_operator_of_its_arguments_only_is_memoized_by_their_values():
    defs = "M(v) == Count(v) * 2\nP(a, b) == Count(a) - b"
    value, calls = run("{M(x + y) : x \\in 1..3, y \\in 0..1}", defs)
    assert value == frozenset({2, 4, 6, 8}) and sorted(calls) == [1, 2, 3, 4]  # 6 calls, 4 values
    value, calls = run("{P(x, y) : x \\in 1..2, y \\in 1..2} \\cup {P(x, 1) : x \\in 1..2}", defs)
    assert value == frozenset({-1, 0, 1}) and len(calls) == 4 + 2  # each call site has its own memo


def test_a_filter_over_a_product_set_keeps_its_order_and_value():
    value, _ = run("<<Cardinality({rj \\in {1, 2} \\X (1..3) : rj[2] > 1}), "
                   "Cardinality({rj \\in {1, 2} \\X (1..3) : rj[2] > 2})>>")
    assert value == (4, 2)
    p = ProductSet([frozenset({2, 1}), frozenset({3, 4})])
    first = ordered_elements(p)
    assert list(first) == [(1, 3), (1, 4), (2, 3), (2, 4)] and ordered_elements(p) is first


def test_two_plain_binders_loop_as_the_general_case():
    binds = [(_bind("x"), frozenset({1, 2})), (_bind("y"), frozenset({3, 4}))]
    for body in (lambda s, n, e: e["x"] < e["y"], lambda s, n, e: e["x"] + e["y"] == 6,
                 lambda s, n, e: e["x"] == 5):
        for is_all in (True, False):
            seen_a: list = []
            seen_b: list = []

            def track(seen, fn=body):
                def b(s, n, e):
                    seen.append((e["x"], e["y"]))
                    return fn(s, n, e)
                return b
            got = _quant2(None, None, {}, frozenset({1, 2}), "x", frozenset({3, 4}), "y", track(seen_a), is_all)
            assert got == _quantn(None, None, {}, binds, track(seen_b), is_all)
            assert seen_a == seen_b
    with pytest.raises(TypeError):
        _quant2(None, None, {}, frozenset({1}), "x", frozenset({2}), "y", lambda s, n, e: 1, True)


def test_hoisted_values_are_not_reused_across_states(tmp_path):
    """x counts 0..5; AddX's and the recursive S's values depend on x (a state variable), Dbl's on its
    argument only: each sits in loops it is invariant in. Each invariant fails first in the state with
    x = 4."""
    body = """
    VARIABLE x
    Init == x = 0
    Next == x < 5 /\\ x' = x + 1
    AddX(a) == a + x
    Dbl(v) == v * 2
    InvA == \\A i \\in {1} : \\A j \\in 1..2 : AddX(i) # 5
    InvB == \\A i \\in 1..2 : \\E j \\in 1..3 : Dbl(x) # 8 /\\ j > 0
    RECURSIVE S(_)
    S(k) == IF k = 0 THEN x ELSE S(k - 1)
    InvC == \\A i \\in 1..2 : S(2) # 4
    Ok == \\A i \\in 1..2 : \\A j \\in 1..2 : AddX(i) + Dbl(x) < 100
    """
    for inv in ("InvA", "InvB", "InvC"):
        spec = write_spec(tmp_path, body, f"INIT Init\nNEXT Next\nINVARIANT {inv}\nCHECK_DEADLOCK FALSE\n")
        r = check_model(spec, spec.with_suffix(".cfg"))
        assert r.outcome is Outcome.SAFETY, inv
        assert r.violation is not None and r.violation.name == inv, inv
        assert r.violation.trace[-1].values["x"] == 4, inv
    spec = write_spec(tmp_path, body, "INIT Init\nNEXT Next\nINVARIANT Ok\nCHECK_DEADLOCK FALSE\n")
    r = check_model(spec, spec.with_suffix(".cfg"))
    assert r.outcome is Outcome.SUCCESS and r.distinct_states == 6 and r.generated_states == 6
