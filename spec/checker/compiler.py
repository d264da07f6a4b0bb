"""Compile the `tla` parser's syntax tree into Python closures, once per definition.

Compiled form (the speed choice): every expression becomes a closure ``f(s, n, e)`` over the current
state ``s`` (dict var -> value), the next state ``n`` (dict, possibly partial; None outside actions) and
the bound names ``e`` (dict). Each compiled expression also carries its *dependencies* (``$s`` state,
``$p`` primed state, bound names): an expression without any is constant-level and is evaluated once
and cached; a definition that depends only on the state is cached per state object; an operator whose
body depends only on its parameters is memoized by argument values.

Actions compile to ``a(s, n, e, k)`` that call ``k(s2, n2)`` once per completed path, exactly as TLC
enumerates successors (docs/checker.md, "Successor enumeration"). State dicts are never mutated after creation.
"""

from __future__ import annotations

import contextlib
import io
import itertools
from collections.abc import Callable
from operator import is_
from pathlib import Path
from typing import Any

import tla

from kvexact.spec.checker import builtins as B
from kvexact.spec.checker.binders import ALIASES, _bind, _binder_names, _bounds, _name_of  # noqa: F401
from kvexact.spec.checker.codegen import FastGen
from kvexact.spec.checker.community import is_proof_module, native_ops
from kvexact.spec.checker.deepstack import DEPTH, too_deep
from kvexact.spec.checker.errors import ArityError, ParseError, SpecError, UndefinedError, UnsupportedError
from kvexact.spec.checker.library import expand_tabs, find_module_file, split_modules
from kvexact.spec.checker.semantics import check_module, check_rebinding, check_shapes
from kvexact.spec.checker.syntax import (
    PrecedenceConflict,
    check_precedence,
    conflict_position,
    describe_syntax_error,
    regroup,
)
from kvexact.spec.checker.unicode import to_ascii
from kvexact.spec.checker.values import (
    SELF_KEYED,
    EvalError,
    Fcn,
    FilterSet,
    LazyFcn,
    LazySet,
    apply_fcn,
    as_set,
    fcn_update,
    fmt,
    member,
    memo_key,
    memo_keys,
    min_value,
    mk_fcn,
    ordered_elements,
    set_of,
    tla_eq,
)

STATE = "$s"
PRIME = "$p"
NODEPS: frozenset = frozenset()
REC = "$rec"  # prefix of the dependency a recursive call has while its definition is being compiled
REC_FN = REC + "fn "  # + f: f inside its own ``f[x \\in S] == ...``, the lazy function bound in e


def _rec_mark(d: Any) -> str:
    return f"{REC}{id(d)}"


def _not_extended(op: str, what: str) -> str:
    """SANY's rejection of a standard operator whose module no module here EXTENDS or INSTANCEs."""
    return (f"undefined {what}: it is defined in the standard module {' or '.join(B.defining_modules(op))}, which "
            f"this module neither EXTENDS nor INSTANCEs (SANY: could not find a declaration or definition of it)")


def in_recursion(deps: frozenset) -> bool:
    """Whether ``deps`` include a call of a definition still being compiled (its dependencies unknown
    yet: never cached, memoized or hoisted on them)."""
    return any(x.startswith(REC) for x in deps)


def _settle_recursion(d: Any, deps: frozenset) -> frozenset:
    """The dependencies of ``d``'s body once compiled: its calls of itself depend on what the body
    does (their arguments are counted at the call), so a self-recursive definition without state is a
    function of its arguments, memoized as any other; a call of another definition still being compiled
    (mutual recursion) is conservatively state- and action-level."""
    marks = frozenset(x for x in deps if x.startswith(REC) and not x.startswith(REC_FN))
    if not marks:
        return deps
    deps = deps - marks
    if marks - {_rec_mark(d)}:
        deps = deps | {STATE, PRIME}
    return deps




def _pos(node: Any) -> tuple[int, int]:
    p = getattr(node, "start", None)
    if p is None:
        return (0, 0)
    return (p.line + 1, p.column + 1)


class ModuleInfo:
    def __init__(self, name: str, path: str):
        self.name = name
        self.path = path


def loc_of(node: Any, mod: ModuleInfo) -> str:
    line, col = _pos(node)
    return f"{mod.path}:{line}:{col}"


def tlc_loc(node: Any, mod: ModuleInfo) -> str:
    s, e = getattr(node, "start", None), getattr(node, "end", None)
    if s is None or e is None:
        return f"module {mod.name}"
    return f"line {s.line + 1}, col {s.column + 1} to line {e.line + 1}, col {e.column} of module {mod.name}"


# --------------------------------------------------------------------------- parsing

_PARSED: dict[tuple[str, str], list] = {}


def parse_module_text(text: str, path: str) -> Any:
    """Parse the first module of a file; a syntax error becomes ParseError with file:line:col."""
    return parse_file_text(text, path)[0]


def parse_file_text(text: str, path: str) -> list:
    """Every top-level module of a file (cached by path and text); a syntax error becomes ParseError
    with file:line:col."""
    key = (path, text)
    hit = _PARSED.get(key)
    if hit is not None:
        return hit
    ascii_text = to_ascii(expand_tabs(text))
    trees = [_parse_one(chunk, path, ascii_text.original_column) for _, chunk in split_modules(ascii_text.text)]
    if not trees:
        raise ParseError("no module found (a module starts with a line ---- MODULE Name ----)", path)
    if len(_PARSED) > 256:
        _PARSED.clear()
    _PARSED[key] = trees
    return trees


def _parse_one(text: str, path: str, column: Callable[[int, int], int] = lambda _line, col: col) -> Any:
    """One module's tree; a rejection names the line and the column of the file as written."""
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            tree = tla.parse(text)
    except Exception as exc:  # the parser raises a bare error and prints where it stopped
        found = describe_syntax_error(text, buf.getvalue())
        if found is not None:
            message, line, col = found
            raise ParseError(f"syntax error: {message}", f"{path}:{line}:{column(line, col)}") from None
        raise ParseError(f"syntax error ({exc})", path) from None
    if tree is None:
        raise ParseError("no module found", path)
    tree = regroup(tree)
    try:
        check_precedence(tree)
    except PrecedenceConflict as conflict:
        line, col = conflict_position(text, conflict)
        raise ParseError(f"precedence conflict between {conflict.left} and {conflict.right}: their precedence "
                         f"ranges overlap, so TLA+ needs parentheses to group them",
                         f"{path}:{line}:{column(line, col)}") from None
    for module in [tree, *nested_modules(tree)]:
        check_module(module, path)
        check_shapes(module, path)
        check_rebinding(module, path)
    return tree


def nested_modules(tree: Any) -> list:
    """The modules defined inside a module (at any depth)."""
    out = []
    for unit in tree.units or []:
        if type(unit).__name__ == "Module":
            out.append(unit)
            out += nested_modules(unit)
    return out


# --------------------------------------------------------------------------- scopes and definitions

class Def:
    """A user definition (top level or LET): ``name(params) == body`` or ``name[x \\in S] == body``."""

    def __init__(self, name: str, params: list[tuple[str, int]], body: Any, scope: Scope, node: Any,
                 is_let: bool, recursive: bool = False):
        self.name = name
        self.params = params
        self.body = body
        self.scope = scope
        self.node = node
        self.is_let = is_let
        self.recursive = recursive
        self.fn: Callable | None = None
        self.deps: frozenset | None = None
        self.compiling = False
        self.actions: dict[str, Callable] = {}

    @property
    def arity(self) -> int:
        return len(self.params)


class Scope:
    """Name -> binding. Bindings: ('var', name) ('const', name) ('def', Def) ('bound', name)
    ('opparam', name, arity) ('builtin', name) ('subst', fn, deps, varname|None) ('instance', Scope)
    ('value', v) ('recfn', Def)."""

    def __init__(self, parent: Scope | None, mod: ModuleInfo):
        self.parent = parent
        self.mod = mod
        self.names: dict[str, tuple] = {}
        self.inherit_env: bool = parent.inherit_env if parent is not None else False
        self._bound: dict[int, tuple] = {}

    def lookup(self, name: str) -> tuple | None:
        sc: Scope | None = self
        while sc is not None:
            b = sc.names.get(name)
            if b is not None:
                return b
            sc = sc.parent
        return None

    def child(self) -> Scope:
        return Scope(self, self.mod)

    def bound(self, at: Any, names: list[str]) -> Scope:
        """The scope of the binders declared at ``at``: one object per declaration, so the closure and
        the generated code of a body share its compiled form (one compilation per nesting level)."""
        memo = self._bound
        hit = memo.get(id(at))
        if hit is None or hit[2] != names:
            inner = self.child()
            for nm in names:
                inner.names[nm] = ("bound", nm)
            hit = memo[id(at)] = (at, inner, list(names))  # at is kept alive, so its id is not reused
        return hit[1]


def _params(arity: Any) -> list[tuple[str, int]]:
    out = []
    for p in arity or []:
        if isinstance(p, str):
            out.append((p, 0))
        elif p.arguments:
            out.append((p.operator, len(p.arguments)))
        else:
            out.append((p.operator, 0))
    return out


def _builtin_spec(b: tuple) -> tuple:
    """(arity, implementation[, operator-argument positions]) of a ('builtin', name[, spec]) binding."""
    return b[2] if len(b) > 2 else B.OPERATORS[b[1]]


def _cached_const(fn: Callable) -> Callable:
    box: list = []

    def g(s, n, e):
        if box:
            return box[0]
        v = fn(s, n, e)
        box.append(v)
        return v
    return g


_ABSENT = object()


