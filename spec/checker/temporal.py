"""Temporal formulas as TLC reads them: a cfg's PROPERTY list and the SPECIFICATION's fairness, and
``ENABLED``.

Invariant of :func:`plan_properties`: every PROPERTY conjunct lands in exactly one of TLC's classes
(``SpecProcessor.processConfigProps``): a state predicate is checked on the initial states (implied
init), ``[]P`` with P a state predicate is an invariant, ``[][A]_v`` is an action property checked on
every transition, and any other temporal formula is checked on the state graph (liveness). A formula
that no class takes, or that this engine cannot read, raises UnsupportedError naming the property and
why: an unchecked property is never passed over.

Formulas are kept in negation normal form over non-temporal leaves: ``("lit", leaf, positive)``,
``("and", parts)``, ``("or", parts)``, ``("box", f)``, ``("dia", f)``. A leaf is a compiled closure
``fn(s, n, e)`` with its bound names; an action leaf reads primed variables and is evaluated on a step.
"""

from __future__ import annotations

from typing import Any

import attrs

from kvexact.spec.checker.actions import ActionCompiler, _strip, conj_items, disj_items
from kvexact.spec.checker.compiler import (
    ALIASES,
    PRIME,
    STATE,
    Compiler,
    Def,
    Primed,
    Scope,
    _bind,
    _binder_names,
    _bounds,
    loc_of,
)
from kvexact.spec.checker.errors import SpecError, UnsupportedError
from kvexact.spec.checker.values import EvalError, canon, fmt, ordered_elements, tla_eq

TRUE: tuple = ("and", ())  # the empty conjunction (no fairness)
FALSE: tuple = ("or", ())  # the empty disjunction


def simplify(f: tuple) -> tuple:
    """``f`` with its constant parts folded away (TRUE/FALSE absorb or vanish, []c = <>c = c) and nested
    conjunctions (disjunctions) flattened; the same behaviours satisfy it."""
    tag = f[0]
    if tag == "lit":
        return f
    if tag in ("box", "dia"):
        g = simplify(f[1])
        return g if g in (TRUE, FALSE) else (tag, g)
    unit, absorb = (TRUE, FALSE) if tag == "and" else (FALSE, TRUE)
    parts: list = []
    for x in f[1]:
        y = simplify(x)
        if y == absorb:
            return absorb
        if y[0] == tag:  # the unit is the empty one of these
            parts.extend(y[1])
        else:
            parts.append(y)
    return parts[0] if len(parts) == 1 else (tag, tuple(parts))


class _Enabled(Exception):
    """Raised by the first successor an ENABLED search finds."""


def _stop(s2: Any, n2: Any) -> None:
    raise _Enabled()


def compile_enabled(comp: Compiler, arg: Any, scope: Scope, where: str):
    """``ENABLED A``: true iff some successor of the current state satisfies A (TLC's ``Tool.enabled``:
    the successor is searched as for Next, and may leave variables that A does not mention unassigned)."""
    _, deps = comp.expr(arg, scope)
    return enabled_fn(comp, arg, None, scope, where), (deps - {PRIME}) | {STATE}


class _Actions(ActionCompiler):
    """Successor search over an instance's own variables (ENABLED's abstract twin)."""

    def __init__(self, comp: Compiler, nvars: int):
        super().__init__(comp, "next")
        self._nvars = nvars

    @property
    def nvars(self) -> int:
        return self._nvars


def enabled_fn(comp: Compiler, action: Any, subscript: Any, scope: Scope, where: str):
    """``ENABLED A`` (``ENABLED <<A>>_v`` with a subscript) as a closure ``f(s, n, e)``.

    Inside an instance with substitutions TLC searches the instanced module's own variables: their
    current values are the substituted expressions' values and their primed values are free (not the
    primed substituted expressions); the abstract twin of the instance (:func:`_twin`) does the same."""
    root = scope
    while root.parent is not None:
        root = root.parent
    extend = None
    if getattr(root, "instance_of", None) is not None:
        twin, extend, nvars = _twin(comp, root)
        scope = _rebase(scope, root, twin)
        act = _Actions(comp, nvars).act(action, scope)
    else:
        act = ActionCompiler(comp, "next").act(action, scope)
    fv = comp.expr(subscript, scope)[0] if subscript is not None else None

    def enabled(s, n, e):
        if s is None:
            raise EvalError("ENABLED is evaluated outside a state", where)
        if extend is not None:
            s = extend(s, e)
        if fv is None:
            k = _stop
        else:
            v0 = fv(s, None, e)

            def k(s2, n2):  # n2 is bound in place: a copy, so a per-state cache keyed on it stays right
                if not tla_eq(fv(Primed(n2), None, e), v0):
                    raise _Enabled()
        try:
            act(s, {}, e, k)
        except _Enabled:
            return True
        return False
    return enabled


