"""Generated code that builds less (issue 16, PaxosCommit): a record constructor keeps the records of
integers, strings and model values it built, by their values (values.record_of); an EXCEPT with several
changes that read no @ updates a key shared by consecutive changes once (codegen.FastGen._merged); a
finite function or record set remembers the members it found by their fingerprint keys
(values._known_key); a union that adds nothing is its larger operand. Values must stay those of TLA+
(TRUE differs from 1; changes apply in their order); counts are worked by hand (generated states
include the initial one)."""

from __future__ import annotations

import pytest
from tla_snippets import NOLOCK, write_spec

from kvexact.spec.checker.engine import check_loaded
from kvexact.spec.checker.model import load_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.checker.values import EvalError, Fcn, FcnSet, RecordSet, canon, record_of, set_union


def _check(tmp_path, body: str):
    r = check_loaded(load_model(write_spec(tmp_path, body, NOLOCK)), coverage=False)
    assert r.outcome is Outcome.SUCCESS
    return r.distinct_states, r.generated_states


def test_a_record_site_returns_its_record_for_the_same_values():
    cache: dict = {}
    a = record_of(cache, ("x", "y"), (1, "u"))
    b = record_of(cache, ("x", "y"), (1, "u"))
    c = record_of(cache, ("x", "y"), (2, "u"))
    assert a is b and a is not c
    assert a == Fcn({"y": "u", "x": 1}) and hash(a) == hash(Fcn({"y": "u", "x": 1}))
    assert c.d == {"x": 2, "y": "u"}
    assert canon(a) == canon(Fcn({"x": 1, "y": "u"}))


def test_a_record_of_true_is_not_the_record_of_1():
    cache: dict = {}
    one = record_of(cache, ("x",), (1,))
    true = record_of(cache, ("x",), (True,))
    assert type(one.d["x"]) is int and type(true.d["x"]) is bool
    assert canon(one) != canon(true)
    # nor a record holding {1} the one holding {TRUE} (a set is not keyed by value at the site)
    s1 = record_of(cache, ("x",), (frozenset({1}),))
    st = record_of(cache, ("x",), (frozenset({True}),))
    assert type(next(iter(st.d["x"]))) is bool and type(next(iter(s1.d["x"]))) is int


MEMBERSHIP = """
VARIABLE msgs
Init == msgs = {}
Next == \\/ \\E a \\in {1, 2}, b \\in {"x", "y"} : msgs' = msgs \\cup {[f |-> a, g |-> b]}
        \\/ /\\ \\A a \\in {1, 2} : [f |-> a, g |-> "x"] \\in msgs
           /\\ UNCHANGED msgs
"""


def test_records_built_per_binding_are_told_apart(tmp_path):
    # msgs: any subset of the 4 records: 16 states; 4 sends from each (64), and the second disjunct
    # from the 4 states holding both [f |-> 1, g |-> "x"] and [f |-> 2, g |-> "x"]: 68, + 1 initial
    assert _check(tmp_path, MEMBERSHIP) == (16, 69)


def test_records_built_under_an_action_exists_give_one_path_each(tmp_path):
    # \\E a at action level: one path per a whose record is in msgs. Each of the 2 "x" records is in
    # 8 of the 16 states: 16 paths, + 64 sends + 1 initial
    body = MEMBERSHIP.replace("\\A a \\in {1, 2} : [f", "\\E a \\in {1, 2} : [f")
    assert _check(tmp_path, body) == (16, 81)


NESTED = """
VARIABLE a
Init == a = [i \\in {1, 2} |-> [j \\in {"x", "y"} |-> [m |-> 0, b |-> 0]]]
Next == \\E i \\in {1, 2}, v \\in 0..1 : a' = [a EXCEPT CHANGES]
"""


def test_two_changes_under_one_path_both_apply(tmp_path):
    # a[i]["x"] becomes [m |-> v, b |-> 1 - v]: for each i one of (0, 0) (initial), (0, 1), (1, 0):
    # 9 states, 4 successors each: 36, + 1 initial
    body = NESTED.replace("CHANGES", '![i]["x"].m = v, ![i]["x"].b = 1 - v')
    assert _check(tmp_path, body) == (9, 37)


def test_a_later_change_at_a_shorter_path_replaces_the_earlier_one(tmp_path):
    # a[i]["x"] becomes [m |-> 0, b |-> v] (the .m = 1 before it is overwritten): (0, 0) or (0, 1) for
    # each i: 4 states, 4 successors each: 16, + 1 initial
    body = NESTED.replace("CHANGES", '![i]["x"].m = 1, ![i]["x"] = [m |-> 0, b |-> v]')
    assert _check(tmp_path, body) == (4, 17)


def test_a_change_after_a_replacement_applies_to_the_new_value(tmp_path):
    # a[i]["x"] becomes [m |-> 1, b |-> v]: (0, 0) initially, then (1, 0) or (1, 1), for each i:
    # 9 states, 36 successors, + 1 initial
    body = NESTED.replace("CHANGES", '![i]["x"] = [m |-> 0, b |-> v], ![i]["x"].m = 1')
    assert _check(tmp_path, body) == (9, 37)


def test_changes_under_two_keys_of_one_key_apply_to_both(tmp_path):
    # a[i]["x"].m and a[i]["y"].b both become v: per i (x.m, y.b) is (0, 0) or (1, 1): 4 states, 4
    # successors each: 16, + 1 initial
    body = NESTED.replace("CHANGES", '![i]["x"].m = v, ![i]["y"].b = v')
    assert _check(tmp_path, body) == (4, 17)


