"""Names and binders of the syntax tree: operator aliases, the names a binder introduces, how bounded
declarations group, and setters that bind a value to a (tuple) binder. Leaf helpers shared by the
compiler and the code generator, which must not import each other."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvexact.spec.checker.values import EvalError, fmt

ALIASES = {
    "\\land": "/\\", "\\lor": "\\/", "\\lnot": "~", "\\neg": "~", "#": "/=", "=<": "<=", "\\leq": "<=",
    "\\geq": ">=", "\\union": "\\cup", "\\intersect": "\\cap", "\\times": "\\X", "\\equiv": "<=>",
    "\\circ": "\\o", "\\notin": "\\notin",
}


def _name_of(node: Any) -> str:
    if isinstance(node, str):
        return node
    return node.operator


def _bounds(decls: list) -> list[tuple[Any, Any]]:
    """Group declarations ``x, y \\in S, z \\in T`` into [(x, S), (y, S), (z, T)]; an unbounded name
    gets S = None. A tuple binder ``<<a, b>> \\in S`` keeps its Tuple node."""
    out: list[tuple[Any, Any]] = []
    pending: list[Any] = []
    for d in decls:
        if type(d).__name__ == "OperatorApplication" and d.operator == "\\in" and d.arguments:
            pending.append(d.arguments[0])
            for p in pending:
                out.append((p, d.arguments[1]))
            pending = []
        else:
            pending.append(d)
    for p in pending:
        out.append((p, None))
    return out


def _binder_names(b: Any) -> list[str]:
    if type(b).__name__ == "Tuple":
        return [_name_of(x) for x in b.items]
    return [_name_of(b)]


def _bind(b: Any) -> Callable[[dict, Any], None]:
    """Return a setter that binds value v to binder b (a name or a tuple of names) in dict e."""
    if type(b).__name__ == "Tuple":
        names = [_name_of(x) for x in b.items]
        if len(names) == 2:  # the common <<a, b>>: no loop
            a, b2 = names

            def set_pair(e: dict, v: Any) -> None:
                if type(v) is not tuple or len(v) != 2:
                    raise EvalError(f"cannot bind {fmt(v)} to <<{a}, {b2}>>")
                e[a] = v[0]
                e[b2] = v[1]
            return set_pair

        def set_tuple(e: dict, v: Any) -> None:
            if type(v) is not tuple or len(v) != len(names):
                raise EvalError(f"cannot bind {fmt(v)} to <<{', '.join(names)}>>")
            for nm, x in zip(names, v, strict=False):
                e[nm] = x
        return set_tuple
    name = _name_of(b)

    def set_one(e: dict, v: Any) -> None:
        e[name] = v
    return set_one