def _let_last(body: Callable, names: frozenset) -> Callable:
    """A LET definition without arguments that reads the state (and perhaps names bound around it):
    its last value, kept with the state object and the bound values it was computed on, is returned
    again while the same state object and the same value objects (by identity) are current, e.g. at each
    of its uses in one action, or in each call of a LET operator that reads it. A value that is not a
    TLA+ value (an operator argument), a state under a prime (whose reads are noted) or no state (None:
    constant-level evaluation) is not cached."""
    last: list = [_ABSENT, None, None]  # state, bound values, value
    if not names:
        def let_s(s, n, e):
            if last[0] is s:
                return last[2]
            v = body(s, n, e)
            if s is not None and type(s) is not Primed:
                last[0], last[2] = s, v
            return v
        return let_s
    if len(names) == 1:
        (nm,) = names

        def let_s1(s, n, e):
            x = e.get(nm, _ABSENT)
            if last[0] is s and last[1] is x:
                return last[2]
            v = body(s, n, e)
            if x is not _ABSENT and not callable(x) and s is not None and type(s) is not Primed:
                last[0], last[1], last[2] = s, x, v
            return v
        return let_s1
    order = tuple(sorted(names))

    def let_sn(s, n, e):
        xs = tuple(map(e.get, order))  # None: not bound (no TLA+ value is None)
        if last[0] is s and all(map(is_, last[1], xs)):
            return last[2]
        v = body(s, n, e)
        if s is not None and type(s) is not Primed and None not in xs and not any(map(callable, xs)):
            last[0], last[1], last[2] = s, xs, v
        return v
    return let_sn


class Primed(dict):
    """A snapshot of the next state, for an expression under a prime, that notes in ``read`` each variable
    read from it (any other access reads them all): a definition evaluated on it is then memoized by the
    values of the variables it read, as the same values give the same evaluation."""

    __slots__ = ("read",)

    def __init__(self, n: dict):
        super().__init__(n)
        self.read: set = set()

    def __getitem__(self, k):
        self.read.add(k)
        return dict.__getitem__(self, k)

    def _all(self) -> None:
        self.read.update(dict.keys(self))

    def get(self, k, d=None):
        self._all()
        return dict.get(self, k, d)

    def __contains__(self, k):
        self._all()
        return dict.__contains__(self, k)

    def __iter__(self):
        self._all()
        return dict.__iter__(self)

    def keys(self):
        self._all()
        return dict.keys(self)

    def items(self):
        self._all()
        return dict.items(self)

    def values(self):
        self._all()
        return dict.values(self)

    def copy(self):
        self._all()
        return dict(dict.items(self))


def _per_state(fn: Callable, reads: tuple | None = None) -> Callable:
    """fn once per state (the last one); on a Primed state, once per values of the variables it has read
    (``names``, the union over evaluations: the memo starts over when it grows). The two are kept apart,
    so evaluating under a prime does not evict the current state's value. ``reads``, when given, are
    all the variables fn can read (reads.state_reads): a state is then also looked up by their values'
    memo keys (the engine has made them for the state's fingerprint), so states that agree on them share
    one evaluation."""
    last: list = [None, None]
    memo: dict = {}
    names: list = []
    by_value: dict = {}

    def primed(s, n, e):
        try:
            hit = memo.get(tuple([dict.get(s, k, _ABSENT) for k in names]), _ABSENT)
        except TypeError:  # a value that cannot be hashed: evaluated as is
            return fn(s, n, e)
        if hit is not _ABSENT:
            s.read.update(names)
            return hit
        outer = s.read
        s.read = set()
        try:
            v = fn(s, n, e)
        finally:
            read, s.read = s.read, outer | s.read
        if not read <= set(names):
            names[:] = sorted(set(names) | read)
            memo.clear()
        if len(memo) > 10_000:
            memo.clear()
        try:
            memo[tuple([dict.get(s, k, _ABSENT) for k in names])] = v
        except TypeError:
            pass
        return v

    def g(s, n, e):
        if last[0] is s:
            return last[1]
        if type(s) is Primed:
            return primed(s, n, e)
        v = fn(s, n, e)
        last[0], last[1] = s, v
        return v
    if not reads:
        return g
    if len(reads) == 1:
        (r0,) = reads

        def g1(s, n, e):
            if last[0] is s:
                return last[1]
            if type(s) is Primed or s is None or r0 not in s:
                return g(s, n, e)
            x = s[r0]
            key = x if type(x) in SELF_KEYED else memo_key(x)
            v = by_value.get(key, _ABSENT)
            if v is _ABSENT:
                v = fn(s, n, e)
                if len(by_value) > 20_000:
                    by_value.clear()
                by_value[key] = v
            last[0], last[1] = s, v
            return v
        return g1

    def gn(s, n, e):
        if last[0] is s:
            return last[1]
        if type(s) is Primed or s is None or any(r not in s for r in reads):
            return g(s, n, e)
        key = memo_keys([s[r] for r in reads])
        v = by_value.get(key, _ABSENT)
        if v is _ABSENT:
            v = fn(s, n, e)
            if len(by_value) > 20_000:
                by_value.clear()
            by_value[key] = v
        last[0], last[1] = s, v
        return v
    return gn


# --------------------------------------------------------------------------- the compiler

