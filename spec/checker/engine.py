"""Breadth-first model checking with TLC's counts, and random-walk simulation.

Counting invariant (docs/checker.md, "Counting rules"): "generated" counts every initial state and every
successor of every dequeued state (duplicates and out-of-constraint states included); "distinct" is the
number of fingerprints inserted (only states that satisfy the CONSTRAINTs); invariants are checked on
every new state and on every out-of-constraint state; depth counts Init as 1. A run stopped by
--max-states, --max-depth or Ctrl-C is reported with complete=False, never as success.
"""

from __future__ import annotations

import gc
import random
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kvexact.spec.checker.builtins import TLC_CONTEXT
from kvexact.spec.checker.cfg import ConfigError
from kvexact.spec.checker.deepstack import run_deep
from kvexact.spec.checker.errors import SpecError
from kvexact.spec.checker.liveness import StateGraph, check_temporal
from kvexact.spec.checker.model import Model, load_model
from kvexact.spec.checker.result import ModelCheckResult, Outcome, TraceState, Violation
from kvexact.spec.checker.temporal import plan_properties
from kvexact.spec.checker.values import EvalError


class _Stop(Exception):
    pass


PARALLEL_MIN_BATCH = 2000
PROGRESS_EVERY_S = 2.0
GC_YOUNG_THRESHOLD = 50_000
GC_LEAK_PER_STATE = 2  # unreachable objects per added state above which the collector runs (see run)
_WORKER_MODEL: Model | None = None
_WORKER_SEEN: dict | None = None


def _work(batch: list[tuple]) -> list | tuple:
    """Worker (forked at the start of a BFS level): for each state, its successors as
    (action index, values, fingerprint, in model, invariants hold: True / False / None = not checked
    because the state was already known when the level started)."""
    m = _WORKER_MODEL
    seen = _WORKER_SEEN
    assert m is not None and seen is not None
    res: list = []
    extras: list[int] = []  # per state, the intermediate states of \cdot (counted as generated)
    composes = m.comp.composed is not None
    for pos, vals in enumerate(batch):
        s = m.state_dict(vals)
        succ: list = []
        if composes:
            m.take_intermediates()
        try:
            for ai, a in enumerate(m.actions):
                out: list = []
                m.successors(s, a, out)
                for n in out:
                    key = m.key(n)
                    inside = m.in_model(n) and (not m.action_constraints or m.action_ok(s, n))
                    if inside and key in seen:  # known when the level started: only the count matters
                        succ.append((ai, None, key, True, None))
                        continue
                    try:
                        ok = m.violated_invariant(n, s) is None
                    except EvalError:
                        ok = False
                    succ.append((ai, None if (ok and not inside) else m.state_tuple(n), key, inside, ok))
        except EvalError as exc:
            return (pos, str(exc), bool(getattr(exc, "assert_failed", False)))
        res.append(succ)
        if composes:
            extras.append(m.take_intermediates())
    if composes:
        res.append(extras)
    return res


def _ignore_sigint() -> None:
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is handled by the parent, which stops the pool


def _start_pool(model: Model, workers: int, seen: dict):
    import multiprocessing

    global _WORKER_MODEL, _WORKER_SEEN
    _WORKER_MODEL = model
    _WORKER_SEEN = seen
    return multiprocessing.get_context("fork").Pool(workers, initializer=_ignore_sigint)


class _Found(Exception):
    def __init__(self, violation: Violation):
        self.violation = violation


