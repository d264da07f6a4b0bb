"""SANY's semantic rules that a single module's syntax tree can decide: an operator, constant or
variable is used only after its definition or declaration (or after a RECURSIVE declaration), and a
name is defined once per module and once per LET.

Invariant: :func:`check_module` raises :class:`SemanticError` only for a use SANY refuses; a name that
might be bound locally (a parameter, a LET definition, any name bound by a quantifier, CHOOSE, set or
function constructor anywhere in the same definition) is never reported, so the check can miss an
error but never invents one.
"""

from __future__ import annotations

import re
from typing import Any

from kvexact.spec.checker.errors import ParseError

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SKIP = ("symbol", "start", "end")


class SemanticError(ParseError):
    """A name used before its definition, or defined twice (SANY's semantic analysis refuses both)."""

    outcome = "parse"


def _children(node: Any):
    if isinstance(node, (list, tuple)) and not hasattr(node, "_fields"):
        yield from node
    elif hasattr(node, "_fields"):
        for f in node._fields:
            if f not in _SKIP:
                yield getattr(node, f)


def _walk(node: Any):
    stack = [node]
    while stack:
        n = stack.pop()
        if hasattr(n, "_fields"):
            yield n
        stack.extend(c for c in _children(n) if isinstance(c, (list, tuple)) or hasattr(c, "_fields"))


def _names_in(node: Any) -> set[str]:
    """The identifiers ``node`` refers to; in ``I!Op(a)`` only ``I`` and ``a`` (Op is I's name)."""
    qualified = {id(item) for n in _walk(node) if type(n).__name__ == "SubexpressionReference"
                 for item in (n.items or [])[1:]}
    return {n.operator for n in _walk(node)
            if type(n).__name__ == "OperatorApplication" and isinstance(n.operator, str)
            and _IDENT.match(n.operator) and id(n) not in qualified}


def _bound(definition: Any) -> set[str]:
    """Every name the definition may bind locally: parameters, LET names and their parameters, and any
    name inside a binder's declaration."""
    out = _names_in(definition.arity or [])
    for n in _walk(definition.definiens):
        kind = type(n).__name__
        if kind == "OperatorDefinition":
            out.add(n.name)
            out |= _names_in(n.arity or [])
        for field in ("declaration", "declarations"):
            if field in n._fields:
                out |= _names_in(getattr(n, field))
        if kind in ("Lambda", "LambdaExpression") or "parameters" in n._fields:
            out |= _names_in(getattr(n, "parameters", []) or [])
    return out


def _pos(node: Any) -> tuple[int, int]:
    s = getattr(node, "start", None)
    return (s.line + 1, s.column + 1) if s is not None else (1, 1)


def _first_use(node: Any, name: str) -> Any:
    for n in sorted(_walk(node), key=_pos):
        if type(n).__name__ == "OperatorApplication" and n.operator == name:
            return n
    return node


def check_module(tree: Any, path: str) -> None:
    """Raise SemanticError at the first use-before-definition or duplicate definition of ``tree``'s
    own units (nested modules are left to their own check)."""
    units = list(tree.units or [])
    declared_at: dict[str, int] = {}  # name -> index of the unit that defines or declares it
    recursive_at: dict[str, int] = {}
    for i, unit in enumerate(units):
        kind = type(unit).__name__
        if kind == "OperatorDefinition":
            if unit.name in declared_at and type(units[declared_at[unit.name]]).__name__ == "OperatorDefinition":
                line, col = _pos(unit)
                raise SemanticError(f"multiply-defined symbol {unit.name}: it is already defined at line "
                                    f"{_pos(units[declared_at[unit.name]])[0]}", f"{path}:{line}:{col}")
            declared_at.setdefault(unit.name, i)
        elif kind in ("Constants", "Variables"):
            for nm in unit.names:
                name = nm if isinstance(nm, str) else getattr(nm, "operator", getattr(nm, "name", None))
                if isinstance(name, str):
                    declared_at.setdefault(name, i)
        elif kind == "RecursiveOperators":
            for nm in unit.names:
                name = getattr(nm, "operator", nm)
                if isinstance(name, str):
                    recursive_at.setdefault(name, i)
    for i, unit in enumerate(units):
        if type(unit).__name__ != "OperatorDefinition" or type(unit.definiens).__name__ == "Instance":
            continue
        _check_lets(unit.definiens, path)
        used = _names_in(unit.definiens) - _bound(unit)
        for name in sorted(used):
            at = declared_at.get(name)
            if at is None or at < i or recursive_at.get(name, len(units)) < i or (at == i and unit.function):
                continue
            line, col = _pos(_first_use(unit.definiens, name))
            what = "itself without a RECURSIVE declaration" if at == i else f"{name}, defined later (line {_pos(units[at])[0]})"
            raise SemanticError(f"{unit.name} uses {what}: TLA+ names must be defined before they are used",
                                f"{path}:{line}:{col}")


def _check_lets(node: Any, path: str) -> None:
    for n in _walk(node):
        if type(n).__name__ == "Let":
            seen: set[str] = set()
            for d in n.definitions or []:
                name = getattr(d, "name", None)
                if name in seen:
                    line, col = _pos(d)
                    raise SemanticError(f"multiply-defined symbol {name} in one LET", f"{path}:{line}:{col}")
                if isinstance(name, str):
                    seen.add(name)


