"""Each evaluator construct, on constant expressions whose values are worked out by hand."""

from __future__ import annotations

import pytest

from kvexact.spec.checker import ModelValue, evaluate, to_python
from kvexact.spec.checker.errors import SpecError, UndefinedError, UnsupportedError
from kvexact.spec.checker.values import EvalError

DEFS = r"""
RECURSIVE Fact(_)
Fact(n) == IF n = 0 THEN 1 ELSE n * Fact(n - 1)
Twice(F(_), x) == F(F(x))
Inc(x) == x + 1
a ++ b == a * 10 + b
fib[n \in Nat] == IF n < 2 THEN n ELSE fib[n - 1] + fib[n - 2]
sq[i \in 1..3] == i * i
"""

CASES = [
    # integers and arithmetic
    ("1 + 2 * 3", 7), ("7 \\div 2", 3), ("(-7) \\div 2", -4), ("-7 \\div 2", -3), ("(-7) % 2", 1), ("2 ^ 10", 1024), ("-(3)", -3),
    ("5 - 8", -3), ("3 < 4 /\\ 4 =< 4 /\\ 5 >= 5 /\\ 6 > 5 /\\ 2 \\leq 3 /\\ 3 \\geq 3", True),
    # booleans, junction lists, implication, equivalence
    ("TRUE /\\ FALSE", False), ("TRUE \\/ FALSE", True), ("~TRUE", False), ("FALSE => 1 = \"a\"", True),
    ("TRUE <=> TRUE", True), ("FALSE \\equiv TRUE", False), ("1 # 2", True), ("1 /= 1", False),
    # sets
    ("{1, 2} \\cup {3}", frozenset({1, 2, 3})), ("{1, 2} \\cap {2, 3}", frozenset({2})),
    ("{1, 2, 3} \\ {2}", frozenset({1, 3})), ("{1} \\subseteq {1, 2}", True), ("2 \\in 1..3", True),
    ("4 \\notin 1..3", True), ("{x \\in 1..6 : x % 3 = 0}", frozenset({3, 6})),
    ("{x * x : x \\in 1..3}", frozenset({1, 4, 9})), ("{x + y : x \\in 1..2, y \\in {10, 20}}",
                                                      frozenset({11, 12, 21, 22})),
    ("SUBSET {1, 2}", frozenset({frozenset(), frozenset({1}), frozenset({2}), frozenset({1, 2})})),
    ("UNION {{1}, {2, 3}}", frozenset({1, 2, 3})), ("Cardinality(SUBSET (1..4))", 16),
    ("Cardinality({1, 2, 2})", 3 - 1), ("{1, 2} \\X {3}", frozenset({(1, 3), (2, 3)})),
    ("5 \\in Nat /\\ -1 \\notin Nat /\\ -1 \\in Int", True), ("(Nat \\ {0}) = (Nat \\ {0})", True),
    ("3 \\in Nat \\ {0}", True), ("BOOLEAN", frozenset({False, True})),
    # functions, EXCEPT with paths and @, DOMAIN, function sets
    ("[x \\in 1..3 |-> x * 2][2]", 4), ("DOMAIN [x \\in {\"a\", \"b\"} |-> 0]", frozenset({"a", "b"})),
    ("[[x \\in 1..2 |-> 0] EXCEPT ![1] = @ + 5]", (5, 0)),
    ("[[a |-> [b |-> 1]] EXCEPT !.a.b = @ * 7].a.b", 7),
    ("[[x \\in 1..2 |-> <<0, 0>>] EXCEPT ![2][1] = 9]", ((0, 0), (9, 0))),
    ("[m, n \\in 1..2 |-> m * 10 + n][2, 1]", 21), ("Cardinality([1..2 -> BOOLEAN])", 4),
    ("[x \\in 1..2 |-> TRUE] \\in [1..2 -> BOOLEAN]", True), ("sq[3]", 9), ("fib[10]", 55),
    ("[<<a, b>> \\in {1, 2} \\X {3} |-> a + b][<<2, 3>>]", 5),
    # records and record sets
    ("[a |-> 1, b |-> \"x\"].b", "x"), ("[a |-> 1] = [a |-> 1]", True),
    ("Cardinality([a : {1, 2}, b : BOOLEAN])", 4), ("[a |-> 2, b |-> TRUE] \\in [a : {1, 2}, b : BOOLEAN]", True),
    # tuples and sequences
    ("<<1, 2>>[2]", 2), ("Len(<<1, 2, 3>>)", 3), ("Append(<<1>>, 2)", (1, 2)), ("Head(<<4, 5>>)", 4),
    ("Tail(<<4, 5>>)", (5,)), ("SubSeq(<<1, 2, 3, 4>>, 2, 3)", (2, 3)), ("<<1>> \\o <<2, 3>>", (1, 2, 3)),
    ("SelectSeq(<<1, 2, 3, 4>>, LAMBDA x : x % 2 = 0)", (2, 4)), ("<<1, 2>> \\in Seq({1, 2})", True),
    ("<<1, 3>> \\in Seq({1, 2})", False), ("<<>> = [x \\in {} |-> 1]", True),
    ("[i \\in 1..2 |-> i] = <<1, 2>>", True),
    # strings, model values, CHOOSE (TLC's first element), quantifiers over tuples
    ("\"ab\" = \"ab\"", True), ("CHOOSE x \\in {3, 1, 2} : TRUE", 1), ("CHOOSE x \\in 1..9 : x * x > 10", 4),
    ("\\A x \\in 1..3 : x > 0", True), ("\\E x \\in 1..3 : x > 2", True), ("\\A x, y \\in 1..2 : x + y < 5", True),
    ("\\E <<x, y>> \\in {1, 2} \\X {3} : x + y = 5", True), ("\\A x \\in {} : FALSE", True),
    # LET with local and RECURSIVE operators, IF, CASE/OTHER, LAMBDA, higher order, infix user op
    ("LET y == 2 IN y * y", 4), ("Fact(5)", 120), ("IF 1 < 2 THEN \"y\" ELSE \"n\"", "y"),
    ("CASE 1 > 2 -> 1 [] 2 > 1 -> 2 [] OTHER -> 3", 2), ("CASE FALSE -> 1 [] OTHER -> 3", 3),
    ("Twice(Inc, 1)", 3), ("Twice(LAMBDA x : x * 3, 1)", 9), ("1 ++ 2", 12),
    ("LET RECURSIVE S(_) S(n) == IF n = 0 THEN 0 ELSE n + S(n - 1) IN S(4)", 10),
    # TLC module
    ("(2 :> \"a\") @@ (3 :> \"b\")", {2: "a", 3: "b"}), ("(1 :> \"a\") @@ (2 :> \"b\") = <<\"a\", \"b\">>", True),
    ("(1 :> 5) @@ (1 :> 6)", (5,)), ("Cardinality(Permutations({1, 2, 3}))", 6),
    ("SortSeq(<<3, 1, 2>>, LAMBDA x, y : x < y)", (1, 2, 3)), ("ToString(12)", "12"),
    ("Assert(TRUE, \"never\")", True),
    # CommunityModules operators (Functions, SequencesExt)
    ("Range([x \\in 1..3 |-> x % 2])", frozenset({0, 1})), ("IsInjective(<<1, 2, 1>>)", False),
    ("Restrict([x \\in 1..3 |-> x], {2, 3})", {2: 2, 3: 3}), ("ToSet(<<1, 1, 2>>)", frozenset({1, 2})),
    ("Reverse(<<1, 2>>)", (2, 1)), ("Front(<<1, 2>>)", (1,)), ("Last(<<1, 2>>)", 2),
    ("SetToSeq({3, 1})", (1, 3)),
]