def _error_result(exc: Exception, started: float, messages: tuple = ()) -> ModelCheckResult:
    if isinstance(exc, ConfigError):
        outcome, kind = Outcome.CONFIG, "config"
    elif isinstance(exc, SpecError):
        outcome = Outcome.PARSE if exc.outcome == "parse" else Outcome.EVALUATION
        kind = "parse" if exc.outcome == "parse" else type(exc).__name__.replace("Error", "").lower() or "error"
        if type(exc).__name__ == "UnsupportedError":
            kind = "unsupported"
        elif type(exc).__name__ == "UndefinedError":
            kind = "undefined"
    else:
        outcome, kind = Outcome.EVALUATION, "evaluation"
    return ModelCheckResult(engine="embedded", outcome=outcome, seconds=time.monotonic() - started,
                            violation=Violation(kind=kind, name=type(exc).__name__, message=str(exc)),
                            messages=messages)


class Checker:
    def __init__(self, model: Model, *, max_states: int | None = None, max_depth: int | None = None,
                 coverage: bool = True, progress: Callable[[dict], None] | None = None,
                 progress_every_s: float | None = None, workers: int = 1, plan: Any = None):
        self.m = model
        self.max_states = max_states
        self.max_depth = max_depth
        self.coverage_on = coverage
        self.progress = progress
        self.progress_every_s = PROGRESS_EVERY_S if progress_every_s is None else progress_every_s
        self.generated = 0
        self.seen: dict[Any, int] = {}
        self.store: list[tuple[tuple, int, int]] = []  # (values, parent index, action index) ; -1 = init
        TLC_CONTEXT.update(engine=self, at=-1)  # TLCExt's Trace reads the behaviour ending at store[at]
        self.depths: list[int] = []
        self.queue: deque[int] = deque()
        self.fired = [0] * len(model.actions)
        self.new = [0] * len(model.actions)
        self.complete = True
        self.max_level = 0
        self.workers = workers
        self.pending = 0  # states of the current BFS level not yet expanded
        # PROPERTY hooks (issue 17, temporal.py / liveness.py): implied inits and actions are checked
        # during the search as TLC does; the state graph is recorded only when a temporal property needs it
        self.implied_inits = plan.implied_inits if plan is not None else []
        self.implied_actions = plan.implied_actions if plan is not None else []
        self.graph: StateGraph | None = StateGraph() if plan is not None and plan.needs_graph else None
        self._last = -1  # store index of the successor last handled by _add/_add_pre (-1: outside the model)
        self._parent_state: dict | None = None  # the state whose successors are being added
        # Without a VIEW, a state's key is made from its per-variable canon keys (its base key), which
        # each stored state keeps (None: not known, computed when the state is expanded): a successor
        # takes its parent's key for every variable it left as the same object
        self._by_var = model.view is None
        self.bases: list[tuple | None] = []
        self._parent_base: tuple | None = None
        self._parent_vals: tuple | None = None  # the values of _parent_state, in variable order

    # -------------------------------------------------------------- traces

    def behaviour(self, idx: int) -> list[dict]:
        """The states from an initial state to store[idx] (TLCExt's Trace); empty for idx < 0."""
        chain = []
        while idx >= 0:
            vals, idx, _ = self.store[idx]
            chain.append(self.m.state_dict(vals))
        return chain[::-1]

    def trace(self, idx: int, extra: tuple[dict, int] | None = None) -> tuple[TraceState, ...]:
        chain = []
        i = idx
        while i >= 0:
            vals, parent, act = self.store[i]
            chain.append((vals, act))
            i = parent
        chain.reverse()
        out = []
        for j, (vals, act) in enumerate(chain):
            out.append(self._trace_state(j + 1, self.m.state_dict(vals), act))
        if extra is not None:
            s = self.m.state_dict(self.m.state_tuple(extra[0]))
            out.append(self._trace_state(len(out) + 1, s, extra[1]))
        return tuple(out)

    def _trace_state(self, index: int, s: dict, act: int) -> TraceState:
        if act < 0:
            init_loc = self.m.init_parts[0]
            from kvexact.spec.checker.compiler import tlc_loc
            return TraceState(index, "Initial predicate", tlc_loc(init_loc[0], init_loc[1].mod), dict(s))
        a = self.m.actions[act]
        return TraceState(index, a.label + _params_text(a.env), a.location, dict(s))

    # -------------------------------------------------------------- search

    def _check_new(self, s: dict, parent: int, act: int, base: tuple | None = None,
                   changed: int | None = None) -> None:
        try:  # the expanded parent satisfies every invariant: conjuncts on unchanged variables hold
            name = self.m.violated_invariant(s, self._parent_state if parent >= 0 else None, base, changed)
        except EvalError as exc:
            tr = (self._trace_state(1, m_state(self.m, s), -1),) if parent < 0 else self.trace(parent, (s, act))
            raise _Found(Violation("evaluation", "EvalError", f"while checking invariants: {exc}", tr)) from None
        if name is not None:
            if parent < 0:
                tr = (self._trace_state(1, m_state(self.m, s), -1),)
                raise _Found(Violation("invariant", name, f"Invariant {name} is violated by the initial state",
                                       tr))
            tr = self.trace(parent, (s, act))
            raise _Found(Violation("invariant", name, f"Invariant {name} is violated.", tr))
        if parent < 0:
            for pname, fn in self.implied_inits:  # PROPERTY conjuncts that are state predicates
                if fn(s, None, {}) is not True:
                    tr = (self._trace_state(1, m_state(self.m, s), -1),)
                    raise _Found(Violation("property-init", pname,
                                           f"Property {pname} is violated by the initial state", tr))

    def _check_implied(self, parent: int, s: dict, n: dict, act: int) -> None:
        """PROPERTY [][A]_v: every generated transition (seen, new or outside the model), as TLC."""
        for name, fn in self.implied_actions:
            try:
                ok = fn(s, n, {})
            except EvalError as exc:
                raise _Found(Violation("evaluation", "EvalError", f"while checking the action property {name}: "
                                       f"{exc}", self.trace(parent, (n, act)))) from None
            if ok is not True:
                raise _Found(Violation("action-property", name, f"Action property {name} is violated.",
                                       self.trace(parent, (n, act))))

    def _add(self, s: dict, parent: int, act: int, depth: int) -> bool:
        """Insert a generated state if it is in the model and new; check invariants as TLC does."""
        m = self.m
        vals = m.state_tuple(s)
        changed = m.changed_mask(vals, self._parent_vals) if parent >= 0 and self._parent_vals is not None else None
        if (m.constraints and not m.in_model(s, self._parent_state if parent >= 0 else None, changed)) or (
                parent >= 0 and m.action_constraints and not m.action_ok(self._parent_state, s)):
            self._check_new(s, parent, act, None, changed)
            self._last = -1
            return False
        if self._by_var:
            if parent >= 0:
                base = m.base_key_from(vals, self._parent_vals, self._parent_base)  # type: ignore[arg-type]
            else:
                base = m.base_key(s)
            k = base if m.symmetry is None else m.symmetry.key(base)
        else:
            base = None
            k = m.key(s)
        hit = self.seen.get(k)  # one lookup: hashing a key walks the whole state
        if hit is not None:
            self._last = hit
            return False
        idx = self._last = len(self.store)  # inserted before the invariant check, as TLC counts it
        self.seen[k] = idx
        self.store.append((vals, parent, act))
        self.bases.append(base)
        self.depths.append(depth)
        if depth > self.max_level:
            self.max_level = depth
        TLC_CONTEXT["level"] = depth
        TLC_CONTEXT["at"] = idx
        self._check_new(s, parent, act, base if m.symmetry is None else None, changed)
        self.queue.append(idx)
        if self.max_states is not None and len(self.store) >= self.max_states:
            self.complete = False
            raise _Stop()
        return True

    def _add_pre(self, vals: tuple, key: Any, inside: bool, ok: bool | None, parent: int, act: int,
                 depth: int) -> bool:
        """_add for a successor whose fingerprint, constraints and invariants a worker computed."""
        if not inside:
            if ok is False:
                self._check_new(self.m.state_dict(vals), parent, act)  # raises with the trace
            self._last = -1
            return False
        hit = self.seen.get(key)
        if hit is not None:
            self._last = hit
            return False
        idx = self._last = len(self.store)
        self.seen[key] = idx
        self.store.append((vals, parent, act))
        self.bases.append(key if self._by_var and self.m.symmetry is None else None)
        self.depths.append(depth)
        if depth > self.max_level:
            self.max_level = depth
        if ok is not True:
            self._check_new(self.m.state_dict(vals), parent, act)
        self.queue.append(idx)
        if self.max_states is not None and len(self.store) >= self.max_states:
            self.complete = False
            raise _Stop()
        return True

    def _expand_inline(self, batch: list[int]):
        """Successors of each state of the batch: yields (idx, [(action index, successor dict)...])."""
        m = self.m
        ctx = TLC_CONTEXT
        composes = m.comp.composed is not None
        for idx in batch:
            self._cur = idx
            ctx["level"] = self.depths[idx]  # TLCGet("level") while the state's actions are evaluated
            ctx["at"] = idx
            vals = self._parent_vals = self.store[idx][0]
            s = self._parent_state = m.state_dict(vals)
            if self._by_var:
                pb = self.bases[idx]
                self._parent_base = pb if pb is not None else m.base_key(s)
            if composes:
                m.take_intermediates()  # what an ENABLED or a property evaluated meanwhile is not counted
            try:
                succ = [(ai, n, None, None, None) for ai, n in m.expand(s)]
            except EvalError as exc:  # what the completed actions generated counts, as in TLC, then the error
                partial = getattr(exc, "partial", None)
                if partial:
                    yield idx, [(ai, n, None, None, None) for ai, n in partial]
                raise
            if composes:
                self.generated += m.take_intermediates()
            yield idx, succ

    def _expand_parallel(self, batch: list[int], pool):
        chunk = max(64, len(batch) // (8 * self.workers))
        pieces = [batch[i:i + chunk] for i in range(0, len(batch), chunk)]
        payload = [[self.store[i][0] for i in p] for p in pieces]
        for piece, res in zip(pieces, pool.imap(_work, payload), strict=True):
            if isinstance(res, tuple):  # (position, message, assert?): an evaluation error in a worker
                pos, msg, is_assert = res
                self._cur = piece[pos]
                exc = EvalError(msg)
                exc.assert_failed = is_assert  # type: ignore[attr-defined]
                raise exc
            extras = res.pop() if self.m.comp.composed is not None else None  # see _work
            for j, (idx, succ) in enumerate(zip(piece, res, strict=True)):
                self._parent_vals = self.store[idx][0]
                self._parent_state = self.m.state_dict(self._parent_vals)
                if extras is not None:
                    self.generated += extras[j]
                yield idx, succ

    def run(self) -> tuple[Violation | None, str]:
        m = self.m
        last = time.monotonic()
        started = last
        self._cur = -1
        pool = None
        # The states found so far live until the run ends. The cyclic collector is switched off during the
        # search (its passes over the stored states took 10-25% of it: KVAllocation deep, MCLamportMutex)
        # and what each level made is frozen when the next one starts, so a collection never scans it
        # again. Evaluation makes few reference cycles, but a spec could make many: the objects of the
        # levels numbered 1, 2, 4, 8, ... are collected before they are frozen, and when such a pass
        # finds more than GC_LEAK_PER_STATE unreachable objects per state added, the collector is
        # switched back on (with its youngest generation collected every 50,000 allocations) for the rest.
        # What exists when the search starts is frozen without a collection pass (a pass over the loaded
        # model took 1-3% of a short search); its garbage is freed after the run, once unfrozen.
        gc.freeze()
        thresholds = gc.get_threshold()
        was_enabled = gc.isenabled()
        gc.disable()
        level_no = 0
        level_start = 0
        try:
            def emit(s):
                self.generated += 1
                self._add(s, -1, -1, 1)
            m.init_states(emit)
            while self.queue:
                batch = list(self.queue)
                self.queue.clear()
                level_no += 1
                if level_no & (level_no - 1) == 0 and not gc.isenabled() and was_enabled:
                    added = max(1, len(self.store) - level_start)
                    if gc.collect() > GC_LEAK_PER_STATE * added:
                        gc.set_threshold(max(thresholds[0], GC_YOUNG_THRESHOLD), *thresholds[1:])
                        gc.enable()
                level_start = len(self.store)
                gc.freeze()
                if self.max_depth is not None and self.depths[batch[0]] >= self.max_depth:
                    self.complete = False
                    self.queue.extend(batch)
                    return None, f"stopped at --max-depth {self.max_depth}"
                self.pending = len(batch)
                if pool is not None:
                    pool.terminate()
                    pool = None
                if self.workers > 1 and len(batch) >= PARALLEL_MIN_BATCH:
                    pool = _start_pool(m, self.workers, self.seen)  # forked now: sees the states known so far
                    results = self._expand_parallel(batch, pool)
                else:
                    results = self._expand_inline(batch)
                for pos, (idx, succ) in enumerate(results):
                    self._cur = idx
                    self.pending = len(batch) - pos - 1
                    depth = self.depths[idx]
                    if not succ and m.cfg.check_deadlock:
                        return Violation("deadlock", "Deadlock", "Deadlock reached.", self.trace(idx)), ""
                    self.generated += len(succ)
                    graph, implied = self.graph, self.implied_actions
                    if graph is not None:
                        graph.row(idx)
                    cur = m.state_dict(self.store[idx][0]) if implied else None
                    done = 0
                    try:
                        for ai, n, key, inside, ok in succ:
                            done += 1
                            self.fired[ai] += 1
                            added = (self._add(n, idx, ai, depth + 1) if key is None
                                     else self._add_pre(n, key, inside, ok, idx, ai, depth + 1))
                            if added:
                                self.new[ai] += 1
                            if implied:
                                self._check_implied(idx, cur, n, ai)  # type: ignore[arg-type]
                            if graph is not None:
                                graph.add(self._last)
                    except _Found:  # TLC stops at the violating successor: the later ones were not generated
                        self.generated -= len(succ) - done
                        raise
                    if self.progress is not None and pos % 256 == 0:
                        now = time.monotonic()
                        if now - last >= self.progress_every_s:
                            last = now
                            self.progress({"generated": self.generated, "distinct": len(self.store),
                                           "queue": len(self.queue) + len(batch) - pos - 1,
                                           "depth": self.max_level,
                                           "states_per_s": self.generated / max(now - started, 1e-9)})
        except _Found as f:
            return f.violation, ""
        except _Stop:
            return None, f"stopped at --max-states {self.max_states}"
        except KeyboardInterrupt:
            self.complete = False
            return None, "interrupted (Ctrl-C)"
        except EvalError as exc:
            tr = self.trace(self._cur) if self._cur >= 0 else ()
            if getattr(exc, "assert_failed", False):
                return Violation("assert", "Assert", str(exc), tr), ""
            return Violation("evaluation", "EvalError", str(exc), tr), ""
        except (RecursionError, TypeError, ValueError, IndexError, KeyError, AttributeError) as exc:
            tr = self.trace(self._cur) if self._cur >= 0 else ()
            return Violation("evaluation", type(exc).__name__,
                             f"evaluation failed ({type(exc).__name__}: {exc})", tr), ""
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            if was_enabled:
                gc.enable()
            if pool is not None:
                pool.terminate()
        return None, ""

    def lasso_trace(self, states: list[int]) -> tuple[TraceState, ...]:
        """The states of a liveness counterexample, each labelled with an action that takes the previous
        one to it (the first is initial)."""
        m = self.m
        out = []
        prev: dict | None = None
        for i, idx in enumerate(states):
            s = m.state_dict(self.store[idx][0])
            act = -1
            if prev is not None:
                key = m.key(s)
                for ai, a in enumerate(m.actions):
                    found: list = []
                    m.successors(prev, a, found)
                    if any(m.key(n) == key for n in found):
                        act = ai
                        break
            out.append(self._trace_state(i + 1, s, act))
            prev = s
        return tuple(out)

    def coverage(self) -> dict[str, dict[str, int]]:
        cov: dict[str, dict[str, int]] = {}
        for a, f, nw in zip(self.m.actions, self.fired, self.new, strict=False):
            key = a.label + _params_text(a.env)
            c = cov.setdefault(key, {"fired": 0, "new": 0})
            c["fired"] += f
            c["new"] += nw
        return cov


def m_state(m: Model, s: dict) -> dict:
    """The state dict in the spec's variable order (for printing)."""
    return m.state_dict(m.state_tuple(s))


def _params_text(env: dict) -> str:
    if not env:
        return ""
    from kvexact.spec.checker.values import fmt
    return "(" + ", ".join(f"{k}={fmt(v)}" for k, v in env.items()) + ")"


def check_loaded(model: Model, *, max_states=None, max_depth=None, coverage=True, progress=None,
                 workers: int = 1) -> ModelCheckResult:
    started = time.monotonic()
    messages = tuple(model.messages)
    if model.failed_assumption:
        return ModelCheckResult(engine="embedded", outcome=Outcome.ASSUMPTION, seconds=time.monotonic() - started,
                                violation=Violation("assumption", "Assumption", model.failed_assumption),
                                messages=messages)
    try:
        plan = plan_properties(model)  # PROPERTY: every conjunct is checked, or this is an error
    except SpecError as exc:
        return _error_result(exc, started, messages)
    if (plan.needs_graph or plan.implied_actions) and workers > 1:
        workers = 1
        messages += ("temporal and action properties are checked with one worker",)
    if plan.needs_graph and (model.symmetry_perms or model.view is not None):
        messages += ("SYMMETRY or VIEW with temporal properties: as in TLC, a violation can be missed",)
    ch = Checker(model, max_states=max_states, max_depth=max_depth, coverage=coverage, progress=progress,
                 workers=workers, plan=plan)
    violation, note = ch.run()
    if note:
        messages = messages + (note,)
        if plan.needs_graph:
            messages += ("temporal properties are checked only on a complete search: not checked",)
    elif violation is None and ch.graph is not None:
        ch.graph.close(len(ch.store))
        violation = check_temporal(model, plan, ch.store, ch.graph, label=ch.lasso_trace)
    outcome = Outcome.SUCCESS
    if violation is not None:
        outcome = {"deadlock": Outcome.DEADLOCK, "invariant": Outcome.SAFETY, "assert": Outcome.ASSERT,
                   "temporal": Outcome.LIVENESS, "action-property": Outcome.LIVENESS,
                   "property-init": Outcome.LIVENESS}.get(violation.kind, Outcome.EVALUATION)
    complete = ch.complete and violation is None and not note
    return ModelCheckResult(
        engine="embedded", outcome=outcome, generated_states=ch.generated, distinct_states=len(ch.store),
        depth=ch.max_level, left_on_queue=len(ch.queue) + ch.pending, seconds=time.monotonic() - started,
        complete=complete if violation is None else True, violation=violation,
        coverage=ch.coverage() if coverage else {}, messages=messages)


def check_model(spec_path, cfg_path=None, *, workers=1, max_states=None, max_depth=None, coverage=True,
                progress=None, lib: list | tuple = ()) -> ModelCheckResult:
    """Model-check a spec with the embedded engine; every failure is a result, never an exception. Runs
    with a deep stack: recursion is bounded by deepstack.max_recursion(), not by Python's limit."""
    return run_deep(_check_model, spec_path, cfg_path, workers=workers, max_states=max_states,
                    max_depth=max_depth, coverage=coverage, progress=progress, lib=lib)


def _check_model(spec_path, cfg_path=None, *, workers=1, max_states=None, max_depth=None, coverage=True,
                 progress=None, lib: list | tuple = ()) -> ModelCheckResult:
    started = time.monotonic()
    try:
        model = load_model(Path(spec_path), cfg_path, lib=lib)
    except (SpecError, ConfigError, EvalError) as exc:
        return _error_result(exc, started)
    except RecursionError:
        return _error_result(EvalError("recursion too deep while loading the spec"), started)
    except Exception as exc:  # a defect of this engine: reported in one line, not as a traceback
        return _error_result(EvalError(f"internal error while loading the spec ({type(exc).__name__}: {exc})"),
                             started)
    try:
        return check_loaded(model, max_states=max_states, max_depth=max_depth, coverage=coverage,
                            progress=progress, workers=workers)
    except (SpecError, ConfigError) as exc:
        return _error_result(exc, started, tuple(model.messages))


def simulate(spec_path, cfg_path=None, *, depth: int = 100, num: int = 10, seed: int = 0,
             lib: list | tuple = ()) -> ModelCheckResult:
    """Random walks of at most ``depth`` states from random initial states, checking invariants."""
    started = time.monotonic()
    try:
        model = load_model(Path(spec_path), cfg_path, lib=lib)
    except (SpecError, ConfigError, EvalError) as exc:
        return _error_result(exc, started)
    if model.cfg.properties:  # a random walk proves nothing about a PROPERTY: never a silent pass
        from kvexact.spec.checker.errors import UnsupportedError
        return _error_result(UnsupportedError(f"PROPERTY {', '.join(model.cfg.properties)} cannot be checked "
                                              f"by random simulation; run an exhaustive check"), started)
    rng = random.Random(seed)
    inits: list = []
    generated = 0
    try:
        model.init_states(inits.append)
        generated += len(inits)
        for _ in range(num):
            s = rng.choice(inits)
            trace = [TraceState(1, "Initial predicate", "", dict(s))]
            name = model.violated_invariant(s)
            for step in range(1, depth):
                if name is not None:
                    break
                options: list = []
                for ai, a in enumerate(model.actions):
                    out: list = []
                    model.successors(s, a, out)
                    options += [(ai, n) for n in out]
                generated += len(options) + model.take_intermediates()
                if not options:
                    if model.cfg.check_deadlock:
                        return ModelCheckResult(engine="embedded", outcome=Outcome.DEADLOCK,
                                                generated_states=generated, seconds=time.monotonic() - started,
                                                violation=Violation("deadlock", "Deadlock", "Deadlock reached.",
                                                                    tuple(trace)), complete=False)
                    break
                ai, s = rng.choice(options)
                a = model.actions[ai]
                trace.append(TraceState(step + 1, a.label + _params_text(a.env), a.location, dict(s)))
                if not model.in_model(s):
                    break
                name = model.violated_invariant(s)
            if name is not None:
                return ModelCheckResult(engine="embedded", outcome=Outcome.SAFETY, generated_states=generated,
                                        seconds=time.monotonic() - started, complete=False,
                                        violation=Violation("invariant", name, f"Invariant {name} is violated.",
                                                            tuple(trace)))
    except EvalError as exc:
        return ModelCheckResult(engine="embedded", outcome=Outcome.EVALUATION, generated_states=generated,
                                seconds=time.monotonic() - started,
                                violation=Violation("evaluation", "EvalError", str(exc)))
    return ModelCheckResult(engine="embedded", outcome=Outcome.SUCCESS, generated_states=generated,
                            seconds=time.monotonic() - started, complete=False,
                            messages=tuple(model.messages) + (f"simulation: {num} walks of depth <= {depth}, "
                                                              f"seed {seed}; not exhaustive",))
