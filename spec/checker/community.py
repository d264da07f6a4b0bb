"""Native implementations of modules TLC users have on their path: TLC's own TLCExt and Randomization,
the TLA+ CommunityModules (Functions, SequencesExt, FiniteSetsExt, Folds, Bitwise, BagsExt, Graphs,
UndirectedGraphs, IOUtils) and the proof library's modules (no operators a model checker evaluates).

Invariant: each operator computes what the module's TLA+ definition denotes (the definitions in
``tla-examples/_modules`` are the reference), including TLC's CHOOSE order where the definition
chooses; a module found on the library path keeps its other definitions, evaluated from TLA+.
"""

from __future__ import annotations

import json
import os
from typing import Any

from kvexact.spec.checker.builtins import _RNG, _te_only
from kvexact.spec.checker.builtins import _trace as B_trace
from kvexact.spec.checker.values import (
    EvalError,
    Fcn,
    LazySet,
    apply_fcn,
    as_set,
    domain,
    fcn_items,
    fmt,
    kind,
    member,
    min_value,
    mk_fcn,
    ordered_elements,
    sort_by_operator,
    sorted_values,
    tla_eq,
)


def _num(v: Any) -> int:
    if type(v) is not int:
        raise EvalError(f"expected an integer, got {kind(v)} {fmt(v)}")
    return v


def _seq(v: Any) -> tuple:
    if type(v) is tuple:
        return v
    if type(v) is Fcn and not v.d:
        return ()
    if hasattr(v, "materialize"):
        v = v.materialize()
        if type(v) is tuple:
            return v
    raise EvalError(f"expected a sequence, got {fmt(v)}")


def _bool(v: Any, what: str) -> bool:
    if type(v) is not bool:
        raise EvalError(f"{what} returned the non-boolean {fmt(v)}")
    return v


# ----------------------------------------------------------------------------- folds

def _choose_order(S: frozenset, choose) -> list:
    """The elements of S in the order MapThenFoldSet takes them: choose(S), choose(S \\ {that}), ..."""
    rest = as_set(S)
    order = []
    while rest:
        x = choose(rest)
        if x not in rest:
            raise EvalError(f"MapThenFoldSet: choose returned {fmt(x)}, which is not in the set")
        order.append(x)
        rest = rest - {x}
    return order


def _fold(op, base, f, order: list) -> Any:
    """op(f(x1), op(f(x2), ... op(f(xn), base))) for the order x1, x2, ..., xn."""
    acc = base
    for x in reversed(order):
        acc = op(f(x), acc)
    return acc


def map_then_fold_set(op, base, f, choose, S):
    return _fold(op, base, f, _choose_order(as_set(S), choose))


def _min_first(S) -> list:
    """The order of CHOOSE x \\in s : TRUE applied repeatedly: TLC's ascending order."""
    return ordered_elements(as_set(S))


def fold_set(op, base, S):
    return _fold(op, base, lambda x: x, _min_first(S))


def fold_function_on_set(op, base, fun, indices):
    return _fold(op, base, lambda i: apply_fcn(fun, i), _min_first(indices))


def fold_function(op, base, fun):
    return fold_function_on_set(op, base, fun, domain(fun))


# ----------------------------------------------------------------------------- Functions

def restrict(f, S):
    return mk_fcn({x: apply_fcn(f, x) for x in as_set(S)})


def range_of(f):
    return frozenset(v for _, v in fcn_items(f))


def is_injective(f):
    vals = [v for _, v in fcn_items(f)]
    return len(set(vals)) == len(vals)


def inverse(f, S, T):
    rng = range_of(f)
    S_ord = ordered_elements(as_set(S))
    out = {}
    for t in as_set(T):
        if t in rng:
            hit = [s for s in S_ord if tla_eq(apply_fcn(f, s), t)]
            if not hit:
                raise EvalError(f"Inverse: no element of the domain maps to {fmt(t)}")
            out[t] = hit[0]
        else:
            if not S_ord:
                raise EvalError("Inverse: CHOOSE from the empty set")
            out[t] = S_ord[0]
    return mk_fcn(out)


def _fcn_set(S, T):
    from kvexact.spec.checker.values import FcnSet
    return FcnSet(S, T)


