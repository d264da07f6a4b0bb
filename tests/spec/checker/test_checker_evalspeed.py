"""Fast paths of evaluation (issue 16's over-budget corpus models): each must give the value and the
error of the general path, as TLC defines them."""

from __future__ import annotations

import pytest

from kvexact.spec.checker.binders import _bind
from kvexact.spec.checker.codegen import _setofn
from kvexact.spec.checker.model import evaluate
from kvexact.spec.checker.values import EvalError, Fcn, canon, fcn_update, order_key, sorted_values


def test_a_pair_binder_binds_both_names_of_each_element():
    # GameOfLife's neighbours: {<<p[1] + x, p[2] + y>> : <<x, y>> \in nbrs}
    got = evaluate("{<<10 + x, 20 + y>> : <<x, y>> \\in {-1, 0, 1} \\X {-1, 1}}")
    assert got == frozenset({(9, 19), (9, 21), (10, 19), (10, 21), (11, 19), (11, 21)})
    assert evaluate("{a - b : <<a, b>> \\in {<<5, 2>>, <<1, 1>>}}") == frozenset({3, 0})
    assert evaluate("{a + b + c : <<a, b, c>> \\in {<<1, 2, 3>>, <<4, 5, 6>>}}") == frozenset({6, 15})


def test_a_pair_binder_refuses_an_element_of_another_length():
    with pytest.raises(EvalError, match="cannot bind <<1, 2, 3>> to <<a, b>>"):
        evaluate("{a : <<a, b>> \\in {<<1, 2, 3>>}}")
    with pytest.raises(EvalError, match="cannot bind 7 to <<a, b>>"):
        _setofn(None, None, {}, [(_bind_pair(), frozenset({7}))], lambda s, n, e: e["a"])


def test_one_tuple_binder_sees_every_element_once():
    seen: list = []

    def body(s, n, e):
        seen.append((e["a"], e["b"]))
        return e["a"] * e["b"]
    got = _setofn(None, None, {"a": 0}, [(_bind_pair(), frozenset({(1, 2), (3, 4), (2, 1)}))], body)
    assert got == frozenset({2, 12}) and sorted(seen) == [(1, 2), (2, 1), (3, 4)]


def _bind_pair():
    return _bind(_Tuple(["a", "b"]))


class _Tuple:
    """A stand-in for the parser's Tuple node (binders.py reads its type name and items)."""

    def __init__(self, items: list):
        self.items = items


_Tuple.__name__ = "Tuple"


@pytest.mark.parametrize("size", [3, 6, 40])
def test_an_updated_function_has_the_key_of_the_same_function_built_directly(size):
    """A small function's key is rebuilt when needed, a large one's follows the update: either way it
    is the key of the new value, and TRUE and 1 stay apart."""
    inner = Fcn({"status": "Empty", "voted": (1, 2)})
    f = Fcn({f"k{i}": inner if i == 0 else i for i in range(size)})
    canon(f)  # the state was fingerprinted before the update
    g = fcn_update(f, "k1", True)
    assert canon(g) == canon(Fcn({**f.d, "k1": True}))
    assert canon(g) != canon(Fcn({**f.d, "k1": 1})) and canon(g) != canon(f)
    nested = fcn_update(f, "k0", fcn_update(inner, "status", "Accepting"))
    direct = Fcn({**f.d, "k0": Fcn({"status": "Accepting", "voted": (1, 2)})})
    assert canon(nested) == canon(direct) and nested == direct


def test_a_record_keeps_its_place_in_tlc_order_once_its_order_key_is_stored():
    a = Fcn({"bal": 2, "type": "Prepare"})
    b = Fcn({"bal": 1, "type": "Prepare"})
    c = Fcn({"bal": 1, "type": "Accept"})
    order_key(a)  # stored on a
    # records compare field by field in name order, then by value: "Accept" < "Prepare", 1 < 2
    assert sorted_values([a, b, c]) == [c, b, a]
    assert sorted_values([a, b, c]) == sorted_values([c, a, b])
    assert evaluate('CHOOSE m \\in {[bal |-> 2, t |-> "P"], [bal |-> 1, t |-> "P"]} : TRUE') == \
        Fcn({"bal": 1, "t": "P"})