def _twin(comp: Compiler, root: Scope):
    """The instance ``root`` compiled again with its module's variables bound to fresh state variables
    ``Module!x``; returns (twin scope, s -> s extended with their current values, their number)."""
    cache = comp.__dict__.setdefault("_enabled_twins", {})
    found = cache.get(id(root))
    if found is not None:
        return found[1:]
    node, mod, outer, inherit = root.instance_of  # type: ignore[attr-defined]
    names = _module_variables(comp, node.name, set())
    fresh = {v: f"{node.name}!{v}" for v in names}
    twin = comp._instance(node, mod, outer, inherit, override={v: ("var", x) for v, x in fresh.items()})
    current = [(fresh[v], comp._apply_binding(root.lookup(v), v, [], node, root)[0]) for v in names
               if root.lookup(v) is not None]

    def extend(s: dict, e: dict) -> dict:
        a = dict(s)
        for x, fn in current:
            a[x] = fn(s, None, e)
        return a
    cache[id(root)] = (root, twin, extend, len(names))  # root kept alive: its id stays its own
    return twin, extend, len(names)


def _root(scope: Scope) -> Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def _instance_root(reader: FormulaReader, arg: Any, scope: Scope) -> tuple | None:
    """(the INSTANCE scope a ``[A]_v`` is wholly read in, A's text, A's scope): the instance it is
    written in, or the one both ``Inst!A`` and ``Inst!v`` name (``[][Abs!Next]_Abs!vars`` written in
    the instantiating module); None when neither."""
    root = _root(scope)
    if getattr(root, "instance_of", None) is not None:
        return root, arg.action, scope
    found = []
    for part in (arg.action, arg.subscript):
        part = _strip(part)
        if type(part).__name__ != "SubexpressionReference":
            return None
        d = reader._instance_def(part, scope)
        if d is None or d[1] or d[0].arity:
            return None
        found.append((_root(d[0].scope), d[0]))
    if found[0][0] is found[1][0] and getattr(found[0][0], "instance_of", None) is not None:
        return found[0][0], found[0][1].body, found[0][1].scope
    return None


