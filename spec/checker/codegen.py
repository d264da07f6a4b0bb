"""Fast paths for compiled expressions and flat actions: the common node kinds are turned into one
generated Python function per expression (and per definition body) instead of a tree of closures.

Invariant (exact fallback): a generated function returns a value only when its Python code computed
the TLA+ value; anything else (a wrong kind, a missing key, a non-boolean condition, an error) raises
inside the fast path, and the function then returns what the closure compiled by compiler.py returns
for the same expression, or raises its error. So values and error messages are those of the closures;
only the speed differs. Expressions that print, assert or draw random values are never generated.
Bound names live in the dict ``e`` as in the closures, so a generated body and a closure call each
other freely.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable
from typing import Any

from kvexact.spec.checker import builtins as B
from kvexact.spec.checker.values import (
    SELF_KEYED,
    Fcn,
    LazyFcn,
    ModelValue,
    apply_fcn,
    as_set,
    fcn_update,
    member,
    memo_key,
    memo_keys,
    min_value,
    mk_fcn,
    ordered_elements,
    record_of,
    same_kind,
    seq_length,
    set_of,
    tla_eq,
)

_NO_GEN = {"Print", "PrintT", "Assert", "TLCSet", "JavaTime", "RandomElement", "TLCGet", "RandomSubset",
           "RandomSetOfSubsets", "AssertEq"}
_INT_OPS = {"+": "+", "-": "-", "*": "*", "<": "<", ">": ">", "<=": "<=", ">=": ">="}
_COUNTER = itertools.count()
_OPS = ("Field", "FunctionApplication", "Tuple", "SetEnumeration", "Record", "If", "Except", "Cases", "Let",
        "Quantification", "SetComprehension", "SetSlice", "Function", "Choose")


class _NoFast(Exception):
    """The expression has no fast path (it prints, asserts, or uses a form this module leaves alone)."""


# ----------------------------------------------------------------------------- helpers (exact on success)

def _nb(*_):
    raise TypeError("not a boolean")


def _field(r: Any, name: str) -> Any:
    return r.d[name] if type(r) is Fcn else apply_fcn(r, name)


def _app(f: Any, x: Any) -> Any:
    t = type(f)
    if t is Fcn:
        return f.d[x]
    if t is tuple and type(x) is int and 0 < x <= len(f):
        return f[x - 1]
    return apply_fcn(f, x)


# the kinds whose Python == is TLA+'s equality when both sides are of the kind (a model value equals
# only itself: ModelValue has identity equality)
_EQ_TYPES = frozenset({int, str, bool, frozenset, tuple, Fcn, ModelValue})


def _eq(a: Any, b: Any) -> bool:
    ta = type(a)
    if ta is type(b) and ta in _EQ_TYPES:
        return a == b
    if ta is ModelValue or type(b) is ModelValue:
        return a is b
    return tla_eq(a, b)


def _in(x: Any, S: Any) -> bool:
    if type(S) is frozenset:  # member() inlined for the common case
        if x in S:
            tx = type(x)
            if tx is bool or (tx is int and (x == 0 or x == 1)):
                same_kind(x, S)
            return True
        return False
    return member(x, S)


def _els(S: Any) -> frozenset:
    return S if type(S) is frozenset else as_set(S)


def _quant1(s, n, e, S, name, body, is_all):
    if type(S) is not frozenset:
        S = as_set(S)
    e2 = dict(e)
    for x in S:
        e2[name] = x
        v = body(s, n, e2)
        if v is not is_all:
            if type(v) is not bool:
                _nb()
            return not is_all
    return is_all


def _setof1(s, n, e, S, name, body):
    if type(S) is not frozenset:
        S = as_set(S)
    e2 = dict(e)
    out = []
    for x in S:
        e2[name] = x
        out.append(body(s, n, e2))
    return frozenset(out)


def _filter1(s, n, e, S, name, body):
    if type(S) is not frozenset:
        _nb()  # a lazy set (or not a set): the closure builds it (or reports it)
    e2 = dict(e)
    out = []
    for x in S:
        e2[name] = x
        if body(s, n, e2) is True:
            out.append(x)
    return frozenset(out)


def _fcn1(s, n, e, S, name, body):
    S = _els(S)
    e2 = dict(e)
    k = seq_length(S)
    if k > 0:  # the domain is 1..k: a tuple, built in order
        out = []
        for x in range(1, k + 1):
            e2[name] = x
            out.append(body(s, n, e2))
        return tuple(out)
    d = {}
    for x in S:
        e2[name] = x
        d[x] = body(s, n, e2)
    return Fcn(d) if d else ()


def _choose1(s, n, e, S, name, body):
    e2 = dict(e)
    for x in ordered_elements(S):
        e2[name] = x
        if body(s, n, e2) is True:
            return x
    return _nb()


def _combos(e: dict, binds: list):
    """Every binding of several binders (setter, set value): the same dict, updated in place."""
    e2 = dict(e)
    if len(binds) == 1:  # one (tuple) binder: its set's order, without a product
        setter = binds[0][0]
        for x in _els(binds[0][1]):
            setter(e2, x)
            yield (x,), e2
        return
    doms = [_els(S) for _, S in binds]
    for combo in itertools.product(*doms):
        for (setter, _), x in zip(binds, combo, strict=True):
            setter(e2, x)
        yield combo, e2


def _quantn(s, n, e, binds, body, is_all):
    """Several binders, some of them tuples (two plain names loop in _quant2)."""
    for _, e2 in _combos(e, binds):
        v = body(s, n, e2)
        if v is not is_all:
            if type(v) is not bool:
                _nb()
            return not is_all
    return is_all


def _quant2(s, n, e, A, a, B, b, body, is_all):
    """Two plain binders ``a \\in A, b \\in B``: nested loops in _combos's order, names set directly."""
    A, B = _els(A), _els(B)
    e2 = dict(e)
    for x in A:
        e2[a] = x
        for y in B:
            e2[b] = y
            v = body(s, n, e2)
            if v is not is_all:
                if type(v) is not bool:
                    _nb()
                return not is_all
    return is_all


