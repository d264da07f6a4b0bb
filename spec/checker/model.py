"""A loaded model: the spec compiled against its cfg, with Init, the split Next actions, invariants,
constraints, and the step API used by trace validation; and the names of a spec's actions, as the
model derives them from ``Next`` (TLC's split of it).

Naming rule (docs/design.md, "Steps are the spec's actions"): a spec action ``CowReserve`` has one reference
twin, the step ``cow_reserve`` (:func:`snake_case`). Nothing else names an action: the recorder, trace
validation and the gate read the action list and each action's parameters from here
(:func:`spec_actions`, :func:`model_actions`).

Invariant: a Model never mutates a state dict; ``successors`` returns every successor TLC would generate
(duplicates included), grouped by the action (TLC's split of Next) that produced it.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec import spec_dir
from kvexact.spec.checker.actions import ActionCompiler, _strip, conj_items, disj_items
from kvexact.spec.checker.builtins import TLC_CONTEXT
from kvexact.spec.checker.cfg import Config, ConfigError, parse_cfg
from kvexact.spec.checker.compiler import ALIASES, Compiler, Def, Scope, _bounds, loc_of, tlc_loc
from kvexact.spec.checker.errors import SpecError
from kvexact.spec.checker.reads import conjuncts, state_reads
from kvexact.spec.checker.symmetry import Symmetry
from kvexact.spec.checker.temporal import compile_enabled
from kvexact.spec.checker.values import (
    SELF_KEYED,
    EvalError,
    as_set,
    canon,
    fmt,
    from_python,
    ordered_elements,
)


@attrs.frozen
class StepVerdict:
    ok: bool
    action: str
    params: dict
    failed: str | None
    location: str


@attrs.define(slots=False)
class SplitAction:
    """One action of TLC's split of Next: ``act`` run with ``env`` (the split's parameter values). Built
    lazily, ``act`` is compiled from ``build`` on its first read (then it is a plain attribute)."""

    label: str
    location: str
    env: dict
    where: str = ""  # file:line:col
    build: Callable[[], Any] | None = attrs.field(default=None, repr=False, eq=False)
    act: Any = attrs.field(init=False, repr=False, eq=False)  # unset until built (see __getattr__)

    def __getattr__(self, name: str) -> Any:  # only reached while ``act`` is not yet set
        build = self.__dict__.get("build")
        if name != "act" or build is None:
            raise AttributeError(name)
        self.act = build()
        self.build = None
        return self.act


def _kind(node: Any) -> str:
    return type(node).__name__


class Model:
    """The spec + cfg, compiled. Build with :func:`load_model`."""

    def __init__(self, spec_path: Path, cfg: Config, constant_overrides: dict[str, Any] | None = None,
                 lib_dirs: list[Path] | None = None, lazy_actions: bool = False):
        self.spec_path = Path(spec_path)
        self.lazy_actions = lazy_actions  # compile each split action of Next on its first use (trace validation)
        self.cfg = cfg
        py_values = {name: (from_python(v) if not callable(v) else v) for name, v in (constant_overrides or {}).items()}
        # every value the cfg gives is known before loading: INSTANCE ... WITH substitutions, compiled
        # while the modules load, may use them; names that turn out not to be constants are pruned below
        constants: dict[str, Any] = {**cfg.constants, **py_values}
        value_overrides: dict[str, Any] = dict(constants)
        self.comp = Compiler(self.spec_path.parent, constants, dict(cfg.overrides), value_overrides, lib_dirs)
        self.comp.enabled = compile_enabled
        self.comp.state_reads = state_reads
        self.comp.scoped_values = dict(cfg.scoped_constants)
        self.comp.scoped_overrides = dict(cfg.scoped_overrides)
        root = self.comp.load_root(self.spec_path)
        self.messages: list[str] = list(self.comp.messages)
        self.root = root
        declared = set(self.comp.declared_constants)
        for name in list(constants):
            if name in declared:
                value_overrides.pop(name)
            else:
                constants.pop(name)
        for name in cfg.constants:
            b = root.lookup(name)
            if name not in declared and (b is None or b[0] != "def"):
                value_overrides.pop(name, None)  # TLC ignores it too
                self.messages.append(f"{cfg.locations.get(name, cfg.path)}: the cfg assigns {name}, which is "
                                     f"neither a constant nor a definition of {self.spec_path.name}; ignored")
        for name, target in cfg.overrides.items():
            if root.lookup(target) is None:
                raise ConfigError(f"{cfg.locations.get(name, cfg.path)}: {name} <- {target}: {target} is not "
                                  f"defined")
            if not (name in declared or root.lookup(name) is not None or name in _standard_names()):
                # TLC refuses it (exit 151), while it ignores `C = v` for an undeclared C (above)
                raise ConfigError(f"{cfg.locations.get(name, cfg.path)}: {name} <- {target}: the identifier "
                                  f"{name} does not appear in the specification")
        # constants given as `C <- Def`: evaluate Def once
        for name in list(declared):
            if name in self.comp.overrides and name not in constants:
                b = root.lookup(self.comp.overrides[name])
                if b is not None and b[0] == "def" and b[1].arity == 0:
                    fn, _ = self.comp.def_fn(b[1])
                    constants[name] = fn(None, None, {})
        missing = [c for c in self.comp.declared_constants if c not in constants and c not in self.comp.overrides]
        if missing:
            raise ConfigError(f"{cfg.path}: no value for constant(s) {', '.join(missing)}")
        self.variables: list[str] = list(self.comp.variables)
        self._index = {v: i for i, v in enumerate(self.variables)}
        self.init_comp = ActionCompiler(self.comp, "init")
        self.next_comp = ActionCompiler(self.comp, "next")
        TLC_CONTEXT.update(deadlock=cfg.check_deadlock, spec=self.spec_path.name, config=Path(cfg.path).name,
                           registers={}, level=0)  # what TLCGet reports from here on
        self._check_assumptions()
        self._setup_spec()
        self.invariants = [(n, self._state_fn(n, "INVARIANT")) for n in cfg.invariants]
        # name -> (the invariant's function, its conjuncts with their read variables); an invariant added
        # later (a PROPERTY []P) or replaced is evaluated whole
        self.invariant_parts = {n: (fn, self._invariant_parts(n)) for n, fn in self.invariants}
        self._held: dict[int, tuple] = {}  # id(conjunct) -> (conjunct, its reads, keys of values it held on,
        # the reads' positions among the variables)
        self.constraints = [(n, self._state_fn(n, "CONSTRAINT")) for n in cfg.constraints]
        # per constraint, the variables it reads (None: unknown): a successor that left them as they were in
        # its parent (an expanded state, so inside the model) satisfies it as the parent does
        self._constraint_reads = [self._reads_of(n) for n in cfg.constraints]
        self.action_constraints = [(n, self._state_fn(n, "ACTION_CONSTRAINT")) for n in cfg.action_constraints]
        self.view = self._state_fn(cfg.view, "VIEW") if cfg.view else None
        self.symmetry_perms: list | None = None
        self.symmetry: Symmetry | None = None
        if cfg.symmetry:
            perms = self._state_fn(cfg.symmetry, "SYMMETRY")(None, None, {})
            self.symmetry_perms = [p for p in ordered_elements(perms)]
            self.symmetry = Symmetry(self.symmetry_perms)
        self._resolve_all()
        for p in cfg.properties:  # read and sorted into TLC's classes by temporal.plan_properties
            self._lookup_def(p, "PROPERTY")

    # ------------------------------------------------------------------ setup

    def _resolve_all(self) -> None:
        """Compile every definition once, so an undefined identifier anywhere is reported (as SANY does);
        constructs this engine cannot evaluate (temporal formulas) are left for their use."""
        from kvexact.spec.checker.errors import UndefinedError
        seen: set[int] = set()

        def visit(scope: Scope) -> None:
            for b in list(scope.names.values()):
                if b[0] == "def" and id(b[1]) not in seen:
                    seen.add(id(b[1]))
                    try:
                        self.comp.def_fn(b[1])
                    except UndefinedError:
                        raise
                    except (SpecError, EvalError):
                        b[1].compiling = False
                elif b[0] == "instance" and id(b[1]) not in seen:
                    seen.add(id(b[1]))
                    visit(b[1])
        visit(self.root)

    def _lookup_def(self, name: str, what: str) -> Def:
        b = self.root.lookup(name)
        if b is None or b[0] != "def":
            raise ConfigError(f"{self.cfg.locations.get(name, self.cfg.path)}: {what} {name} is not defined "
                              f"in {self.spec_path.name}")
        return b[1]

    def _state_fn(self, name: str, what: str):
        d = self._lookup_def(name, what)
        if d.arity:
            raise ConfigError(f"{self.cfg.locations.get(name, self.cfg.path)}: {what} {name} takes arguments")
        fn, _ = self.comp.def_fn(d)
        return fn

    def _reads_of(self, name: str) -> tuple | None:
        d = self._lookup_def(name, "CONSTRAINT")
        _, deps = self.comp.def_fn(d)
        try:
            reads = state_reads(self.comp, d.body, d.scope, deps)
        except Exception:  # not told from the text: evaluated on every state
            return None
        return None if reads is None else tuple(sorted(reads))

    def _invariant_parts(self, name: str) -> list[tuple[Callable, frozenset | None]]:
        """An invariant's conjuncts, each compiled, with the variables it reads (None: unknown)."""
        d = self._lookup_def(name, "INVARIANT")
        whole, deps = self.comp.def_fn(d)
        leaves = conjuncts(self.comp, d.body, d.scope)
        if len(leaves) == 1:  # not a conjunction: the invariant's own function, not compiled again
            return [(whole, state_reads(self.comp, leaves[0][0], leaves[0][1], deps))]
        parts = []
        for node, scope in leaves:
            fn, _ = self.comp.expr(node, scope)
            parts.append((fn, state_reads(self.comp, node, scope)))
        return parts

    def _check_assumptions(self) -> None:
        """TLC evaluates every ASSUME before exploring; the first false one stops the run (exit 10)."""
        self.failed_assumption: str | None = None
        for expr, scope, name in self.comp.assumes:
            fn, _ = self.comp.expr(expr, scope)
            v = fn(None, None, {})
            if v is not True:
                self.failed_assumption = f"Assumption {name} at {loc_of(expr, scope.mod)} is false"
                return

    def _setup_spec(self) -> None:
        cfg = self.cfg
        self.spec_temporals: list = []  # the SPECIFICATION's temporal conjuncts (fairness), for liveness
        self.constant_only = not (cfg.specification or cfg.init)
        if self.constant_only:  # ASSUMEs only: TLC checks them and reports 0 states
            if self.variables:
                raise ConfigError(f"{cfg.path}: the cfg names neither SPECIFICATION nor INIT and NEXT, and "
                                  f"{self.spec_path.name} declares variables ({', '.join(self.variables)})")
            self.init_parts = []
            self.init_act = lambda s, n, e, k: None
            self.actions: list[SplitAction] = []
            return
        if cfg.specification:
            d = self._lookup_def(cfg.specification, "SPECIFICATION")
            init_parts: list = []
            nxt: list = []
            self._walk_spec(d.body, d.scope, init_parts, nxt, set())
            if not nxt:
                raise ConfigError(f"{cfg.path}: SPECIFICATION {cfg.specification} has no [][Next]_vars conjunct")
            if not init_parts:
                raise ConfigError(f"{cfg.path}: SPECIFICATION {cfg.specification} has no initial predicate")
            self.next_node, self.next_scope = nxt[0]
            self.init_parts = init_parts
        else:
            di = self._lookup_def(cfg.init, "INIT")  # type: ignore[arg-type]
            dn = self._lookup_def(cfg.next, "NEXT")  # type: ignore[arg-type]
            self.init_parts = [(di.body, di.scope)]
            self.next_node, self.next_scope = dn.body, dn.scope
        acts = [self.init_comp.act(node, scope) for node, scope in self.init_parts]

        def init_all(s, n, e, k):
            def run(i, s2):
                if i == len(acts):
                    k(s2, None)
                    return
                acts[i](s2, None, e, lambda s3, n3: run(i + 1, s3))
            run(0, s)
        self.init_act = init_all
        self.actions = []
        self._split(self.next_node, self.next_scope, {}, "Next", tlc_loc(self.next_node, self.next_scope.mod),
                    loc_of(self.next_node, self.next_scope.mod))

    def _temporal(self, node: Any, scope: Scope, seen: set) -> bool:
        k = _kind(node)
        if k in ("Fairness", "SubscriptedAction", "TemporalQuantification"):
            return True
        if k == "SubexpressionReference":  # I!Op: temporal when Op's body is (I!Fairness in a SPECIFICATION)
            d = self._instance_def0(node, scope)
            if d is not None and id(d) not in seen:
                seen.add(id(d))
                return self._temporal(d.body, d.scope, seen)
        if k == "OperatorApplication":
            op = ALIASES.get(node.operator, node.operator)
            if op in ("[]", "<>", "~>", "-+->"):
                return True
            if node.arguments is None:
                b = scope.lookup(op)
                if b is not None and b[0] == "def" and b[1].arity == 0 and id(b[1]) not in seen:
                    seen.add(id(b[1]))
                    return self._temporal(b[1].body, b[1].scope, seen)
                return False
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            for f in node._fields:
                if f in ("symbol", "start", "end"):
                    continue
                v = getattr(node, f)
                if isinstance(v, (list, tuple)) and not hasattr(v, "_fields"):
                    for x in v:
                        if isinstance(x, tuple) and self._temporal(x, scope, seen):
                            return True
                        if isinstance(x, list) and any(isinstance(y, tuple) and self._temporal(y, scope, seen)
                                                       for y in x):
                            return True
                elif isinstance(v, tuple) and self._temporal(v, scope, seen):
                    return True
        return False

    def _instance_def0(self, node: Any, scope: Scope) -> Any:
        """The definition an argument-free ``I!Op`` names (Op of arity 0), or None."""
        try:
            target, args, binds = self.comp._instance_target(node, scope)
        except SpecError:
            return None
        if target[0] == "def" and not args and not binds and target[1].arity == 0:
            return target[1]
        return None

    def _walk_spec(self, node: Any, scope: Scope, init_parts: list, nxt: list, seen: set) -> None:
        node = _strip(node)
        items = conj_items(node)
        if items is not None:
            for it in items:
                self._walk_spec(it, scope, init_parts, nxt, seen)
            return
        k = _kind(node)
        if k == "OperatorApplication" and node.operator == "[]" and node.arguments:
            arg = _strip(node.arguments[0])
            if _kind(arg) == "SubscriptedAction" and arg.operator == "[":
                nxt.append((arg.action, scope))
            else:
                self.spec_temporals.append((node, scope))
            return
        if k == "OperatorApplication" and node.arguments is None:
            b = scope.lookup(node.operator)
            if b is not None and b[0] == "def" and b[1].arity == 0 and self._temporal(node, scope, set()):
                self._walk_spec(b[1].body, b[1].scope, init_parts, nxt, seen)
                return
        if k == "SubexpressionReference":
            d = self._instance_def0(node, scope)
            if d is not None and self._temporal(node, scope, set()):
                self._walk_spec(d.body, d.scope, init_parts, nxt, seen)
                return
        if self._temporal(node, scope, set()):
            self.spec_temporals.append((node, scope))  # fairness: an assumption of liveness checking
            return
        init_parts.append((node, scope))

    def _split(self, node: Any, scope: Scope, env: dict, label: str, location: str, where: str = "") -> None:
        """TLC's action split: through \\/, \\E with constant bounds, and definitions with constant args."""
        node = _strip(node)
        items = disj_items(node)
        if items is not None:
            for it in items:
                self._split(it, scope, env, label, location, where)
            return
        k = _kind(node)
        if k == "Quantification" and node.quantifier == "\\E":
            bounds = _bounds(node.declarations)
            fns = []
            ok = all(sset is not None for _, sset in bounds)
            if ok:
                for b, sset in bounds:
                    fn, deps = self.comp.expr(sset, scope)
                    if deps - set(env):
                        ok = False
                        break
                    fns.append((b, fn))
            if ok:
                from kvexact.spec.checker.compiler import _bind, _binder_names
                inner = scope.child()
                for b, _ in fns:
                    for nm in _binder_names(b):
                        inner.names[nm] = ("bound", nm)

                def rec(i: int, e2: dict) -> None:
                    if i == len(fns):
                        self._split(node.predicate, inner, e2, label, location, where)
                        return
                    b, fn = fns[i]
                    for x in ordered_elements(fn(None, None, e2)):
                        e3 = dict(e2)
                        _bind(b)(e3, x)
                        rec(i + 1, e3)
                rec(0, env)
                return
        if k == "OperatorApplication":
            op = ALIASES.get(node.operator, node.operator)
            b = self.comp.resolve(op, scope)
            if b is not None and b[0] == "def" and not (b[1].node is not None and b[1].node.function):
                d = b[1]
                args = node.arguments or []
                if len(args) == d.arity and all(ar == 0 for _, ar in d.params) and not d.is_let:
                    vals = []
                    ok = True
                    for a in args:
                        fn, deps = self.comp.expr(a, scope)
                        if deps - set(env):
                            ok = False
                            break
                        vals.append(fn(None, None, env))
                    if ok:
                        inner = d.scope.child()
                        for p, _ in d.params:
                            inner.names[p] = ("bound", p)
                        e2 = {p: v for (p, _), v in zip(d.params, vals, strict=False)}
                        self._split(d.body, inner, e2, d.name, tlc_loc(d.node, d.scope.mod),
                                    loc_of(d.node, d.scope.mod))
                        return
        def build() -> Any:
            return self.next_comp.compiled(node, scope, where or location)
        split = SplitAction(label, location, env, where, build=build)
        if not self.lazy_actions:
            split.act = build()
            split.build = None
        self.actions.append(split)

    # ------------------------------------------------------------------ states

    def state_dict(self, vals: tuple) -> dict:
        return dict(zip(self.variables, vals, strict=False))

    def state_tuple(self, s: dict) -> tuple:
        if len(self.variables) > 1:
            return self._values_of(s)
        return tuple([s[v] for v in self.variables])

    @functools.cached_property
    def _values_of(self) -> Callable[[dict], tuple]:
        return operator.itemgetter(*self.variables)

    def init_states(self, emit) -> None:
        """Call ``emit(state_dict)`` for every initial state, duplicates included."""
        if self.constant_only:
            return
        nv = len(self.variables)
        where = tlc_loc(self.init_parts[0][0], self.init_parts[0][1].mod)

        def k(s, n):
            if len(s) != nv:
                missing = [v for v in self.variables if v not in s]
                raise EvalError(f"initial state is not completely specified: no value for "
                                f"{', '.join(missing)}", where)
            emit(s)
        self.init_act({}, None, {}, k)

    def successors(self, s: dict, action: SplitAction, out: list) -> None:
        nv = len(self.variables)

        def k(s2, n):
            if len(n) != nv:
                missing = [v for v in self.variables if v not in n]
                raise EvalError(f"successor state is not completely specified by action {action.label}: "
                                f"no value for {', '.join(missing)}", action.where or action.location)
            out.append(dict(n))  # n is bound in place by the enumerator
        action.act(s, {}, action.env, k)

    def expand(self, s: dict) -> list[tuple[int, dict]]:
        """Every successor of s as (action index, state), duplicates included, in action order."""
        out: list = []
        nv = len(self.variables)
        actions = self.actions
        ai = 0

        def k(s2, n):
            if len(n) != nv:
                a = actions[ai]
                missing = [v for v in self.variables if v not in n]
                raise EvalError(f"successor state is not completely specified by action {a.label}: "
                                f"no value for {', '.join(missing)}", a.where or a.location)
            out.append((ai, dict(n)))
        done = 0
        try:
            for ai, a in enumerate(actions):  # noqa: B007 - k reads ai
                a.act(s, {}, a.env, k)
                done = len(out)
        except EvalError as exc:  # TLC has added the successors of the actions completed before it
            exc.partial = out[:done]  # type: ignore[attr-defined]
            raise
        return out

    def take_intermediates(self) -> int:
        """The intermediate states of top-level ``A \\cdot B`` steps taken since the last call, which TLC
        counts as generated; 0 for a spec without \\cdot."""
        cell = self.comp.composed
        if cell is None:
            return 0
        n, cell[0] = cell[0], 0
        return n

    def key(self, s: dict) -> Any:
        """The state's fingerprint key: its canon key (of the VIEW when there is one), made canonical
        over the SYMMETRY permutations."""
        if self.view is not None:
            base = (canon(self.view(s, None, {})),)
        else:
            base = tuple([x if type(x) in SELF_KEYED else canon(x) for x in map(s.__getitem__, self.variables)])
        if self.symmetry is not None:
            return self.symmetry.key(base)
        return base

    def base_key(self, s: dict) -> tuple:
        """The per-variable canon keys of s, in variable order (``key`` without VIEW and SYMMETRY)."""
        return tuple([x if type(x) in SELF_KEYED else canon(x) for x in map(s.__getitem__, self.variables)])

    def base_key_from(self, vals: tuple, parent_vals: tuple, parent_base: tuple) -> tuple:
        """The base key of a successor (its values ``vals``, in variable order) of a state with values
        ``parent_vals`` and base key ``parent_base``: a variable left as the same object keeps the parent's
        key, which is not looked up again."""
        return tuple([c if x is y else x if type(x) in SELF_KEYED else canon(x)
                      for x, y, c in zip(vals, parent_vals, parent_base, strict=True)])

    def in_model(self, s: dict, parent: dict | None = None, changed: int | None = None) -> bool:
        """s satisfies every CONSTRAINT; ``parent``, when given, is a state inside the model from which s
        was generated: a constraint reading only variables s left unchanged holds without evaluation.
        ``changed``, when given with ``parent``, is the bit mask of the variables s changed
        (``changed_mask``)."""
        if not self.constraints:
            return True
        if changed is not None and parent is not None:
            for (_, fn), mask in zip(self.constraints, self._constraint_masks, strict=True):
                if (mask is None or mask & changed) and fn(s, None, {}) is not True:
                    return False
            return True
        for (_, fn), reads in zip(self.constraints, self._constraint_reads, strict=True):
            if parent is not None and reads is not None:
                for v in reads:
                    if s[v] is not parent[v]:
                        break
                else:
                    continue
            if fn(s, None, {}) is not True:
                return False
        return True

    def action_ok(self, s: dict, n: dict) -> bool:
        for _, fn in self.action_constraints:
            if fn(s, n, {}) is not True:
                return False
        return True

    def changed_mask(self, vals: tuple, parent_vals: tuple) -> int:
        """The bit mask (bit i: variable i) of the variables whose values are not the same objects."""
        return sum(itertools.compress(self._bits, map(operator.is_not, vals, parent_vals)))

    @functools.cached_property
    def _constraint_masks(self) -> list[int | None]:
        return [None if r is None or any(v not in self._index for v in r) else
                sum(1 << self._index[v] for v in r) for r in self._constraint_reads]

    def violated_invariant(self, s: dict, parent: dict | None = None, base: tuple | None = None,
                           changed: int | None = None) -> str | None:
        """The first invariant (in cfg order) that s violates, or None. With ``parent``, a state whose
        invariants all hold and from which s was generated, a conjunct whose read variables s left
        unchanged (the same values) holds in s as in parent and is not evaluated; any other outcome
        than TRUE for the conjuncts evaluated falls back to the whole invariant, so values and errors
        are those of a full evaluation. ``base``, when given, is s's base key (``base_key``): the keys of
        the values a conjunct read are taken from it; ``changed``, the bit mask of the variables s
        changed (``changed_mask``), is computed when not given."""
        plan = None
        if parent is not None:
            plan = self._invariant_plan()
            if changed is None:
                changed = self.changed_mask(self.state_tuple(s), self.state_tuple(parent))
        for i, (name, fn) in enumerate(self.invariants):
            if plan is not None:
                parts = plan[2][i]
                if parts is not None and _holds_where_changed(parts, s, changed, base):  # type: ignore[arg-type]
                    continue
            v = fn(s, None, {})
            if v is not True:
                if v is not False:
                    raise EvalError(f"invariant {name} has the non-boolean value {fmt(v)}")
                return name
        return None

    @functools.cached_property
    def _bits(self) -> tuple[int, ...]:
        return tuple(1 << i for i in range(len(self.variables)))

    def _invariant_plan(self) -> tuple:
        """(the invariant list, its length, per invariant its conjunct plan or None: evaluated whole), made
        again when the list is replaced or grows (a PROPERTY []P appends one, evaluated whole). A conjunct's
        plan: (function, bit mask of the variables it reads or None: unknown, the names it reads, the keys
        of the values of those it held on, their positions in the base key or None)."""
        plan = self.__dict__.get("_inv_plan")
        invs = self.invariants
        if plan is not None and plan[0] is invs and plan[1] == len(invs):
            return plan
        per: list = []
        for name, fn in invs:
            parts = self.invariant_parts.get(name)
            if parts is None or parts[0] is not fn:
                per.append(None)
                continue
            conj: list[tuple] = []
            for cfn, reads in parts[1]:
                if reads is None:
                    conj.append((cfn, None, (), None, None))
                    continue
                held = self._held.get(id(cfn))  # shared by the invariants that share a conjunct
                if held is None:
                    names = sorted(reads)
                    at = [self._index[v] for v in names] if all(v in self._index for v in names) else None
                    held = self._held[id(cfn)] = (cfn, names, set(), at)  # cfn kept alive: its id stays its own
                cfn, names, seen, at = held
                mask = sum(1 << self._index[v] for v in names if v in self._index)  # others never change
                get = None if at is None else (operator.itemgetter(*at) if len(at) > 1 else
                                               (lambda b, i=at[0]: (b[i],)) if at else (lambda b: ()))
                conj.append((cfn, mask, names, seen, get))
            per.append(conj)
        plan = self.__dict__["_inv_plan"] = (invs, len(invs), per)
        return plan

    # ------------------------------------------------------------------ step API

    def check_step(self, action_name: str, state: dict, next_state: dict,
                   params: dict | None = None) -> StepVerdict:
        """Is (state, next_state) a step of the spec's action ``action_name``? With no params, every
        binding of the action's parameters over the spec's constant sets (or the \\E binding it under
        Next) is tried, and the one that works is reported."""
        b = self.root.lookup(action_name)
        if b is None or b[0] != "def":
            raise SpecError(f"{action_name} is not an action of {self.spec_path.name}")
        d: Def = b[1]
        s = {v: from_python(state[v]) for v in self.variables if v in state}
        n = {v: from_python(next_state[v]) for v in self.variables if v in next_state}
        missing = [v for v in self.variables if v not in s or v not in n]
        if missing:
            raise SpecError(f"check_step({action_name}): no value for variable(s) {', '.join(missing)}")
        loc = loc_of(d.node, d.scope.mod)
        act = self.next_comp.def_action(d)
        names = [p for p, _ in d.params]
        if params is not None:
            candidates = [{k: from_python(v) for k, v in params.items()}]
        else:
            candidates = self._param_candidates(d)
        first_fail: tuple | None = None
        for env in candidates:
            ok, why = self._try_step(act, d, s, n, env)
            if ok:
                return StepVerdict(True, action_name, {k: env[k] for k in names}, None, loc)
            if first_fail is None:
                first_fail = (env, why)
        env, why = first_fail if first_fail else ({}, "no binding of the parameters")
        return StepVerdict(False, action_name, {k: env.get(k) for k in names}, why, loc)

    def _param_candidates(self, d: Def) -> list[dict]:
        names = [p for p, _ in d.params]
        if not names:
            return [{}]
        found: list[dict] = []
        for a in self.actions:
            if a.label == d.name and set(names) <= set(a.env):
                env = {k: a.env[k] for k in names}
                if env not in found:
                    found.append(env)
        if found:
            return found
        # otherwise: every constant set, for every parameter
        pools = []
        for _c, v in self.comp.constants.items():
            if type(v) is frozenset:
                pools.append(v)
        domain = frozenset().union(*pools) if pools else frozenset()
        import itertools
        return [dict(zip(names, combo, strict=False)) for combo in itertools.product(ordered_elements(domain),
                                                                       repeat=len(names))]

    def _try_step(self, act, d: Def, s: dict, n: dict, env: dict) -> tuple[bool, str | None]:
        target = self.state_tuple(n)
        hits: list = []
        try:
            act(s, {}, env, lambda s2, n2: hits.append(dict(n2)))
        except EvalError as exc:
            return False, f"evaluation error: {exc}"
        for h in hits:
            if len(h) == len(self.variables) and self.state_tuple(h) == target and \
                    all(canon(h[v]) == canon(n[v]) for v in self.variables):
                return True, None
        return False, self._failed_conjunct(d, s, n, env)

    def _failed_conjunct(self, d: Def, s: dict, n: dict, env: dict) -> str:
        inner = d.scope.child()
        for p, ar in d.params:
            inner.names[p] = ("opparam", p, ar) if ar else ("bound", p)
        items = conj_items(d.body) or [d.body]
        for it in items:
            try:
                fn, _ = self.comp.expr(it, inner)
                v = fn(s, n, env)
            except (EvalError, SpecError) as exc:
                return f"conjunct at {loc_of(it, d.scope.mod)} could not be evaluated: {exc}"
            if v is not True:
                return f"conjunct at {loc_of(it, d.scope.mod)} is FALSE"
        return "every conjunct holds, but the step is not one the action generates"


