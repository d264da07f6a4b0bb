"""Generated next-state actions: one Python function per split action of Next, with the action's
conjunctions, disjunctions, IF/CASE, \\E, LET, implications and operator calls laid out as statements
and its expressions inline (codegen.py), instead of a chain of continuation closures.

Invariant: a generated action calls ``k(s, n)`` for exactly the paths, in the same order, with the same
errors, as the closure that actions.py compiles for it (TLC's enumeration, docs/checker.md, "Successor enumeration");
whatever it does not lay out itself it calls as that closure. ``n`` is bound in place and restored.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from kvexact.spec.checker.codegen import ACTION_HELPERS, HELPERS, run_generated
from kvexact.spec.checker.compiler import ALIASES, loc_of
from kvexact.spec.checker.junctions import _flat_step, _strip, conj_items, disj_items
from kvexact.spec.checker.values import EvalError, LazyFcn, fmt, member, ordered_elements

_COUNTER = itertools.count()
_MAX_INLINE_DEPTH = 6


def _raise(message: str, where: str) -> None:
    raise EvalError(message, where)


def _in_iter(n: dict, var: str, S: Any, where: str):
    """x' \\in S: the bound value when x' has one (if it is in S), else every element, to bind."""
    if var in n:
        if member(n[var], S):
            yield n[var], False
        return
    try:
        elems = ordered_elements(S)
    except EvalError as exc:
        raise EvalError(f"cannot enumerate the values of {var}: {exc.message}", where) from None
    for v in elems:
        yield (v.materialize() if type(v) is LazyFcn else v), True


def _rest(s, n, e, evals, where) -> bool:
    """Every variable is bound: the remaining conjuncts are evaluated (TLC's fast path)."""
    for f in evals:
        v = f(s, n, e)
        if v is not True:
            if v is not False:
                raise EvalError(f"a conjunct has the non-boolean value {fmt(v)}", where)
            return False
    return True


NS = {**HELPERS, **ACTION_HELPERS, "_raise": _raise, "_in_iter": _in_iter, "_rest": _rest,
      "_ordered": ordered_elements, "EvalError": EvalError, "fmt": fmt}


def _indent(lines: list[str], n: int = 4) -> list[str]:
    return [" " * n + ln for ln in lines]


class ActGen:
    """Lays out next-state actions (compile) for an ActionCompiler in next mode."""

    def __init__(self, ac: Any):
        self.ac = ac
        self.c = ac.c

    def compile(self, node: Any, scope: Any, where: str) -> Callable | None:
        self.ns = dict(NS)
        try:
            body = self.gen(node, scope, ["k(s, n)"], 0)
        except _NoGen:
            return None
        src = "\n".join(["def _act(s, n, e, k):", *_indent(body or ["pass"])]) + "\n"
        try:
            return run_generated(src, self.ns, "_act")
        except (SyntaxError, RecursionError, MemoryError):  # past Python's nesting limits: the closures
            return None

    def _name(self, prefix: str, value: Any = None) -> str:
        name = f"_{prefix}{next(_COUNTER)}"
        if value is not None:
            self.ns[name] = value
        return name

    def _value(self, node: Any, scope: Any, var: str) -> list[str]:
        """``var = <node>``: the inline fast code, the compiled expression as its exact fallback."""
        fn = self._name("f", self.c.expr(node, scope)[0])
        code = self.c.fast.inline(node, scope, self.ns)
        if code is None:
            return [f"{var} = {fn}(s, n, e)"]
        return ["try:", f"    {var} = {code}", "except Exception:", f"    {var} = {fn}(s, n, e)"]

    def _hoist(self, K: list[str]) -> tuple[list[str], list[str]]:
        """A continuation used at more than one place: a local function (e passed, as it is rebound)."""
        if len(K) <= 1:
            return [], K
        name = self._name("k")
        return [f"def {name}(s, n, e):", *_indent(K)], [f"{name}(s, n, e)"]

    def _closure(self, act: Callable, K: list[str]) -> list[str]:
        """An action this module does not lay out: its closure, continuing with K."""
        a = self._name("a", act)
        kn = self._name("c")
        return [f"def {kn}(s, n, e=e):", *_indent(K or ["pass"]), f"{a}(s, n, e, {kn})"]

    # ------------------------------------------------------------------ layout

    def gen(self, node: Any, scope: Any, K: list[str], depth: int) -> list[str]:
        node = _strip(node)
        items = conj_items(node)
        if items is not None:
            return self._conj(items, scope, K, depth, loc_of(node, scope.mod))
        items = disj_items(node)
        if items is not None:
            pre, call = self._hoist(K)
            out = list(pre)
            for it in items:
                out += self.gen(it, scope, call, depth)
            return out
        kind = type(node).__name__
        if kind == "BooleanLiteral":
            return list(K) if node.value == "TRUE" else ["pass"]
        if kind == "Let":
            return self.gen(node.expression, self.c._let_scope(node, scope), K, depth)
        if kind == "If":
            return self._if(node, scope, K, depth)
        if kind == "Cases":
            return self._case(node, scope, K, depth)
        if kind == "Quantification" and node.quantifier == "\\E":
            laid = self._exists(node, scope, K, depth)
            if laid is not None:
                return laid
        if kind == "Quantification" and node.quantifier == "\\A":
            laid = self._forall_guard(node, scope, K)
            if laid is not None:
                return laid
        if kind == "SubexpressionReference":
            positional = self.c.positional(node, scope)
            if positional is not None:
                return self.gen(positional[0], positional[1], K, depth)
        if kind == "OperatorApplication":
            laid = self._operator(node, scope, K, depth)
            if laid is not None:
                return laid
        act = self.ac.act(node, scope)
        step = _flat_step(act)
        if step is not None:
            return self._flat(step, getattr(act, "_src", None), K, loc_of(node, scope.mod))
        return self._closure(act, K)

    def _flat(self, step: tuple, src: Any, K: list[str], where: str) -> list[str]:
        kind, a, b = step
        w = self._name("w", where)
        if kind == 0:  # a guard
            v = self._name("v")
            code = self._value(src[0], src[1], v) if src is not None else [f"{v} = {self._name('g', a)}(s, n, e)"]
            return [*code, f"if {v} is True:", *_indent(K or ["pass"]), f"elif {v} is not False:",
                    f"    _raise('an action conjunct has the non-boolean value ' + fmt({v}), {w})"]
        if kind == 1:  # x' = e
            v = self._name("v")
            code = self._value(src[0], src[1], v) if src is not None else [f"{v} = {self._name('g', b)}(s, n, e)"]
            return [*code, *self._bind(a, v, K, w)]
        out: list[str] = []
        inner = list(K)
        for var in reversed(a):  # UNCHANGED variables: each is x' = x
            inner = self._bind(var, f"s[{var!r}]", inner, w)
        out += inner
        return out

    def _bind(self, var: str, value: str, K: list[str], w: str) -> list[str]:
        ok, add = self._name("ok"), self._name("ad")
        return [f"if {var!r} in n:",
                f"    {ok} = _same(n[{var!r}], {value}, {w}); {add} = False",
                "else:",
                f"    _b = {value}",
                f"    n[{var!r}] = _b.materialize() if type(_b) is LazyFcn else _b",
                f"    {ok} = {add} = True",
                f"if {ok}:",
                "    try:",
                *_indent(K or ["pass"], 8),
                "    finally:",
                f"        if {add}:",
                f"            del n[{var!r}]"]

    def _conj(self, items: list, scope: Any, K: list[str], depth: int, where: str) -> list[str]:
        """Left to right; before a conjunct that may branch, TLC's fast path: once every variable is
        bound, the remaining conjuncts are evaluated as booleans."""
        acts = [self.ac.act(x, scope) for x in items]
        evals = [self.c.expr(x, scope)[0] for x in items]
        flat = [_flat_step(a) is not None for a in acts]
        needs_rest = any(not flat[i] for i in range(1, len(items)))
        pre, k_all = self._hoist(K) if needs_rest else ([], K)
        w = self._name("w", where)
        nv = self.ac.nvars
        out = k_all
        for i in range(len(items) - 1, -1, -1):
            body = self.gen(items[i], scope, out, depth)
            if i > 0 and not flat[i]:
                rest = self._name("r", evals[i:])
                body = [f"if len(n) == {nv}:", f"    if _rest(s, n, e, {rest}, {w}):",
                        *_indent(k_all or ["pass"], 8), "else:", *_indent(body)]
            out = body
        return pre + out

    def _if(self, node: Any, scope: Any, K: list[str], depth: int) -> list[str]:
        pre, call = self._hoist(K)
        v = self._name("v")
        w = self._name("w", loc_of(node, scope.mod))
        return [*pre, *self._value(node.predicate, scope, v),
                f"if {v} is True:", *_indent(self.gen(node.then, scope, call, depth)),
                f"elif {v} is False:", *_indent(self.gen(node.else_, scope, call, depth)),
                "else:", f"    _raise('IF condition is ' + fmt({v}) + ', not a boolean', {w})"]

    def _case(self, node: Any, scope: Any, K: list[str], depth: int) -> list[str]:
        pre, call = self._hoist(K)
        w = self._name("w", loc_of(node, scope.mod))
        out = list(pre)
        indent = 0
        for arm in node.cases:
            v = self._name("v")
            out += _indent(self._value(arm.predicate, scope, v), indent)
            out += _indent([f"if {v} is True:", *_indent(self.gen(arm.expression, scope, call, depth)), "else:"],
                           indent)
            indent += 4
        if node.other is not None:
            out += _indent(self.gen(node.other, scope, call, depth), indent)
        else:
            out += _indent([f"_raise('CASE: no guard is true and there is no OTHER', {w})"], indent)
        return out

    def _exists(self, node: Any, scope: Any, K: list[str], depth: int) -> list[str] | None:
        from kvexact.spec.checker.compiler import _binder_names, _bounds, _name_of
        bounds = _bounds(node.declarations)
        if len(bounds) != 1 or bounds[0][1] is None or type(bounds[0][0]).__name__ == "Tuple":
            return None
        b, sset = bounds[0]
        name = _name_of(b)
        inner = scope.child()
        for nm in _binder_names(b):
            inner.names[nm] = ("bound", nm)
        S, x, saved = self._name("S"), self._name("x"), self._name("e")
        return [*self._value(sset, scope, S), f"{saved} = e", f"for {x} in _ordered({S}):",
                f"    e = dict({saved})", f"    e[{name!r}] = {x}",
                *_indent(self.gen(node.predicate, inner, K, depth)), f"e = {saved}"]

    def _forall_guard(self, node: Any, scope: Any, K: list[str]) -> list[str] | None:
        """``\\A x \\in S : P`` that reads no primed variable (so assigns nothing): its fast code as a guard
        (as actions.py evaluates an \\A whose body is one predicate); an error, or a value that is not a
        boolean, runs the action's closure instead, which gives the closure's errors and paths."""
        from kvexact.spec.checker.compiler import PRIME, in_recursion
        deps = self.c.expr(node, scope)[1]
        if PRIME in deps or in_recursion(deps) or deps & {"$impure", "$random"}:
            return None
        act = self.ac.act(node, scope)
        if not getattr(act, "_pure", False):  # a body with paths (an \E, a disjunction): TLC multiplies them
            return None
        code = self.c.fast.inline(node, scope, self.ns)
        if code is None:
            return None
        pre, call = self._hoist(K)
        v = self._name("v")
        return [*pre, "try:", f"    {v} = {code}", "except Exception:", f"    {v} = None",
                f"if {v} is True:", *_indent(call or ["pass"]), f"elif {v} is not False:",
                *_indent(self._closure(act, call))]

    def _operator(self, node: Any, scope: Any, K: list[str], depth: int) -> list[str] | None:
        op = ALIASES.get(node.operator, node.operator)
        args = node.arguments
        if op == "\\in" and args:
            var = self.ac._target_var(args[0], scope)
            if var is None:
                return None
            S, v, add = self._name("S"), self._name("v"), self._name("ad")
            w = self._name("w", loc_of(node, scope.mod))
            return [*self._value(args[1], scope, S), f"for {v}, {add} in _in_iter(n, {var!r}, {S}, {w}):",
                    f"    if {add}:", f"        n[{var!r}] = {v}", "    try:", *_indent(K or ["pass"], 8),
                    "    finally:", f"        if {add}:", f"            del n[{var!r}]"]
        if op == "=>" and args:
            pre, call = self._hoist(K)
            v = self._name("v")
            w = self._name("w", loc_of(node, scope.mod))
            return [*pre, *self._value(args[0], scope, v), f"if {v} is False:", *_indent(call or ["pass"]),
                    f"elif {v} is True:", *_indent(self.gen(args[1], scope, call, depth)),
                    "else:", f"    _raise('=> applied to the non-boolean ' + fmt({v}), {w})"]
        if op == "::" and args:
            return self.gen(args[1], scope, K, depth)
        if args is None or op in ("=", "\\subseteq", "UNCHANGED"):
            return None if args is not None or depth >= _MAX_INLINE_DEPTH else self._call(node, op, [], scope,
                                                                                           K, depth)
        return self._call(node, op, args, scope, K, depth)

    def _call(self, node, op, args, scope, K, depth) -> list[str] | None:
        """A definition used as an action: its body laid out here, with the parameters bound as
        actions.py binds them (by name where TLC passes them lazily)."""
        b = self.c.resolve(op, scope)
        if b is None or b[0] != "def" or depth >= _MAX_INLINE_DEPTH:
            return None
        d = b[1]
        if (d.node is not None and d.node.function) or len(args) != d.arity:
            return None
        by_name = self.ac._by_name(d, args, scope)
        saved = self._name("e")
        if args and (self.c.primed_params(d) or by_name):
            inner, values = self.ac.inline_scope(d, args, scope, by_name)
            lines = [f"{saved} = e", "e = dict(e)"]
            for p, f in values:
                lines.append(f"e[{p!r}] = {self._name('p', f[0])}(s, n, {saved})")
        else:
            inner = d.scope.child()
            for p, ar in d.params:
                inner.names[p] = ("opparam", p, ar) if ar else ("bound", p)
            lines = [f"{saved} = e", "e = dict(e)" if d.is_let else "e = {}"]
            for a, (p, ar) in zip(args, d.params, strict=True):
                lines.append(f"e[{p!r}] = {self._name('p', self.c._arg(a, ar, scope)[0])}(s, n, {saved})")
        if not args and not d.is_let:
            lines = [f"{saved} = e", "e = {}"]
        pre: list[str] = []
        if K not in (["k(s, n)"], ["pass"]):  # the continuation runs with the caller's bound names
            name = self._name("k")
            pre, K = [f"def {name}(s, n, e):", *_indent(K or ["pass"])], [f"{name}(s, n, {saved})"]
        body = self.gen(d.body, inner, K, depth + 1)
        return [*pre, *lines, "try:", *_indent(body or ["pass"]), "finally:", f"    e = {saved}"]


class _NoGen(Exception):
    pass