def _memo_miss(memo: dict, body: Callable, params: list) -> Callable:
    """The miss path of a memoized call of a definition whose body reads only its parameters: the body
    on the argument value (one parameter) or tuple of values, stored in ``memo`` under ``key``, the
    values' memo_key (so that F(TRUE) does not find F(1))."""
    if len(params) == 1:
        p0 = params[0]

        def miss1(s, n, x, key):
            v = body(s, n, {p0: x})
            if len(memo) > 200_000:
                memo.clear()
            memo[key] = v
            return v
        return miss1

    def missn(s, n, vals, key):
        v = body(s, n, dict(zip(params, vals, strict=True)))
        if len(memo) > 200_000:
            memo.clear()
        memo[key] = v
        return v
    return missn


def _setofn(s, n, e, binds, body):
    if len(binds) == 1:  # one tuple binder: a plain loop
        setter, S = binds[0]
        e2 = dict(e)
        out = []
        for x in _els(S):
            setter(e2, x)
            out.append(body(s, n, e2))
        return frozenset(out)
    return frozenset([body(s, n, e2) for _, e2 in _combos(e, binds)])


def _fcnn(s, n, e, binds, body):
    return mk_fcn({combo: body(s, n, e2) for combo, e2 in _combos(e, binds)})


HELPERS: dict[str, Any] = {
    "_nb": _nb, "_field": _field, "_app": _app, "_eq": _eq, "_in": _in, "Fcn": Fcn, "frozenset": frozenset,
    "_upd": fcn_update, "_rec": record_of, "_EQ_TYPES": _EQ_TYPES, "_setenum": set_of, "_quant1": _quant1, "_setof1": _setof1, "_filter1": _filter1, "_fcn1": _fcn1,
    "_choose1": _choose1, "_quantn": _quantn, "_quant2": _quant2, "_setofn": _setofn, "_fcnn": _fcnn, "_min": min_value,
}
# A hoisted expression may not depend on these: a primed variable ("$p", compiler.PRIME: the next state
# is filled in while an action runs), @ (changes per EXCEPT path), an operator argument, or a value that
# is not a function of its inputs; nor on a call of a definition still being compiled ("$rec...").
_NO_HOIST = frozenset({"$p", "@", "$lambda", "$impure", "$random"})
_BINDER_FORMS = frozenset({"Quantification", "SetComprehension", "SetSlice", "Function", "Choose"})
_INLINE_OPS = frozenset({"/\\", "\\/", "~", "=>", "<=>", "=", "/=", "\\in", "\\notin", "'", *_INT_OPS})


# Generated names (constants, temporaries, local functions) carry a process-wide counter, so the code of
# one expression split over many parameter values differs only in those names: renamed in order of first
# use, equal code compiles once (compiling was most of a model's load time).
_NAME = re.compile(r"(?<![\w.'\"])_[A-Za-z]+\d+\b")