def _holds_where_changed(parts: list, s: dict, changed: int, base: tuple | None = None) -> bool:
    """Every conjunct is TRUE in s, knowing that those reading none of the variables in the bit mask
    ``changed`` held in the parent, and that one which held in a state with the same values of the
    variables it reads holds in s (its value is a function of them: ``mask`` is None otherwise)."""
    try:
        for fn, mask, names, seen, get in parts:
            if mask is not None:
                if not mask & changed:
                    continue
                key = get(base) if base is not None and get is not None else tuple([canon(s[v]) for v in names])
                if key in seen:
                    continue
                if fn(s, None, {}) is not True:
                    return False
                if len(seen) > 100_000:
                    seen.clear()
                seen.add(key)
                continue
            if fn(s, None, {}) is not True:
                return False
    except Exception:  # the whole invariant is evaluated again and reports it as without the skip
        return False
    return True


def _standard_names() -> set:
    from kvexact.spec.checker.builtins import OPERATORS
    return set(OPERATORS)


def load_model(spec_path: str | Path, cfg_path: str | Path | None = None,
               constant_overrides: dict[str, object] | None = None,
               lib: list[str | Path] | tuple = (), lazy_actions: bool = False) -> Model:
    """Parse and compile a spec with its cfg (default: same stem .cfg); constants may be overridden with
    Python values (trace validation binds them to the finite sets seen in a trace). Modules are looked
    up beside the spec, then in ``lib`` and $KVEXACT_TLA_LIB (library.py). With ``lazy_actions`` each
    split action of Next is compiled on its first use (the step API compiles the named definition)."""
    spec_path = Path(spec_path)
    if not spec_path.exists():
        raise SpecError(f"{spec_path}: spec file not found")
    from kvexact.spec.checker.compiler import parse_file_text
    from kvexact.spec.checker.library import library_dirs
    parse_file_text(spec_path.read_text(), str(spec_path))  # a parse error outranks a cfg problem
    dirs = library_dirs(lib)
    default_cfg = cfg_path is None
    if cfg_path is None:
        cfg_path = spec_path.with_suffix(".cfg")
    cfg_path = Path(cfg_path)
    if not cfg_path.exists():
        if default_cfg and constant_overrides is not None:
            # trace validation without a cfg: INIT Init, NEXT Next, constants from the overrides
            return Model(spec_path, Config(path=str(cfg_path), init="Init", next="Next"), constant_overrides, dirs,
                         lazy_actions)
        raise ConfigError(f"{cfg_path}: cfg file not found")
    cfg = parse_cfg(cfg_path)
    return Model(spec_path, cfg, constant_overrides, dirs, lazy_actions)


