"""Value semantics: TLC's equality rules, fingerprints that keep kinds apart, printing."""

from __future__ import annotations

import pytest

from kvexact.spec.checker.values import (
    EvalError,
    Fcn,
    ModelValue,
    canon,
    fmt,
    mk_fcn,
    ordered_elements,
    seq_length,
    tla_eq,
)


def test_equality_rules():
    a = ModelValue("a")
    assert tla_eq(a, a) and not tla_eq(a, 1) and not tla_eq("a", a)
    assert ModelValue("a") is a  # interned
    with pytest.raises(EvalError, match="compare integer 1 with string"):
        tla_eq(1, "a")
    with pytest.raises(EvalError, match="compare boolean TRUE with integer 1"):
        tla_eq(True, 1)
    assert tla_eq(frozenset({1}), frozenset({1})) and not tla_eq((1,), (2,))


def test_functions_with_domain_one_to_n_are_tuples():
    assert mk_fcn({1: "x", 2: "y"}) == ("x", "y") and mk_fcn({}) == ()
    assert type(mk_fcn({2: "x"})) is Fcn


def test_canon_keeps_kinds_apart():
    assert canon(True) != canon(1)
    assert canon(frozenset({True})) != canon(frozenset({1}))
    assert canon(frozenset({1})) != canon((1,))
    assert canon(Fcn({"a": True})) != canon(Fcn({"a": 1}))


def test_canon_of_containers_by_hand():
    """The keys of sequences and functions, written out: plain elements (integers, strings, model
    values) are their own keys, booleans are tagged at every depth, keys and values alike."""
    m = ModelValue("m1")
    assert canon((1, "s", m, True, (2, False))) == ("$T", 1, "s", m, ("$B", True), ("$T", 2, ("$B", False)))
    assert canon(Fcn({True: 3, "k": (False,)})) == ("$F", frozenset({(("$B", True), 3), ("k", ("$T", ("$B", False)))}))
    assert canon((True,)) != canon((1,)) and canon(Fcn({0: True})) != canon(Fcn({0: 1}))


def test_printing_and_order():
    assert fmt(frozenset({3, 1, 2})) == "{1, 2, 3}"
    assert fmt(Fcn({"b": 1, "a": "s"})) == '[a |-> "s", b |-> 1]'
    assert fmt((True, ModelValue("m1"))) == "<<TRUE, m1>>"
    assert fmt(Fcn({5: 1})) == "(5 :> 1)"
    # TLC's order: sets by size first
    assert ordered_elements(frozenset({frozenset({1, 2}), frozenset({3})})) == [frozenset({3}), frozenset({1, 2})]


def test_seq_length_is_n_only_for_one_to_n():
    assert seq_length(frozenset({1, 2, 3})) == 3 and seq_length(frozenset({1})) == 1
    for s in ({2, 3}, {1, 3}, {0, 1}, {True}, {True, 2}, {"a"}, set()):
        assert seq_length(frozenset(s)) == -1, s


def test_generated_function_builder_gives_tuples_only_on_one_to_n():
    from kvexact.spec.checker.binders import _bind
    from kvexact.spec.checker.codegen import _fcn1, _quantn

    double = lambda s, n, e: e["i"] * 2  # noqa: E731
    assert _fcn1(None, None, {}, frozenset({1, 2, 3}), "i", double) == (2, 4, 6)
    assert _fcn1(None, None, {}, frozenset(), "i", double) == ()
    f = _fcn1(None, None, {}, frozenset({2, 3}), "i", double)
    assert type(f) is Fcn and f.d == {2: 4, 3: 6}
    g = _fcn1(None, None, {}, frozenset({True}), "i", lambda s, n, e: 7)
    assert type(g) is Fcn and list(g.d) == [True]
    seen = []

    def body(s, n, e):
        seen.append((e["x"], e["y"]))
        return e["x"] < e["y"]
    binds = [(_bind("x"), frozenset({1, 2})), (_bind("y"), frozenset({3}))]
    assert _quantn(None, None, {}, binds, body, True) is True and sorted(seen) == [(1, 3), (2, 3)]
    assert _quantn(None, None, {}, binds, lambda s, n, e: e["x"] == 2, False) is True
    assert _quantn(None, None, {}, binds, lambda s, n, e: e["x"] == 9, False) is False
    with pytest.raises(TypeError):  # a non-boolean body leaves the fast path (the closure reports it)
        _quantn(None, None, {}, binds, lambda s, n, e: 1, True)


def test_functions_and_two_binder_quantifiers_evaluate_as_tla():
    from kvexact.spec.checker import evaluate
    assert evaluate("[i \\in {1, 2, 3} |-> i * 2] = <<2, 4, 6>>") is True
    assert evaluate("DOMAIN [i \\in {2, 3} |-> i] = {2, 3}") is True
    assert evaluate("[b \\in {TRUE} |-> 7][TRUE]") == 7
    assert evaluate("\\A x \\in {1, 2}, y \\in {3, 4} : x < y") is True
    assert evaluate("\\E x \\in {1, 2}, y \\in {1, 2} : x + y = 4") is True
    with pytest.raises(EvalError, match="non-boolean|boolean"):
        evaluate("\\A x \\in {1}, y \\in {2} : x")


def test_a_set_of_incomparable_values_is_an_error_as_in_tlc():
    # Python holds 1 == TRUE, so {1} \cup {TRUE} was {1}; TLC cannot compare an integer with a boolean
    from kvexact.spec.checker import evaluate
    with pytest.raises(EvalError, match="compare integer 1 with boolean TRUE"):
        evaluate("{1} \\cup {TRUE}")
    with pytest.raises(EvalError, match="compare integer 1 with boolean TRUE"):
        evaluate("{1, TRUE}")
    with pytest.raises(EvalError, match="compare boolean FALSE with integer 0"):
        evaluate("{FALSE} \\cup {0}")
    assert evaluate("{2, {1}} = {{1}} \\cup {2}") is True  # TLC accepts a set and an integer in one set
    assert evaluate("{1} \\cup {2} = {2, 1}") is True and evaluate("{TRUE} \\cup {FALSE} = BOOLEAN") is True
    from kvexact.spec.checker.values import set_of, set_union
    a, b = ModelValue("a"), ModelValue("b")  # model values compare with every value
    assert set_of((a, 1, 2)) == frozenset({a, 1, 2}) and set_union(frozenset({b}), frozenset({"x"})) == {b, "x"}


def test_a_union_derives_its_fingerprint_key_from_the_larger_operand():
    from kvexact.spec.checker.values import set_union
    recs = [Fcn({"t": "m", "b": i}) for i in range(5)]
    for small in (frozenset({recs[4]}), frozenset({True}), frozenset({7})):
        big = frozenset(recs[:4]) if small == frozenset({recs[4]}) else frozenset({False} if True in small else {1, 2})
        canon(big)  # known: the union's key is derived from it
        u = set_union(big, small)
        assert canon(u) == canon(frozenset(list(u)[::-1])) and u == big | small
    assert canon(set_union(frozenset({False}), frozenset({True}))) != canon(frozenset({0, 1}))