FUNCTIONS: dict[str, tuple] = {
    "Restrict": (2, restrict),
    "RestrictDomain": (2, lambda f, test: restrict(f, {x for x in domain(f) if _bool(test(x), "Test")}), (1,)),
    "RestrictValues": (2, lambda f, test: restrict(f, {x for x, v in fcn_items(f) if _bool(test(v), "Test")}),
                       (1,)),
    "IsRestriction": (2, lambda n, w: domain(n) <= domain(w) and all(
        tla_eq(apply_fcn(n, x), apply_fcn(w, x)) for x in domain(n) & domain(w))),
    "Range": (1, range_of),
    "Pointwise": (3, lambda f, g, T: mk_fcn({e: T(apply_fcn(f, e), apply_fcn(g, e)) for e in domain(f)}), (2,)),
    "Inverse": (3, inverse),
    "AntiFunction": (1, lambda f: inverse(f, domain(f), range_of(f))),
    "IsInjective": (1, is_injective),
    "Injection": (2, lambda S, T: frozenset(m for m in _fcn_set(S, T).ordered() if is_injective(m))),
    "Surjection": (2, lambda S, T: frozenset(m for m in _fcn_set(S, T).ordered()
                                             if range_of(m) >= as_set(T))),
    "Bijection": (2, lambda S, T: frozenset(m for m in _fcn_set(S, T).ordered()
                                            if is_injective(m) and range_of(m) >= as_set(T))),
    "ExistsInjection": (2, lambda S, T: len(as_set(S)) <= len(as_set(T))),
    "ExistsSurjection": (2, lambda S, T: (len(as_set(T)) > 0 and len(as_set(S)) >= len(as_set(T)))
                         or (not as_set(S) and not as_set(T))),
    "ExistsBijection": (2, lambda S, T: len(as_set(S)) == len(as_set(T))),
    "FoldFunctionOnSet": (4, fold_function_on_set, (0,)),
    "FoldFunction": (3, fold_function, (0,)),
    "SumFunctionOnSet": (2, lambda fun, idx: fold_function_on_set(lambda a, b: _num(a) + _num(b), 0, fun, idx)),
    "SumFunction": (1, lambda fun: fold_function(lambda a, b: _num(a) + _num(b), 0, fun)),
}

FOLDS: dict[str, tuple] = {"MapThenFoldSet": (5, map_then_fold_set, (0, 2, 3))}


# ----------------------------------------------------------------------------- FiniteSetsExt

def _max(S):
    els = as_set(S)
    if not els:
        raise EvalError("Max of the empty set (CHOOSE found no element)")
    return max(_num(x) for x in els)


def _min(S):
    els = as_set(S)
    if not els:
        raise EvalError("Min of the empty set (CHOOSE found no element)")
    return min(_num(x) for x in els)


def _choose_unique(S, P):
    hits = [x for x in ordered_elements(as_set(S)) if _bool(P(x), "ChooseUnique's predicate")]
    if len(hits) != 1:
        raise EvalError(f"ChooseUnique: {len(hits)} elements satisfy the predicate (CHOOSE found none)")
    return hits[0]


def _choices(sets):
    import itertools
    Ts = ordered_elements(as_set(sets))
    out = set()
    for combo in itertools.product(*[ordered_elements(as_set(T)) for T in Ts]):
        out.add(frozenset(combo))
    return frozenset(out)


def _ksubset(k, S):
    import itertools
    return frozenset(frozenset(c) for c in itertools.combinations(sorted_values(as_set(S)), _num(k)))


FINITE_SETS_EXT: dict[str, tuple] = {
    "FoldSet": (3, fold_set, (0,)),
    "SumSet": (1, lambda S: sum(_num(x) for x in as_set(S))),
    "ProductSet": (1, lambda S: _product(as_set(S))),
    "ReduceSet": (3, lambda op, S, acc: fold_set(op, acc, S), (0,)),
    "MapThenSumSet": (2, lambda op, S: sum(_num(op(x)) for x in as_set(S)), (0,)),
    "FlattenSet": (1, lambda S: frozenset().union(*[as_set(x) for x in as_set(S)])),
    "SymDiff": (2, lambda A, B: as_set(A) ^ as_set(B)),
    "Quantify": (2, lambda S, P: sum(1 for x in as_set(S) if _bool(P(x), "Quantify's predicate")), (1,)),
    "kSubset": (2, _ksubset),
    "Max": (1, _max),
    "Min": (1, _min),
    "Choices": (1, _choices),
    "ChooseUnique": (2, _choose_unique, (1,)),
}


