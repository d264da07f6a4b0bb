"""State keys built from a parent's (issue 16, the state store): a successor takes its parent's per-variable
fingerprint keys for the variables it left as the same objects, Append/Tail and EXCEPT derive a value's
key from a known one, and \\A over an action that assigns nothing counts each binding's paths. Keys must
stay equal exactly when the TLA+ values are (TRUE differs from 1); counts are worked by hand."""

from __future__ import annotations

from tla_snippets import NOLOCK, write_spec

from kvexact.spec.checker.engine import check_loaded
from kvexact.spec.checker.model import load_model
from kvexact.spec.checker.result import Outcome
from kvexact.spec.checker.values import Fcn, canon, fcn_update, seq_append, seq_tail


def _fresh(v):
    """The same TLA+ value rebuilt from new objects (no key remembered for it)."""
    if type(v) is tuple:
        return tuple([_fresh(x) for x in v] + [])
    if type(v) is frozenset:
        return frozenset(_fresh(x) for x in v)
    if type(v) is Fcn:
        return Fcn({_fresh(k): _fresh(x) for k, x in reversed(list(v.d.items()))})
    return v


def test_records_that_differ_in_one_nested_field_get_different_keys():
    a = Fcn({"x": Fcn({"y": 1, "z": "u"}), "w": 0})
    b = fcn_update(a, "x", fcn_update(a.d["x"], "y", 2))
    t = fcn_update(a, "x", fcn_update(a.d["x"], "y", True))
    assert canon(a) != canon(b) and canon(a) != canon(t) and canon(b) != canon(t)
    assert canon(b) == canon(_fresh(b)) and canon(t) == canon(_fresh(t))
    assert canon(fcn_update(b, "x", fcn_update(b.d["x"], "y", 1))) == canon(a)


def test_equal_values_built_different_ways_get_equal_keys():
    r1 = Fcn({"a": 1, "b": (1, 2)})
    r2 = Fcn({"b": (1, 2), "a": 1})  # another insertion order
    assert canon(r1) == canon(r2)
    s = (r1, 3)
    canon(s)  # s's key remembered: Append and Tail below derive theirs from it
    grown = seq_append(s, Fcn({"c": True}))
    assert canon(grown) == canon((r2, 3, Fcn({"c": True})))
    assert canon(grown) != canon((r2, 3, Fcn({"c": 1})))
    assert canon(seq_tail(grown)) == canon((3, Fcn({"c": True})))
    assert canon(seq_tail(grown)) != canon((3, Fcn({"c": 1})))
    one = seq_append((True, 2), 1)
    assert canon(seq_tail(seq_append(_known((1, 2)), True))) == canon((2, True)) != canon((2, 1))
    assert canon(one) == canon((True, 2, 1))


def _known(t: tuple) -> tuple:
    canon(t)
    return t


def test_except_with_the_same_value_is_the_same_function():
    f = Fcn({"a": 1, "b": Fcn({"c": 0})})
    assert fcn_update(f, "a", f.d["a"]) is f
    assert fcn_update(f, "a", True) is not f and canon(fcn_update(f, "a", True)) != canon(f)
    assert fcn_update(f, "z", 5) is f  # outside the domain: f itself (TLA+)
    big = Fcn({i: i for i in range(20, 60)})  # a key that follows the update (more than 16 pairs)
    canon(big)
    upd = fcn_update(big, 30, True)
    assert canon(upd) == canon(_fresh(upd)) != canon(fcn_update(big, 30, 1))


def test_a_successor_key_from_its_parent_equals_the_full_key(tmp_path):
    spec = write_spec(tmp_path, "VARIABLES p, q\nInit == p = 0 /\\ q = 0\nNext == p' = p /\\ q' = q\n", NOLOCK)
    m = load_model(spec)
    parent = {"p": Fcn({"a": Fcn({"b": 1}), "c": (1, 2)}), "q": frozenset({(1, 2)})}
    pb = m.base_key(parent)
    for child in ({"p": parent["p"], "q": frozenset({(1, 2), (3,)})},
                  {"p": fcn_update(parent["p"], "a", Fcn({"b": True})), "q": parent["q"]},
                  {"p": _fresh(parent["p"]), "q": _fresh(parent["q"])}):
        assert m.base_key_from(m.state_tuple(child), m.state_tuple(parent), pb) == m.base_key(_fresh_state(child)) == m.key(child)
    same = {"p": _fresh(parent["p"]), "q": _fresh(parent["q"])}
    assert m.base_key_from(m.state_tuple(same), m.state_tuple(parent), pb) == pb
    one = {"p": fcn_update(parent["p"], "a", Fcn({"b": True})), "q": parent["q"]}
    assert m.base_key_from(m.state_tuple(one), m.state_tuple(parent), pb) != pb


def _fresh_state(s: dict) -> dict:
    return {k: _fresh(v) for k, v in s.items()}


QUEUE_BOOL_INT = """
VARIABLE q
Init == q = <<>>
Next == \\/ Len(q) < 2 /\\ q' = Append(q, 1)
        \\/ Len(q) < 2 /\\ q' = Append(q, TRUE)
        \\/ q /= <<>> /\\ q' = Tail(q)
"""


def test_a_queue_of_true_and_1_keeps_them_apart(tmp_path):
    # sequences of length <= 2 over {1, TRUE}: 1 + 2 + 4 = 7 states. Successors: <<>> 2; each of the
    # 2 of length 1: 2 appends and a tail; each of the 4 of length 2: a tail: 2 + 6 + 4 = 12, + 1 initial
    r = check_loaded(load_model(write_spec(tmp_path, QUEUE_BOOL_INT, NOLOCK)), coverage=False)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (7, 13)