def instance_step_memo(comp: Compiler, where: tuple | None, fn: Any) -> Any:
    """``fn`` (an action ``[A]_v`` read wholly inside the INSTANCE scope ``root``) remembered per step of the instance.

    A formula of an instanced module M reads nothing but M's declared names, each of which the INSTANCE
    binds to an expression of the instantiating module; so its value on a step (s, t) is fixed by
    those expressions' values at s and at t (its *abstract* step). A refinement's ``[][Abs!Next]_vars``
    is then evaluated once per distinct abstract step instead of once per generated transition, and an
    abstract step that changes no abstract value is a stuttering step, which ``[A]_v`` allows (v is an
    expression of M). Returns ``fn`` itself outside an instance, or when a constant of M is bound to a
    state-dependent expression, or when a binding reads a primed variable (then M's names are not
    fixed by the two states alone). Invariant: the wrapper returns what ``fn(s, t, e)`` returns with
    ``e`` empty (an action property has no bound names).

    A step the memo has not seen is first looked up among the successors of its abstract source,
    generated once per abstract state by A's successor search over M's own variables (ENABLED's
    abstract twin): one found there satisfies A. Only a step not found there (or whose source's
    search failed) is evaluated with ``fn``."""
    if where is None:
        return fn
    root, action, ascope = where
    inst = getattr(root, "instance_of", None)
    if inst is None:
        return fn
    node = inst[0]
    found = comp.load_tree(node.name)
    if found is None:
        return fn
    proj = []
    names = []
    reads: set | None = set()  # the variables the bindings read (None: not known from the text)
    variables = set(_module_variables(comp, node.name, set()))
    for name, arity in comp._declared_names(found[0], set()).items():
        b = root.lookup(name)
        if b is None:
            return fn
        if b[0] in ("const", "value", "builtin") and name not in variables:
            continue  # a constant of M bound to a constant
        if arity or b[0] not in ("var", "subst", "def", "const", "value"):
            return fn  # an operator constant, or a binding of a kind not read here: no memo
        if b[0] == "def" and b[1].arity:
            return fn
        f, deps = comp._apply_binding(b, name, [], node, root)
        if deps - {STATE}:
            return fn  # reads a primed variable or a bound name: not a function of one state
        if deps or name in variables:  # every variable of M, so that its successor search can be read
            proj.append(f)
            names.append(name)
            r = _binding_reads(comp, b)
            reads = None if r is None or reads is None else reads | r
    ids: dict = {}
    memo: dict[tuple[int, int], bool] = {}
    last: list = [None, -1]
    keep = sorted(reads) if reads is not None else None
    by_reads: dict = {}  # the values of the variables read -> abstract state (states share most)

    def abstract(st: dict) -> int:
        if keep is not None:
            try:
                rk = tuple([canon(st[v]) for v in keep])
            except KeyError:
                rk = None
            if rk is not None:
                i = by_reads.get(rk)
                if i is not None:
                    return i
        key = tuple([canon(f(st, None, _NO_ENV)) for f in proj])
        i = ids.get(key)
        if i is None:
            i = ids[key] = len(ids)
        if keep is not None and rk is not None:
            by_reads[rk] = i
        return i

    gen = None
    if set(names) >= variables:
        try:
            twin, extend, nvars = _twin(comp, root)
            act = _Actions(comp, nvars).act(action, _rebase(ascope, root, twin))
        except (SpecError, EvalError):
            act = None
        if act is not None:
            fresh = [f"{node.name}!{v}" for v in names]

            def gen(s: dict) -> set | None:
                out: set = set()

                def k(s2: dict, n2: dict) -> None:
                    try:
                        key = tuple([canon(n2[x]) for x in fresh])
                    except KeyError:  # a variable A leaves unassigned: that step is evaluated instead
                        return
                    i = ids.get(key)
                    if i is None:
                        i = ids[key] = len(ids)
                    out.add(i)
                try:
                    act(extend(s, _NO_ENV), {}, _NO_ENV, k)
                except (EvalError, SpecError, RecursionError, TypeError, ValueError, KeyError):
                    return None
                return out
    succs: dict[int, set | None] = {}

    def step(s: dict, t: dict, e: dict) -> Any:
        if e:
            return fn(s, t, e)
        if last[0] is s:
            a = last[1]
        else:
            a = abstract(s)
            last[0], last[1] = s, a
        b = abstract(t)
        if a == b:
            return True  # the abstract step stutters: [A]_v holds
        r = memo.get((a, b))
        if r is None and gen is not None:
            if a not in succs:
                succs[a] = gen(s)
            found = succs[a]
            if found is not None and b in found:
                memo[(a, b)] = r = True
        if r is None:
            r = fn(s, t, e)
            if r is True:
                memo[(a, b)] = True
        return r
    step.abstract_states = ids  # type: ignore[attr-defined]
    return step


_NO_ENV: dict = {}


def _binding_reads(comp: Compiler, b: tuple) -> frozenset | None:
    """The variables an INSTANCE binding's expression reads, or None when its text does not tell."""
    if b[0] in ("const", "value"):
        return frozenset()
    if b[0] == "var":
        return frozenset({b[1]})
    if comp.state_reads is None:
        return None
    if b[0] == "def":
        return comp.state_reads(comp, b[1].body, b[1].scope)
    if b[0] == "subst" and len(b) > 5:
        expr, outer = b[5]
        return comp.state_reads(comp, expr, outer)
    return None


def _module_variables(comp: Compiler, name: str, seen: set) -> list[str]:
    found = comp.load_tree(name)
    if found is None or name in seen:
        return []
    seen.add(name)
    tree = found[0]
    out: list[str] = []
    for ext in tree.extendees or []:
        out += _module_variables(comp, ext if isinstance(ext, str) else ext.operator, seen)
    for unit in tree.units or []:
        if type(unit).__name__ == "Variables":
            out += [n if isinstance(n, str) else n.operator for n in unit.names]
    return out