def _product(S) -> int:
    out = 1
    for x in S:
        out *= _num(x)
    return out


# ----------------------------------------------------------------------------- SequencesExt

class BoundedSeqSet(LazySet):
    """SeqOf(S, n) = UNION {[1..m -> S] : m \\in 0..n}: membership without enumerating."""

    def __init__(self, base: Any, n: int):
        self.base = base
        self.n = n
        self.name = "SeqOf(...)"
        self._el: frozenset | None = None

    def contains(self, v: Any) -> bool:
        return type(v) is tuple and len(v) <= self.n and all(member(x, self.base) for x in v)

    def ordered(self) -> list:
        import itertools
        base = ordered_elements(self.base)
        return [c for m in range(self.n + 1) for c in itertools.product(base, repeat=m)]

    def elements(self) -> frozenset:
        if self._el is None:
            self._el = frozenset(self.ordered())
        return self._el


def _select_in_seq(s, test, last=False):
    idx = [i for i, x in enumerate(_seq(s), 1) if _bool(test(x), "Test")]
    if not idx:
        return 0
    return idx[-1] if last else idx[0]


def _is_prefix(s, t):
    s, t = _seq(s), _seq(t)
    return len(s) <= len(t) and all(tla_eq(a, b) for a, b in zip(s, t, strict=False))


def _subseq(s, m, n):
    s = _seq(s)
    if m > n:
        return ()
    if m < 1 or n > len(s):
        raise EvalError(f"SubSeq({fmt(s)}, {m}, {n}) is out of range")
    return s[m - 1:n]


def _remove_at(s, i):
    s = _seq(s)
    i = _num(i)
    return _subseq(s, 1, i - 1) + _subseq(s, i + 1, len(s))


def _insert_at(s, i, e):
    s = _seq(s)
    i = _num(i)
    return _subseq(s, 1, i - 1) + (e,) + _subseq(s, i, len(s))


def _replace_at(s, i, e):
    s = _seq(s)
    i = _num(i)
    if not 1 <= i <= len(s):
        return s
    return s[: i - 1] + (e,) + s[i:]


def _last(s):
    s = _seq(s)
    if not s:
        raise EvalError("Last of the empty sequence: s[0] is outside its domain")
    return s[-1]


def _set_to_seqs(S):
    import itertools
    return frozenset(itertools.permutations(sorted_values(as_set(S))))


def _sort_seq(s, lt):
    return sort_by_operator(_seq(s), lt)


def _common_prefixes(S):
    seqs = [_seq(x) for x in as_set(S)]
    if not seqs:
        raise EvalError("CommonPrefixes of the empty set is not a finite set")
    n = min(len(x) for x in seqs)
    k = 0
    while k < n and all(tla_eq(x[k], seqs[0][k]) for x in seqs):
        k += 1
    return seqs[0][:k]


def _fold_left(op, base, seq):
    acc = base
    for x in _seq(seq):
        acc = op(acc, x)
    return acc


def _fold_right(op, seq, base):
    acc = base
    for x in reversed(_seq(seq)):
        acc = op(x, acc)
    return acc


def _flatten_seq(seqs):
    seqs = _seq(seqs)
    out: tuple = ()
    for x in seqs:
        out = out + _seq(x)
    return out


def _interleave(s, t):
    s, t = _seq(s), _seq(t)
    if len(s) != len(t):
        raise EvalError("Interleave: the sequences differ in length (no CASE arm applies)")
    if not s:
        return ((), ())
    out: list = []
    for a, b in zip(s, t, strict=True):
        out += [(a,), (b,)]
    return tuple(out)