@functools.lru_cache(maxsize=8192)
def _code_of(canonical: str) -> Any:
    return compile(canonical, "<kvexact generated>", "exec")


def run_generated(src: str, ns: dict[str, Any], name: str) -> Callable:
    """Execute generated ``src`` in ``ns`` (its names renamed canonically) and return the function ``name``
    it defines; a SyntaxError of the source propagates."""
    renamed: dict[str, str] = {}
    canonical = _NAME.sub(lambda m: renamed.setdefault(m.group(0), f"_Q{len(renamed)}"), src)
    for old, new in renamed.items():
        if old in ns:
            ns[new] = ns[old]
    exec(_code_of(canonical), ns)
    return ns[renamed.get(name, name)]


def _indent(text: str, n: int) -> str:
    return "\n".join(" " * n + line for line in text.split("\n"))


def _try_value(code: str | None, fallback: str) -> str:
    if code is None:
        return f"v = {fallback}(s, n, e)"
    return f"try:\n    v = {code}\nexcept RecursionError:\n    raise\nexcept Exception:\n    v = {fallback}(s, n, e)"


def _nonbool(v: Any, where: str) -> None:
    from kvexact.spec.checker.values import EvalError, fmt
    raise EvalError(f"a conjunct has the non-boolean value {fmt(v)}", where)


def _same(a: Any, b: Any, where: str) -> bool:
    from kvexact.spec.checker.values import EvalError
    if type(a) is type(b) and type(a) in (int, str, bool):
        return a == b
    try:
        return tla_eq(a, b)
    except EvalError as exc:
        if not exc.location:
            exc.location = where
        raise


ACTION_HELPERS = {"_nonbool": _nonbool, "_same": _same, "LazyFcn": LazyFcn}


# ----------------------------------------------------------------------------- the generator

def _shape(node: Any) -> Any:
    """A syntax tree without its positions: equal shapes are the same expression."""
    if isinstance(node, tuple) and hasattr(node, "_fields"):
        return (type(node).__name__,) + tuple(_shape(getattr(node, f)) for f in node._fields
                                               if f not in ("start", "end"))
    if isinstance(node, (list, tuple)):
        return tuple(_shape(x) for x in node)
    return node


