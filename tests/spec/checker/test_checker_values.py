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


def test_printing_and_order():
    assert fmt(frozenset({3, 1, 2})) == "{1, 2, 3}"
    assert fmt(Fcn({"b": 1, "a": "s"})) == '[a |-> "s", b |-> 1]'
    assert fmt((True, ModelValue("m1"))) == "<<TRUE, m1>>"
    assert fmt(Fcn({5: 1})) == "(5 :> 1)"
    # TLC's order: sets by size first
    assert ordered_elements(frozenset({frozenset({1, 2}), frozenset({3})})) == [frozenset({3}), frozenset({1, 2})]
