"""Partial traces: validation of a log that names actions (or events) and gives only some variables.

A partial trace is a list of :class:`Expect` steps. Each names the spec actions that may explain it (none:
a checkpoint that only internal steps reach), some of their parameters, some variables after it, and
optionally a check of ``(state, next_state)``. Validation is a constrained search over the embedded
checker's public successor API (``Model.init_states``, ``Model.actions``, ``Model.successors``): from the
initial states that agree with the given variables, it follows only successors consistent with each step,
allowing up to ``internal_max`` unlogged steps of the ``internal`` actions before it (an internal step must
leave the ``silent`` variables unchanged: a change of those would have been logged). The candidate states
are deduplicated by fingerprint (``Model.key``, or a ``view`` that the caller proves behaviour-preserving).

Invariant: the trace is accepted only when every step is explained by some candidate: then some behaviour
of the spec (with internal steps) produces exactly the logged steps. The first unexplained step is reported
with the candidates just before it and the nearest miss (the failed conjunct, or the field that differed).
Mode ``exhaustive`` keeps every explanation within the bound (complete within it); mode ``minimal`` keeps,
per candidate, only the explanations with the fewest internal steps (faster; it may reject a trace that only
a longer internal sequence explains, never accepts one that no behaviour explains).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from kvexact.spec.checker.values import canon, fmt


class PartialRejection(enum.Enum):
    """Why a partial trace was rejected."""

    NO_INITIAL_STATE = "no initial state of the spec agrees with the given variables"
    UNEXPLAINED = "no candidate state has a successor consistent with the step"
    UNKNOWN_ACTION = "the step names an action the spec does not have"
    TOO_MANY_CANDIDATES = "the candidate set outgrew its bound"
    EVENT_NOT_MAPPED = "the event mapping cannot express this event in the spec"


Check = Callable[[dict, dict], "str | None"]
MEMO_LIMIT = 200_000  # memoized explanations kept before the memo starts afresh (bounds memory)


@attrs.frozen
class Expect:
    """One logged step (values are the checker's values; see ``kvexact.spec.checker.values``)."""

    where: str  # "line 7", "event 12 (BlockStored, hash 2 of 3)"
    actions: tuple[str, ...]  # () = a checkpoint: only internal steps lead to it
    params: Mapping[str, Any] = attrs.field(factory=dict)
    state: Mapping[str, Any] = attrs.field(factory=dict)
    internal_max: int = 0
    internal: tuple[str, ...] | None = None  # None: the search's internal actions
    silent: tuple[str, ...] | None = None  # None: the search's silent variables
    check: Check | None = None
    check_key: Any = None  # a hashable name of ``check`` (steps with equal keys check the same thing)
    # True when a state reached by internal steps cannot explain the step within the given number of further
    # internal steps (it is dropped from the search: a sound lower bound, named by ``check_key`` like check)
    prune: Callable[[dict, int], bool] | None = None
    tla: str = ""  # ``check`` as a TLA+ action formula, for the generated trace spec (partial_module)
    describe: str = ""
    source: int = 0  # the line or event number the step comes from (0: its position)


class Unmapped(Exception):
    """Raised by an event mapping for an event it cannot express in the spec (``source``: the event number)."""

    def __init__(self, source: int, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.source, self.where, self.reason = source, where, reason


@attrs.frozen
class Miss:
    """Why one candidate did not explain the step: the action tried and the first thing that failed."""

    action: str
    params: dict[str, Any]
    reason: str
    rank: int  # lower is nearer: 0 a field of an enabled step differed, 1 a check failed, 2 a guard failed


@attrs.frozen
class PartialFailure:
    index: int  # the failing step's source line or event number (1-based)
    where: str
    rejection: PartialRejection
    reason: str
    candidates: tuple[dict, ...]  # the candidate states just before the step (a sample)
    num_candidates: int
    nearest: Miss | None = None

    def text(self) -> str:
        out = f"rejected at {self.where}: {self.rejection.name}: {self.reason}"
        if self.nearest is not None:
            out += (f"\n  nearest miss: {self.nearest.action}"
                    f"({', '.join(f'{k}={fmt(v)}' for k, v in self.nearest.params.items())}): {self.nearest.reason}")
        if self.candidates:
            out += f"\n  {self.num_candidates} candidate state(s) before it; the first:"
            for k, v in sorted(self.candidates[0].items()):
                out += f"\n    {k} = {fmt(v)}"
        return out


@attrs.frozen
class PartialResult:
    ok: bool
    steps: int  # steps explained
    max_candidates: int  # the largest candidate set seen
    growth: tuple[int, ...]  # candidate-set size after each step (sampled: every step)
    failure: PartialFailure | None = None

    def summary(self) -> str:
        if self.ok:
            return (f"partial trace accepted: {self.steps} steps explained; candidate states at most "
                    f"{self.max_candidates}")
        assert self.failure is not None
        return self.failure.text()


def _with_source(reason: str) -> str:
    """``reason`` with the text of the spec line it points at (``... at FILE:LINE:COL ...``)."""
    m = re.search(r"at (\S+?):(\d+):(\d+)", reason)
    if not m:
        return reason
    try:
        line = Path(m.group(1)).read_text(encoding="utf-8").splitlines()[int(m.group(2)) - 1].strip()
    except (OSError, IndexError):
        return reason
    return f"{reason}: {line}"


class Search:
    """The constrained search over one loaded :class:`~kvexact.spec.checker.model.Model`."""

    def __init__(self, model: Any, internal: Iterable[str] = (), silent: Iterable[str] = (),
                 view: Callable[[dict], Any] | None = None, mode: str = "exhaustive",
                 max_candidates: int = 100_000, prune: bool = True):
        if mode not in ("exhaustive", "minimal"):
            raise ValueError(f"mode {mode!r}: exhaustive or minimal")
        self.model = model
        self.internal = tuple(internal)
        self.silent = tuple(silent)
        self.view = view
        self.mode = mode
        self.max_candidates = max_candidates
        self.prune = prune  # False: ignore the steps' prune bounds (for comparing the search's cost)
        self.labels = {a.label for a in model.actions}
        self._memo: dict[tuple, dict] = {}
        self._splits: dict[tuple, list] = {}
        self._by_label: dict[str, list] = {}
        for a in model.actions:
            self._by_label.setdefault(a.label, []).append(a)

    def key(self, s: dict) -> Any:
        return self.view(s) if self.view is not None else self.model.key(s)

    # ---------------------------------------------------------------- matching

    def _split(self, names: tuple[str, ...], params: Mapping[str, Any]) -> list:
        """The split actions named in ``names`` whose parameter bindings agree with ``params`` (cached)."""
        key = (names, tuple(sorted((k, canon(v)) for k, v in params.items())))
        found = self._splits.get(key)
        if found is None:
            found = self._splits[key] = self._split_uncached(names, params)
        return found

    def _split_uncached(self, names: tuple[str, ...], params: Mapping[str, Any]) -> list:
        out = []
        for name in names:
            for a in self._by_label.get(name, ()):
                if all(k not in a.env or canon(a.env[k]) == canon(v) for k, v in params.items()):
                    out.append(a)
        return out

    def _given_ok(self, n: dict, given: Mapping[str, Any]) -> str | None:
        for var, want in given.items():
            if canon(n[var]) != canon(want):
                return f"variable {var} is {fmt(n[var])}, the step gives {fmt(want)}"
        return None

    def _fits(self, step: Expect, a: Any, s: dict, n: dict) -> tuple[str | None, int]:
        for k in step.params:
            if k not in a.env:
                return f"parameter {k} is not a parameter of {a.label}", 0
        why = self._given_ok(n, step.state)
        if why is not None:
            return why, 0
        if step.check is not None:
            why = step.check(s, n)
            if why is not None:
                return why, 1
        return None, 0

    def _internal_succ(self, s: dict, names: tuple[str, ...], silent: tuple[str, ...]) -> list[dict]:
        out: list[dict] = []
        for a in self._split(names, {}):
            succ: list[dict] = []
            self.model.successors(s, a, succ)
            for n in succ:
                if all(n[v] == s[v] or canon(n[v]) == canon(s[v]) for v in silent):
                    out.append(n)
        return out

    def _explain(self, s: dict, step: Expect, logged: list, out: dict) -> bool:
        found = False
        if not step.actions:
            if (step.check is None or step.check(s, s) is None) and self._given_ok(s, step.state) is None:
                out.setdefault(self.key(s), s)
                return True
            return False
        for a in logged:
            succ: list[dict] = []
            self.model.successors(s, a, succ)
            for n in succ:
                if self._fits(step, a, s, n)[0] is None:
                    out.setdefault(self.key(n), n)
                    found = True
        return found

    def step(self, candidates: dict, step: Expect) -> dict:
        """The candidates after ``step`` (empty: nothing explains it). Each candidate's explanations are
        memoized by (fingerprint, step): states with one fingerprint have the same futures."""
        logged = self._split(step.actions, step.params)
        names = self.internal if step.internal is None else step.internal
        silent = self.silent if step.silent is None else step.silent
        sig = None
        if step.check is None or step.check_key is not None:
            sig = (step.actions, tuple(sorted((k, canon(v)) for k, v in step.params.items())),
                   tuple(sorted((k, canon(v)) for k, v in step.state.items())), step.internal_max, names, silent,
                   step.check_key)
        out: dict = {}
        for k, s in candidates.items():
            memo = self._memo.get((k, sig)) if sig is not None else None
            if memo is None:
                memo = {}
                self._deepen({k: s}, step, logged, names, silent, memo, stop_early=self.mode == "minimal")
                if sig is not None:
                    if len(self._memo) >= MEMO_LIMIT:
                        self._memo.clear()
                    self._memo[(k, sig)] = memo
            out.update(memo)
        return out

    def _deepen(self, frontier: dict, step: Expect, logged: list, names: tuple[str, ...],
                silent: tuple[str, ...], out: dict, stop_early: bool) -> None:
        seen = set(frontier)
        for depth in range(step.internal_max + 1):
            hit = False
            for s in frontier.values():
                hit = self._explain(s, step, logged, out) or hit
            if (hit and stop_early) or depth == step.internal_max:
                return
            nxt: dict = {}
            left = step.internal_max - depth - 1
            for s in frontier.values():
                for n in self._internal_succ(s, names, silent):
                    k = self.key(n)
                    if k not in seen:
                        seen.add(k)
                        if not (self.prune and step.prune is not None and step.prune(n, left)):
                            nxt[k] = n
            if not nxt:
                return
            frontier = nxt

    # ---------------------------------------------------------------- diagnosis

    def nearest_miss(self, candidates: dict, step: Expect) -> Miss | None:
        """The nearest miss of ``step`` from the candidates (no internal steps): a differing field of an
        enabled step first, then a failed check, then the first false conjunct of a disabled action."""
        best: Miss | None = None
        for s in list(candidates.values())[:50]:
            if not step.actions and step.check is not None:  # a checkpoint: what its check says of a candidate
                why = step.check(s, s)
                if why is not None and best is None:
                    best = Miss("(checkpoint)", {}, why, 1)
            for a in self._split(step.actions, step.params):
                succ: list[dict] = []
                self.model.successors(s, a, succ)
                params = {k: v for k, v in a.env.items()}
                if not succ:
                    verdict = self.model.check_step(a.label, s, s, params)
                    miss = Miss(a.label, params, _with_source(verdict.failed or "disabled"), 2)
                else:
                    why, rank = self._fits(step, a, s, succ[0])
                    if why is None:
                        continue
                    miss = Miss(a.label, params, why, rank)
                if best is None or miss.rank < best.rank:
                    best = miss
        return best

    # ---------------------------------------------------------------- driver

    def run(self, steps: Iterable[Expect], given_init: Mapping[str, Any] | None = None) -> PartialResult:
        init: dict = {}

        def emit(s: dict) -> None:
            if self._given_ok(s, given_init or {}) is None:
                init.setdefault(self.key(s), s)

        self.model.init_states(emit)
        if not init:
            return PartialResult(False, 0, 0, (), PartialFailure(
                0, "the initial state", PartialRejection.NO_INITIAL_STATE,
                "no initial state agrees with the given variables", (), 0))
        candidates: dict = init
        growth: list[int] = []
        count = 0
        it = iter(steps)
        while True:
            try:
                st = next(it)
            except StopIteration:
                break
            except Unmapped as exc:
                st = Expect(exc.where, (), source=exc.source)
                return self._fail(count + 1, st, PartialRejection.EVENT_NOT_MAPPED, exc.reason, candidates, growth)
            count += 1
            unknown = [a for a in st.actions if a not in self.labels]
            if unknown:
                return self._fail(count, st, PartialRejection.UNKNOWN_ACTION,
                                  f"{', '.join(unknown)} is not an action of the spec", candidates, growth)
            after = self.step(candidates, st)
            if not after:
                why = ("no candidate state, with up to "
                       f"{st.internal_max} internal step(s), has a successor consistent with it")
                return self._fail(count, st, PartialRejection.UNEXPLAINED, why, candidates, growth,
                                  self.nearest_miss(candidates, st))
            if len(after) > self.max_candidates:
                return self._fail(count, st, PartialRejection.TOO_MANY_CANDIDATES,
                                  f"{len(after)} candidate states > {self.max_candidates}", candidates, growth)
            candidates = after
            growth.append(len(after))
        return PartialResult(True, count, max(growth, default=len(init)), tuple(growth))

    def _fail(self, count: int, st: Expect, rejection: PartialRejection, reason: str, candidates: dict,
              growth: list[int], nearest: Miss | None = None) -> PartialResult:
        where = st.where + (f" ({st.describe})" if st.describe else "")
        sample = tuple(list(candidates.values())[:3])
        return PartialResult(False, count - 1, max(growth, default=len(candidates)), tuple(growth),
                             PartialFailure(st.source or count, where, rejection, reason, sample,
                                            len(candidates), nearest))