@pytest.mark.parametrize("expr,expected", CASES, ids=[c[0] for c in CASES])
def test_construct(expr, expected):
    assert to_python(evaluate(expr, DEFS)) == expected


def test_booleans_are_not_integers():
    """Python's True == 1 must not leak: {TRUE, FALSE} has 2 elements, and TRUE = 1 is an error."""
    assert evaluate("Cardinality({TRUE, FALSE})") == 2
    with pytest.raises(EvalError, match="compare"):
        evaluate("TRUE = 1")


def test_model_values_only_equal_themselves():
    c = {"a": ModelValue("a"), "b": ModelValue("b")}
    assert evaluate("a = a /\\ a # b /\\ a # 1 /\\ a # \"a\"", constants=c) is True


@pytest.mark.parametrize("expr,message", [
    ("1 = \"a\"", "compare"),
    ("CHOOSE x \\in 1..3 : x > 5", "CHOOSE"),
    ("[x \\in 1..2 |-> x][3]", "outside its domain"),
    ("<<1, 2>>[0]", "outside its domain"),
    ("[a |-> 1].b", "no field b"),
    ("Head(<<>>)", "Head of the empty sequence"),
    ("CASE FALSE -> 1", "no guard"),
    ("IF 1 THEN 2 ELSE 3", "not a boolean"),
    ("Assert(FALSE, \"boom\")", "Assert failed: boom"),
    ("Cardinality(Nat)", "infinite"),
])
def test_evaluation_errors_name_the_problem_and_place(expr, message):
    with pytest.raises(EvalError, match=message) as info:
        evaluate(expr)
    assert info.value.location.startswith("<expr>:"), info.value.location