SEQUENCES_EXT: dict[str, tuple] = {
    "ToSet": (1, lambda s: frozenset(_seq(s))),
    "ToBag": (1, lambda s: mk_fcn(_count(_seq(s)))),
    "SetToSeq": (1, lambda S: tuple(sorted_values(as_set(S)))),
    "SetToSeqs": (1, _set_to_seqs),
    "SetToSortSeq": (2, lambda S, op: _sort_seq(tuple(sorted_values(as_set(S))), op), (1,)),
    "TupleOf": (2, lambda S, n: _fcn_set(frozenset(range(1, _num(n) + 1)), S)),
    "SeqOf": (2, lambda S, n: BoundedSeqSet(S, _num(n))),
    "BoundedSeq": (2, lambda S, n: BoundedSeqSet(S, _num(n))),
    "Contains": (2, lambda s, e: any(tla_eq(x, e) for x in _seq(s))),
    "IsSorted": (2, lambda s, op: all(_bool(op(a, b), "the order") for i, a in enumerate(_seq(s))
                                      for b in _seq(s)[i + 1:]), (1,)),
    "Reverse": (1, lambda s: tuple(reversed(_seq(s)))),
    "Remove": (2, lambda s, e: tuple(x for x in _seq(s) if not tla_eq(x, e))),
    "ReplaceAll": (3, lambda s, old, new: tuple(new if tla_eq(x, old) else x for x in _seq(s))),
    "SelectInSeq": (2, lambda s, t: _select_in_seq(s, t), (1,)),
    "SelectInSubSeq": (4, lambda s, a, b, t: _select_in_seq(_subseq(s, _num(a), _num(b)), t), (3,)),
    "SelectLastInSeq": (2, lambda s, t: _select_in_seq(s, t, last=True), (1,)),
    "SelectLastInSubSeq": (4, lambda s, a, b, t: _select_in_seq(_subseq(s, _num(a), _num(b)), t, last=True),
                           (3,)),
    "InsertAt": (3, _insert_at),
    "ReplaceAt": (3, _replace_at),
    "RemoveAt": (2, _remove_at),
    "RemoveFirst": (2, lambda s, e: next((_remove_at(s, i) for i, x in enumerate(_seq(s), 1) if tla_eq(x, e)),
                                         _seq(s))),
    "RemoveFirstMatch": (2, lambda s, t: next((_remove_at(s, i) for i, x in enumerate(_seq(s), 1)
                                               if _bool(t(x), "Test")), _seq(s)), (1,)),
    "Cons": (2, lambda e, s: (e,) + _seq(s)),
    "Snoc": (2, lambda e, s: _seq(s) + (e,)),
    "Front": (1, lambda s: _subseq(s, 1, len(_seq(s)) - 1)),
    "Last": (1, _last),
    "IsPrefix": (2, _is_prefix),
    "IsStrictPrefix": (2, lambda s, t: _is_prefix(s, t) and not tla_eq(_seq(s), _seq(t))),
    "IsSuffix": (2, lambda s, t: _is_prefix(tuple(reversed(_seq(s))), tuple(reversed(_seq(t))))),
    "IsStrictSuffix": (2, lambda s, t: _is_prefix(tuple(reversed(_seq(s))), tuple(reversed(_seq(t))))
                       and not tla_eq(_seq(s), _seq(t))),
    "Prefixes": (1, lambda s: frozenset(_seq(s)[:k] for k in range(len(_seq(s)) + 1))),
    "Suffixes": (1, lambda s: frozenset(_seq(s)[k:] for k in range(len(_seq(s)) + 1))),
    "LongestCommonPrefix": (1, _common_prefixes),
    "SeqMod": (2, lambda a, b: _num(b) if _num(a) % _num(b) == 0 else a % b),
    "FoldSeq": (3, lambda op, base, s: fold_function(op, base, _seq(s)), (0,)),
    "FoldLeft": (3, _fold_left, (0,)),
    "FoldRight": (3, _fold_right, (0,)),
    "FoldLeftDomain": (3, lambda op, base, s: _fold_left(op, base, tuple(range(1, len(_seq(s)) + 1))), (0,)),
    "FoldRightDomain": (3, lambda op, s, base: _fold_right(op, tuple(range(1, len(_seq(s)) + 1)), base), (0,)),
    "FlattenSeq": (1, _flatten_seq),
    "Zip": (2, lambda s, t: tuple(zip(_seq(s), _seq(t), strict=False))),
    "Interleave": (2, _interleave),
    "SubSeqs": (1, lambda s: frozenset(_seq(s)[i:j] for i in range(len(_seq(s)) + 1)
                                       for j in range(len(_seq(s)) + 1))),
}


def _count(s: tuple) -> dict:
    out: dict = {}
    for x in s:
        out[x] = out.get(x, 0) + 1
    return out