def _same_item(a: Any, b: Any) -> bool:
    """Two EXCEPT path items (a field name, or a list of argument expressions) are the same text, up
    to positions."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return _shape(a) == _shape(b)


class FastGen:
    """Generates fast paths; ``compile`` returns None when an expression has none worth having."""

    def __init__(self, comp: Any):
        self.c = comp
        self.ns: dict[str, Any] = {}
        self.ops = 0
        self.top: tuple = (None, None, None)
        self.at: str | None = None  # the code of @ inside an EXCEPT value
        self.lets: dict[int, str] = {}  # id(LET definition) -> the code that stands for its value
        # the binders enclosing the code being generated, outermost first: (bound names, cells to create
        # just outside that binder's loop)
        self.loops: list[tuple[frozenset, list[str]]] = []

    def _state(self) -> tuple:
        return (self.ns, self.ops, self.top, self.at, self.lets, self.loops)

    def _restore(self, saved: tuple) -> None:
        self.ns, self.ops, self.top, self.at, self.lets, self.loops = saved

    def _const(self, v: Any) -> str:
        name = f"_k{next(_COUNTER)}"
        self.ns[name] = v
        return name

    def _tmp(self) -> str:
        return f"_t{next(_COUNTER)}"

    def _call(self, node: Any, scope: Any) -> str:
        """A node without an inline form: call its compiled function (none for the expression being
        generated: its closure is then all there is)."""
        if node is self.top[0] and scope is self.top[1]:
            raise _NoFast()  # the whole expression is its own closure: a fast path would only wrap it
        fn = self.c.expr(node, scope)[0]
        return f"{self._const(fn)}(s, n, e)"

    def compile(self, node: Any, scope: Any, slow: Callable, where: str) -> Callable | None:
        saved = self._state()
        self.ns, self.ops, self.top, self.at, self.lets = dict(HELPERS), 0, (node, scope, slow), None, {}
        self.loops = []
        try:
            code = self.code(node, scope)
            if self.ops == 0:  # a literal, a name or one call: the closure is as fast
                return None
            ns = self.ns
            ns["_slow"] = slow
            src = ("def _fast(s, n, e):\n    try:\n        return " + code +
                   "\n    except RecursionError:\n        raise\n    except Exception:\n        return _slow(s, n, e)\n")
            return run_generated(src, ns, "_fast")
        except (_NoFast, SyntaxError, RecursionError, MemoryError):  # no fast code, or past Python's limits
            return None
        finally:
            self._restore(saved)

    def inline(self, node: Any, scope: Any, ns: dict) -> str | None:
        """The fast code of an expression, its constants added to ``ns``; None when it has none."""
        saved = self._state()
        self.ns, self.ops, self.top, self.at, self.lets = ns, 0, (None, None, None), None, {}
        self.loops = []
        try:
            return self.code(node, scope)
        except _NoFast:
            return None
        finally:
            self._restore(saved)

    def flat_action(self, steps: list, where: str) -> Callable:
        """The function of a flat conjunction (actions.py ``_flat_conj``): guards, x' = e and UNCHANGED
        variables in one straight-line body, each expression inline with its compiled function as the
        exact fallback."""
        ns = dict(HELPERS)
        ns.update(ACTION_HELPERS)
        ns["_where"] = where
        body: list[str] = []
        binds = False
        for i, (kind, a, b, src) in enumerate(steps):
            if kind == 0:
                ns[f"_g{i}"] = a
                code = self.inline(src[0], src[1], ns) if src is not None else None
                body.append(_try_value(code, f"_g{i}"))
                body.append("if v is not True:\n    if v is not False:\n        _nonbool(v, _where)\n    return")
            elif kind == 1:
                binds = True
                ns[f"_g{i}"] = b
                code = self.inline(src[0], src[1], ns) if src is not None else None
                body.append(_try_value(code, f"_g{i}"))
                body.append(f"if {a!r} in n:\n    if not _same(n[{a!r}], v, _where):\n        return\n"
                            f"else:\n    n[{a!r}] = v.materialize() if type(v) is LazyFcn else v\n"
                            f"    bound.append({a!r})")
            else:
                binds = True
                for var in a:
                    body.append(f"if {var!r} in n:\n    if not _same(n[{var!r}], s[{var!r}], _where):\n"
                                f"        return\nelse:\n    n[{var!r}] = s[{var!r}]\n    bound.append({var!r})")
        body.append("k(s, n)")
        inner = "\n".join(body)
        if binds:
            src_text = ("def _act(s, n, e, k):\n    bound = []\n    try:\n" + _indent(inner, 8) +
                        "\n    finally:\n        for var in bound:\n            del n[var]\n")
        else:
            src_text = "def _act(s, n, e, k):\n" + _indent(inner, 4) + "\n"
        return run_generated(src_text, ns, "_act")

    # -------------------------------------------------------------- nodes

    def code(self, node: Any, scope: Any) -> str:
        if isinstance(node, str):
            if node == "@" and self.at is not None:
                return self.at
            raise _NoFast()
        kind = type(node).__name__
        if kind in _OPS or (kind == "OperatorApplication" and node.arguments):
            if not (node is self.top[0] and scope is self.top[1]):
                deps = self.c.expr(node, scope)[1]
                if not deps:
                    return self._call(node, scope)  # constant-level: its compiled function caches the value
                if (self.loops and not (deps & _NO_HOIST) and self._worth_hoisting(kind, node)
                        and not any(x.startswith("$rec") for x in deps)):
                    level = self._hoist_level(deps)
                    if level < len(self.loops):
                        return self._hoist(level, node, scope)
        if kind in _OPS:
            self.ops += 1
        method = getattr(self, "_g_" + kind, None)
        if method is not None:
            return method(node, scope)
        return self._call(node, scope)

    @staticmethod
    def _worth_hoisting(kind: str, node: Any) -> bool:
        """Binder forms and operator calls (not the inline ones: a cell costs about as much as those)."""
        if kind in _BINDER_FORMS:
            return True
        from kvexact.spec.checker.binders import ALIASES
        return kind == "OperatorApplication" and ALIASES.get(node.operator, node.operator) not in _INLINE_OPS

    def _hoist_level(self, deps: frozenset) -> int:
        """The index of the outermost enclosing binder whose loop does not change an expression with
        ``deps``: len(self.loops) when the innermost binder binds one of them."""
        level = len(self.loops)
        while level > 0 and not (self.loops[level - 1][0] & deps):
            level -= 1
        return level

    def _hoist(self, level: int, node: Any, scope: Any) -> str:
        """Loop-invariant code: the expression keeps its place, but its value is kept in a cell created
        just outside the loop of binder ``level``, so it is computed at most once per run of that loop
        (lazily: never when no iteration reaches it, as without the cell)."""
        saved = self.loops
        self.loops = saved[:level]
        try:
            code = self.code(node, scope)
        finally:
            self.loops = saved
        cell = f"_c{next(_COUNTER)}"
        saved[level][1].append(cell)
        return f"({cell}[0] if {cell} else ({cell}.append({code}) or {cell}[0]))"

    def _loop(self, names: Any, make: Callable[[], str]) -> str:
        """The code of a binder's loop built by ``make`` with ``names`` bound inside it, preceded by the
        cells of the expressions hoisted out of it."""
        cells: list[str] = []
        self.loops.append((frozenset(names), cells))
        try:
            code = make()
        finally:
            self.loops.pop()
        if not cells:
            return code
        return "(" + "".join(f"({c} := []), " for c in cells) + code + ")[-1]"

    def _g_Parentheses(self, node, scope):
        return self.code(node.expression, scope)

    def _g_VerticalList(self, node, scope):
        """A bulleted conjunction or disjunction list."""
        self.ops += 1
        return self._junction([self.code(it.expression, scope) for it in node.arguments], node.operator == "/\\")

    def _g_VerticalItem(self, node, scope):
        return self.code(node.expression, scope)

    def _g_IntegralNumeral(self, node, scope):
        return str(int(node.value))

    def _g_StringLiteral(self, node, scope):
        return repr(node.value[1:-1].replace('\\"', '"').replace("\\\\", "\\"))

    def _g_BooleanLiteral(self, node, scope):
        return "True" if node.value == "TRUE" else "False"

    def _g_Field(self, node, scope):
        r = self._tmp()
        return (f"({r}.d[{node.name!r}] if type({r} := {self.code(node.expression, scope)}) is Fcn "
                f"else _field({r}, {node.name!r}))")

    def _g_FunctionApplication(self, node, scope):
        if len(node.arguments) != 1:
            args = "".join(self.code(a, scope) + ", " for a in node.arguments)
            return f"_app({self.code(node.function, scope)}, ({args}))"
        f, x = self._tmp(), self._tmp()
        return (f"({f}.d[{x}] if type(({f} := {self.code(node.function, scope)}, {x} := "
                f"{self.code(node.arguments[0], scope)})[0]) is Fcn else ({f}[{x} - 1] if type({f}) is tuple and "
                f"type({x}) is int and 0 < {x} <= len({f}) else _app({f}, {x})))")

    def _g_Tuple(self, node, scope):
        return "(" + "".join(self.code(x, scope) + ", " for x in node.items) + ")"

    def _g_SetEnumeration(self, node, scope):
        items = "(" + "".join(self.code(x, scope) + ", " for x in node.items) + ")"
        return f"_setenum({items})" if len(node.items) > 1 else f"frozenset({items})"

    def _g_Record(self, node, scope):
        """[k1 |-> e1, ...]: built by values.record_of with a cache of this site's own (a record of
        integers, strings and model values is built once per value tuple)."""
        keys = tuple(k for k, _ in node.key_values)
        vals = "(" + "".join(self.code(v, scope) + ", " for _, v in node.key_values) + ")"
        return f"_rec({self._const({})}, {self._const(keys)}, {vals})"

    def _g_If(self, node, scope):
        c = self._tmp()
        return (f"({self.code(node.then, scope)} if ({c} := {self.code(node.predicate, scope)}) is True else "
                f"({self.code(node.else_, scope)} if {c} is False else _nb()))")

    def _g_Cases(self, node, scope):
        out = self.code(node.other, scope) if node.other is not None else "_nb()"
        for arm in reversed(node.cases):
            out = f"({self.code(arm.expression, scope)} if {self.code(arm.predicate, scope)} is True else {out})"
        return out

    def _g_Let(self, node, scope):
        """LET d1 == e1 ... IN body: each definition without arguments is computed before the body (an
        error there sends the expression to its closure, which evaluates LET lazily)."""
        inner = self.c._let_scope(node, scope)
        pre = []
        for d in node.definitions:
            if type(d).__name__ != "OperatorDefinition" or d.arity or d.function:
                continue
            b = inner.names.get(d.name)
            if b is None or b[0] != "def":
                continue
            t = self._tmp()
            shared = self.c.let_cache(b[1])
            if shared is not None:  # its one cache, which its other uses (LET operators) read too
                pre.append(f"({t} := {self._const(shared)}(s, n, e))")
            else:
                pre.append(f"({t} := {self.code(d.definiens, inner)})")
            self.lets[id(b[1])] = t
        body = self.code(node.expression, inner)
        if not pre:
            return body
        return "(" + ", ".join(pre) + f", {body})[-1]"

    def _except_keys(self, item, scope):
        if isinstance(item, str):
            return repr(item)
        if len(item) == 1:
            return self.code(item[0], scope)
        return "(" + "".join(self.code(a, scope) + ", " for a in item) + ")"

    def _g_Except(self, node, scope):
        """[f EXCEPT !p1 = v1, !p2 = v2]: each change applied in turn; @ is the value at the path."""
        out = self.code(node.function, scope)
        chs = node.changes
        if len(chs) > 1 and not any("@" in self.c.expr(ch.expression, scope)[1] for ch in chs):
            return self._merged(out, [(ch.item, ch.expression) for ch in chs], scope)
        for ch in chs:
            keys = [self._except_keys(item, scope) for item in ch.item]
            out = self._update(out, keys, ch.expression, scope)
        return out

    def _merged(self, fcode: str, changes: list, scope: Any) -> str:
        """Changes (path items, value) that read no @, applied in turn to the function of ``fcode``; a run
        of consecutive changes whose paths go on past the same first item (the same key expression, so
        the same key: they are evaluated with the same state and names) is one update at that key, its
        value the run's changes applied to the old one (Paxos's ![m.ins][acc].mbal, ...bal, ...val: the
        levels above the record are built once, not once per change). Only consecutive changes: two key
        expressions that differ may still have equal values, and the changes' order then matters."""
        out = fcode
        i = 0
        while i < len(changes):
            items, value = changes[i]
            j = i + 1
            if len(items) > 1:
                while j < len(changes) and len(changes[j][0]) > 1 and _same_item(changes[j][0][0], items[0]):
                    j += 1
            if j == i + 1:
                out = self._update(out, [self._except_keys(item, scope) for item in items], value, scope)
            else:
                f, k = self._tmp(), self._tmp()
                inner = self._merged(f"_app({f}, {k})", [(it[1:], v) for it, v in changes[i:j]], scope)
                out = f"_upd(({f} := {out}), ({k} := {self._except_keys(items[0], scope)}), {inner})"
            i = j
        return out

    def _update(self, fcode: str, keys: list[str], value: Any, scope: Any) -> str:
        f, k = self._tmp(), self._tmp()
        at = f"_app({f}, {k})"
        if len(keys) == 1:
            saved, self.at = self.at, at
            try:
                v = self.code(value, scope)
            finally:
                self.at = saved
        else:
            v = self._update(at, keys[1:], value, scope)
        return f"_upd(({f} := {fcode}), ({k} := {keys[0]}), {v})"

    # binders: the body is a lambda over (s, n, e) with the bound names in e, as the closures have them

    def _binders(self, decls, scope):
        """(single name or None, [(setter constant, set code)], inner scope, bound names) for bounded
        binders."""
        from kvexact.spec.checker.binders import _bind, _binder_names, _bounds
        bounds = _bounds(decls)
        if any(sset is None for _, sset in bounds):
            raise _NoFast()
        names = [nm for b, _ in bounds for nm in _binder_names(b)]
        inner = scope.bound(decls, names)
        binds = []
        for b, sset in bounds:
            binds.append((self._const(_bind(b)), self.code(sset, scope)))
        single = None
        if len(bounds) == 1 and type(bounds[0][0]).__name__ != "Tuple":
            from kvexact.spec.checker.binders import _name_of
            single = _name_of(bounds[0][0])
        return single, binds, inner, names

    def _lambda(self, node, inner) -> str:
        return f"(lambda s, n, e: {self.code(node, inner)})"

    def _bound_loop(self, decls, scope, body_node, one: str, many: str, extra: str = "",
                    tuple_ok: bool = True) -> str:
        """``one(s, n, e, S, name, body{extra})`` for one plain binder, else ``many(s, n, e, [(setter, S),
        ...], body{extra})`` (not for one tuple binder unless ``tuple_ok``), with loop-invariant parts of
        the body hoisted out of the loop."""
        single, binds, inner, names = self._binders(decls, scope)
        if single is None and len(binds) == 1 and not tuple_ok:
            raise _NoFast()
        pair = one == "_quant1" and len(binds) == 2 and len(names) == 2

        def make() -> str:
            body = self._lambda(body_node, inner)
            if single is not None:
                return f"{one}(s, n, e, {binds[0][1]}, {single!r}, {body}{extra})"
            if pair:  # two plain names (a tuple binder binds more names than it has sets)
                (_, sa), (_, sb) = binds
                return f"_quant2(s, n, e, {sa}, {names[0]!r}, {sb}, {names[1]!r}, {body}{extra})"
            return f"{many}(s, n, e, [{', '.join(f'({a}, {b})' for a, b in binds)}], {body}{extra})"
        return self._loop(names, make)

    def _g_Quantification(self, node, scope):
        if node.quantifier not in ("\\A", "\\E"):
            raise _NoFast()
        extra = ", True" if node.quantifier == "\\A" else ", False"
        return self._bound_loop(node.declarations, scope, node.predicate, "_quant1", "_quantn", extra)

    def _g_SetComprehension(self, node, scope):
        return self._bound_loop(node.declarations, scope, node.item, "_setof1", "_setofn")

    def _g_Function(self, node, scope):
        # one tuple binder: keyed by the element itself (the closure's way)
        return self._bound_loop(node.declaration, scope, node.value, "_fcn1", "_fcnn", tuple_ok=False)

    def _one_binder(self, binder, scope) -> tuple[str, Any, str]:
        """(name, inner scope, set code) of a binder ``x \\in S`` (no tuple)."""
        b, sset = binder.arguments
        if type(b).__name__ == "Tuple":
            raise _NoFast()
        from kvexact.spec.checker.binders import _name_of
        name = _name_of(b)
        inner = scope.child()
        inner.names[name] = ("bound", name)
        return name, inner, self.code(sset, scope)

    def _g_SetSlice(self, node, scope):
        name, inner, sset = self._one_binder(node.declaration, scope)
        return self._loop([name], lambda: f"_filter1(s, n, e, {sset}, {name!r}, "
                                          f"{self._lambda(node.predicate, inner)})")

    def _g_Choose(self, node, scope):
        binder = node.declaration
        if not (type(binder).__name__ == "OperatorApplication" and binder.operator == "\\in" and binder.arguments):
            raise _NoFast()
        if type(node.predicate).__name__ == "BooleanLiteral" and node.predicate.value == "TRUE":
            if type(binder.arguments[0]).__name__ == "Tuple":
                raise _NoFast()
            return f"_min({self.code(binder.arguments[1], scope)})"
        name, inner, sset = self._one_binder(binder, scope)
        return self._loop([name], lambda: f"_choose1(s, n, e, {sset}, {name!r}, "
                                          f"{self._lambda(node.predicate, inner)})")

    # operators

    def _g_OperatorApplication(self, node, scope):
        from kvexact.spec.checker.binders import ALIASES
        op = ALIASES.get(node.operator, node.operator)
        args = node.arguments
        if op in _NO_GEN:
            raise _NoFast()
        if args is None:
            return self._name(op, node, scope)
        self.ops += 1
        if op in ("/\\", "\\/"):
            return self._junction([self.code(a, scope) for a in args], op == "/\\")
        if op == "~":
            t = self._tmp()
            return f"((not {t}) if type({t} := {self.code(args[0], scope)}) is bool else _nb())"
        if op == "=>":
            a, b2 = self._tmp(), self._tmp()
            return (f"(True if ({a} := {self.code(args[0], scope)}) is False else "
                    f"(({b2} if type({b2} := {self.code(args[1], scope)}) is bool else _nb()) if {a} is True "
                    f"else _nb()))")
        if op == "<=>":
            a, b2 = self._tmp(), self._tmp()
            return (f"(({a} == {b2}) if type({a} := {self.code(args[0], scope)}) is bool and "
                    f"type({b2} := {self.code(args[1], scope)}) is bool else _nb())")
        if op in ("=", "/="):
            a, b2 = self._tmp(), self._tmp()
            neg = "not " if op == "/=" else ""
            lits = [type(x).__name__ == "StringLiteral" for x in args]
            if lits[0] != lits[1]:  # a string literal: Python's == is TLA+'s when the other side is a string
                lit = self.code(args[0 if lits[0] else 1], scope)
                x = self.code(args[1 if lits[0] else 0], scope)
                pair = f"{lit}, {a}" if lits[0] else f"{a}, {lit}"
                return f"({neg}(({a} == {lit}) if type({a} := {x}) is str else _eq({pair})))"
            return (f"({neg}(({a} == {b2}) if type({a} := {self.code(args[0], scope)}) is type({b2} := "
                    f"{self.code(args[1], scope)}) and type({a}) in _EQ_TYPES else _eq({a}, {b2})))")
        if op in ("\\in", "\\notin"):
            neg = "not " if op == "\\notin" else ""
            return f"({neg}_in({self.code(args[0], scope)}, {self.code(args[1], scope)}))"
        if op == "'":
            var = self.c._as_var(args[0], scope)
            if var is not None:
                return f"n[{var!r}]"
            return self._call(node, scope)
        b = self.c.resolve(op, scope)
        if b is None and op in B.OPERATORS:
            b = ("builtin", op)
        if b is None:
            return self._call(node, scope)
        if b[0] == "builtin":
            return self._builtin(b, args, node, scope)
        if b[0] == "def":
            return self._def_call(b[1], args, node, scope)
        if b[0] == "opparam" and b[2] == len(args):
            return f"e[{b[1]!r}](" + ", ".join(self.code(a, scope) for a in args) + ")"
        return self._call(node, scope)

    def _name(self, op, node, scope):
        b = self.c.resolve(op, scope)
        if b is None:
            return self._call(node, scope)
        if b[0] == "var":
            return f"s[{b[1]!r}]"
        if b[0] == "bound" or (b[0] == "opparam" and b[2] == 0):
            return f"e[{b[1]!r}]"
        if b[0] == "const" and b[1] in self.c.constants and not callable(self.c.constants[b[1]]):
            return self._const(self.c.constants[b[1]])
        if b[0] == "value" and not callable(b[1]):
            return self._const(b[1])
        if b[0] == "def" and id(b[1]) in self.lets:
            return self.lets[id(b[1])]
        return self._call(node, scope)

    def _builtin(self, b, args, node, scope):
        spec = b[2] if len(b) > 2 else B.OPERATORS[b[1]]
        if spec[0] != len(args) or (len(spec) > 2 and spec[2]) or spec[0] <= 0:
            return self._call(node, scope)
        codes = [self.code(a, scope) for a in args]
        if b[1] in _INT_OPS and len(args) == 2 and spec is B.OPERATORS.get(b[1]):
            x, y = self._tmp(), self._tmp()
            return (f"(({x} {_INT_OPS[b[1]]} {y}) if type({x} := {codes[0]}) is int and type({y} := {codes[1]}) "
                    f"is int else {self._const(spec[1])}({x}, {y}))")
        return f"{self._const(spec[1])}({', '.join(codes)})"

    def _def_call(self, d, args, node, scope):
        """A call of a definition with arguments, as compiler._def_ref's plain call does it: the body
        with a fresh dict of parameter values (for a LET operator, added to the bound names); memoized when
        the body reads only its parameters (recursive-function and primed-parameter definitions keep their
        closures)."""
        if (not args or len(args) != d.arity or any(ar for _, ar in d.params)
                or (d.node is not None and d.node.function) or self.c.primed_params(d)):
            return self._call(node, scope)
        body, bdeps = self.c.def_fn(d)
        params = [p for p, _ in d.params]
        if not (bdeps - frozenset(params)):
            if any("$lambda" in self.c.expr(a, scope)[1] for a in args):
                return self._call(node, scope)
            # a function of its arguments: memoized by their values, as the closure does (its own memo)
            memo, k, c = self._const({}), self._tmp(), self._tmp()
            miss = self._const(_memo_miss(self.ns[memo], body, params))
            if len(args) == 1:
                ck = (f"({k} if type({k} := {self.code(args[0], scope)}) in {self._const(SELF_KEYED)} "
                      f"else {self._const(memo_key)}({k}))")
            else:
                ck = f"{self._const(memo_keys)}({k} := {self._g_args(args, scope)})"
            return f"({memo}[{c}] if ({c} := {ck}) in {memo} else {miss}(s, n, {k}, {c}))"
        items = ", ".join(f"{p!r}: {self.code(a, scope)}" for p, a in zip(params, args, strict=True))
        if d.is_let:  # a LET operator's body also reads the names bound around it
            return f"{self._const(body)}(s, n, {{**e, {items}}})"
        return f"{self._const(body)}(s, n, {{{items}}})"

    def _g_args(self, args, scope) -> str:
        return "(" + "".join(self.code(a, scope) + ", " for a in args) + ")"

    def _junction(self, codes: list[str], is_and: bool) -> str:
        """a1 /\\ ... /\\ an (or \\/): left to right, each operand a boolean, short-circuiting."""
        stop, go = ("False", "True") if is_and else ("True", "False")
        t = self._tmp()
        out = f"({t} if type({t} := {codes[-1]}) is bool else _nb())"
        for c in reversed(codes[:-1]):
            u = self._tmp()
            out = f"({out} if ({u} := {c}) is {go} else ({stop} if {u} is {stop} else _nb()))"
        return out
