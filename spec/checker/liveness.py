"""Liveness: search the reachable state graph for a fair behaviour that violates a temporal property,
the way TLC does (behaviour graph = states x tableau of the negated property, checked SCC by SCC).

Method (docs/checker.md, "Temporal properties and liveness"): a property P is violated iff some behaviour of the spec satisfies
``Fairness /\\ ~P``. That formula, in negation normal form, is split into *conditions* -- conjuncts of
the shape ``[]<>X \\/ ... \\/ <>[]Y \\/ ...`` with X, Y non-temporal (every WF_v(A) and SF_v(A) has it) --
and the rest, whose tableau (tableau.py) is multiplied with the state graph. Every state has a
stuttering step to itself, as in TLC. A behaviour exists iff a strongly connected component C reachable
in the product visits every acceptance set of the tableau and meets every condition: some edge of C
satisfies one of its ``[]<>X``, or every edge of C satisfies one of its ``<>[]Y``; when neither holds,
C is cut down to the edges that satisfy Y and searched again (the Streett recursion, which SF needs).
Invariant: :func:`check_temporal` returns a violation only with a lasso (prefix, cycle) whose cycle
meets all of this, and None only after every reachable component was checked.
"""

from __future__ import annotations

from array import array
from collections import defaultdict, deque
from typing import Any

import attrs

from kvexact.spec.checker.result import TraceState, Violation
from kvexact.spec.checker.tableau import Tableau, build
from kvexact.spec.checker.temporal import PropertyPlan
from kvexact.spec.checker.values import EvalError


class StateGraph:
    """Successors of every reachable state, recorded by the BFS only when a temporal property needs
    them: one 8-byte entry per distinct edge and per state (offsets/targets); stuttering is implicit."""

    def __init__(self) -> None:
        self.offsets = array("q", [0])
        self.targets = array("q")
        self._row: set[int] = set()

    def row(self, idx: int) -> None:
        """The successors of state ``idx`` follow (states are expanded in index order)."""
        while len(self.offsets) <= idx:
            self.offsets.append(len(self.targets))
        self._row = set()

    def add(self, target: int) -> None:
        if target >= 0 and target not in self._row:
            self._row.add(target)
            self.targets.append(target)

    def close(self, states: int) -> None:
        while len(self.offsets) <= states:
            self.offsets.append(len(self.targets))

    def successors(self, s: int) -> list[int]:
        out = list(self.targets[self.offsets[s]:self.offsets[s + 1]])
        if s not in out:
            out.append(s)  # the stuttering step
        return out

    def nbytes(self) -> int:
        return self.offsets.itemsize * len(self.offsets) + self.targets.itemsize * len(self.targets)


@attrs.define
class Condition:
    """``[]<>ae[0] \\/ ... \\/ <>[]ea[0] \\/ ...``: some edge of the cycle satisfies an ``ae`` predicate,
    or every edge satisfies one ``ea`` predicate (state predicates are read at the edge's source)."""

    ae: list
    ea: list


def negate(f: tuple) -> tuple:
    tag = f[0]
    if tag == "lit":
        return ("lit", f[1], not f[2])
    if tag in ("and", "or"):
        return ("or" if tag == "and" else "and", tuple(negate(x) for x in f[1]))
    return ("dia" if tag == "box" else "box", negate(f[1]))


def conjuncts(f: tuple) -> list[tuple]:
    if f[0] == "and":
        return [y for x in f[1] for y in conjuncts(x)]
    return [f]


def _flat(f: tuple) -> bool:
    return f[0] == "lit" or (f[0] in ("and", "or") and all(_flat(x) for x in f[1]))


def as_condition(f: tuple) -> Condition | None:
    items = f[1] if f[0] == "or" else (f,)
    ae, ea = [], []
    for it in items:
        if it[0] == "box" and it[1][0] == "dia" and _flat(it[1][1]):
            ae.append(it[1][1])
        elif it[0] == "dia" and it[1][0] == "box" and _flat(it[1][1]):
            ea.append(it[1][1])
        else:
            return None
    return Condition(ae, ea) if items else None