# ----------------------------------------------------------------------------- Bitwise, BagsExt

def _nat(v: Any) -> int:
    if type(v) is not int or v < 0:
        raise EvalError(f"expected a natural number, got {fmt(v)}")
    return v


BITWISE: dict[str, tuple] = {
    "&": (2, lambda x, y: _nat(x) & _nat(y)),
    "|": (2, lambda x, y: _nat(x) | _nat(y)),
    "^^": (2, lambda x, y: _nat(x) ^ _nat(y)),
    "Not": (1, lambda a: ~_nat(a) & ((1 << a.bit_length()) - 1)),
    "shiftR": (2, lambda n, pos: _nat(n) >> _nat(pos)),
}


def _bag(B) -> dict:
    return dict(fcn_items(B))


def _bag_add(B, x):
    d = _bag(B)
    d[x] = d.get(x, 0) + 1
    return mk_fcn(d)


def _bag_remove(B, x):
    d = _bag(B)
    if x not in d:
        return B
    if d[x] == 1:
        del d[x]
    else:
        d[x] -= 1
    return mk_fcn(d)


def _fold_bag(op, base, B):
    d = _bag(B)
    acc = base
    for x in reversed(_min_first(frozenset(d))):
        h = base
        for _ in range(_num(d[x])):
            h = op(h, x)
        acc = op(h, acc)
    return acc


BAGS_EXT: dict[str, tuple] = {
    "BagAdd": (2, _bag_add),
    "BagRemove": (2, _bag_remove),
    "BagRemoveAll": (2, lambda B, x: mk_fcn({k: v for k, v in fcn_items(B) if k != x})),
    "FoldBag": (3, _fold_bag, (0,)),
    "SumBag": (1, lambda B: sum(_num(k) * _num(v) for k, v in fcn_items(B))),
    "ProductBag": (1, lambda B: _product([_num(k) ** _num(v) for k, v in fcn_items(B)])),
}


# ----------------------------------------------------------------------------- Graphs

def _graph(G) -> tuple[frozenset, frozenset]:
    if type(G) is not Fcn or "node" not in G.d or "edge" not in G.d:
        raise EvalError(f"expected a graph [node |-> ..., edge |-> ...], got {fmt(G)}")
    return as_set(G.d["node"]), as_set(G.d["edge"])


def _succ(nodes: frozenset, edges: frozenset, undirected: bool) -> dict:
    out: dict = {n: set() for n in nodes}
    for e in edges:
        if undirected:
            ends = list(as_set(e))
            for a in ends:
                for b in ends:
                    if a in out:
                        out[a].add(b)
        else:
            out.setdefault(e[0], set()).add(e[1])
    return out


def _reach(G, m, undirected: bool) -> set:
    """Nodes n with a path <<m, ..., n>> (every step an edge, every element a node); m itself when m is
    a node."""
    nodes, edges = _graph(G)
    if m not in nodes:
        return set()
    succ = _succ(nodes, edges, undirected)
    seen = {m}
    todo = [m]
    while todo:
        x = todo.pop()
        for y in succ.get(x, ()):
            if y in nodes and y not in seen:
                seen.add(y)
                todo.append(y)
    return seen


class PathSet(LazySet):
    """Path(G): the non-empty sequences of nodes whose consecutive elements are joined by edges."""

    def __init__(self, G, undirected: bool):
        self.nodes, self.edges = _graph(G)
        self.undirected = undirected
        self.name = "Path(G)"

    def contains(self, p: Any) -> bool:
        if type(p) is not tuple or not p or any(x not in self.nodes for x in p):
            return False
        if self.undirected:
            return all(frozenset({a, b}) in self.edges for a, b in zip(p, p[1:], strict=False))
        return all((a, b) in self.edges for a, b in zip(p, p[1:], strict=False))

    def finite(self) -> bool:
        return False

    def key(self) -> Any:
        return ("Path", self.nodes, self.edges, self.undirected)


def _simple_paths(G, undirected: bool) -> frozenset:
    nodes, edges = _graph(G)
    succ = _succ(nodes, edges, undirected)
    out = set()

    def walk(path):
        out.add(tuple(path))
        for y in succ.get(path[-1], ()):
            if y in nodes and y not in path:
                walk(path + [y])
    for n in nodes:
        walk([n])
    return frozenset(out)