def _rebase(scope: Scope, root: Scope, twin: Scope) -> Scope:
    """``scope`` (inside the instance ``root``) re-rooted on ``twin``: its local names copied."""
    chain = []
    while scope is not root:
        chain.append(scope)
        scope = scope.parent  # type: ignore[assignment]
    out = twin
    for sc in reversed(chain):
        out = out.child()
        out.names = dict(sc.names)
        out.inherit_env = sc.inherit_env
    return out


@attrs.define
class Leaf:
    """A non-temporal formula: ``fn(s, n, e)`` with ``e = env``; ``action`` when it reads a next state."""

    fn: Any
    env: dict
    action: bool
    where: str

    def holds(self, s: dict, t: dict | None) -> bool:
        v = self.fn(s, t if self.action else None, self.env)
        if v is True or v is False:
            return v
        raise EvalError(f"a temporal formula's predicate has the non-boolean value {fmt(v)}", self.where)


@attrs.define
class PropertyPlan:
    """A cfg's PROPERTY list sorted into TLC's classes, plus the spec's fairness."""

    implied_inits: list = attrs.field(factory=list)    # (property name, fn(s, None, {}))
    implied_actions: list = attrs.field(factory=list)  # (property name, fn(s, t, {}))
    temporal: list = attrs.field(factory=list)         # (property name, NNF formula)
    fairness: tuple = TRUE                             # the SPECIFICATION's temporal conjuncts
    leaves: list = attrs.field(factory=list)           # Leaf, indexed by the formulas' leaf ids

    @property
    def needs_graph(self) -> bool:
        return bool(self.temporal)


