"""The shape of action formulas: junction operands, parentheses stripped, primes, and the flat steps
an enumerator can run in a loop. Shared by the action compiler and the action generator, which must
not import each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvexact.spec.checker.binders import ALIASES

Act = Callable[..., None]


def _strip(node: Any) -> Any:
    while type(node).__name__ in ("Parentheses", "VerticalItem"):
        node = node.expression
    return node


def _junction_items(node: Any, op: str) -> list | None:
    """The operands of a (vertical or infix) junction ``op`` (``/\\`` or ``\\/``), nested infix ones
    flattened; None when ``node`` is not such a junction."""
    node = _strip(node)
    k = type(node).__name__
    if k == "VerticalList" and node.operator == op:
        return [it.expression for it in node.arguments]
    if k == "OperatorApplication" and ALIASES.get(node.operator, node.operator) == op and node.arguments:
        out = []
        for a in node.arguments:
            sub = _junction_items(a, op)
            out.extend(sub if sub is not None and type(_strip(a)).__name__ == "OperatorApplication" else [a])
        return out
    return None


def _flat_step(a: Act) -> tuple | None:
    """(0, guard, None), (1, variable, value function) or (2, variables kept, None) for an action that
    yields at most one path and can run in a flat loop; None otherwise."""
    if getattr(a, "_pure", False):
        return (0, a._fn, None)  # type: ignore[attr-defined]
    if getattr(a, "_assigns", None) is not None:
        var, f = a._assigns  # type: ignore[attr-defined]
        return (1, var, f)
    if getattr(a, "_keeps", None) is not None:
        return (2, a._keeps, None)  # type: ignore[attr-defined]
    return None


def _mentions_prime(node: Any) -> bool:
    """Does the expression contain a prime (x', e')?"""
    if isinstance(node, list):
        return any(_mentions_prime(x) for x in node)
    if not (isinstance(node, tuple) and hasattr(node, "_fields")):
        return False
    if type(node).__name__ == "OperatorApplication" and getattr(node, "operator", None) == "'":
        return True
    return any(_mentions_prime(getattr(node, f)) for f in node._fields if f not in ("symbol", "start", "end"))


def conj_items(node: Any) -> list | None:
    return _junction_items(node, "/\\")


def disj_items(node: Any) -> list | None:
    return _junction_items(node, "\\/")