def _connected_components(G) -> frozenset:
    nodes, _ = _graph(G)
    out = set()
    left = set(nodes)
    while left:
        m = next(iter(left))
        comp = frozenset(_reach(G, m, True))
        out.add(comp)
        left -= comp
    return frozenset(out)


def _is_tree_with_root(G, r) -> bool:
    nodes, edges = _graph(G)
    if set(G.d) != {"node", "edge"} or any(type(e) is not tuple or len(e) != 2 or e[0] not in nodes
                                           or e[1] not in nodes for e in edges):
        return False
    if r not in nodes:
        return False
    parents: dict = {}
    for e in edges:
        if e[0] == r or parents.setdefault(e[0], e) != e:
            return False
    rev = {"node": nodes, "edge": frozenset((e[1], e[0]) for e in edges)}
    return _reach(Fcn(rev), r, False) >= set(nodes)


def _connections_in(G):
    nodes, _ = _graph(G)
    return mk_fcn({(m, n): n in _reach(G, m, False) for m in nodes for n in nodes})


GRAPHS: dict[str, tuple] = {
    "Path": (1, lambda G: PathSet(G, False)),
    "SimplePath": (1, lambda G: _simple_paths(G, False)),
    "AreConnectedIn": (3, lambda m, n, G: n in _reach(G, m, False)),
    "IsStronglyConnected": (1, lambda G: all(_reach(G, m, False) >= set(_graph(G)[0]) for m in _graph(G)[0])),
    "ConnectionsIn": (1, _connections_in),
    "IsTreeWithRoot": (2, _is_tree_with_root),
}

UNDIRECTED_GRAPHS: dict[str, tuple] = {
    "Path": (1, lambda G: PathSet(G, True)),
    "SimplePath": (1, lambda G: _simple_paths(G, True)),
    "AreConnectedIn": (3, lambda m, n, G: n in _reach(G, m, True)),
    "ConnectedComponents": (1, _connected_components),
    "IsStronglyConnected": (1, lambda G: _connected_components(G) == frozenset({_graph(G)[0]})),
}


# ----------------------------------------------------------------------------- TLC's own extras



def _random_subset(k, S):
    els = sorted_values(as_set(S))
    k = _num(k)
    if k > len(els):
        raise EvalError(f"RandomSubset: {k} elements requested from a set of {len(els)}")
    return frozenset(_RNG.sample(els, k))




def _assert_eq(a, b):
    if not tla_eq(a, b):
        print(f"AssertEq: {fmt(a)} # {fmt(b)}", flush=True)
        return False
    return True


def _atoi(s):
    if type(s) is not str:
        raise EvalError(f"atoi expects a string, got {fmt(s)}")
    try:
        return int(s)
    except ValueError:
        raise EvalError(f"atoi: {fmt(s)} is not the text of an integer") from None


def _io_env():
    return mk_fcn({k: v for k, v in os.environ.items()})


TLCEXT: dict[str, tuple] = {
    "AssertEq": (2, _assert_eq),
    "TLCModelValue": (1, lambda name: _model_value(name)),
    "TLCNoOp": (1, lambda v: v),
    "TLCCache": (2, lambda v, closure: v),
    "Trace": (0, B_trace),
}

def _to_json_data(v: Any) -> Any:
    """A TLA+ value as JSON data: sequences and sets as arrays, records and other functions as objects
    (keys as their TLA+ text when not strings), model values by name."""
    if type(v) is bool or type(v) is int or type(v) is str:
        return v
    if type(v) is tuple:
        return [_to_json_data(x) for x in v]
    if isinstance(v, Fcn):
        return {(k if type(k) is str else fmt(k)): _to_json_data(x) for k, x in fcn_items(v)}
    if isinstance(v, (frozenset, LazySet)):
        return [_to_json_data(x) for x in ordered_elements(as_set(v))]
    name = getattr(v, "name", None)
    if isinstance(name, str):
        return name
    raise EvalError(f"ToJson: {fmt(v)} has no JSON form")


def _from_json_data(d: Any) -> Any:
    if isinstance(d, list):
        return tuple(_from_json_data(x) for x in d)
    if isinstance(d, dict):
        return mk_fcn({k: _from_json_data(x) for k, x in d.items()})
    if isinstance(d, float):
        raise EvalError(f"JsonDeserialize: {d} is not an integer (TLA+ has no reals here)")
    return d