class LeafValues:
    """The value of every leaf on the states and steps of the graph, computed at most once and shared
    by every property checked: one byte per state (and per stuttering step) for each leaf, and a dict
    entry per other step an action leaf is asked about."""

    def __init__(self, model: Any, store: list, leaves: list):
        self.m = model
        self.store = store
        self.leaves = leaves
        n = self.n = len(store)
        self.state_memo = {i: bytearray(n) for i, lf in enumerate(leaves) if not lf.action}
        self.stutter_memo = {i: bytearray(n) for i, lf in enumerate(leaves) if lf.action}
        self.action_memo: dict[int, dict[int, bool]] = defaultdict(dict)

    def _state(self, i: int) -> dict:
        return self.m.state_dict(self.store[i][0])

    def value(self, leaf: int, s: int, t: int) -> bool:
        lf = self.leaves[leaf]
        if not lf.action or s == t:
            memo = self.state_memo[leaf] if not lf.action else self.stutter_memo[leaf]
            v = memo[s]
            if v == 0:
                st = self._state(s)
                v = memo[s] = 2 if lf.holds(st, st if lf.action else None) else 1
            return v == 2
        am = self.action_memo[leaf]
        key = s * self.n + t
        r = am.get(key)
        if r is None:
            r = am[key] = lf.holds(self._state(s), self._state(t))
        return r

    def nbytes(self) -> int:
        return sum(len(b) for b in (*self.state_memo.values(), *self.stutter_memo.values()))