class FormulaReader:
    """Reads temporal formulas of one compiled spec into NNF, expanding definitions, instances and
    constant-bounded quantifiers (``\\A n \\in S : F`` is the conjunction over S)."""

    def __init__(self, comp: Compiler):
        self.c = comp
        self.leaves: list[Leaf] = []
        self._temporal_memo: dict = {}
        self._action_memo: dict = {}

    # ------------------------------------------------------------ levels (SANY's, through definitions)

    def is_temporal(self, node: Any, scope: Scope) -> bool:
        """Temporal level: contains [], <>, ~>, -+->, WF/SF or a temporal quantifier."""
        return self._reaches(node, scope, self._temporal_memo, _temporal_hit)

    def is_action(self, node: Any, scope: Scope) -> bool:
        """Action level: reads a primed variable (', UNCHANGED, [A]_v, <<A>>_v) outside ENABLED."""
        return self._reaches(node, scope, self._action_memo, _action_hit)

    def _reaches(self, node: Any, scope: Scope, memo: dict, hit) -> bool:
        key = (id(node), id(scope))
        if key in memo:
            return memo[key][0]
        memo[key] = (False, node, scope)  # a recursive definition does not reach through its recursion
        r = self._scan(node, scope, memo, hit)
        memo[key] = (r, node, scope)  # node and scope are kept alive, so their ids stay theirs
        return r

    def _scan(self, node: Any, scope: Scope, memo: dict, hit) -> bool:
        k = type(node).__name__
        found = hit(k, node)
        if found is not None:
            return found
        if k == "OperatorApplication":
            b = self.c.resolve(ALIASES.get(node.operator, node.operator), scope)
            if b is not None and b[0] == "subst" and hit is _action_hit:  # a substituted expression:
                text = b[5] if len(b) > 5 else None  # its level from its text (INSTANCE ... WITH)
                if text is not None and self._reaches(text[0], text[1], memo, hit):
                    return True
                if text is None and PRIME in b[2]:
                    return True
            if b is not None and b[0] == "def" and self._reaches(b[1].body, b[1].scope, memo, hit):
                return True
        if k == "SubexpressionReference":
            target = self._instance_def(node, scope)
            if target is not None and self._reaches(target[0].body, target[0].scope, memo, hit):
                return True
        if k == "Let":
            return self._reaches(node.expression, self.c._let_scope(node, scope), memo, hit)
        return any(self._reaches(x, scope, memo, hit) for x in _children(node))

    def _def_of(self, name: str, scope: Scope) -> Def | None:
        b = self.c.resolve(name, scope)
        if b is not None and b[0] == "def" and not (b[1].node is not None and b[1].node.function):
            return b[1]
        return None

    def _instance_def(self, node: Any, scope: Scope) -> tuple[Def, list] | None:
        try:
            target, args, _ = self.c._instance_target(node, scope)
        except SpecError:
            return None
        if target[0] == "def":
            return target[1], args
        return None

    # ------------------------------------------------------------ leaves

    def leaf(self, node: Any, scope: Scope, env: dict, positive: bool) -> tuple:
        """A literal, or TRUE/FALSE for a constant-level formula: evaluated now, as TLC does when it
        builds a tableau (so ``c => WF_v(A)`` with c false asks nothing of the behaviour)."""
        fn, deps = self.c.expr(node, scope)
        if deps <= set(env):
            v = fn(None, None, env)
            if type(v) is not bool:
                raise EvalError(f"a temporal formula's predicate has the non-boolean value {fmt(v)}",
                                loc_of(node, scope.mod))
            return TRUE if v is positive else FALSE
        self.leaves.append(Leaf(fn, env, self.is_action(node, scope), loc_of(node, scope.mod)))
        return ("lit", len(self.leaves) - 1, positive)

    def _fn_leaf(self, fn: Any, env: dict, action: bool, where: str, positive: bool) -> tuple:
        self.leaves.append(Leaf(fn, env, action, where))
        return ("lit", len(self.leaves) - 1, positive)

    # ------------------------------------------------------------ formulas

    def read(self, node: Any, scope: Scope, env: dict, neg: bool = False) -> tuple:
        """The NNF of ``node`` (of its negation when ``neg``)."""
        node = _strip(node)
        if not self.is_temporal(node, scope):
            return self.leaf(node, scope, env, not neg)
        where = loc_of(node, scope.mod)
        items = conj_items(node)
        if items is not None:
            return ("or" if neg else "and", tuple(self.read(x, scope, env, neg) for x in items))
        items = disj_items(node)
        if items is not None:
            return ("and" if neg else "or", tuple(self.read(x, scope, env, neg) for x in items))
        k = type(node).__name__
        if k == "OperatorApplication":
            return self._read_op(node, scope, env, neg, where)
        if k == "SubexpressionReference":
            found = self._instance_def(node, scope)
            if found is None:
                raise UnsupportedError("a temporal instance reference that is not a definition", where)
            return self._read_def(found[0], found[1], scope, env, neg, where)
        if k == "Fairness":
            return self._fairness(node, scope, env, neg)
        if k == "Quantification" and node.quantifier in ("\\A", "\\E"):
            return self._quantified(node, scope, env, neg, where)
        if k == "Let":
            return self.read(node.expression, self.c._let_scope(node, scope), env, neg)
        if k == "If":
            c = self.leaf(node.predicate, scope, env, True)
            if c[0] != "lit":
                return self.read(node.then if c == TRUE else node.else_, scope, env, neg)
            nc = ("lit", c[1], False)
            a, b = self.read(node.then, scope, env, neg), self.read(node.else_, scope, env, neg)
            return ("or", (("and", (c, a)), ("and", (nc, b))))
        if k == "TemporalQuantification":
            raise UnsupportedError("temporal quantification (\\AA, \\EE) is not checked by this engine", where)
        raise UnsupportedError(f"the temporal construct {k} is not checked by this engine", where)

    def _read_op(self, node: Any, scope: Scope, env: dict, neg: bool, where: str) -> tuple:
        op = ALIASES.get(node.operator, node.operator)
        args = node.arguments or []
        if op == "[]":
            return ("dia" if neg else "box", self.read(args[0], scope, env, neg))
        if op == "<>":
            return ("box" if neg else "dia", self.read(args[0], scope, env, neg))
        if op == "~>":  # P ~> Q == [](P => <>Q)
            if neg:
                return ("dia", ("and", (self.read(args[0], scope, env), ("box", self.read(args[1], scope, env, True)))))
            return ("box", ("or", (self.read(args[0], scope, env, True), ("dia", self.read(args[1], scope, env)))))
        if op == "~":
            return self.read(args[0], scope, env, not neg)
        if op == "=>":
            if neg:
                return ("and", (self.read(args[0], scope, env), self.read(args[1], scope, env, True)))
            return ("or", (self.read(args[0], scope, env, True), self.read(args[1], scope, env)))
        if op == "<=>":
            a, na = self.read(args[0], scope, env), self.read(args[0], scope, env, True)
            b, nb = self.read(args[1], scope, env), self.read(args[1], scope, env, True)
            if neg:
                return ("or", (("and", (a, nb)), ("and", (na, b))))
            return ("or", (("and", (a, b)), ("and", (na, nb))))
        if op == "-+->":
            raise UnsupportedError("-+-> (while-plus) is not checked by this engine", where)
        d = self._def_of(op, scope)
        if d is not None:
            return self._read_def(d, args, scope, env, neg, where)
        raise UnsupportedError(f"the temporal operator {op} is not checked by this engine", where)

    def _read_def(self, d: Def, args: list, scope: Scope, env: dict, neg: bool, where: str) -> tuple:
        """A definition applied to arguments: constant-level arguments are evaluated and bound, the
        others are substituted (as TLC does for a definition's parameters)."""
        if len(args) != d.arity:
            raise SpecError(f"{d.name} takes {d.arity} argument(s), given {len(args)}", where)
        inner = d.scope.child()
        env2 = dict(env)
        for a, (p, ar) in zip(args, d.params, strict=True):
            if ar:
                maker, _ = self.c._arg(a, ar, scope)
                inner.names[p] = ("opparam", p, ar)
                env2[p] = maker(None, None, env)
                continue
            sub = self.c._subst(a, scope)
            if sub[2] <= set(env):
                inner.names[p] = ("bound", p)
                env2[p] = sub[1](None, None, env)
            else:
                inner.names[p] = sub
        return self.read(d.body, inner, env2, neg)

    def _quantified(self, node: Any, scope: Scope, env: dict, neg: bool, where: str) -> tuple:
        inner = scope.child()
        binds = []
        for b, sset in _bounds(node.declarations):
            if sset is None:
                raise UnsupportedError("an unbounded quantifier over a temporal formula", where)
            fn, deps = self.c.expr(sset, scope)
            if not deps <= set(env):
                raise UnsupportedError("a quantifier over a state-dependent set in a temporal formula", where)
            binds.append((_bind(b), fn))
            for nm in _binder_names(b):
                inner.names[nm] = ("bound", nm)
        parts: list = []

        def rec(i: int, e: dict) -> None:
            if i == len(binds):
                parts.append(self.read(node.predicate, inner, e, neg))
                return
            setter, fn = binds[i]
            for x in ordered_elements(fn(None, None, e)):
                e2 = dict(e)
                setter(e2, x)
                rec(i + 1, e2)
        rec(0, env)
        conj = (node.quantifier == "\\A") != neg
        return ("and" if conj else "or", tuple(parts))

    def _fairness(self, node: Any, scope: Scope, env: dict, neg: bool) -> tuple:
        """WF_v(A) == []<>~ENABLED <<A>>_v \\/ []<><<A>>_v; SF_v(A) == <>[]~ENABLED <<A>>_v \\/ []<><<A>>_v."""
        where = loc_of(node, scope.mod)
        enabled = enabled_fn(self.c, node.action, node.subscript, scope, where)
        fa, _ = self.c.expr(node.action, scope)
        fv, _ = self.c.expr(node.subscript, scope)

        def step(s, n, e):
            return (not tla_eq(fv(n, None, e), fv(s, None, e))) and fa(s, n, e) is True
        strong = node.operator.startswith("SF")
        en = self._fn_leaf(enabled, env, False, where, True)
        not_en = ("lit", en[1], False)
        st = self._fn_leaf(step, env, True, where, True)
        not_st = ("lit", st[1], False)
        if not neg:
            return ("or", (("dia", ("box", not_en)) if strong else ("box", ("dia", not_en)), ("box", ("dia", st))))
        return ("and", (("box", ("dia", en)) if strong else ("dia", ("box", en)), ("dia", ("box", not_st))))