_unused = (as_set,)


def evaluate(expr: str, defs: str = "",
             extends: str = "Naturals, Integers, Sequences, FiniteSets, TLC, Functions, SequencesExt",
             constants: dict[str, Any] | None = None) -> Any:
    """Evaluate a constant-level TLA+ expression (with optional extra definitions); returns the TLA+
    value (see values.py). Errors are raised as EvalError/SpecError with a location in <expr>; deep
    recursion is bounded as in a check (deepstack.py)."""
    from kvexact.spec.checker.deepstack import run_deep
    return run_deep(_evaluate, expr, defs, extends, constants)


def _evaluate(expr: str, defs: str, extends: str, constants: dict[str, Any] | None) -> Any:
    text = (f"---- MODULE Expr ----\nEXTENDS {extends}\n"
            + (f"CONSTANTS {', '.join(constants)}\n" if constants else "")
            + f"{defs}\nValue__ == {expr}\n====\n")
    comp = Compiler(Path("."), {k: from_python(v) for k, v in (constants or {}).items()})
    root = comp.load_root(Path("<expr>"), text)
    b = root.lookup("Value__")
    assert b is not None
    fn, _ = comp.def_fn(b[1])
    return fn(None, None, {})


def snake_case(action: str) -> str:
    """The reference step name of a spec action: ``CowReserve`` -> ``cow_reserve``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", action).lower()


def model_actions(model: Model) -> dict[str, tuple[str, ...]]:
    """Action name -> parameter names, for every action of a loaded model's ``Next``, in order."""
    actions: dict[str, tuple[str, ...]] = {}
    for split in model.actions:
        if split.label not in actions:
            _kind, definition = model.root.lookup(split.label)
            actions[split.label] = tuple(name for name, _arity in definition.params)
    return actions


@functools.cache
def spec_actions(spec: str) -> dict[str, tuple[str, ...]]:
    """:func:`model_actions` of the shipped ``spec`` with its CI model."""
    return model_actions(load_model(spec_dir() / f"{spec}.tla", spec_dir() / f"{spec}.cfg", lazy_actions=True))


def find_action(actions: Iterable[str], step: str) -> str | None:
    """The action named ``step``, or whose reference step is ``step``; None when there is none."""
    for action in actions:
        if step in (action, snake_case(action)):
            return action
    return None


def action_of(spec: str, step: str) -> str | None:
    """:func:`find_action` among the shipped ``spec``'s actions."""
    return find_action(spec_actions(spec), step)