def test_changes_at_keys_that_may_be_equal_keep_their_order(tmp_path):
    # ![i]..m = 1, ![j]..m = 2, ![i]..m = 3: m of i is 3, and m of j is 2 unless j = i. From (m1, m2):
    # (1,1) -> (3, m2), (2,2) -> (m1, 3), (1,2) -> (3, 2), (2,1) -> (2, 3). Reachable from (0, 0):
    # (3,0), (0,3), (3,2), (2,3), (3,3): 6 states, 4 successors each: 24, + 1 initial
    body = NESTED.replace("i \\in {1, 2}, v \\in 0..1", "i, j \\in {1, 2}").replace(
        "CHANGES", '![i]["x"].m = 1, ![j]["x"].m = 2, ![i]["x"].m = 3')
    assert "j \\in" in body
    assert _check(tmp_path, body) == (6, 25)


def test_a_record_set_remembers_members_by_key_and_keeps_true_apart():
    rs = RecordSet({"a": frozenset({1, 2})})
    one = Fcn({"a": 1})
    canon(one)  # its key made, as the state's fingerprint makes it
    assert rs.contains(one) and one in rs._known
    true = Fcn({"a": True})
    canon(true)
    assert true == one  # Python's equality would take it for the member
    with pytest.raises(EvalError):  # TLC: a boolean compared with integers
        rs.contains(true)
    assert not rs.contains(Fcn({"a": 3}))


def test_a_function_set_remembers_members_by_key():
    inner = FcnSet(frozenset({"x", "y"}), RecordSet({"m": frozenset({0, 1})}))
    fs = FcnSet(frozenset({1, 2}), inner)
    r0, r1 = Fcn({"m": 0}), Fcn({"m": 1})
    good = Fcn({1: Fcn({"x": r0, "y": r1}), 2: Fcn({"x": r0, "y": r0})})
    canon(good)
    assert fs.contains(good) and canon(good) in fs._known
    bad = Fcn({1: Fcn({"x": r0, "y": r1}), 2: Fcn({"x": r0, "y": Fcn({"m": 2})})})
    canon(bad)
    assert not fs.contains(bad) and canon(bad) not in fs._known


TYPED = """
VARIABLE f
Init == f = [i \\in {1, 2} |-> [a |-> 0]]
Next == \\E i \\in {1, 2} : f[i].a < 3 /\\ f' = [f EXCEPT ![i].a = @ + 1]
TypeOK == f \\in [{1, 2} -> [a : 0..TOP]]
"""


def test_a_type_invariant_over_nested_functions(tmp_path):
    cfg = "INIT Init\nNEXT Next\nINVARIANT TypeOK\nCHECK_DEADLOCK FALSE\n"
    # a in 0..3 for each i: 16 states; a step for each i with a < 3: 2 * 12 = 24, + 1 initial
    r = check_loaded(load_model(write_spec(tmp_path, TYPED.replace("TOP", "3"), cfg)), coverage=False)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (16, 25)
    # with a in 0..2 the first state with an a = 3 violates it, though states before it passed the test
    r = check_loaded(load_model(write_spec(tmp_path, TYPED.replace("TOP", "2"), cfg)), coverage=False)
    assert r.outcome is Outcome.SAFETY and r.violation is not None and r.violation.name == "TypeOK"


LITERAL_EQ = """
CONSTANTS a, b
VARIABLE x
Init == x = a
Next == \\/ x = a /\\ x' = b
        \\/ EQ /\\ x' = a
"""


@pytest.mark.parametrize("eq", ['x = "s"', '"s" = x', '~(x /= "s")'])
def test_a_model_value_is_not_equal_to_a_string_literal(tmp_path, eq):
    # x = a -> b; from b no step (b is not "s", a model value equals only itself): 2 states, 1 + 1
    cfg = "CONSTANTS a = a  b = b\n" + NOLOCK
    r = check_loaded(load_model(write_spec(tmp_path, LITERAL_EQ.replace("EQ", eq), cfg)), coverage=False)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (2, 2)


@pytest.mark.parametrize("eq, text", [('y = "s"', 'integer 1 with string "s"'), ('"s" = y', 'string "s" with integer 1')])
def test_an_integer_compared_with_a_string_literal_is_an_error(tmp_path, eq, text):
    body = f"VARIABLE y\nInit == y = 1\nNext == {eq} /\\ y' = 2\n"
    r = check_loaded(load_model(write_spec(tmp_path, body, NOLOCK)), coverage=False)
    assert r.outcome is Outcome.EVALUATION and r.violation is not None and text in r.violation.message


def test_a_union_that_adds_nothing_is_the_larger_set_itself():
    r1, r2 = Fcn({"t": "a", "v": 1}), Fcn({"t": "b", "v": 2})
    a = frozenset({r1, r2})
    again = set_union(a, frozenset({Fcn({"v": 1, "t": "a"})}))
    assert again is a and set_union(frozenset({r2}), a) is a
    grown = set_union(a, frozenset({Fcn({"t": "c", "v": 3})}))
    assert len(grown) == 3 and grown is not a
    # the kinds are checked first: {TRUE} is not taken for a part of {1, 2} (Python: True == 1)
    with pytest.raises(EvalError):
        set_union(frozenset({1, 2}), frozenset({True}))