def _temporal_hit(kind: str, node: Any) -> bool | None:
    if kind in ("Fairness", "TemporalQuantification"):
        return True
    if kind == "OperatorApplication" and ALIASES.get(node.operator, node.operator) in ("[]", "<>", "~>", "-+->"):
        return True
    return None


def _action_hit(kind: str, node: Any) -> bool | None:
    if kind == "SubscriptedAction":
        return True
    if kind == "OperatorApplication":
        op = ALIASES.get(node.operator, node.operator)
        if op in ("'", "UNCHANGED"):
            return True
        if op == "ENABLED":
            return False
    return None


def _children(node: Any) -> list:
    out: list = []
    if not (isinstance(node, tuple) and hasattr(node, "_fields")):
        return out
    for f in node._fields:
        if f in ("symbol", "start", "end"):
            continue
        v = getattr(node, f)
        stack = [v]
        while stack:
            x = stack.pop()
            if isinstance(x, tuple) and hasattr(x, "_fields"):
                out.append(x)
            elif isinstance(x, (list, tuple)):
                stack.extend(x)
    return out


# ---------------------------------------------------------------- PROPERTY classes (TLC's SpecProcessor)

def plan_properties(model: Any) -> PropertyPlan:
    """Sort the cfg's PROPERTY list into TLC's classes and read the spec's fairness; ``[]P`` invariants
    are appended to ``model.invariants``. Done once per model (cached as ``model.plan``)."""
    plan = getattr(model, "plan", None)
    if plan is not None:
        return plan
    reader = FormulaReader(model.comp)
    plan = PropertyPlan(leaves=reader.leaves)
    for name in model.cfg.properties:
        d = model._lookup_def(name, "PROPERTY")
        try:
            _classify(reader, model, plan, name, d.body, d.scope)
        except (SpecError, EvalError) as exc:
            raise UnsupportedError(f"PROPERTY {name} cannot be checked: {exc}") from None
    if plan.temporal:
        parts = []
        for node, scope in getattr(model, "spec_temporals", []):
            try:
                parts.append(simplify(reader.read(node, scope, {})))
            except (SpecError, EvalError) as exc:
                raise UnsupportedError(f"the fairness of SPECIFICATION {model.cfg.specification} cannot be "
                                       f"read: {exc}") from None
        plan.fairness = simplify(("and", tuple(parts)))
    model.plan = plan
    return plan


