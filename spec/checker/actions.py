"""Compile action formulas (Init over unprimed variables, Next over primed ones) into enumerators that
produce states exactly as TLC's ``getInitStates``/``getNextStates`` do (docs/checker.md, "Successor enumeration").

An enumerator is ``a(s, n, e, k)``: it calls ``k(s2, n2)`` once per completed path (duplicates
included). In "init" mode the assigned dict is ``s``; in "next" mode it is ``n``. Once every variable
has a value, the remaining conjuncts are evaluated as booleans (TLC's all-assigned fast path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvexact.spec.checker.compiler import (
    ALIASES,
    Compiler,
    Def,
    Primed,
    Scope,
    _binder_names,
    _bounds,
    _name_of,
    loc_of,
)
from kvexact.spec.checker.junctions import (  # noqa: F401 (model.py takes them from here)
    Act,
    _flat_step,
    _mentions_prime,
    _strip,
    conj_items,
    disj_items,
)
from kvexact.spec.checker.values import EvalError, LazyFcn, fmt, member, ordered_elements, tla_eq


def _is_action(node: Any, scope: Any, depth: int) -> bool:
    """Is the expression action-level: a prime or UNCHANGED in it, or a call of a definition whose body
    has one (``NoStutter(Step(i))`` passes the action Step(i) by name, as TLC does)?"""
    if isinstance(node, list):
        return any(_is_action(x, scope, depth) for x in node)
    if not (isinstance(node, tuple) and hasattr(node, "_fields")):
        return False
    if type(node).__name__ == "OperatorApplication":
        op = getattr(node, "operator", None)
        if op in ("'", "UNCHANGED"):
            return True
        b = scope.lookup(op) if depth < 16 else None
        if b is not None and b[0] == "def" and _is_action(b[1].body, b[1].scope, depth + 1):
            return True
    return any(_is_action(getattr(node, f), scope, depth) for f in node._fields if f not in ("symbol", "start", "end"))


class ActionCompiler:
    def __init__(self, comp: Compiler, mode: str):
        self.c = comp
        self.mode = mode
        self.init = mode == "init"
        self.sources: dict[int, tuple] = {}  # id of a by-name binding -> (binding, argument, its scope)
        self.lazy_bodies: dict = {}  # (function definition, mode) -> its binders and body as an action

    def inline_scope(self, d: Def, args, scope: Scope, by_name: set) -> tuple[Scope, list]:
        """The compiler's inline scope, remembering the actions passed by name, so that a parameter
        standing for one (A in NoStutter(A) == ... /\\ A) is laid out as that action, not evaluated."""
        inner, values = self.c.inline_scope(d, args, scope, by_name)
        for a, (p, ar) in zip(args, d.params, strict=False):
            b = inner.names.get(p)
            if p in by_name and ar == 0 and b is not None and b[0] == "subst" and _is_action(a, scope, 0):
                self.sources[id(b)] = (b, a, scope)
        return inner, values

    @property
    def nvars(self) -> int:
        return len(self.c.variables)

    def _bind(self, var: str) -> Callable:
        if self.init:
            def bind_s(s, n, v, k):
                if type(v) is LazyFcn:
                    v = v.materialize()
                s2 = dict(s)
                s2[var] = v
                k(s2, n)
            return bind_s

        def bind_n(s, n, v, k):  # n is bound in place and restored: k must copy what it keeps
            if type(v) is LazyFcn:
                v = v.materialize()
            n[var] = v
            try:
                k(s, n)
            finally:
                del n[var]
        return bind_n

    def act(self, node: Any, scope: Scope) -> Act:
        node_s = _strip(node)
        kind = type(node_s).__name__
        items = conj_items(node_s)
        if items is not None:
            return self._conj(items, scope, node_s)
        items = disj_items(node_s)
        if items is not None:
            acts = [self.act(x, scope) for x in items]

            def disj(s, n, e, k):
                for a in acts:
                    a(s, n, e, k)
            return disj
        method = getattr(self, "_a_" + kind, None)
        if method is not None:
            r = method(node_s, scope)
            if r is not None:
                return r
        return self._pred(node_s, scope)

    def _compose(self, first: Act, second: Act, where: str) -> Act:
        """``A \\cdot B`` (TLC's action composition): B taken from each complete successor of A; the
        step goes from the current state to B's successor, one step per path of A then B. As TLC does,
        the successors of A are counted as generated states, but only for a \\cdot that no other \\cdot
        encloses while it runs (TLC adds them to the functor it was given, and an enclosing \\cdot's
        functor drops the count: ChainedCdots, 9 generated)."""
        nvars = self.nvars
        if self.c.composed is None:
            self.c.composed = [0, 0]
        cell = self.c.composed

        def compose(s, n, e, k):
            top = cell[1] == 0
            mids: list[dict] = []
            cell[1] += 1
            try:
                first(s, {}, e, lambda s2, n2: mids.append(dict(n2)))
                if top:
                    cell[0] += len(mids)
                for m in mids:
                    if len(m) != nvars:
                        raise EvalError("the first action of \\cdot leaves a variable without a value", where)
                    second(m, n, e, lambda s3, n3: k(s, n3))
            finally:
                cell[1] -= 1
        return compose

    def _pred(self, node: Any, scope: Scope) -> Act:
        f, _ = self.c.expr(node, scope)
        where = loc_of(node, scope.mod)

        def pred(s, n, e, k):
            v = f(s, n, e)
            if v is True:
                k(s, n)
            elif v is not False:
                raise EvalError(f"an action conjunct has the non-boolean value {fmt(v)}", where)
        pred._pure = True  # type: ignore[attr-defined]
        pred._noassign = True  # type: ignore[attr-defined]
        pred._where = where  # type: ignore[attr-defined]
        pred._fn = f  # type: ignore[attr-defined]
        pred._src = (node, scope)  # type: ignore[attr-defined]
        return pred

    def _conj(self, items: list, scope: Scope, node: Any) -> Act:
        acts = [self.act(x, scope) for x in items]
        where = loc_of(node, scope.mod)
        if not self.init and all(_flat_step(a) is not None for a in acts):
            if self.c.fast is not None:
                steps = [(*_flat_step(a), getattr(a, "_src", None)) for a in acts]  # type: ignore[misc]
                return self.c.fast.flat_action(steps, where)
            return self._flat_conj([_flat_step(a) for a in acts], where)
        evals = [self.c.expr(x, scope)[0] for x in items]
        nv = self.nvars
        init = self.init
        starts = list(range(len(acts)))  # the first conjunct of each segment
        if not init and self.c.fast is not None:
            acts, starts = self._segments(acts, where)
        m = len(acts)
        pure = [getattr(a, "_pure", False) for a in acts]

        def run(i, s, n, e, k):
            while i < m:
                if i > 0 and len(s if init else n) == nv:  # TLC: every variable bound, the rest is evaluated
                    for j in range(starts[i], len(evals)):
                        v = evals[j](s, n, e)
                        if v is not True:
                            if v is not False:
                                raise EvalError(f"a conjunct has the non-boolean value {fmt(v)}", where)
                            return
                    k(s, n)
                    return
                if pure[i]:  # a plain predicate: evaluate it in the loop, no continuation needed
                    v = evals[starts[i]](s, n, e)
                    if v is not True:
                        if v is not False:
                            raise EvalError(f"a conjunct has the non-boolean value {fmt(v)}", where)
                        return
                    i += 1
                    continue
                nxt = i + 1
                acts[i](s, n, e, lambda s2, n2, j=nxt: run(j, s2, n2, e, k))
                return
            k(s, n)

        def conj(s, n, e, k):
            run(0, s, n, e, k)
        return conj

    def _segments(self, acts: list, where: str) -> tuple[list, list[int]]:
        """Runs of two or more flat conjuncts become one generated flat action each (a flat run yields at
        most one path, so running it is the same as evaluating it); returns the segments and the index
        of each one's first conjunct."""
        out: list = []
        starts: list[int] = []
        i = 0
        while i < len(acts):
            j = i
            while j < len(acts) and _flat_step(acts[j]) is not None:
                j += 1
            starts.append(i)
            if j - i >= 2:
                steps = [(*_flat_step(a), getattr(a, "_src", None)) for a in acts[i:j]]  # type: ignore[misc]
                out.append(self.c.fast.flat_action(steps, where))  # type: ignore[union-attr]
                i = j
            else:
                out.append(acts[i])
                i += 1
        return out, starts

    @staticmethod
    def _flat_conj(steps: list, where: str) -> Act:
        """A conjunction of guards, x' = e and UNCHANGED variables (at most one path): evaluated in one
        loop, binding n in place and restoring it afterwards. Once a variable is bound, its x' = e is an
        equality test, exactly as in the general enumeration."""
        def flat(s, n, e, k):
            bound = []
            try:
                for kind, a, b in steps:
                    if kind == 0:  # a guard
                        v = a(s, n, e)
                        if v is not True:
                            if v is not False:
                                raise EvalError(f"a conjunct has the non-boolean value {fmt(v)}", where)
                            return
                    elif kind == 1:  # x' = e: a = variable, b = value function
                        v = b(s, n, e)
                        if a in n:
                            if not tla_eq(n[a], v):
                                return
                        else:
                            n[a] = v.materialize() if type(v) is LazyFcn else v
                            bound.append(a)
                    else:  # UNCHANGED variables
                        for var in a:
                            if var in n:
                                if not tla_eq(n[var], s[var]):
                                    return
                            else:
                                n[var] = s[var]
                                bound.append(var)
                k(s, n)
            except EvalError as exc:
                if not exc.location:
                    exc.location = where
                raise
            finally:
                for var in bound:
                    del n[var]
        return flat

    def _a_BooleanLiteral(self, node, scope):
        if node.value == "TRUE":
            return lambda s, n, e, k: k(s, n)
        return lambda s, n, e, k: None

    def _a_FunctionApplication(self, node, scope):
        """``f[a]`` as an action conjunct where TLC holds f as a lazy function (a FcnLambdaValue): TLC does
        not apply f but enumerates its body with the bound names set to the arguments (getInitStates and
        getNextStates on FcnApply), so each disjunct and \\E witness inside is a path of its own (and
        counts as a generated state). Which f are lazy: :meth:`_lazy_function`; any other f[a] is a
        predicate."""
        lazy = self._lazy_function(node, scope)
        if lazy is None:
            return None
        fnode, make_env, compile_body, reduce_if_finite = lazy
        argfns = [self.c.expr(a, scope)[0] for a in node.arguments]
        pred = self._pred(node, scope)
        where = loc_of(node, scope.mod)
        compiled: list = []

        def descend(s, n, e, k):
            if not compiled:  # compiled on the first call: a recursive f meets itself in its body
                compiled.append(compile_body())
            binds, body = compiled[0]
            env = make_env(s, n, e)
            doms = [fs(s, n, env) for _, fs, _ in binds]
            xs = [f(s, n, e) for f in argfns]
            for x, dom in zip(xs, doms, strict=True):
                if not member(x, dom):
                    raise EvalError(f"function applied to {fmt(x if len(xs) == 1 else tuple(xs))}, outside its "
                                    "domain", where)
            if reduce_if_finite and all(_finite(dom) for dom in doms):  # TLC made it a record: a predicate
                pred(s, n, e, k)
                return
            for (setter, _, _), x in zip(binds, xs, strict=True):
                setter(env, x)
            body(s, n, env, k)
        return descend

    def _lazy_function(self, node, scope) -> tuple | None:
        """How TLC evaluates the f of ``f[a]`` in an action: lazily (KeepLazy) in next mode, eagerly in init
        mode, where a function whose domains are all finite becomes a record. A recursive function stays
        lazy in both; a top-level definition of constant level is evaluated once at start-up (a record
        where its domains are finite). Returns (the function's Function node, the environment its body
        starts from, its compiled binders and body, whether finite domains make it a record), or None
        where f is not such a function (a variable's value, a record, a tuple, an instance's definition)."""
        fnode = _strip(node.function)
        nargs = len(node.arguments)
        kind = type(fnode).__name__
        if kind == "Function":
            return self._lazy_shape(fnode, scope, nargs, lambda s, n, e: dict(e), self.init)
        if kind != "OperatorApplication":
            return None
        b = self.c.resolve(fnode.operator, scope)
        if b is None or b[0] not in ("def", "recfn"):
            return None
        d = b[1]
        body = _strip(d.body)
        if type(body).__name__ != "Function":
            return None
        if d.node is not None and d.node.function:  # f[x \in S] == e: f names the function itself
            if fnode.arguments or d.params:
                return None
            recursive = b[0] == "recfn" or _mentions_name(body.value, d.name)
            constant = not d.is_let and not self.c.def_fn(d)[1]
            ff = self.c.expr(fnode, scope)[0]
            fname = d.name

            def fn_env(s, n, e):
                env = dict(e) if d.is_let or b[0] == "recfn" else {}
                if recursive:
                    env[fname] = ff(s, n, e)
                return env
            inner = d.scope.child()
            inner.names[fname] = ("recfn", d)
            return self._lazy_shape(body, inner, nargs, fn_env, not recursive and (self.init or constant),
                                    key=(d, self.mode))
        args = fnode.arguments or []
        if b[0] != "def" or len(args) != d.arity or any(ar for _, ar in d.params):
            return None
        if args and (self.c.primed_params(d) or self._by_name(d, args, scope)):
            return None
        constant = not args and not d.is_let and not self.c.def_fn(d)[1]
        params = [p for p, _ in d.params]
        parts = [self.c.expr(a, scope)[0] for a in args]

        def op_env(s, n, e):
            env = dict(e) if d.is_let else {}
            for p, f in zip(params, parts, strict=True):
                env[p] = f(s, n, e)
            return env
        inner = d.scope.child()
        for p in params:
            inner.names[p] = ("bound", p)
        return self._lazy_shape(body, inner, nargs, op_env, self.init or constant)

    def _lazy_shape(self, fnode, scope, nargs: int, make_env: Callable, reduce_if_finite: bool,
                    key: Any = None) -> tuple | None:
        """The Function node ``[x \\in S, ... |-> e]`` (or a definition's ``f[x \\in S] == e``) when its
        binders are plain names, one per argument; its binders and body compile on first use (once per
        definition and mode when ``key`` is given)."""
        bounds = _bounds(fnode.declaration)
        if len(bounds) != nargs or any(sset is None or type(b).__name__ == "Tuple" for b, sset in bounds):
            return None

        def compile_body():
            hit = self.lazy_bodies.get(key) if key is not None else None
            if hit is None:
                binds, _, inner, _ = self.c._bounds_compiled(fnode.declaration, scope)
                hit = (binds, self.act(fnode.value, inner))
                if key is not None:
                    self.lazy_bodies[key] = hit
            return hit
        return fnode, make_env, compile_body, reduce_if_finite

    def _a_Let(self, node, scope):
        inner = self.c._let_scope(node, scope)
        return self.act(node.expression, inner)

    def _a_If(self, node, scope):
        fc, _ = self.c.expr(node.predicate, scope)
        at = self.act(node.then, scope)
        ae = self.act(node.else_, scope)
        where = loc_of(node, scope.mod)

        def if_(s, n, e, k):
            c = fc(s, n, e)
            if c is True:
                at(s, n, e, k)
            elif c is False:
                ae(s, n, e, k)
            else:
                raise EvalError(f"IF condition is {fmt(c)}, not a boolean", where)
        return if_

    def _a_Cases(self, node, scope):
        arms = [(self.c.expr(c.predicate, scope)[0], self.act(c.expression, scope)) for c in node.cases]
        other = self.act(node.other, scope) if node.other is not None else None
        where = loc_of(node, scope.mod)

        def case(s, n, e, k):
            for g, a in arms:
                if g(s, n, e) is True:
                    a(s, n, e, k)
                    return
            if other is None:
                raise EvalError("CASE: no guard is true and there is no OTHER", where)
            other(s, n, e, k)
        return case

    def _a_Quantification(self, node, scope):
        if node.quantifier not in ("\\E", "\\A"):
            return None
        bounds = _bounds(node.declarations)
        if any(sset is None for _, sset in bounds):
            return None
        inner = scope.child()
        sets = []
        for b, sset in bounds:
            sets.append((self.c.expr(sset, scope)[0], b))
            for nm in _binder_names(b):
                inner.names[nm] = ("bound", nm)
        body = self.act(node.predicate, inner)
        from kvexact.spec.checker.compiler import _bind as mk_setter
        setters = [(f, mk_setter(b)) for f, b in sets]
        if node.quantifier == "\\E" and len(sets) == 1 and type(sets[0][1]).__name__ != "Tuple":
            fs1 = sets[0][0]
            name = _name_of(sets[0][1])
            if getattr(body, "_pure", False):  # a predicate: each binding that satisfies it is one path
                test, where = body._fn, body._where  # type: ignore[attr-defined]

                def exists1_test(s, n, e, k):
                    for x in ordered_elements(fs1(s, n, e)):
                        e3 = dict(e)
                        e3[name] = x
                        v = test(s, n, e3)
                        if v is True:
                            k(s, n)
                        elif v is not False:
                            raise EvalError(f"an action conjunct has the non-boolean value {fmt(v)}", where)
                exists1_test._noassign = True  # type: ignore[attr-defined]
                return exists1_test

            def exists1(s, n, e, k):
                for x in ordered_elements(fs1(s, n, e)):
                    e3 = dict(e)
                    e3[name] = x
                    body(s, n, e3, k)
            exists1._noassign = lambda: _noassign_of(body)  # type: ignore[attr-defined]
            return exists1
        # module-level helpers, not nested recursive closures: a closure that calls itself is a reference
        # cycle, garbage only the cyclic collector frees (it was most of the collector's work)
        if node.quantifier == "\\E":
            if getattr(body, "_pure", False):  # a predicate: each binding that satisfies it is one path
                test_m, where_m = body._fn, body._where  # type: ignore[attr-defined]

                def exists_test(s, n, e, k):
                    _exists_test(setters, 0, s, n, e, test_m, where_m, k)
                exists_test._noassign = True  # type: ignore[attr-defined]
                return exists_test

            def exists(s, n, e, k):
                _exists(setters, 0, s, n, e, body, k)
            exists._noassign = lambda: _noassign_of(body)  # type: ignore[attr-defined]
            return exists

        if getattr(body, "_pure", False):  # no assignment inside: one predicate, as TLC evaluates it
            return self._pred(node, scope)
        cell: list = []  # [does the body assign nothing?], known once the body's definitions are compiled

        def forall(s, n, e, k):
            envs: list = []
            _bindings(setters, 0, s, n, e, envs)
            if not envs:  # \A over the empty set: the one path (s, n)
                k(s, n)
                return
            if not cell:  # (the body's definition is compiled here, as on its first call)
                cell.append(_noassign_of(body) is True)
            if cell[0]:  # each binding's paths leave (s, n) as they are: count them, binding by binding
                _forall_counted(body, envs, s, n, k)
                return
            _Chain(body, envs, k).step(0, s, n)
        forall._noassign = lambda: _noassign_of(body)  # type: ignore[attr-defined]
        return forall

    def _target_var(self, node, scope) -> str | None:
        """The variable assigned by ``node`` (``x'`` in next mode, ``x`` in init mode), if any; also
        through a parameter the argument ``x'`` (or ``x``) was passed to, and through LET n == x'."""
        node = _strip(node)
        if type(node).__name__ != "OperatorApplication":
            return None
        if self.init:
            return self.c._as_var(node, scope) if node.arguments is None else None
        return self.c._as_primed_var(node, scope)

    def _by_name(self, d: Def, args, scope) -> set:
        """Parameters whose arguments TLC binds lazily and this engine must pass by name: an argument
        with a prime (next mode) or one that mentions a variable (init mode), so that ``p = e`` inside
        the body can assign it."""
        out = set()
        for a, (p, ar) in zip(args, d.params, strict=False):
            if ar == 0 and (_is_action(a, scope, 0) if not self.init else self.c._as_var(a, scope) is not None):
                out.add(p)
        return out

    def _a_OperatorApplication(self, node, scope):
        op = ALIASES.get(node.operator, node.operator)
        args = node.arguments
        if op == "=" and args:
            var = self._target_var(args[0], scope)
            if var is not None:
                return self._assign(var, args[1], node, scope)
            return None
        if op == "\\in" and args:
            var = self._target_var(args[0], scope)
            if var is not None:
                return self._assign_in(var, args[1], node, scope)
            return None
        if op == "\\subseteq" and args:
            var = self._target_var(args[0], scope)
            if var is not None:
                return self._assign_subset(var, args[1], node, scope)
            return None
        if op == "UNCHANGED" and not self.init:
            return self._unchanged(args[0], scope)
        if op == "=>" and args:
            fp, _ = self.c.expr(args[0], scope)
            body = self.act(args[1], scope)
            where = loc_of(node, scope.mod)

            def implies(s, n, e, k):
                v = fp(s, n, e)
                if v is False:
                    k(s, n)
                elif v is True:
                    body(s, n, e, k)
                else:
                    raise EvalError(f"=> applied to the non-boolean {fmt(v)}", where)
            return implies
        if op == "::" and args:
            return self.act(args[1], scope)
        if op == "\\cdot" and args and not self.init:
            return self._compose(self.act(args[0], scope), self.act(args[1], scope), loc_of(node, scope.mod))
        b = self.c.resolve(op, scope)
        if b is not None and b[0] == "def":
            return self._call_def(b[1], args or [], node, scope)
        src = self.sources.get(id(b)) if b is not None and b[0] == "subst" and not args else None
        if src is not None and src[0] is b:
            return self.act(src[1], src[2])
        return None

    def _a_SubexpressionReference(self, node, scope):
        positional = self.c.positional(node, scope)
        if positional is not None:
            return self.act(*positional)
        target, args, binds = self.c._instance_target(node, scope)
        if target[0] != "def":
            return None
        a = self._call_def(target[1], args, node, scope)
        if a is None or not binds:
            return a
        pairs = [(p, f[0]) for p, f in binds]

        def with_instance_args(s, n, e, k):
            e2 = dict(e)
            for p, f in pairs:
                e2[p] = f(s, n, e)
            a(s, n, e2, k)
        return with_instance_args

    def compiled(self, node: Any, scope: Scope, where: str) -> Act:
        """A top-level action (one split action of Next): generated (actgen.py) in next mode, where it
        can be; else the closure."""
        if not self.init and self.c.fast is not None:
            from kvexact.spec.checker.actgen import ActGen
            gen = ActGen(self).compile(node, scope, where)
            if gen is not None:
                return gen
        return self.act(node, scope)

    def def_action(self, d: Def) -> Act:
        a = d.actions.get(self.mode)
        if a is None:
            inner = d.scope.child()
            for p, ar in d.params:
                inner.names[p] = ("opparam", p, ar) if ar else ("bound", p)
            if d.node is not None and d.node.function:
                return None  # type: ignore[return-value]
            a = self.act(d.body, inner)
            d.actions[self.mode] = a
        return a

    def _call_def(self, d: Def, args, node, scope):
        if d.node is not None and d.node.function:
            return None
        if len(args) != d.arity:
            return None
        by_name = self._by_name(d, args, scope)
        if args and (self.c.primed_params(d) or by_name):
            inner, values = self.inline_scope(d, args, scope, by_name)
            body_i = self.act(d.body, inner)
            vfns = [(p, f[0]) for p, f in values]

            def call_inlined(s, n, e, k):
                e2 = dict(e)
                for p, f in vfns:
                    e2[p] = f(s, n, e)
                body_i(s, n, e2, k)
            return call_inlined
        holder: list = []

        def body_act(s, n, e, k):
            if not holder:
                holder.append(self.def_action(d))
            holder[0](s, n, e, k)

        def resolved() -> Any:  # the definition's action, for _noassign_of (compiled on demand)
            if not holder:
                holder.append(self.def_action(d))
            return _noassign_of(holder[0])
        params = [p[0] for p in d.params]
        parts = [self.c._arg(a, ar, scope)[0] for a, (_, ar) in zip(args, d.params, strict=False)]
        is_let = d.is_let

        def call(s, n, e, k):
            e2 = dict(e) if is_let else {}
            for p, f in zip(params, parts, strict=False):
                e2[p] = f(s, n, e)
            body_act(s, n, e2, k)
        call._noassign = resolved  # type: ignore[attr-defined]
        return call

    def _assign(self, var, rhs, node, scope):
        f, _ = self.c.expr(rhs, scope)
        bind = self._bind(var)
        init = self.init
        where = loc_of(node, scope.mod)

        def assign(s, n, e, k):
            t = s if init else n
            v = f(s, n, e)
            if var in t:
                try:
                    same = tla_eq(t[var], v)
                except EvalError as exc:
                    if not exc.location:
                        exc.location = where
                    raise
                if same:
                    k(s, n)
                return
            bind(s, n, v, k)
        assign._assigns = (var, f)  # type: ignore[attr-defined]
        assign._src = (rhs, scope)  # type: ignore[attr-defined]
        return assign

    def _assign_in(self, var, rhs, node, scope):
        f, _ = self.c.expr(rhs, scope)
        bind = self._bind(var)
        init = self.init
        where = loc_of(node, scope.mod)

        def assign_in(s, n, e, k):
            t = s if init else n
            S = f(s, n, e)
            if var in t:
                if member(t[var], S):
                    k(s, n)
                return
            try:
                elems = ordered_elements(S)
            except EvalError as exc:
                raise EvalError(f"cannot enumerate the values of {var}: {exc.message}", where) from None
            for v in elems:
                bind(s, n, v, k)
        return assign_in

    def _assign_subset(self, var, rhs, node, scope):
        """x' \\subseteq S with x' unbound enumerates SUBSET S (TLC)."""
        from kvexact.spec.checker.values import PowerSet
        f, _ = self.c.expr(rhs, scope)
        bind = self._bind(var)
        init = self.init

        def assign_subset(s, n, e, k):
            t = s if init else n
            S = f(s, n, e)
            if var in t:
                if PowerSet(S).contains(t[var]):
                    k(s, n)
                return
            for v in PowerSet(S).ordered():
                bind(s, n, v, k)
        return assign_subset

    def _unchanged(self, arg, scope) -> Act:
        arg = _strip(arg)
        kind = type(arg).__name__
        if kind == "Tuple":
            acts = [self._unchanged(x, scope) for x in arg.items]

            def all_(s, n, e, k):
                def run(i, s2, n2):
                    if i == len(acts):
                        k(s2, n2)
                        return
                    acts[i](s2, n2, e, lambda s3, n3: run(i + 1, s3, n3))
                run(0, s, n)
            if all(getattr(a, "_keeps", None) is not None for a in acts):
                all_._keeps = tuple(v for a in acts for v in a._keeps)  # type: ignore[attr-defined]
            return all_
        var = self.c._as_var(arg, scope)
        if var is not None:
            bind = self._bind(var)

            def keep(s, n, e, k):
                if var in n:
                    if tla_eq(n[var], s[var]):
                        k(s, n)
                    return
                bind(s, n, s[var], k)
            keep._keeps = (var,)  # type: ignore[attr-defined]
            return keep
        if kind == "OperatorApplication" and arg.arguments is None:
            b = self.c.resolve(arg.operator, scope)
            if b is not None and b[0] == "def" and b[1].arity == 0:
                d = b[1]
                return self._unchanged(d.body, d.scope)
        f, _ = self.c.expr(arg, scope)

        def unchanged_expr(s, n, e, k):
            if tla_eq(f(Primed(n), None, e), f(s, None, e)):
                k(s, n)
        return unchanged_expr

    def _a_SubscriptedAction(self, node, scope):
        a = self.act(node.action, scope)
        fv, _ = self.c.expr(node.subscript, scope)
        stutter = self._unchanged(node.subscript, scope)
        if node.operator == "[":
            def box(s, n, e, k):
                a(s, n, e, k)
                stutter(s, n, e, k)
            return box

        def angle(s, n, e, k):
            def k2(s2, n2):
                if not tla_eq(fv(Primed(n2), None, e), fv(s2, None, e)):
                    k(s2, n2)
            a(s, n, e, k2)
        return angle


__all__ = ["ActionCompiler", "conj_items", "disj_items", "_name_of"]


def _bindings(setters: list, i: int, s: dict, n: dict, e: dict, out: list) -> None:
    """Every binding of the quantifier's names, in TLC's order (each set evaluated with the names
    before it bound), appended to ``out``."""
    if i == len(setters):
        out.append(e)
        return
    fs, setter = setters[i]
    last = i + 1 == len(setters)
    for x in ordered_elements(fs(s, n, e)):
        e3 = dict(e)
        setter(e3, x)
        if last:
            out.append(e3)
        else:
            _bindings(setters, i + 1, s, n, e3, out)


def _exists(setters: list, i: int, s: dict, n: dict, e: dict, body: Callable, k: Callable) -> None:
    """\\E x \\in S, y \\in T(x) : A in an action: A for each binding, as soon as it is made (TLC's order)."""
    if i == len(setters):
        body(s, n, e, k)
        return
    fs, setter = setters[i]
    for x in ordered_elements(fs(s, n, e)):
        e3 = dict(e)
        setter(e3, x)
        _exists(setters, i + 1, s, n, e3, body, k)


def _finite(dom: Any) -> bool:
    """Is the domain a finite set (TLC's Reducible: a record is made of a function over it)?"""
    if type(dom) is frozenset:
        return True
    finite = getattr(dom, "finite", None)
    return callable(finite) and finite() is True


def _mentions_name(node: Any, name: str) -> bool:
    """Does the expression apply the operator ``name`` (a function definition naming itself)?"""
    if isinstance(node, list):
        return any(_mentions_name(x, name) for x in node)
    if not (isinstance(node, tuple) and hasattr(node, "_fields")):
        return False
    if type(node).__name__ == "OperatorApplication" and getattr(node, "operator", None) == name:
        return True
    return any(_mentions_name(getattr(node, f), name) for f in node._fields if f not in ("symbol", "start", "end"))


def _noassign_of(a: Any) -> bool | None:
    """True when the action ``a`` assigns no variable, so each of its paths continues with the (s, n) it
    was given; ``_noassign`` is a bool, or a function that tells (a call, once its definition is known)."""
    f = getattr(a, "_noassign", None)
    if f is None or f is False:
        return False
    if f is True:
        return True
    try:
        return f() is True
    except RecursionError:
        return False


def _forall_counted(body: Callable, envs: list, s: dict, n: dict, k: Callable) -> None:
    """\\A x \\in S : A(x) for an A that assigns nothing: its paths are the products of each binding's
    paths, all continuing with (s, n), as _Chain makes them (a binding with no path ends it, and the
    bindings after it are not evaluated)."""
    total = 1
    for env in envs:
        cnt = [0]

        def count(s2: dict, n2: dict, cnt: list = cnt) -> None:
            cnt[0] += 1
        body(s, n, env, count)
        if not cnt[0]:
            return
        total *= cnt[0]
    for _ in range(total):
        k(s, n)


def _exists_test(setters: list, i: int, s: dict, n: dict, e: dict, test: Callable, where: str, k: Callable) -> None:
    """_exists for a body that is the predicate ``test``: k once per binding that satisfies it."""
    fs, setter = setters[i]
    last = i + 1 == len(setters)
    for x in ordered_elements(fs(s, n, e)):
        e3 = dict(e)
        setter(e3, x)
        if not last:
            _exists_test(setters, i + 1, s, n, e3, test, where, k)
            continue
        v = test(s, n, e3)
        if v is True:
            k(s, n)
        elif v is not False:
            raise EvalError(f"an action conjunct has the non-boolean value {fmt(v)}", where)


class _Chain:
    """\\A x \\in S : A(x) in an action: A for each binding in turn, each one continuing from the
    states the previous one reached."""

    __slots__ = ("body", "envs", "k")

    def __init__(self, body: Callable, envs: list, k: Callable):
        self.body, self.envs, self.k = body, envs, k

    def step(self, j: int, s: dict, n: dict) -> None:
        if j == len(self.envs):
            self.k(s, n)
            return
        self.body(s, n, self.envs[j], lambda s3, n3: self.step(j + 1, s3, n3))