class Compiler:
    """Loads modules (EXTENDS, INSTANCE) and compiles expressions and actions to closures."""

    def __init__(self, spec_dir: Path, constants: dict[str, Any] | None = None,
                 overrides: dict[str, str] | None = None, value_overrides: dict[str, Any] | None = None,
                 lib_dirs: list[Path] | None = None, fast: bool = True):
        self.spec_dir = spec_dir
        self.lib_dirs = list(lib_dirs or [])
        self.constants: dict[str, Any] = constants if constants is not None else {}
        self.overrides = dict(overrides or {})  # name -> definition name in the root module
        self.value_overrides = value_overrides if value_overrides is not None else {}
        self.variables: list[str] = []
        self.root: Scope | None = None
        self.declared_constants: list[str] = []
        self.assumes: list[tuple[Any, Scope, str]] = []
        self.trees: dict[str, tuple[Any, str]] = {}
        self.messages: list[str] = []
        self._memo: dict[tuple[int, int], tuple] = {}  # (id(node), id(scope)) -> (node, scope, fn, deps)
        self._state_defs: dict[int, tuple] = {}  # id(definition) -> (definition, its per-state cache)
        self._drawn: dict[int, tuple] = {}  # id(definition) -> (definition, its value cached once): random draws
        self.fast: FastGen | None = FastGen(self) if fast else None
        self.scoped_values: dict[tuple[str, str], Any] = {}  # cfg C = [M] v
        # [intermediate states of a top-level A \cdot B since the engine last took them, \cdot nesting];
        # None while the spec has no \cdot (actions.py)
        self.composed: list[int] | None = None
        self.scoped_overrides: dict[tuple[str, str], str] = {}  # cfg C <- [M] Def
        # ENABLED A's compiler (temporal.compile_enabled, a successor search), given by whoever builds
        # the model: the compiler below the action compiler cannot import it without a cycle
        self.enabled: Callable[..., tuple] | None = None
        # the variables an expression reads (reads.state_reads, None: unknown), given the same way
        self.state_reads: Callable[..., frozenset | None] | None = None

    # ---------------------------------------------------------------- loading

    def _register(self, trees: list, path: str) -> None:
        """Make every module of a parsed file (and every nested module) findable by name."""
        for tree in trees:
            for t in [tree, *nested_modules(tree)]:
                self.trees.setdefault(t.name, (t, path))

    def load_tree(self, name: str) -> tuple[Any, str] | None:
        """A module by name: one already read (a file may hold several), else NAME.tla in the spec's
        folder or a library folder."""
        if name in self.trees:
            return self.trees[name]
        path = find_module_file(name, [self.spec_dir, *self.lib_dirs])
        if path is None:
            return None
        self._register(parse_file_text(path.read_text(), str(path)), str(path))
        return self.trees.get(name)

    def load_root(self, path: Path, text: str | None = None) -> Scope:
        trees = parse_file_text(path.read_text() if text is None else text, str(path))
        tree = trees[0]
        self._register(trees, str(path))
        self.trees[tree.name] = (tree, str(path))
        mod = ModuleInfo(tree.name, str(path))
        scope = Scope(None, mod)
        self.root = scope
        self._pending: list | None = []
        self._include(tree, mod, scope, subst=None, root=True, seen=set())
        while self._pending:  # instances of the root's modules, once every definition is known
            self._pending.pop(0)()  # type: ignore[union-attr]
        self._pending = None
        return scope

    def _later(self, build: Callable[[], None], root: bool) -> None:
        """Instantiate a module now, or (in the root's modules while they load) once every definition
        of the root is known, so that WITH substitutions can use cfg overrides defined after them."""
        pending = getattr(self, "_pending", None)
        if root and pending is not None:
            pending.append(build)
        else:
            build()

    def _include(self, tree: Any, mod: ModuleInfo, scope: Scope, subst: dict | None, root: bool,
                 seen: set) -> None:
        """Add a module's declarations and definitions (and those it EXTENDS) to ``scope``; operators
        this engine implements natively replace their TLA+ definitions (as TLC's overrides do)."""
        if tree.name in seen:
            return
        seen.add(tree.name)
        for ext in tree.extendees or []:
            self._extend(_name_of(ext), scope, subst, root, seen, ext, mod)
        for unit in tree.units or []:
            self._unit(unit, mod, scope, subst, root, seen)
        for opname, spec in (native_ops(tree.name) or {}).items():
            scope.names[opname] = ("builtin", opname, spec)

    def _builtin_module(self, name: str) -> dict[str, tuple] | None:
        """The natively known operators of a module that is not read from a file: the standard modules
        (always), TLC's own, and CommunityModules or proof modules that are on no path."""
        if name in B.STANDARD_MODULES:
            return {op: B.OPERATORS[op] for op in B.STANDARD_MODULES[name]}
        ops = native_ops(name)
        if ops is not None:
            return ops
        if is_proof_module(name):
            self.messages.append(f"module {name} is not on the library path; it holds proofs only, so it is "
                                 f"loaded empty")
            return {}
        return None

    def _not_found(self, name: str, node: Any, mod: ModuleInfo) -> UndefinedError:
        where = ", ".join(str(p) for p in [self.spec_dir, *self.lib_dirs])
        return UndefinedError(f"module {name} not found (looked in {where}; give a library folder with --lib "
                              f"or KVEXACT_TLA_LIB)", loc_of(node, mod))

    def _extend(self, name: str, scope: Scope, subst: dict | None, root: bool, seen: set, node: Any,
                mod: ModuleInfo) -> None:
        found = None if name in B.STANDARD_MODULES else self.load_tree(name)
        if found is not None:
            tree, path = found
            self._include(tree, ModuleInfo(tree.name, path), scope, subst, root, seen)
            return
        if name in B.STANDARD_MODULES and name not in seen:  # a file of that name on the path (the proof
            shadow = self.load_tree(name)  # library's Bags) may extend more modules: SANY reads them too
            seen.add(name)
            if shadow is not None:
                for ext in shadow[0].extendees or []:
                    self._extend(_name_of(ext), scope, subst, root, seen, ext, ModuleInfo(name, shadow[1]))
        ops = self._builtin_module(name)
        if ops is None:
            raise self._not_found(name, node, mod)
        for opname, spec in ops.items():
            scope.names.setdefault(opname, ("builtin", opname, spec))

    def _unit(self, unit: Any, mod: ModuleInfo, scope: Scope, subst: dict | None, root: bool,
              seen: set) -> None:
        kind = type(unit).__name__
        here = scope if scope.mod is mod else Scope(scope, mod)  # names resolve in scope, errors name mod
        if kind in ("Constants", "Variables"):
            tag, declared = ("const", self.declared_constants) if kind == "Constants" else ("var", self.variables)
            for nm in unit.names:
                name = _name_of(nm)
                if subst is not None and name in subst:  # INSTANCE ... WITH name <- expr
                    scope.names[name] = subst[name]
                else:
                    scope.names[name] = (tag, name)
                    if name not in declared:
                        declared.append(name)
        elif kind == "OperatorDefinition":
            definiens = unit.definiens
            if type(definiens).__name__ == "Instance":
                if unit.arity:  # I(p) == INSTANCE M WITH ...: instantiated at each use I(e)!Op
                    params = [p for p, _ in _params(unit.arity)]
                    scope.names[unit.name] = ("pinstance", (params, definiens, mod, here))
                    return
                def named(name=unit.name, definiens=definiens):
                    scope.names[name] = ("instance", self._instance(definiens, mod, here))
                self._later(named, root)
                return
            d = Def(unit.name, _params(unit.arity), definiens, here, unit, is_let=scope.inherit_env)
            scope.names[unit.name] = ("def", d)
        elif kind == "Instance":
            def unnamed(unit=unit):
                inst = self._instance(unit, mod, here)
                for name, b in inst.names.items():
                    if b[0] in ("def", "instance", "builtin"):
                        scope.names.setdefault(name, b)
            self._later(unnamed, root)
        elif kind == "Axiom":
            if unit.name:  # ASSUME Name == e: Name is a definition
                scope.names[unit.name] = ("def", Def(unit.name, [], unit.expression, here, None, is_let=False))
            if unit.axiom_keyword in ("ASSUME", "ASSUMPTION") and root:
                # TLC checks the assumptions of the root module and the modules it extends, not those of
                # instantiated modules (they are theorems about the instance)
                self.assumes.append((unit.expression, here, unit.name or "ASSUME"))
        elif kind == "Theorem":
            goal = getattr(unit, "goal", None)
            if unit.name and goal is not None and type(goal).__name__ != "Sequent":
                # THEOREM Name == e (and LEMMA, ...): Name is a definition, as SANY makes it
                scope.names[unit.name] = ("def", Def(unit.name, [], goal, here, None, is_let=False))
        elif kind in ("RecursiveOperators", "DashLine", "EqLine"):
            return
        elif kind == "Module":
            return  # a nested module is found by name (load_tree), like a module of its own
        else:
            return

    def _instance(self, node: Any, mod: ModuleInfo, outer: Scope, inherit_env: bool = False,
                  override: dict | None = None) -> Scope:
        found = None if node.name in B.STANDARD_MODULES else self.load_tree(node.name)
        if found is None:
            ops = self._builtin_module(node.name)
            if ops is None:
                raise self._not_found(node.name, node, mod)
            sc = Scope(None, mod)
            for opname, spec in ops.items():
                sc.names[opname] = ("builtin", opname, spec)
            return sc
        tree, path = found
        imod = ModuleInfo(tree.name, path)
        declared = self._declared_names(tree, set())  # name -> arity (operator constants C(_, _))
        explicit: dict[str, tuple] = {}
        for w in node.with_substitution or []:
            if declared.get(w.name, 0):  # WITH C <- Op or C <- LAMBDA x, y : e
                fn, deps = self._arg(w.expression, declared[w.name], outer)
                explicit[w.name] = ("opsubst", fn, deps - {"$lambda"}, declared[w.name])
            else:  # the 6th item (expression, scope) lets temporal.py read the substitution's level from its text
                sub = self._subst(w.expression, outer)
                if sub[2] == frozenset({STATE}) and sub[3] is None:
                    # a state function (a refinement mapping such as view <- [r \in R |-> ...]): once
                    # per state, as a definition of the state is, not once per use
                    sub = (sub[0], _per_state(sub[1])) + sub[2:]
                explicit[w.name] = sub + ((w.expression, outer),)
        # implicit substitution: every constant/variable of M not substituted is the same name outside
        subst: dict[str, tuple] = {}
        for name in declared:
            if name in explicit:
                subst[name] = explicit[name]
            else:
                b = outer.lookup(name)
                if b is None:
                    raise UndefinedError(f"INSTANCE {node.name}: no substitution for {name} and no {name} "
                                         f"in scope", loc_of(node, mod))
                if b[0] in ("def", "builtin", "const", "var", "subst", "value"):
                    subst[name] = b
                else:
                    subst[name] = b
        subst.update(override or {})  # ENABLED's abstract twin (temporal.py): variables bound afresh
        sc = Scope(None, imod)
        sc.inherit_env = inherit_env  # definitions of a parameterized instance see the instance parameters
        sc.instance_of = (node, mod, outer, inherit_env)  # type: ignore[attr-defined]
        self._include(tree, imod, sc, subst, root=False, seen=set())
        return sc

    def _declared_names(self, tree: Any, seen: set) -> dict[str, int]:
        """The constants and variables of a module (and those it extends), with their arities."""
        if tree.name in seen:
            return {}
        seen.add(tree.name)
        out: dict[str, int] = {}
        for ext in tree.extendees or []:
            found = self.load_tree(_name_of(ext))
            if found is not None:
                out.update(self._declared_names(found[0], seen))
        for unit in tree.units or []:
            if type(unit).__name__ in ("Constants", "Variables"):
                for nm in unit.names:
                    out[_name_of(nm)] = len(getattr(nm, "arguments", None) or [])
        return out

    def _subst(self, node: Any, scope: Scope) -> tuple:
        """A name bound to an expression (INSTANCE ... WITH, an instance or operator parameter passed by
        name): ('subst', fn, deps, variable it stands for, variable whose prime it stands for)."""
        fn, deps = self.expr(node, scope)
        return ("subst", fn, deps, self._as_var(node, scope), self._as_primed_var(node, scope))

    def _as_var(self, node: Any, scope: Scope, seen: frozenset = frozenset()) -> str | None:
        """The variable name if ``node`` is (an alias of) a state variable: through parameters passed
        by name and LET definitions without arguments (TLC's lazily bound names)."""
        while type(node).__name__ == "Parentheses":
            node = node.expression
        if type(node).__name__ == "OperatorApplication" and node.arguments is None:
            b = self.resolve(node.operator, scope)
            if b is not None and b[0] == "var":
                return b[1]
            if b is not None and b[0] == "subst":
                return b[3]
            if b is not None and b[0] == "def" and b[1].is_let and b[1].arity == 0 and id(b[1]) not in seen:
                return self._as_var(b[1].body, b[1].scope, seen | {id(b[1])})
        return None

    def _as_primed_var(self, node: Any, scope: Scope, seen: frozenset = frozenset()) -> str | None:
        """The variable v if ``node`` is v' (or a name that stands for it: a parameter passed by name,
        a LET definition without arguments such as LET n == v')."""
        while type(node).__name__ == "Parentheses":
            node = node.expression
        if type(node).__name__ != "OperatorApplication":
            return None
        if node.operator == "'" and node.arguments:
            return self._as_var(node.arguments[0], scope)
        if node.arguments is None:
            b = self.resolve(node.operator, scope)
            if b is not None and b[0] == "subst":
                return b[4]
            if b is not None and b[0] == "def" and b[1].is_let and b[1].arity == 0 and id(b[1]) not in seen:
                return self._as_primed_var(b[1].body, b[1].scope, seen | {id(b[1])})
        return None

    def resolve(self, name: str, scope: Scope) -> tuple | None:
        b = scope.lookup(name)
        if b is not None and b[0] in ("bound", "opparam", "recfn"):
            return b
        if self.scoped_values or self.scoped_overrides:
            key = (scope.mod.name, name)
            if key in self.scoped_values:
                return ("value", self.scoped_values[key])
            if key in self.scoped_overrides and self.root is not None:
                target = self.root.lookup(self.scoped_overrides[key])
                if target is not None:
                    return target
        if name in self.overrides and self.root is not None:
            target = self.root.lookup(self.overrides[name])
            if target is None:
                raise SpecError(f"cfg override {name} <- {self.overrides[name]}: no definition "
                                f"{self.overrides[name]}")
            return target
        if name in self.value_overrides and (b is None or b[0] == "const" or (b[0] == "def" and self._root_name(name, b))):
            return ("value", self.value_overrides[name])
        return b

    def _root_name(self, name: str, b: tuple) -> bool:
        """Is definition b what the root module calls ``name``? The cfg's ``name = v`` replaces only that
        one, as in TLC: an INSTANCEd module's own definition of the same name keeps its body."""
        r = self.root.lookup(name) if self.root is not None else None
        return r is None or r is b or (r[0] == "def" and r[1] is b[1])

    # ---------------------------------------------------------------- expressions

    def expr(self, node: Any, scope: Scope) -> tuple[Callable, frozenset]:
        """Compile an expression (once per node and scope); a result without dependencies is evaluated
        once and cached; common node kinds get a generated fast path (codegen.py)."""
        key = (id(node), id(scope))
        hit = self._memo.get(key)
        if hit is not None:
            return hit[2], hit[3]
        fn, deps = self._expr(node, scope)
        if self.fast is not None and not isinstance(node, str):
            gen = self.fast.compile(node, scope, fn, loc_of(node, scope.mod))
            if gen is not None:
                fn = gen
        if not deps and not getattr(fn, "_is_const", False):
            fn = _cached_const(fn)
            fn._is_const = True  # type: ignore[attr-defined]
        self._memo[key] = (node, scope, fn, deps)
        return fn, deps

    def _expr(self, node: Any, scope: Scope) -> tuple[Callable, frozenset]:
        if isinstance(node, str):
            if node == "@":
                return (lambda s, n, e: e["@"]), frozenset({"@"})
            raise UnsupportedError(f"unexpected token {node!r}", scope.mod.path)
        kind = type(node).__name__
        method = getattr(self, "_x_" + kind, None)
        if method is None:
            raise UnsupportedError(f"the construct {kind} is not supported by the embedded checker",
                                   loc_of(node, scope.mod))
        return method(node, scope)

    def _x_Parentheses(self, node, scope):
        return self._expr(node.expression, scope)

    def _x_IntegralNumeral(self, node, scope):
        v = int(node.value)
        return (lambda s, n, e: v), NODEPS

    def _x_StringLiteral(self, node, scope):
        v = node.value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        return (lambda s, n, e: v), NODEPS

    def _x_BooleanLiteral(self, node, scope):
        v = node.value == "TRUE"
        return (lambda s, n, e: v), NODEPS

    def _x_SetOfBooleans(self, node, scope):
        v = frozenset({False, True})
        return (lambda s, n, e: v), NODEPS

    def _x_SetOfStrings(self, node, scope):
        return (lambda s, n, e: B.STRING), NODEPS

    def _x_Tuple(self, node, scope):
        parts = [self.expr(x, scope) for x in node.items]
        fns = [p[0] for p in parts]
        deps = frozenset().union(*[p[1] for p in parts])
        if len(fns) == 2:
            f0, f1 = fns
            return (lambda s, n, e: (f0(s, n, e), f1(s, n, e))), deps
        return (lambda s, n, e: tuple([f(s, n, e) for f in fns])), deps

    def _x_SetEnumeration(self, node, scope):
        parts = [self.expr(x, scope) for x in node.items]
        fns = [p[0] for p in parts]
        deps = frozenset().union(*[p[1] for p in parts])
        if len(fns) == 1:
            f0 = fns[0]
            return (lambda s, n, e: frozenset((f0(s, n, e),))), deps
        return (lambda s, n, e: set_of([f(s, n, e) for f in fns])), deps

    def _x_Record(self, node, scope):
        keys = [kv[0] for kv in node.key_values]
        parts = [self.expr(kv[1], scope) for kv in node.key_values]
        fns = [p[0] for p in parts]
        deps = frozenset().union(*[p[1] for p in parts])
        return (lambda s, n, e: Fcn({k: f(s, n, e) for k, f in zip(keys, fns, strict=False)})), deps

    def _x_SetOfRecords(self, node, scope):
        keys = [kb.name for kb in node.key_bounds]
        parts = [self.expr(kb.bound, scope) for kb in node.key_bounds]
        fns = [p[0] for p in parts]
        deps = frozenset().union(*[p[1] for p in parts])
        return (lambda s, n, e: B.RecordSet({k: f(s, n, e) for k, f in zip(keys, fns, strict=False)})), deps

    def _x_SetOfFunctions(self, node, scope):
        fd, dd = self.expr(node.domain, scope)
        fc, dc = self.expr(node.codomain, scope)
        return (lambda s, n, e: B.FcnSet(fd(s, n, e), fc(s, n, e))), dd | dc

    def _x_Field(self, node, scope):
        fr, deps = self.expr(node.expression, scope)
        name = node.name
        where = loc_of(node, scope.mod)

        def field(s, n, e):
            r = fr(s, n, e)
            if type(r) is Fcn:
                try:
                    return r.d[name]
                except KeyError:
                    pass
            try:
                return apply_fcn(r, name)
            except EvalError as exc:
                raise EvalError(f"record {fmt(r)} has no field {name}", where) from exc
        return field, deps

    def _x_FunctionApplication(self, node, scope):
        ff, df = self.expr(node.function, scope)
        args = [self.expr(a, scope) for a in node.arguments]
        deps = df.union(*[a[1] for a in args])
        where = loc_of(node, scope.mod)
        if len(args) == 1:
            fa = args[0][0]

            def app1(s, n, e):
                f = ff(s, n, e)
                x = fa(s, n, e)
                t = type(f)
                try:
                    if t is Fcn:
                        return f.d[x]
                    if t is tuple and type(x) is int and 0 < x <= len(f):
                        return f[x - 1]
                    if t is LazyFcn:
                        memo = f.memo
                        if x in memo:
                            return memo[x]
                    return apply_fcn(f, x)
                except KeyError:
                    raise EvalError(f"function {fmt(f)} applied to {fmt(x)}, outside its domain",
                                    where) from None
                except EvalError as exc:
                    if not exc.location:
                        exc.location = where
                    raise
            return app1, deps
        fas = [a[0] for a in args]

        def appn(s, n, e):
            f = ff(s, n, e)
            x = tuple([a(s, n, e) for a in fas])
            try:
                return apply_fcn(f, x)
            except EvalError as exc:
                if not exc.location:
                    exc.location = where
                raise
        return appn, deps

    def _x_If(self, node, scope):
        fc, dc = self.expr(node.predicate, scope)
        ft, dt = self.expr(node.then, scope)
        fe, de = self.expr(node.else_, scope)
        where = loc_of(node, scope.mod)

        def if_(s, n, e):
            c = fc(s, n, e)
            if c is True:
                return ft(s, n, e)
            if c is False:
                return fe(s, n, e)
            raise EvalError(f"IF condition is {fmt(c)}, not a boolean", where)
        return if_, dc | dt | de

    def _x_Cases(self, node, scope):
        arms = [(self.expr(c.predicate, scope), self.expr(c.expression, scope)) for c in node.cases]
        other = self.expr(node.other, scope) if node.other is not None else None
        deps = frozenset().union(*[a[0][1] | a[1][1] for a in arms])
        if other:
            deps |= other[1]
        guards = [(a[0][0], a[1][0]) for a in arms]
        of = other[0] if other else None
        where = loc_of(node, scope.mod)

        def case(s, n, e):
            for g, v in guards:
                if g(s, n, e) is True:
                    return v(s, n, e)
            if of is not None:
                return of(s, n, e)
            raise EvalError("CASE: no guard is true and there is no OTHER", where)
        return case, deps

    def _x_Let(self, node, scope):
        inner = self._let_scope(node, scope)
        fb, db = self._expr(node.expression, inner)
        return fb, db

    def _let_scope(self, node, scope) -> Scope:
        inner = scope.child()
        for d in node.definitions:
            k = type(d).__name__
            if k == "OperatorDefinition" and type(d.definiens).__name__ == "Instance" and not d.arity:
                inner.names[d.name] = ("instance", self._instance(d.definiens, scope.mod, scope))
            elif k == "OperatorDefinition":
                inner.names[d.name] = ("def", Def(d.name, _params(d.arity), d.definiens, inner, d, is_let=True))
            elif k == "RecursiveOperators":
                continue
            else:
                raise UnsupportedError(f"{k} inside LET", loc_of(d, scope.mod))
        return inner

    def _x_Lambda(self, node, scope):
        return self._lambda(node, scope)

    def _lambda(self, node, scope):
        params = [_name_of(p) for p in node.parameters]
        inner = scope.child()
        for p in params:
            inner.names[p] = ("bound", p)
        fb, db = self.expr(node.expression, inner)

        def mk(s, n, e):
            def op(*vals):
                e2 = dict(e)
                e2.update(zip(params, vals, strict=False))
                return fb(s, n, e2)
            return op
        return mk, db - frozenset(params) | {"$lambda"}

    def _x_Choose(self, node, scope):
        binder = node.declaration
        if type(binder).__name__ == "OperatorApplication" and binder.operator == "\\in" and binder.arguments:
            b, sset = binder.arguments
        else:
            b, sset = binder, None
        names = _binder_names(b)
        inner = scope.child()
        for nm in names:
            inner.names[nm] = ("bound", nm)
        fp, dp = self.expr(node.predicate, inner)
        setter = _bind(b)
        where = loc_of(node, scope.mod)
        if sset is None:
            raise UnsupportedError("unbounded CHOOSE (CHOOSE x : P) is not supported; give the value in the "
                                   "cfg", where)
        fs, ds = self.expr(sset, scope)

        if type(node.predicate).__name__ == "BooleanLiteral" and node.predicate.value == "TRUE":
            def choose_any(s, n, e):
                try:
                    return min_value(fs(s, n, e))
                except EvalError as exc:
                    if not exc.location:
                        exc.location = where
                    raise
            return choose_any, ds

        def choose(s, n, e):
            e2 = dict(e)
            for v in ordered_elements(fs(s, n, e)):
                setter(e2, v)
                if fp(s, n, e2) is True:
                    return v
            raise EvalError("CHOOSE: no element of the set satisfies the predicate", where)
        return choose, ds | (dp - frozenset(names))

    def _bounds_compiled(self, decls, scope):
        """Compile binders; returns (list of (setter, set-fn)), deps of the sets, inner scope, names."""
        inner = scope.bound(decls, [nm for b, _ in _bounds(decls) for nm in _binder_names(b)])
        out = []
        deps: frozenset = NODEPS
        names: list[str] = []
        for b, sset in _bounds(decls):
            if sset is None:
                raise UnsupportedError("unbounded quantifier (\\A x : P or \\E x : P) is not supported",
                                       loc_of(b, scope.mod) if not isinstance(b, str) else scope.mod.path)
            fs, ds = self.expr(sset, scope)
            deps |= ds
            out.append((_bind(b), fs, _binder_names(b)))
            for nm in _binder_names(b):
                names.append(nm)
        for nm in names:
            inner.names[nm] = ("bound", nm)
        return out, deps, inner, frozenset(names)

    def _x_Quantification(self, node, scope):
        if node.quantifier not in ("\\A", "\\E"):
            raise UnsupportedError(f"temporal quantifier {node.quantifier}", loc_of(node, scope.mod))
        binds, ds, inner, names = self._bounds_compiled(node.declarations, scope)
        fp, dp = self.expr(node.predicate, inner)
        where = loc_of(node, scope.mod)
        is_all = node.quantifier == "\\A"

        def rec(i, s, n, e):
            if i == len(binds):
                v = fp(s, n, e)
                if type(v) is not bool:
                    raise EvalError(f"quantified formula has the non-boolean value {fmt(v)}", where)
                return v
            setter, fs, _ = binds[i]
            for x in as_set(fs(s, n, e)):
                setter(e, x)
                if rec(i + 1, s, n, e) is not is_all:
                    return not is_all
            return is_all

        if len(binds) == 1 and not isinstance(binds[0][2], tuple) and len(binds[0][2]) == 1:
            nm = binds[0][2][0]
            fs = binds[0][1]

            def q1(s, n, e):
                e2 = dict(e)
                for x in as_set(fs(s, n, e)):
                    e2[nm] = x
                    v = fp(s, n, e2)
                    if v is not is_all:
                        if type(v) is not bool:
                            raise EvalError(f"quantified formula has the non-boolean value {fmt(v)}", where)
                        return not is_all
                return is_all
            return q1, ds | (dp - names)

        def q(s, n, e):
            return rec(0, s, n, dict(e))
        return q, ds | (dp - names)

    def _x_SetSlice(self, node, scope):
        binder = node.declaration
        b, sset = binder.arguments
        names = _binder_names(b)
        inner = scope.child()
        for nm in names:
            inner.names[nm] = ("bound", nm)
        fs, ds = self.expr(sset, scope)
        fp, dp = self.expr(node.predicate, inner)
        setter = _bind(b)

        def slice_(s, n, e):
            e2 = dict(e)
            out = []
            S = fs(s, n, e)
            if isinstance(S, LazySet):  # lazy, as TLC's SetPredValue: membership needs no enumeration
                def test(x, e2=e2):
                    setter(e2, x)
                    return fp(s, n, e2) is True
                return FilterSet(S, test)
            for x in as_set(S):
                setter(e2, x)
                if fp(s, n, e2) is True:
                    out.append(x)
            return frozenset(out)
        return slice_, ds | (dp - frozenset(names))

    def _x_SetComprehension(self, node, scope):
        binds, ds, inner, names = self._bounds_compiled(node.declarations, scope)
        fi, di = self.expr(node.item, inner)

        def comp(s, n, e):
            out: list = []
            e2 = dict(e)

            def rec(i):
                if i == len(binds):
                    out.append(fi(s, n, e2))
                    return
                setter, fs, _ = binds[i]
                for x in as_set(fs(s, n, e)):
                    setter(e2, x)
                    rec(i + 1)
            rec(0)
            return frozenset(out)
        return comp, ds | (di - names)

    def _x_Function(self, node, scope):
        binds, ds, inner, names = self._bounds_compiled(node.declaration, scope)
        fv, dv = self.expr(node.value, inner)
        multi = len(binds) > 1

        def fcn(s, n, e):
            d: dict = {}
            e2 = dict(e)
            if not multi:
                setter, fs, _ = binds[0]
                for x in as_set(fs(s, n, e)):
                    setter(e2, x)
                    d[x] = fv(s, n, e2)
                return mk_fcn(d)
            doms = [as_set(b[1](s, n, e)) for b in binds]
            for combo in itertools.product(*doms):
                for (setter, _, _), x in zip(binds, combo, strict=False):
                    setter(e2, x)
                d[combo] = fv(s, n, e2)
            return mk_fcn(d)
        return fcn, ds | (dv - names)

    def _x_Except(self, node, scope):
        ff, df = self.expr(node.function, scope)
        deps = df
        changes = []
        for ch in node.changes:
            path = []
            for item in ch.item:
                if isinstance(item, str):
                    path.append(("field", item))
                else:
                    parts = [self.expr(a, scope) for a in item]
                    for p in parts:
                        deps |= p[1]
                    path.append(("args", [p[0] for p in parts]))
            fv, dv = self.expr(ch.expression, scope)
            uses_at = "@" in dv
            deps |= dv - {"@"}
            changes.append((path, fv, uses_at))
        where = loc_of(node, scope.mod)

        def keyof(step, s, n, e):
            if step[0] == "field":
                return step[1]
            fns = step[1]
            if len(fns) == 1:
                return fns[0](s, n, e)
            return tuple(f(s, n, e) for f in fns)

        def upd(f, path, i, fv, uses_at, s, n, e):
            k = keyof(path[i], s, n, e)
            t = type(f)
            if (t is Fcn and k not in f.d) or (t is tuple and not (type(k) is int and 0 < k <= len(f))):
                return f  # TLA+: [f EXCEPT ![k] = v] is f when k is not in DOMAIN f
            if i == len(path) - 1:
                if uses_at:
                    e2 = dict(e)
                    e2["@"] = apply_fcn(f, k)
                    v = fv(s, n, e2)
                else:
                    v = fv(s, n, e)
            else:
                v = upd(apply_fcn(f, k), path, i + 1, fv, uses_at, s, n, e)
            return fcn_update(f, k, v)

        def except_(s, n, e):
            f = ff(s, n, e)
            try:
                for path, fv, uses_at in changes:
                    f = upd(f, path, 0, fv, uses_at, s, n, e)
            except EvalError as exc:
                if not exc.location:
                    exc.location = where
                raise
            return f
        return except_, deps

    def _x_SubexpressionReference(self, node, scope):
        target = self.positional(node, scope)
        if target is not None:
            return self._expr(target[0], target[1])
        return self._call_path(node, scope, action_mode=None)

    def positional(self, node, scope) -> tuple[Any, Scope] | None:
        """``Def!2!1``: the operand selected by position in a definition without arguments (the n-th
        conjunct of a conjunction list, the n-th argument of an operator); ``Name!:`` is the body of
        the definition, the assertion of a named THEOREM or ASSUME; None for ``I!Op``."""
        items = list(node.items)
        first = items[0]
        b = self.resolve(_name_of(first), scope)
        steps = items[1:]
        while steps and steps[0] == ":":  # the body itself: the definition's own expression
            steps = steps[1:]
        if b is None or b[0] != "def" or not all(isinstance(i, str) and i.isdigit() for i in steps):
            if b is not None and b[0] == "def" and ":" in steps:
                raise UnsupportedError(f"{b[1].name}!...!: selecting a body below the top", loc_of(node, scope.mod))
            return None
        d = b[1]
        if d.arity:
            raise UnsupportedError(f"{d.name}!... with arguments", loc_of(node, scope.mod))
        target = d.body
        for i in steps:
            while type(target).__name__ == "Parentheses":
                target = target.expression
            k = int(i)
            kind = type(target).__name__
            if kind == "VerticalList":
                operands = [it.expression for it in target.arguments]
            elif kind == "OperatorApplication" and target.arguments:
                operands = list(target.arguments)
            elif kind == "If":
                operands = [target.predicate, target.then, target.else_]
            else:
                raise UnsupportedError(f"{d.name}!{i}: selecting inside a {kind}", loc_of(node, scope.mod))
            if not 1 <= k <= len(operands):
                raise SpecError(f"{d.name}!{i}: there is no operand {k}", loc_of(node, scope.mod))
            target = operands[k - 1]
        return target, d.scope

    def _instance_target(self, node, scope) -> tuple[tuple, list, list]:
        """Follow ``I!J!Op(args)`` or ``I(e)!Op(args)``: return (binding of Op, args nodes,
        [(instance parameter, compiled argument)] to bind around the call)."""
        items = list(node.items)
        first = items[0]
        b = self.resolve(_name_of(first), scope)
        binds: list = []
        if b is not None and b[0] == "pinstance":
            params, inode, imod, iouter = b[1]
            iargs = [] if isinstance(first, str) else list(first.arguments or [])
            if len(iargs) != len(params):
                raise SpecError(f"{_name_of(first)} takes {len(params)} argument(s)", loc_of(node, scope.mod))
            inner_outer = iouter.child()
            for p, a in zip(params, iargs, strict=True):  # by name, so I(x)!A can prime x
                inner_outer.names[p] = self._subst(a, scope)
            b = ("instance", self._instance(inode, imod, inner_outer, inherit_env=True))
        if b is None or b[0] != "instance":
            raise UndefinedError(f"{_name_of(first)} is not a module instance", loc_of(node, scope.mod))
        sc = b[1]
        for it in items[1:-1]:
            nb = sc.lookup(_name_of(it))
            if nb is None or nb[0] != "instance":
                raise UndefinedError(f"{_name_of(it)} is not a module instance", loc_of(node, scope.mod))
            sc = nb[1]
        last = items[-1]
        name = _name_of(last)
        args = [] if isinstance(last, str) else list(last.arguments or [])
        target = self.resolve(name, sc)
        if target is None:
            raise UndefinedError(f"{name} is not defined in the instance", loc_of(node, scope.mod))
        return target, args, binds

    def _call_path(self, node, scope, action_mode):
        target, args, binds = self._instance_target(node, scope)
        fn, deps = self._apply_binding(target, _name_of(node.items[-1]), args, node, scope)
        if not binds:
            return fn, deps
        pairs = [(p, f[0]) for p, f in binds]

        def with_instance_args(s, n, e):
            e2 = dict(e)
            for p, f in pairs:
                e2[p] = f(s, n, e)
            return fn(s, n, e2)
        return with_instance_args, (deps - frozenset(p for p, _ in binds)).union(*[f[1] for _, f in binds])

    def _x_OperatorApplication(self, node, scope):
        op = ALIASES.get(node.operator, node.operator)
        args = node.arguments
        if args is None:
            return self._name(op, node, scope)
        special = getattr(self, "_op_" + B.SPECIAL_NAMES.get(op, "none"), None)
        if special is not None and op in B.SPECIAL_NAMES:
            return special(node, args, scope)
        if op == "-" and len(args) == 1 and self.resolve("-.", scope) is None:
            raise UndefinedError(_not_extended("-.", "operator -. (the prefix minus)"), loc_of(node, scope.mod))
        b = self.resolve(op, scope)
        if b is None:
            if op in B.LANGUAGE_OPERATORS:
                b = ("builtin", op)
            elif op in B.OPERATORS:
                raise UndefinedError(_not_extended(op, f"operator {op}"), loc_of(node, scope.mod))
            elif op == "\\cdot":  # an action (actions.py lays it out); never a value of its own
                return self._composition_value(node, scope)
            elif op in B.UNSUPPORTED:
                raise UnsupportedError(f"{op} ({B.UNSUPPORTED[op]}) is not supported by the embedded checker",
                                       loc_of(node, scope.mod))
            else:
                raise UndefinedError(f"undefined operator {op}", loc_of(node, scope.mod))
        return self._apply_binding(b, op, args, node, scope)

    def _composition_value(self, node, scope):
        where = loc_of(node, scope.mod)

        def composition(s, n, e):
            raise EvalError("A \\cdot B is an action: it is taken as a step, not evaluated as a value", where)
        return composition, frozenset()

    def _name(self, name, node, scope):
        b = self.resolve(name, scope)
        if b is None:
            if name in B.LANGUAGE_OPERATORS and B.OPERATORS[name][0] == 0:
                b = ("builtin", name)
            elif name in B.OPERATORS and B.OPERATORS[name][0] == 0:
                raise UndefinedError(_not_extended(name, f"identifier {name}"), loc_of(node, scope.mod))
            elif name in B.UNSUPPORTED:
                raise UnsupportedError(f"{name} ({B.UNSUPPORTED[name]}) is not supported by the embedded checker",
                                       loc_of(node, scope.mod))
            else:
                raise UndefinedError(f"undefined identifier {name}", loc_of(node, scope.mod))
        return self._apply_binding(b, name, [], node, scope)

    def _apply_binding(self, b, name, args, node, scope):
        kind = b[0]
        where = loc_of(node, scope.mod)
        if kind == "var":
            var = b[1]

            def read(s, n, e):
                try:
                    return s[var]
                except KeyError:
                    raise EvalError(f"variable {var} is read before it has a value", where) from None
            return read, frozenset({STATE})
        if kind == "bound":
            nm = b[1]
            return (lambda s, n, e: e[nm]), frozenset({nm})
        if kind == "const":
            cname = b[1]
            if cname not in self.constants:
                raise SpecError(f"constant {cname} has no value (give it in the cfg)", where)
            v = self.constants[cname]
            if callable(v) and not isinstance(v, (LazySet,)):
                return self._call_python(v, name, args, node, scope)
            return (lambda s, n, e: v), NODEPS
        if kind == "value":
            v = b[1]
            return (lambda s, n, e: v), NODEPS
        if kind == "subst":
            if args:
                raise UnsupportedError(f"substituted operator {name} with arguments", where)
            return b[1], b[2]
        if kind == "opsubst":  # an operator constant given by INSTANCE ... WITH C <- Op
            mk, odeps, arity = b[1], b[2], b[3]
            if len(args) != arity:
                raise ArityError(f"{name} takes {arity} argument(s), given {len(args)}", where)
            parts = [self.expr(a, scope) for a in args]
            fns = [p[0] for p in parts]

            def call_subst(s, n, e):
                return mk(s, n, e)(*[f(s, n, e) for f in fns])
            return call_subst, (odeps | {STATE}).union(*[p[1] for p in parts])
        if kind == "opparam":
            nm = b[1]
            if not args:
                return (lambda s, n, e: e[nm]), frozenset({nm})
            parts = [self.expr(a, scope) for a in args]
            fns = [p[0] for p in parts]
            deps = frozenset({nm}).union(*[p[1] for p in parts])

            def call_param(s, n, e):
                return e[nm](*[f(s, n, e) for f in fns])
            return call_param, deps
        if kind == "builtin":
            return self._builtin(b[1], args, node, scope, _builtin_spec(b))
        if kind == "recfn":
            d = b[1]
            return self._def_ref(d, args, node, scope)
        if kind == "def":
            return self._def_ref(b[1], args, node, scope)
        if kind == "instance":
            raise UnsupportedError(f"instance {name} used as a value", where)
        raise UnsupportedError(f"binding {kind} for {name}", where)

    def _call_python(self, fn, name, args, node, scope):
        parts = [self.expr(a, scope) for a in args]
        fns = [p[0] for p in parts]
        deps = frozenset().union(*[p[1] for p in parts]) if parts else NODEPS
        return (lambda s, n, e: fn(*[f(s, n, e) for f in fns])), deps

    def _arg(self, a, arity, scope):
        """Compile an argument; an operator parameter (arity > 0) receives a Python callable."""
        if arity == 0:
            return self.expr(a, scope)
        if type(a).__name__ == "Lambda":
            return self._lambda(a, scope)
        name = ALIASES.get(_name_of(a), _name_of(a)) if type(a).__name__ == "OperatorApplication" else None
        if name is None:
            raise UnsupportedError("operator argument must be a name or a LAMBDA", loc_of(a, scope.mod))
        b = self.resolve(name, scope)
        if b is None and name in B.LANGUAGE_OPERATORS:
            b = ("builtin", name)
        if b is None:
            message = _not_extended(name, f"operator {name}") if name in B.OPERATORS else f"undefined operator {name}"
            raise UndefinedError(message, loc_of(a, scope.mod))
        if b[0] == "opparam":
            return (lambda s, n, e: e[name]), frozenset({name})
        if b[0] == "builtin":
            impl = _builtin_spec(b)[1]
            return (lambda s, n, e: impl), NODEPS
        if b[0] == "def":
            d = b[1]
            body, deps = self.def_fn(d)
            params = [p[0] for p in d.params]
            is_let = d.is_let

            if len(params) == 1 and not is_let:  # SelectSeq(s, Test) and the like: one fresh dict per call
                p0 = params[0]

                def mk1(s, n, e):
                    return lambda v: body(s, n, {p0: v})
                return mk1, (deps - frozenset(params)) | {"$lambda"}

            def mk(s, n, e):
                def op(*vals):
                    e2 = dict(e) if is_let else {}
                    e2.update(zip(params, vals, strict=False))
                    return body(s, n, e2)
                return op
            return mk, (deps - frozenset(params)) | {"$lambda"}
        raise UnsupportedError(f"{name} cannot be passed as an operator", loc_of(a, scope.mod))

    def _builtin(self, name, args, node, scope, spec: tuple):
        fn, deps = self._builtin_call(name, args, node, scope, spec)
        if name in B.RANDOM:  # a draw: never cached, except in a constant definition (evaluated once)
            deps = deps | {"$random"}
        elif name in B.IMPURE:
            deps = deps | {"$impure"}  # its value is not a function of its arguments: never cached
        return fn, deps

    def _builtin_call(self, name, args, node, scope, spec: tuple):
        arity, impl, *rest = spec
        where = loc_of(node, scope.mod)
        if arity == 0:
            if args:
                raise SpecError(f"{name} takes no arguments", where)
            if name in B.DYNAMIC:  # TLCExt's Trace: computed where it is evaluated, never cached
                return (lambda s, n, e: impl()), frozenset({STATE, "$impure"})
            v = impl
            return (lambda s, n, e: v), NODEPS
        if arity == -1:
            parts_v = [self.expr(a, scope) for a in args]
            fns_v = [p[0] for p in parts_v]
            return ((lambda s, n, e: impl(*[f(s, n, e) for f in fns_v])),
                    frozenset().union(*[p[1] for p in parts_v]))
        if len(args) != arity and not (name == "-" and len(args) == 1):
            raise ArityError(f"{name} takes {arity} argument(s), given {len(args)}", where)
        if name == "-" and len(args) == 1:
            f0, d0 = self.expr(args[0], scope)
            return (lambda s, n, e: -B.num(f0(s, n, e))), d0
        op_positions = rest[0] if rest else ()
        parts = [self._arg(a, 1 if i in op_positions else 0, scope) for i, a in enumerate(args)]
        fns = [p[0] for p in parts]
        deps = frozenset().union(*[p[1] for p in parts]) - {"$lambda"}
        if any("$lambda" in p[1] for p in parts):
            deps = deps | {STATE}  # a callable argument is rebuilt per call: never cache it

        if arity == 1:
            f0 = fns[0]

            def call1(s, n, e):
                try:
                    return impl(f0(s, n, e))
                except EvalError as exc:
                    if not exc.location:
                        exc.location = where
                    raise
                except (TypeError, ValueError, ZeroDivisionError, IndexError) as exc:
                    raise EvalError(f"{name}: {exc}", where) from None
            return call1, deps
        if arity == 2:
            f0, f1 = fns

            def call2(s, n, e):
                try:
                    return impl(f0(s, n, e), f1(s, n, e))
                except EvalError as exc:
                    if not exc.location:
                        exc.location = where
                    raise
                except (TypeError, ValueError, ZeroDivisionError, IndexError) as exc:
                    raise EvalError(f"{name}: {exc}", where) from None
            return call2, deps

        def calln(s, n, e):
            try:
                return impl(*[f(s, n, e) for f in fns])
            except EvalError as exc:
                if not exc.location:
                    exc.location = where
                raise
            except (TypeError, ValueError, ZeroDivisionError, IndexError) as exc:
                raise EvalError(f"{name}: {exc}", where) from None
        return calln, deps

    def _shared_per_state(self, d: Def, fn: Callable) -> Callable:
        """One per-state cache for a state-level definition, shared by all its uses: a definition used
        by several split actions (TryRead(1), TryRead(2), ...) is evaluated once per state, not once
        per use."""
        hit = self._state_defs.get(id(d))
        if hit is None:
            hit = self._state_defs[id(d)] = (d, _per_state(fn, self._value_reads(d)))  # d kept alive: its
        return hit[1]                                                                  # id is not reused

    def _value_reads(self, d: Def) -> tuple | None:
        """The variables a state-level definition without arguments reads, when they are fewer than all
        of them (a memo by their values can then be shared by different states), else None."""
        if self.state_reads is None or d.arity or d.body is None or (d.node is not None and d.node.function):
            return None
        try:
            reads = self.state_reads(self, d.body, d.scope, d.deps)
        except Exception:  # noqa: BLE001 - unknown reads: no memo by value
            return None
        if not reads or len(reads) >= len(set(self.variables)):
            return None
        return tuple(sorted(reads))

    def def_fn(self, d: Def) -> tuple[Callable, frozenset]:
        """Compile a definition's body once (params bound); recursion gets a conservative dependency."""
        if d.fn is not None:
            return d.fn, d.deps  # type: ignore[return-value]
        if d.compiling:
            def later(s, n, e):  # a recursive application: one level deeper, bounded (deepstack.py)
                if DEPTH[0] >= DEPTH[1]:
                    raise too_deep(d.name)
                DEPTH[0] += 1
                try:
                    return d.fn(s, n, e)  # type: ignore[misc]
                finally:
                    DEPTH[0] -= 1
            return later, frozenset({_rec_mark(d)})
        d.compiling = True
        inner = d.scope.child()
        for p, ar in d.params:
            inner.names[p] = ("opparam", p, ar) if ar else ("bound", p)
        body = d.body
        if type(body).__name__ == "Function" and d.node is not None and d.node.function:
            fn, deps = self._function_def(d, body, inner)
        else:
            fn, deps = self._expr(body, inner)
            if self.fast is not None and not isinstance(body, str):
                fn = self.fast.compile(body, inner, fn, loc_of(body, inner.mod)) or fn
        deps = _settle_recursion(d, deps)
        d.fn, d.deps = fn, deps
        d.compiling = False
        return fn, deps

    def _function_def(self, d: Def, node, inner: Scope):
        """``f[x \\in S] == e``: recursive definitions become memoized lazy functions."""
        inner.names[d.name] = ("recfn", d)
        binds, ds, inner2, names = self._bounds_compiled(node.declaration, inner)
        fv, dv = self.expr(node.value, inner2)
        fname = d.name
        multi = len(binds) > 1

        def build(s, n, e):
            if multi:
                dom = B.ProductSet([b[1](s, n, e) for b in binds])
            else:
                dom = binds[0][1](s, n, e)
            e_body = dict(e)
            lf: LazyFcn

            def compute(x):
                e2 = dict(e_body)
                if multi:
                    for (setter, _, _), xi in zip(binds, x, strict=False):
                        setter(e2, xi)
                else:
                    binds[0][0](e2, x)
                return fv(s, n, e2)
            lf = LazyFcn(dom, compute)  # lazy: entries are computed when applied (TLC's FcnLambdaValue)
            e_body[fname] = lf
            return lf
        deps = ds | (dv - names - {fname, REC_FN + fname})
        return build, deps

    @staticmethod
    def _self_ref(fname: str):
        """``f`` inside the body of ``f[x \\in S] == ...``: the lazy function being defined, bound in e.
        Its dependencies are its name and ``REC_FN + f`` (no LET memo may hash a function still being
        computed, and a LET inside the body stays state-free); the definition drops both."""
        def selfref(s, n, e):
            return e[fname]
        return selfref, frozenset({fname, REC_FN + fname})

    def primed_params(self, d: Def) -> set:
        """Parameters that the body primes or UNCHANGEs: they are passed by name (substituted)."""
        if getattr(d, "_primed", None) is None:
            names = {p for p, ar in d.params if ar == 0}
            found: set = set()

            def walk(x, under_prime):
                if isinstance(x, list):
                    for y in x:
                        walk(y, under_prime)
                    return
                if not (isinstance(x, tuple) and hasattr(x, "_fields")):
                    if isinstance(x, tuple):
                        for y in x:
                            walk(y, under_prime)
                    return
                k = type(x).__name__
                if k == "OperatorApplication":
                    if x.arguments is None:
                        if under_prime and x.operator in names:
                            found.add(x.operator)
                        return
                    up = under_prime or x.operator in ("'", "UNCHANGED")
                    walk(x.arguments, up)
                    return
                if k == "SubscriptedAction":
                    walk(x.action, under_prime)
                    walk(x.subscript, True)
                    return
                for f in x._fields:
                    if f not in ("symbol", "start", "end"):
                        walk(getattr(x, f), under_prime)
            if names:
                walk(d.body, False)
            d._primed = found  # type: ignore[attr-defined]
        return d._primed  # type: ignore[attr-defined]

    def inline_scope(self, d: Def, args, scope, by_name: set | frozenset = frozenset()) -> tuple[Scope, list]:
        """A scope for d's body at one call site: primed parameters (and those in ``by_name``) are
        bound to the argument expressions (substitution); the others are returned as (name, compiled
        argument)."""
        primed = self.primed_params(d) | set(by_name)
        inner = d.scope.child()
        values = []
        for a, (p, ar) in zip(args, d.params, strict=False):
            if p in primed:
                inner.names[p] = self._subst(a, scope)
            else:
                inner.names[p] = ("opparam", p, ar) if ar else ("bound", p)
                values.append((p, self._arg(a, ar, scope)))
        return inner, values

    @staticmethod
    def _let_memo(d: Def, body, bdeps):
        """A LET definition that depends only on bound names is memoized by their values."""
        names = sorted(bdeps)
        memo: dict = {}
        if len(names) == 1:
            nm = names[0]

            def letref1(s, n, e):
                x = e[nm]
                if callable(x):
                    return body(s, n, e)
                try:
                    key = x if type(x) in SELF_KEYED else memo_key(x)
                    return memo[key]
                except KeyError:
                    pass
                except (TypeError, EvalError):
                    return body(s, n, e)
                v = body(s, n, e)
                if len(memo) > 100_000:
                    memo.clear()
                memo[key] = v
                return v
            return letref1

        def letref(s, n, e):
            vals = [e[nm] for nm in names]
            if any(callable(x) for x in vals):
                return body(s, n, e)
            try:
                key = memo_keys(vals)
                return memo[key]
            except KeyError:
                pass
            except (TypeError, EvalError):
                return body(s, n, e)
            v = body(s, n, e)
            if len(memo) > 100_000:
                memo.clear()
            memo[key] = v
            return v
        return letref

    def let_ref(self, d: Def, body: Callable, bdeps: frozenset) -> Callable:
        """The function of a LET definition without arguments (body, bdeps: def_fn's), one per definition,
        shared by all its uses: memoized by the bound values it reads when it does not read the state;
        else, when it reads the state, its last value kept (_let_last)."""
        shared = getattr(d, "_ref", None)
        if shared is not None and shared[0] is body:
            return shared[1]
        fn = body
        if bdeps and not (bdeps & {STATE, PRIME, "$lambda", "@", "$impure", "$random"}) and not in_recursion(bdeps):
            fn = self._let_memo(d, body, bdeps)
        elif STATE in bdeps and not any(x.startswith("$") or x == "@" for x in bdeps - {STATE}):
            fn = _let_last(body, bdeps - {STATE})
        d._ref = (body, fn)  # type: ignore[attr-defined]
        return fn

    def let_cache(self, d: Def) -> Callable | None:
        """The shared cache of a LET definition without arguments that reads the state (let_ref's
        _let_last), else None."""
        body, bdeps = self.def_fn(d)
        if STATE not in bdeps:
            return None
        fn = self.let_ref(d, body, bdeps)
        return None if fn is body else fn

    def _def_ref(self, d: Def, args, node, scope):
        where = loc_of(node, scope.mod)
        if args and len(args) == d.arity and self.primed_params(d):
            inner, values = self.inline_scope(d, args, scope)
            body_i, bdeps_i = self._expr(d.body, inner)
            vfns = [(p, f[0]) for p, f in values]
            deps_i = (bdeps_i - frozenset(p for p, _ in d.params)).union(*[f[1] for _, f in values]) - {"$lambda"}

            def inlined(s, n, e):
                e2 = dict(e)
                for p, f in vfns:
                    e2[p] = f(s, n, e)
                return body_i(s, n, e2)
            return inlined, deps_i | {STATE, PRIME}
        if len(args) != d.arity:
            raise ArityError(f"{d.name} takes {d.arity} argument(s), given {len(args)}", where)
        if d.compiling and d.node is not None and d.node.function:
            return self._self_ref(d.name)
        body, bdeps = self.def_fn(d)
        if d.node is not None and d.node.function:
            # reference to a function definition; inside its own body it is bound in e
            fname = d.name

            def fref(s, n, e):
                lf = e.get(fname)
                if lf is not None and type(lf) is LazyFcn:
                    return lf
                return body(s, n, {} if not d.is_let else e)
            deps = bdeps
            if not deps and not d.is_let:
                return _cached_const(fref), NODEPS
            if deps == frozenset({STATE}) and not d.is_let:
                return self._shared_per_state(d, fref), deps
            return fref, deps
        if d.arity == 0:
            if d.is_let:
                return self.let_ref(d, body, bdeps), bdeps
            if not bdeps:
                return _cached_const(body), NODEPS
            if bdeps == frozenset({STATE}):
                return self._shared_per_state(d, body), bdeps
            if bdeps == frozenset({"$random"}):  # TLC evaluates a constant definition once, at startup,
                hit = self._drawn.get(id(d))     # so a RandomElement in it is drawn once per run
                if hit is None:
                    hit = self._drawn[id(d)] = (d, _cached_const(body))
                return hit[1], NODEPS
            return body, bdeps
        params = [p[0] for p in d.params]
        parts = [self._arg(a, ar, scope) for a, (_, ar) in zip(args, d.params, strict=False)]
        fns = [p[0] for p in parts]
        adeps = frozenset().union(*[p[1] for p in parts])
        rest = bdeps - frozenset(params)
        deps = (rest | adeps) - {"$lambda"}
        has_op_arg = any(ar for _, ar in d.params) or "$lambda" in adeps
        if has_op_arg:
            deps = deps | {STATE}
        is_let = d.is_let
        memo: dict | None = {} if (not rest and not has_op_arg) else None
        if len(params) == 1:
            p0 = params[0]
            f0 = fns[0]
            if memo is not None:
                def call1m(s, n, e):
                    x = f0(s, n, e)
                    key = x if type(x) in SELF_KEYED else memo_key(x)  # F(TRUE) must not find F(1)
                    try:
                        return memo[key]
                    except KeyError:
                        pass
                    except TypeError:
                        return body(s, n, {p0: x})
                    v = body(s, n, {p0: x})
                    if len(memo) > 200_000:
                        memo.clear()
                    memo[key] = v
                    return v
                return call1m, deps

            def call1(s, n, e):
                if is_let:
                    e2 = dict(e)
                    e2[p0] = f0(s, n, e)
                    return body(s, n, e2)
                return body(s, n, {p0: f0(s, n, e)})
            return call1, deps

        if memo is None and not is_let and len(params) == 2:
            pa, pb = params
            fa, fb = fns

            def call2p(s, n, e):
                return body(s, n, {pa: fa(s, n, e), pb: fb(s, n, e)})
            return call2p, deps

        def calln(s, n, e):
            vals = [f(s, n, e) for f in fns]
            if memo is not None:
                key = memo_keys(vals)
                try:
                    return memo[key]
                except KeyError:
                    pass
                except TypeError:
                    return body(s, n, dict(zip(params, vals, strict=False)))
                v = body(s, n, dict(zip(params, vals, strict=False)))
                if len(memo) > 200_000:
                    memo.clear()
                memo[key] = v
                return v
            e2 = dict(e) if is_let else {}
            e2.update(zip(params, vals, strict=False))
            return body(s, n, e2)
        return calln, deps

    # ---------------------------------------------------------------- special operators

    def _op_prime(self, node, args, scope):
        var = self._as_var(args[0], scope)
        where = loc_of(node, scope.mod)
        if var is not None:
            def read_prime(s, n, e):
                if n is None:
                    raise EvalError(f"{var}' is used outside an action", where)
                try:
                    return n[var]
                except KeyError:
                    raise EvalError(f"{var}' is read before it has a value", where) from None
            return read_prime, frozenset({PRIME})
        fa, _ = self.expr(args[0], scope)

        def prime_expr(s, n, e):
            if n is None:
                raise EvalError("a primed expression is used outside an action", where)
            return fa(Primed(n), None, e)
        return prime_expr, frozenset({PRIME})

    def _op_and(self, node, args, scope):
        parts = [self.expr(a, scope) for a in args]
        return self._junction([p[0] for p in parts], True, node, scope), frozenset().union(*[p[1] for p in parts])

    def _op_or(self, node, args, scope):
        parts = [self.expr(a, scope) for a in args]
        return self._junction([p[0] for p in parts], False, node, scope), frozenset().union(*[p[1] for p in parts])

    def _junction(self, fns, is_and, node, scope):
        where = loc_of(node, scope.mod)
        word = "/\\" if is_and else "\\/"
        if len(fns) == 2:
            a, b = fns

            def j2(s, n, e):
                v = a(s, n, e)
                if v is not is_and:
                    if v is (not is_and):
                        return v
                    raise EvalError(f"{word} applied to the non-boolean {fmt(v)}", where)
                w = b(s, n, e)
                if type(w) is not bool:
                    raise EvalError(f"{word} applied to the non-boolean {fmt(w)}", where)
                return w
            return j2

        def jn(s, n, e):
            for f in fns:
                v = f(s, n, e)
                if v is not is_and:
                    if v is (not is_and):
                        return v
                    raise EvalError(f"{word} applied to the non-boolean {fmt(v)}", where)
            return is_and
        return jn

    def _x_VerticalList(self, node, scope):
        items = [it.expression for it in node.arguments]
        parts = [self.expr(a, scope) for a in items]
        return (self._junction([p[0] for p in parts], node.operator == "/\\", node, scope),
                frozenset().union(*[p[1] for p in parts]))

    def _x_VerticalItem(self, node, scope):
        return self._expr(node.expression, scope)

    def _op_implies(self, node, args, scope):
        (fa, da), (fb, db) = self.expr(args[0], scope), self.expr(args[1], scope)
        where = loc_of(node, scope.mod)

        def implies(s, n, e):
            v = fa(s, n, e)
            if v is False:
                return True
            if v is not True:
                raise EvalError(f"=> applied to the non-boolean {fmt(v)}", where)
            w = fb(s, n, e)
            if type(w) is not bool:
                raise EvalError(f"=> applied to the non-boolean {fmt(w)}", where)
            return w
        return implies, da | db

    def _op_not(self, node, args, scope):
        fa, da = self.expr(args[0], scope)
        where = loc_of(node, scope.mod)

        def not_(s, n, e):
            v = fa(s, n, e)
            if type(v) is not bool:
                raise EvalError(f"~ applied to the non-boolean {fmt(v)}", where)
            return not v
        return not_, da

    def _op_eq(self, node, args, scope):
        (fa, da), (fb, db) = self.expr(args[0], scope), self.expr(args[1], scope)
        where = loc_of(node, scope.mod)
        negate = ALIASES.get(node.operator, node.operator) == "/="

        def eq(s, n, e):
            a = fa(s, n, e)
            b = fb(s, n, e)
            ta = type(a)
            if ta is type(b) and (ta is int or ta is str or ta is bool or ta is frozenset):
                return (a != b) if negate else (a == b)
            try:
                r = tla_eq(a, b)
            except EvalError as exc:
                if not exc.location:
                    exc.location = where
                raise
            return (not r) if negate else r
        return eq, da | db

    def _op_in(self, node, args, scope):
        (fa, da), (fb, db) = self.expr(args[0], scope), self.expr(args[1], scope)
        where = loc_of(node, scope.mod)
        negate = node.operator == "\\notin"

        def in_(s, n, e):
            x = fa(s, n, e)
            S = fb(s, n, e)
            try:
                r = member(x, S)
            except EvalError as exc:
                if not exc.location:
                    exc.location = where
                raise
            except TypeError:
                raise EvalError(f"cannot test membership of {fmt(x)}", where) from None
            return (not r) if negate else r
        return in_, da | db

    def _op_iff(self, node, args, scope):
        (fa, da), (fb, db) = self.expr(args[0], scope), self.expr(args[1], scope)
        where = loc_of(node, scope.mod)

        def iff(s, n, e):
            a, b = fa(s, n, e), fb(s, n, e)
            if type(a) is not bool or type(b) is not bool:
                raise EvalError("<=> applied to a non-boolean", where)
            return a == b
        return iff, da | db

    def _op_unchanged(self, node, args, scope):
        fa, _ = self.expr(args[0], scope)
        where = loc_of(node, scope.mod)

        def unchanged(s, n, e):
            if n is None:
                raise EvalError("UNCHANGED is used outside an action", where)
            return tla_eq(fa(Primed(n), None, e), fa(s, None, e))
        return unchanged, frozenset({STATE, PRIME})

    def _op_label(self, node, args, scope):
        return self._expr(args[1], scope)

    def _op_temporal(self, node, args, scope):
        raise UnsupportedError(f"temporal operator {node.operator} cannot be evaluated on states",
                               loc_of(node, scope.mod))

    def _op_enabled(self, node, args, scope):
        # ENABLED A (issue 17): some successor of the state satisfies A; searched as Next is (temporal.py)
        if self.enabled is None:
            raise UnsupportedError("ENABLED outside a model (no successor search)", loc_of(node, scope.mod))
        return self.enabled(self, args[0], scope, loc_of(node, scope.mod))

    def _x_SubscriptedAction(self, node, scope):
        fa, da = self.expr(node.action, scope)
        fv, _ = self.expr(node.subscript, scope)
        box = node.operator == "["
        reads = self.state_reads(self, node.subscript, scope) if self.state_reads is not None else None
        keep = tuple(reads) if reads is not None else None  # a step that leaves these as they were: v' = v
        # per side (successor, state): the read values (compared by identity) and v's value last computed
        # without bound names; the state side repeats for every successor of one state
        lasts: tuple[list, list] = ([None, None], [None, None])

        def value(st, e, copy):
            vals = None if keep is None or e else tuple([st.get(v) for v in keep])
            if vals is not None and None not in vals:
                last = lasts[copy]
                hit = last[0]
                if hit is not None and all(a is b for a, b in zip(hit, vals, strict=True)):
                    return last[1]
                r = fv(Primed(st) if copy else st, None, e)
                last[0], last[1] = vals, r
                return r
            return fv(Primed(st) if copy else st, None, e)

        def sub(s, n, e):
            if keep is not None and all(v in n and v in s and n[v] is s[v] for v in keep):
                same = True
            else:
                same = tla_eq(value(n, e, True), value(s, e, False))
            if box:
                return same or fa(s, n, e)
            return (not same) and fa(s, n, e)
        return sub, da | {STATE, PRIME}

    def _x_Fairness(self, node, scope):
        raise UnsupportedError("fairness (WF_/SF_) cannot be evaluated on states", loc_of(node, scope.mod))

    def _x_TemporalQuantification(self, node, scope):
        raise UnsupportedError("temporal quantification (\\AA, \\EE)", loc_of(node, scope.mod))
