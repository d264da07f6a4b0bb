"""Which state variables a state predicate reads, told from its text, so that the search need not
evaluate an invariant again on a successor that left those variables as they were in its parent.

Invariant: ``state_reads`` returns a set holding every variable the expression can read, through every
definition, LET, INSTANCE substitution and operator argument it reaches, or None when that cannot be
told from the text or the value may not be a function of the state alone (a prime, UNCHANGED,
ENABLED, a temporal operator, TLCGet/TLCSet, a random draw, printing, I/O, an instance reached through
its parameters, a substituted operator that reads the state). Constants never change during a run.
"""

from __future__ import annotations

from typing import Any

from kvexact.spec.checker.binders import ALIASES, _name_of
from kvexact.spec.checker.compiler import PRIME, STATE, Compiler, Scope, in_recursion
from kvexact.spec.checker.errors import SpecError
from kvexact.spec.checker.junctions import conj_items
from kvexact.spec.checker.temporal import _children
from kvexact.spec.checker.values import EvalError

# operators whose value is not a function of the current state, or that act beyond returning a value
_OPAQUE_OPS = frozenset({"'", "UNCHANGED", "ENABLED", "[]", "<>", "~>", "-+->", "\\cdot", "TLCGet", "TLCSet",
                         "JavaTime", "Print", "PrintT", "RandomElement"})
_OPAQUE_KINDS = frozenset({"Fairness", "TemporalQuantification", "SubscriptedAction"})
# dependency marks of compiled code that make a value more than a function of the state
_IMPURE_DEPS = frozenset({PRIME, "$impure", "$random"})


class _Opaque(Exception):
    pass


def _opaque_name(op: str) -> bool:
    return op in _OPAQUE_OPS or op.startswith(("Random", "IO")) or "erialize" in op


class _Scan:
    def __init__(self, comp: Compiler):
        self.c = comp
        self.vars: set[str] = set()
        self.seen: set[tuple[int, int]] = set()
        self.keep: list = []  # the nodes and scopes visited stay alive, so their ids stay theirs

    def visit(self, node: Any, scope: Scope) -> None:
        if not hasattr(node, "_fields"):  # a token, not a syntax node
            return
        key = (id(node), id(scope))
        if key in self.seen:
            return
        self.seen.add(key)
        self.keep.append((node, scope))
        k = type(node).__name__
        if k in _OPAQUE_KINDS:
            raise _Opaque
        if k == "OperatorApplication":
            op = ALIASES.get(node.operator, node.operator)
            if _opaque_name(op):
                raise _Opaque
            self.binding(self.c.resolve(op, scope))
        elif k == "SubexpressionReference":
            target = self.c.positional(node, scope)
            if target is not None:
                self.visit(target[0], target[1])
                return
            binding, args, binds = self.c._instance_target(node, scope)
            if binds or _opaque_name(_name_of(node.items[-1])):
                raise _Opaque
            self.binding(binding)
            for a in args:
                self.visit(a, scope)
            return
        elif k == "Let":
            self.visit(node.expression, self.c._let_scope(node, scope))
            return
        for x in _children(node):
            self.visit(x, scope)

    def binding(self, b: tuple | None) -> None:
        if b is None:  # a standard operator, or a name bound by a quantifier, LET or parameter
            return
        kind = b[0]
        if kind == "var":
            self.vars.add(b[1])
        elif kind == "def":
            self.visit(b[1].body, b[1].scope)
        elif kind == "subst":  # INSTANCE ... WITH, or a parameter passed by name
            if len(b) > 5 and b[5] is not None:
                self.visit(b[5][0], b[5][1])
            elif b[2] & (_IMPURE_DEPS | {STATE}) or in_recursion(b[2]):
                raise _Opaque
        elif kind == "opsubst":
            if b[2] & (_IMPURE_DEPS | {STATE}) or in_recursion(b[2]):
                raise _Opaque
        elif kind in ("instance", "pinstance"):
            raise _Opaque
        elif kind == "builtin" and _opaque_name(b[1]):
            raise _Opaque


def state_reads(comp: Compiler, node: Any, scope: Scope, deps: frozenset | None = None) -> frozenset[str] | None:
    """The variables ``node`` can read, or None when unknown (see the module's invariant); ``deps``: its
    compiled dependencies when known (else it is compiled here)."""
    scan = _Scan(comp)
    try:
        if deps is None:
            _, deps = comp.expr(node, scope)
        if deps & _IMPURE_DEPS or in_recursion(deps):
            return None
        scan.visit(node, scope)
    except (_Opaque, SpecError, EvalError, RecursionError):
        return None
    return frozenset(scan.vars)


def conjuncts(comp: Compiler, node: Any, scope: Scope, depth: int = 0) -> list[tuple[Any, Scope]]:
    """The conjuncts of a state predicate, through conjunction lists and references to definitions
    without arguments (``Inv == TypeOK /\\ Safe``), in evaluation order."""
    while type(node).__name__ in ("Parentheses", "VerticalItem"):
        node = node.expression
    items = conj_items(node)
    if items is not None and depth < 8:
        return [c for it in items for c in conjuncts(comp, it, scope, depth + 1)]
    if type(node).__name__ == "OperatorApplication" and node.arguments is None and depth < 8:
        try:
            b = comp.resolve(ALIASES.get(node.operator, node.operator), scope)
        except SpecError:
            b = None
        if b is not None and b[0] == "def" and b[1].arity == 0 and not (b[1].node is not None and
                                                                          getattr(b[1].node, "function", False)):
            return conjuncts(comp, b[1].body, b[1].scope, depth + 1)
    return [(node, scope)]