NESTED_EXCEPT = """
VARIABLE f
Init == f = [a |-> [b |-> 0, c |-> 0], d |-> 0]
Next == \\/ f.a.b < 2 /\\ f' = [f EXCEPT !.a.b = @ + 1]
        \\/ f.a.c < 1 /\\ f' = [f EXCEPT !.a.c = 1]
        \\/ f' = [f EXCEPT !.a.b = f.a.b]
"""


def test_nested_except_states(tmp_path):
    # b in 0..2, c in 0..1: 6 states. Successors: a b step from the 4 with b < 2, a c step from the 3
    # with c = 0, and the third disjunct (the same record) from all 6: 13, + 1 initial
    r = check_loaded(load_model(write_spec(tmp_path, NESTED_EXCEPT, NOLOCK)), coverage=False)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (6, 14)


FORALL_PATHS = """
VARIABLE x
Ok(i) == \\E j \\in {1, 2, 3} : j >= i
Init == x = 0
Next == /\\ \\A i \\in S : Ok(i)
        /\\ x' = 1 - x
"""


def test_forall_over_an_action_without_assignments_multiplies_its_paths(tmp_path):
    # \\A i \\in {1, 2} : \\E j ... : j >= i is the conjunction of 3 paths (i = 1) and 2 (i = 2): 6
    # successors of each of the 2 states (x = 0, 1): 12, + 1 initial
    for body in ("Ok(i)", "\\E j \\in {1, 2, 3} : j >= i"):
        spec = write_spec(tmp_path, FORALL_PATHS.replace("S", "{1, 2}").replace("Ok(i)\n", body + "\n"), NOLOCK)
        r = check_loaded(load_model(spec), coverage=False)
        assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (2, 13), body
    # i = 4 has no path: no successor at all (the bindings after it are not needed)
    r = check_loaded(load_model(write_spec(tmp_path, FORALL_PATHS.replace("S", "{1, 4, 2}"), NOLOCK)),
                     coverage=False)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (1, 1)


def test_exists_over_a_non_boolean_predicate_is_an_error(tmp_path):
    body = "VARIABLE x\nInit == x = 0\nNext == /\\ \\E i \\in {1, 2}, j \\in {3} : i + j\n        /\\ x' = x\n"
    r = check_loaded(load_model(write_spec(tmp_path, body, NOLOCK)), coverage=False)
    assert r.outcome is Outcome.EVALUATION and "non-boolean" in r.violation.message


def test_plain_functions_and_sequences_are_their_own_keys_without_meeting_tagged_ones():
    from kvexact.spec.checker.values import is_flat
    rec = Fcn({"a": 1, "b": "x"})
    assert canon(rec) is rec and canon(Fcn({"b": "x", "a": 1})) == rec
    assert canon(Fcn({"a": True, "b": "x"})) != canon(rec) and canon(Fcn({"a": 1, "b": ("x",)})) != canon(rec)
    assert canon((1, "a")) == (1, "a") and is_flat(())
    assert canon(("$T", 1)) != canon((1,)) and canon(("$B", 1)) != canon(True)  # strings like the tags
    assert canon((1,)) != canon((True,)) and canon(frozenset({(1,)})) != canon(frozenset({(True,)}))
    # Tail that leaves only plain elements: its key is the flat sequence's own, as when built afresh
    assert canon(seq_tail(_known(((1,), 2, 3)))) == canon((2, 3)) == (2, 3)
    # EXCEPT that replaces the only boolean: the result's key is the plain function's own
    big = Fcn({i: (True if i == 40 else i) for i in range(20, 60)})
    canon(big)
    plain = fcn_update(big, 40, 40)
    assert canon(plain) == canon(Fcn({i: i for i in range(20, 60)})) and canon(plain) is plain
    # a set of plain records is keyed by its elements; one with a boolean field is not equal to it
    s1 = frozenset({rec, Fcn({"a": 2, "b": "y"})})
    assert canon(s1) == canon(frozenset({Fcn({"b": "y", "a": 2}), Fcn({"a": 1, "b": "x"})}))
    assert canon(s1) != canon(frozenset({rec, Fcn({"a": True, "b": "y"})}))


def test_symmetry_permutes_plain_records():
    from kvexact.spec.checker.symmetry import Symmetry
    from kvexact.spec.checker.values import ModelValue
    p, q = ModelValue("sk_p"), ModelValue("sk_q")
    sym = Symmetry([Fcn({p: q, q: p})])
    a = (canon(Fcn({"who": p, "n": 1})), canon(frozenset({Fcn({"who": q, "n": 2})})))
    b = (canon(Fcn({"who": q, "n": 1})), canon(frozenset({Fcn({"who": p, "n": 2})})))  # a with p, q swapped
    c = (canon(Fcn({"who": q, "n": 1})), canon(frozenset({Fcn({"who": q, "n": 2})})))
    assert sym.key(a) == sym.key(b) and sym.key(a) != sym.key(c)


def test_forall_over_the_empty_set_is_one_path(tmp_path):
    # \\A over {} holds: each state has its one successor (x' = 1 - x): 2 states, 1 + 1 + 1 generated
    spec = write_spec(tmp_path, FORALL_PATHS.replace("S", "{}"), NOLOCK)
    r = check_loaded(load_model(spec), coverage=False)
    assert r.outcome is Outcome.SUCCESS and (r.distinct_states, r.generated_states) == (2, 3)