class _Search:
    """The product of the state graph with one tableau, and the fair-SCC search over it."""

    def __init__(self, values: LeafValues, graph: StateGraph, tab: Tableau, conds: list[Condition]):
        self.store = values.store
        self.graph = graph
        self.tab = tab
        self.conds = conds
        self.T = tab.size
        self.n = values.n
        self.value = values.value
        leaves = values.leaves
        self.state_lits = [[lit for lit in nd[0] if not leaves[lit[0]].action] for nd in tab.nodes]
        self.action_lits = [[lit for lit in nd[0] if leaves[lit[0]].action] for nd in tab.nodes]
        self.ok = bytearray(self.n * self.T)  # node_ok per product node: 0 not yet known, 1 no, 2 yes
        if tab.size == 1 and not tab.nodes[0][0] and tab.succ[0] == [0]:  # no tableau: the graph itself
            self.succ = graph.successors  # type: ignore[method-assign,assignment]

    # ------------------------------------------------------------ predicates

    def ev(self, x: tuple, s: int, t: int) -> bool:
        tag = x[0]
        if tag == "lit":
            return self.value(x[1], s, t) == x[2]
        if tag == "and":
            return all(self.ev(y, s, t) for y in x[1])
        return any(self.ev(y, s, t) for y in x[1])

    def node_ok(self, j: int, s: int) -> bool:
        """Whether state s satisfies the state literals of tableau node j (remembered per node)."""
        lits = self.state_lits[j]
        if not lits:
            return True
        i = s * self.T + j
        v = self.ok[i]
        if v == 0:
            v = self.ok[i] = 2 if all(self.value(leaf, s, s) == pos for leaf, pos in lits) else 1
        return v == 2

    # ------------------------------------------------------------ the product graph

    def succ(self, p: int) -> list[int]:
        s, j = divmod(p, self.T)
        alits = self.action_lits[j]
        out = []
        for t in self.graph.successors(s):
            if alits and not all(self.value(leaf, s, t) == pos for leaf, pos in alits):
                continue
            for j2 in self.tab.succ[j]:
                if self.node_ok(j2, t):
                    out.append(t * self.T + j2)
        return out

    def roots(self) -> list[int]:
        out: list[int] = []
        for i, entry in enumerate(self.store):
            if entry[1] < 0:
                out.extend(i * self.T + j for j in self.tab.init if self.node_ok(j, i))
        return out

    def inner(self, p: int, members: set, restr: tuple) -> list[int]:
        """Successors of p inside ``members`` along edges that satisfy every predicate of ``restr``."""
        s = p // self.T
        return [q for q in self.succ(p) if q in members and all(self.ev(x, s, q // self.T) for x in restr)]

    # ------------------------------------------------------------ components

    def components(self, roots: list[int], succ, dense: bool):
        """Tarjan's strongly connected components, iteratively, in reverse topological order."""
        size = self.n * self.T
        if dense:
            index: Any = array("q", [-1]) * size
            low: Any = array("q", [-1]) * size
            onstack: Any = bytearray(size)
        else:
            index, low, onstack = defaultdict(lambda: -1), defaultdict(lambda: -1), defaultdict(int)
        counter = 0
        stack: list[int] = []
        for r in roots:
            if index[r] >= 0:
                continue
            index[r] = low[r] = counter
            counter += 1
            stack.append(r)
            onstack[r] = 1
            work = [(r, iter(succ(r)))]
            while work:
                v, it = work[-1]
                pushed = False
                for w in it:
                    if index[w] < 0:
                        index[w] = low[w] = counter
                        counter += 1
                        stack.append(w)
                        onstack[w] = 1
                        work.append((w, iter(succ(w))))
                        pushed = True
                        break
                    if onstack[w] and index[w] < low[v]:
                        low[v] = index[w]
                if pushed:
                    continue
                work.pop()
                if work:
                    u = work[-1][0]
                    if low[v] < low[u]:
                        low[u] = low[v]
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        onstack[w] = 0
                        comp.append(w)
                        if w == v:
                            break
                    yield comp

    def accepting(self, comp: list[int], restr: tuple):
        """(members, restr, witness edges, Büchi nodes) of a fair cycle inside ``comp``, or None."""
        members = set(comp)
        single = len(comp) == 1
        if single:  # one node: its only possible cycle is its self-loop (a stuttering step)
            loop = [comp[0]] if self._self_loop(comp[0], restr) else []
            if not loop:
                return None
        tab = self.tab
        buchi = []
        for acc in tab.accept:
            hit = next((p for p in comp if p % self.T in acc), None)
            if hit is None:
                return None
            buchi.append(hit)
        wit: list = [None] * len(self.conds)
        ea_all = [[True] * len(c.ea) for c in self.conds]
        for p in comp:
            s = p // self.T
            for q in (loop if single else self.inner(p, members, restr)):
                t = q // self.T
                for ci, c in enumerate(self.conds):
                    if wit[ci] is None and any(self.ev(x, s, t) for x in c.ae):
                        wit[ci] = (p, q)
                    flags = ea_all[ci]
                    for k, x in enumerate(c.ea):
                        if flags[k] and not self.ev(x, s, t):
                            flags[k] = False
        failing = [ci for ci, c in enumerate(self.conds) if wit[ci] is None and not any(ea_all[ci])]
        if not failing:
            return members, restr, [w for w in wit if w is not None], buchi
        if any(not self.conds[ci].ea for ci in failing):  # no witness, and no way to cut it into one
            return None
        for x in self.conds[failing[0]].ea:  # keep only the edges where one <>[] item holds; search again
            r2 = restr + (x,)
            for sub in self.components(comp, lambda p, r2=r2: self.inner(p, members, r2), dense=False):
                found = self.accepting(sub, r2)
                if found is not None:
                    return found
        return None

    def _self_loop(self, p: int, restr: tuple) -> bool:
        """Whether p steps to itself (what ``p in self.inner(p, {p}, restr)`` says, without listing
        every successor): its state stutters, which every state may, and its tableau node has itself
        as a successor whose literals hold on the stuttering step."""
        s, j = divmod(p, self.T)
        if j not in self.tab.succ[j]:
            return False
        if not all(self.value(leaf, s, s) == pos for leaf, pos in self.action_lits[j]):
            return False
        return all(self.ev(x, s, s) for x in restr)

    def reachable(self, roots: list[int]) -> list[int]:
        seen = bytearray(self.n * self.T)
        out = list(roots)
        for r in roots:
            seen[r] = 1
        i = 0
        while i < len(out):
            for q in self.succ(out[i]):
                if not seen[q]:
                    seen[q] = 1
                    out.append(q)
            i += 1
        return out

    def find(self):
        """A fair accepting component reachable from the initial nodes, or None. A condition that is a
        lone <>[]X (the negation of []<>P, or of WF's enabledness) holds on every edge of the cycle, so
        the components are those of the reachable nodes along the edges that satisfy it (as TLC does)."""
        roots = self.roots()
        base = tuple(c.ea[0] for c in self.conds if not c.ae and len(c.ea) == 1)
        if base:
            T = self.T

            def along(p):
                s = p // T
                return [q for q in self.succ(p) if all(self.ev(x, s, q // T) for x in base)]
            comps = self.components(self.reachable(roots), along, dense=True)
        else:
            comps = self.components(roots, self.succ, dense=True)
        for comp in comps:
            found = self.accepting(comp, base)
            if found is not None:
                return roots, found
        return None

    # ------------------------------------------------------------ the lasso

    @staticmethod
    def _path(starts: list[int], goal, step) -> list[int]:
        """Shortest path (BFS) of at least one step from one of ``starts`` to a node satisfying ``goal``."""
        parent: dict[int, int | None] = {s: None for s in starts}
        q = deque(starts)
        while q:
            v = q.popleft()
            for w in step(v):
                if goal(w):
                    path = [w]
                    x: int | None = v
                    while x is not None:
                        path.append(x)
                        x = parent[x]
                    return path[::-1]
                if w not in parent:
                    parent[w] = v
                    q.append(w)
        raise AssertionError("no path to a node of the component")

    def lasso(self, roots: list[int], found) -> tuple[list[int], int]:
        members, restr, wits, buchi = found
        hit = [r for r in roots if r in members]
        prefix = [hit[0]] if hit else self._path(roots, lambda w: w in members, self.succ)
        c0 = prefix[-1]
        cycle = [c0]

        def step(v):
            return self.inner(v, members, restr)
        legs: list = [(b, None) for b in buchi] + [(p, q) for p, q in wits]
        for a, b in legs:
            if cycle[-1] != a:
                cycle += self._path([cycle[-1]], lambda w, a=a: w == a, step)[1:]
            if b is not None:
                cycle.append(b)
        if len(cycle) == 1 or cycle[-1] != c0:
            cycle += self._path([cycle[-1]], lambda w: w == c0, step)[1:]
        states = [p // self.T for p in prefix] + [p // self.T for p in cycle[1:-1]]
        loop = len(prefix) - 1
        out: list[int] = []
        for i, s in enumerate(states):  # a stuttering step is not a state of the printed behaviour
            if out and out[-1] == s:
                if i <= loop:
                    loop -= 1
                continue
            out.append(s)
        while len(out) - 1 > loop and out[-1] == out[loop]:
            out.pop()
        while loop > 0 and len(out) - 1 > loop and out[loop - 1] == out[-1]:  # rotate the cycle
            out.pop()  # into the prefix: ... a, [b ... a] back to b  ==  ... [a, b ...] back to a
            loop -= 1
        return out, loop


def check_temporal(model: Any, plan: PropertyPlan, store: list, graph: StateGraph,
                   label=None) -> Violation | None:
    """Check every temporal property of ``plan`` on the complete state graph; the first violated one
    is returned with its lasso (``loop``: the 1-based state the last state steps back to)."""
    values = LeafValues(model, store, plan.leaves)
    for name, formula in plan.temporal:
        for part in conjuncts(formula):
            goal = ("and", (plan.fairness, negate(part)))
            conds, rest = [], []
            for f in conjuncts(goal):
                c = as_condition(f)
                if c is not None:
                    conds.append(c)
                else:
                    rest.append(f)
            tab = build(("and", tuple(rest)))
            search = _Search(values, graph, tab, conds)
            try:
                found = search.find()
                if found is None:
                    continue
                states, loop = search.lasso(*found)
            except EvalError as exc:
                return Violation("evaluation", "EvalError",
                                 f"while checking the temporal property {name}: {exc}")
            trace = label(states) if label is not None else tuple(
                TraceState(i + 1, "", "", model.state_dict(store[s][0])) for i, s in enumerate(states))
            return Violation("temporal", name, "Temporal properties were violated.", trace,
                             loop=loop + 1)
    return None