def _to_json(v: Any) -> str:
    return json.dumps(_to_json_data(v), separators=(",", ":"))


def _json_write(path: Any, v: Any, lines: bool) -> bool:
    if type(path) is not str:
        raise EvalError(f"JsonSerialize: the file name must be a string, got {fmt(path)}")
    try:
        with open(path, "w") as fh:
            if lines:
                for x in (v if type(v) is tuple else ordered_elements(as_set(v))):
                    fh.write(_to_json(x) + "\n")
            else:
                fh.write(_to_json(v) + "\n")
    except OSError as exc:
        raise EvalError(f"JsonSerialize: cannot write {path}: {exc.strerror}") from None
    return True


def _json_read(path: Any, lines: bool) -> Any:
    if type(path) is not str:
        raise EvalError(f"JsonDeserialize: the file name must be a string, got {fmt(path)}")
    try:
        text = open(path).read()
        if lines:
            return tuple(_from_json_data(json.loads(x)) for x in text.splitlines() if x.strip())
        return _from_json_data(json.loads(text))
    except (OSError, ValueError) as exc:
        raise EvalError(f"JsonDeserialize: cannot read {path}: {exc}") from None


JSON: dict[str, tuple] = {  # TLC's Json module
    "ToJson": (1, _to_json),
    "ToJsonArray": (1, _to_json),
    "ToJsonObject": (1, _to_json),
    "JsonSerialize": (2, lambda p, v: _json_write(p, v, False)),
    "ndJsonSerialize": (2, lambda p, v: _json_write(p, v, True)),
    "JsonDeserialize": (1, lambda p: _json_read(p, False)),
    "ndJsonDeserialize": (1, lambda p: _json_read(p, True)),
}

TOOLBOX: dict[str, tuple] = {  # TLC's Toolbox module: names of the trace explorer
    "_TETrace": (0, _te_only("_TETrace")),
    "_TEPosition": (0, _te_only("_TEPosition")),
}

RANDOMIZATION: dict[str, tuple] = {
    "RandomSubset": (2, _random_subset),
    "RandomSetOfSubsets": (3, lambda k, n, S: frozenset(
        frozenset(x for x in as_set(S) if _RNG.random() < _num(n) / max(len(as_set(S)), 1))
        for _ in range(_num(k)))),
}

IOUTILS: dict[str, tuple] = {
    "IOEnv": (0, None),  # filled lazily: the environment when the operator is first used
    "atoi": (1, _atoi),
    "zeroPadN": (2, lambda n, w: str(_num(n)).rjust(_num(w), "0")),
}


def _model_value(name):
    from kvexact.spec.checker.values import ModelValue
    if type(name) is not str:
        raise EvalError(f"TLCModelValue expects a string, got {fmt(name)}")
    return ModelValue(name)


NATIVE_MODULES: dict[str, dict[str, tuple]] = {
    "Functions": FUNCTIONS,
    "Folds": FOLDS,
    "FiniteSetsExt": FINITE_SETS_EXT,
    "SequencesExt": SEQUENCES_EXT,
    "Bitwise": BITWISE,
    "BagsExt": BAGS_EXT,
    "Graphs": GRAPHS,
    "UndirectedGraphs": UNDIRECTED_GRAPHS,
    "TLCExt": TLCEXT,
    "Toolbox": TOOLBOX,
    "Json": JSON,
    "Randomization": RANDOMIZATION,
    "IOUtils": IOUTILS,
}

# TLC's own modules beyond the standard ones: always native, never read from a file
TLC_MODULES = {"TLCExt", "Randomization", "Toolbox"}


def native_ops(module: str) -> dict[str, tuple] | None:
    """Name -> (arity, implementation[, operator-argument positions]) for a natively known module."""
    ops = NATIVE_MODULES.get(module)
    if ops is None:
        return None
    if module == "IOUtils":
        ops = dict(ops)
        ops["IOEnv"] = (0, _io_env())
    return ops


def is_proof_module(name: str) -> bool:
    """TLAPS and the proof library's *Theorems modules: nothing in them is evaluated by a model checker."""
    return name == "TLAPS" or name.endswith("Theorems") or name in ("NaturalsInduction", "WellFoundedInduction")


_unused = (min_value,)