def _classify(reader: FormulaReader, model: Any, plan: PropertyPlan, name: str, node: Any, scope: Scope) -> None:
    comp = reader.c
    node = _strip(node)
    k = type(node).__name__
    if k == "OperatorApplication" and not node.arguments:
        d = reader._def_of(ALIASES.get(node.operator, node.operator), scope)
        if d is not None and d.arity == 0:
            _classify(reader, model, plan, name, d.body, d.scope)
            return
    if k == "SubexpressionReference":
        found = reader._instance_def(node, scope)
        if found is not None and not found[1] and found[0].arity == 0:
            _classify(reader, model, plan, name, found[0].body, found[0].scope)
            return
    items = conj_items(node)
    if items is not None:
        for it in items:
            _classify(reader, model, plan, name, it, scope)
        return
    if k == "OperatorApplication" and node.operator == "[]" and node.arguments:
        arg = _strip(node.arguments[0])
        if type(arg).__name__ == "SubscriptedAction" and arg.operator == "[":
            fn, _ = comp.expr(arg, scope)
            plan.implied_actions.append((name, instance_step_memo(comp, _instance_root(reader, arg, scope), fn)))
            return
        if not reader.is_temporal(arg, scope) and not reader.is_action(arg, scope):
            fn, _ = comp.expr(arg, scope)
            inv = arg.operator if type(arg).__name__ == "OperatorApplication" and not arg.arguments else name
            model.invariants.append((inv, fn))
            return
    if not reader.is_temporal(node, scope):
        if reader.is_action(node, scope):
            raise UnsupportedError("an action-level formula is a property only as [][A]_v",
                                   loc_of(node, scope.mod))
        plan.implied_inits.append((name, comp.expr(node, scope)[0]))
        return
    plan.temporal.append((name, simplify(reader.read(node, scope, {}))))