def test_undefined_identifier_has_a_location():
    with pytest.raises(UndefinedError, match="undefined identifier Nope") as info:
        evaluate("Nope + 1")
    assert str(info.value).startswith("<expr>:")


def test_unsupported_construct_is_named():
    with pytest.raises(UnsupportedError, match="unbounded CHOOSE"):
        evaluate("CHOOSE x : x = 1")
    with pytest.raises(SpecError, match="temporal"):
        evaluate("[](TRUE)")


def test_except_outside_the_domain_leaves_the_function_unchanged():
    """TLA+: [f EXCEPT ![x] = e] = f when x \\notin DOMAIN f (e and @ are never evaluated)."""
    assert evaluate("[<<1, 2>> EXCEPT ![5] = @ + 1]") == (1, 2)
    assert to_python(evaluate("[[a |-> 1] EXCEPT !.b = 2]")) == {"a": 1}


def test_membership_in_a_filtered_lazy_set_tests_only_the_element():
    """x \\in {y \\in S : P(y)} over a lazy S (SUBSET ..., [S -> T]) is S's membership and P(x), as TLC's
    SetPredValue: P is never evaluated at other elements (LoopInvariance's DomainPartitions filters
    SUBSET SUBSET 1..n on every state). Enumerating it still gives every element."""
    guarded = "{D \\in SUBSET SUBSET (1..3) : D = {{1}} \\/ Assert(FALSE, \"enumerated\")}"
    assert evaluate("{{1}} \\in " + guarded) is True
    with pytest.raises(EvalError, match="enumerated"):
        evaluate("Cardinality(" + guarded + ")")
    assert evaluate("{{1, 2}, {3}} \\in {D \\in SUBSET SUBSET (1..3) : UNION D = 1..3}") is True
    assert evaluate("{{1, 2}} \\in {D \\in SUBSET SUBSET (1..3) : UNION D = 1..3}") is False
    assert evaluate("Cardinality({D \\in SUBSET (1..4) : 1 \\in D})") == 8
    assert evaluate("{D \\in SUBSET (1..2) : 1 \\in D} = {{1}, {1, 2}}") is True
    assert evaluate("[x \\in {1} |-> 2] \\in {f \\in [{1} -> 1..3] : f[1] > 1}") is True