def _binders(definition: Any) -> list[Any]:
    """The name nodes a definition binds exactly: parameters, LET names, and the variables of every
    quantifier, CHOOSE, set and function constructor (``x`` and the items of ``<<x, y>>`` in ``\\in``)."""
    out = [p for p in definition.arity or [] if type(p).__name__ == "OperatorApplication"]
    for n in _walk(definition.definiens):
        if type(n).__name__ == "OperatorDefinition":
            out.append(n)
        for field in ("declaration", "declarations"):
            decl = getattr(n, field, None) if field in n._fields else None
            items = decl if isinstance(decl, list) else [decl] if decl is not None else []
            for item in items:
                target = item.arguments[0] if (type(item).__name__ == "OperatorApplication"
                                                and item.operator == "\\in" and item.arguments) else item
                out += target.items if type(target).__name__ == "Tuple" else [target]
    return [b for b in out if isinstance(getattr(b, "operator", getattr(b, "name", None)), str)]


def _binder_name(node: Any) -> str:
    return node.name if type(node).__name__ == "OperatorDefinition" else node.operator


def check_shapes(tree: Any, path: str) -> None:
    """A bound name that redeclares a name of the module defined before, a record field given twice,
    and ``@`` outside an EXCEPT: SANY refuses each."""
    units = list(tree.units or [])
    earlier: set[str] = set()
    for unit in units:
        kind = type(unit).__name__
        if kind == "OperatorDefinition" and type(unit.definiens).__name__ != "Instance":
            params = {p.operator for p in unit.arity or [] if type(p).__name__ == "OperatorApplication"}
            for b in _binders(unit):
                name = _binder_name(b)
                if name in earlier or (name in params and not any(b is p for p in unit.arity or [])):
                    line, col = _pos(b)
                    where = "a parameter of the definition" if name in params else "a name of the module"
                    raise SemanticError(f"multiply-defined symbol {name}: {unit.name} binds it again, while it "
                                        f"is already {where}", f"{path}:{line}:{col}")
            in_except: set[int] = set()
            for n in _walk(unit.definiens):
                if type(n).__name__ == "Except":
                    in_except |= {id(m) for m in _walk(n.changes)}
                if type(n).__name__ == "Record":
                    keys = [k for k, _ in n.key_values or []]
                    dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
                    if dup is not None:
                        line, col = _pos(n)
                        raise SemanticError(f"the record field {dup} is given twice", f"{path}:{line}:{col}")
            for n in _walk(unit.definiens):
                if type(n).__name__ == "OperatorApplication" and n.operator == "@" and id(n) not in in_except:
                    line, col = _pos(n)
                    raise SemanticError("@ is used outside an EXCEPT", f"{path}:{line}:{col}")
        if kind == "OperatorDefinition":
            earlier.add(unit.name)
        elif kind in ("Constants", "Variables"):
            for nm in unit.names:
                name = getattr(nm, "operator", getattr(nm, "name", nm))
                if isinstance(name, str):
                    earlier.add(name)


def _declared(decls: Any) -> tuple[list[Any], list[Any]]:
    """The name nodes a binder's declarations bind, and their bound expressions (``S`` of ``x \\in S``)."""
    names: list[Any] = []
    bounds: list[Any] = []
    for item in decls if isinstance(decls, list) else [decls] if decls is not None else []:
        target = item
        if type(item).__name__ == "OperatorApplication" and item.operator == "\\in" and item.arguments:
            target, bounds = item.arguments[0], [*bounds, *item.arguments[1:]]
        names += target.items if type(target).__name__ == "Tuple" else [target]
    return [n for n in names if isinstance(getattr(n, "operator", None), str)], bounds


def _claim(node: Any, name: str, scope: set[str], path: str) -> None:
    if name in scope:
        line, col = _pos(node)
        raise SemanticError(f"multiply-defined symbol {name}: it is bound again where {name} is already bound",
                            f"{path}:{line}:{col}")
    scope.add(name)


def _rebinding(node: Any, scope: set[str], path: str) -> None:
    """Raise SemanticError where a binder inside ``node`` binds a name already bound around it (``scope``):
    quantifier, CHOOSE, set and function constructor variables, LAMBDA and LET parameters, LET names."""
    stack: list[tuple[Any, set[str]]] = [(node, scope)]
    while stack:
        n, outer = stack.pop()
        if isinstance(n, (list, tuple)) and not hasattr(n, "_fields"):
            stack.extend((c, outer) for c in n)
            continue
        if not hasattr(n, "_fields"):
            continue
        kind = type(n).__name__
        if kind == "Let":
            inner = set(outer)
            for d in n.definitions or []:
                if type(d).__name__ != "OperatorDefinition":
                    stack.append((d, set(inner)))
                    continue
                params = set(inner)
                for p in d.arity or []:
                    if isinstance(getattr(p, "operator", None), str):
                        _claim(p, p.operator, params, path)
                stack.append((d.definiens, params))
                _claim(d, d.name, inner, path)
            stack.append((n.expression, inner))
            continue
        field = next((f for f in ("declarations", "declaration", "parameters") if f in n._fields), None)
        if field is None:
            stack.extend((c, outer) for c in _children(n))
            continue
        names, bounds = _declared(getattr(n, field))
        inner = set(outer)
        for b in names:
            _claim(b, b.operator, inner, path)
        stack.extend((b, outer) for b in bounds)  # a bound is outside its variables' scope
        stack.extend((getattr(n, f), inner) for f in n._fields if f not in (*_SKIP, field))


def check_rebinding(tree: Any, path: str) -> None:
    """A name bound again inside the scope of the same name (``\\A g : \\E g : ...``, ``LET G(x)`` under
    ``\\E x``, ``[x \\in S |-> [x \\in S |-> x]]``): SANY refuses each as a multiply-defined symbol."""
    for unit in tree.units or []:
        if type(unit).__name__ != "OperatorDefinition" or type(unit.definiens).__name__ == "Instance":
            continue
        params: set[str] = set()
        for p in unit.arity or []:
            if isinstance(getattr(p, "operator", None), str):
                _claim(p, p.operator, params, path)
        _rebinding(unit.definiens, params, path)
