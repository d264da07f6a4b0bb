"""Operators of the standard modules (Naturals, Integers, Sequences, FiniteSets, TLC, Bags) and the
built-in infix operators, as Python functions over the values of values.py.

Invariant: each operator checks the kinds of its arguments and raises EvalError (never a Python
TypeError) on a wrong kind.
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from typing import Any

from kvexact.spec.checker.values import (
    INT,
    NAT,
    STRING,
    EvalError,
    Fcn,
    FcnSet,
    LazyFcn,
    LazySet,
    PowerSet,
    ProductSet,
    RecordSet,
    SeqSet,
    UnionSet,
    apply_fcn,
    as_set,
    domain,
    fcn_items,
    fmt,
    is_infinite,
    kind,
    member,
    mk_fcn,
    order_key,
    ordered_elements,
    seq_append,
    seq_tail,
    set_union,
    sort_by_operator,
    sorted_values,
    tla_eq,
)

__all__ = ["RecordSet", "FcnSet", "ProductSet", "STRING", "OPERATORS", "STANDARD_MODULES", "SPECIAL_NAMES",
           "LANGUAGE_OPERATORS", "defining_modules"]

# operators compiled specially (lazy operands, primes, actions)
SPECIAL_NAMES = {
    "'": "prime", "/\\": "and", "\\/": "or", "=>": "implies", "~": "not", "=": "eq", "/=": "eq",
    "\\in": "in", "\\notin": "in", "<=>": "iff", "UNCHANGED": "unchanged", "::": "label",
    "[]": "temporal", "<>": "temporal", "~>": "temporal", "-+->": "temporal", "ENABLED": "enabled",
}


def num(v: Any) -> int:
    if type(v) is not int:
        raise EvalError(f"expected an integer, got {kind(v)} {fmt(v)}")
    return v


def _seq(v: Any) -> tuple:
    if type(v) is tuple:
        return v
    if type(v) is LazyFcn:
        v = v.materialize()
        if type(v) is tuple:
            return v
    raise EvalError(f"expected a sequence, got {fmt(v)}")


def _plus(a, b):
    if type(a) is int and type(b) is int:
        return a + b
    return num(a) + num(b)


def _negate(a):
    return -num(a)


def _minus(a, b):
    return num(a) - num(b)


def _times(a, b):
    return num(a) * num(b)


def _div(a, b):
    if num(b) == 0:
        raise EvalError("division by zero (\\div)")
    return num(a) // b


def _mod(a, b):
    if num(b) <= 0:
        raise EvalError(f"% with non-positive divisor {b}")
    return num(a) % b


def _pow(a, b):
    return num(a) ** num(b)


def _lt(a, b):
    return num(a) < num(b)


def _gt(a, b):
    return num(a) > num(b)


def _le(a, b):
    return num(a) <= num(b)


def _ge(a, b):
    return num(a) >= num(b)


def _range(a, b):
    return frozenset(range(num(a), num(b) + 1))


def _cup(a, b):
    if type(a) is frozenset and type(b) is frozenset:
        return set_union(a, b)
    if is_infinite(a) or is_infinite(b):
        return UnionSet([a, b])
    return set_union(as_set(a), as_set(b))


def _cap(a, b):
    if is_infinite(a) and is_infinite(b):
        from kvexact.spec.checker.values import InfiniteSet
        return InfiniteSet(f"{a.name} \\cap {b.name}", lambda v: a.contains(v) and b.contains(v))
    if is_infinite(a):
        a, b = b, a
    if is_infinite(b):
        return frozenset(x for x in as_set(a) if b.contains(x))
    return as_set(a) & as_set(b)


def _minus_set(a, b):
    if type(a) is frozenset and type(b) is frozenset:
        return a - b
    if isinstance(a, LazySet) and not a.finite():
        from kvexact.spec.checker.values import InfiniteSet
        return InfiniteSet(f"{a.name} \\ ...", lambda v: a.contains(v) and not member(v, b))
    if isinstance(b, LazySet) and not b.finite():
        return frozenset(x for x in as_set(a) if not b.contains(x))
    return as_set(a) - as_set(b)


def _subseteq(a, b):
    if isinstance(b, LazySet):
        return all(b.contains(x) for x in as_set(a))
    return as_set(a) <= as_set(b)


def _subset(a):
    return PowerSet(a)


def _union(a):
    parts = as_set(a)
    if any(is_infinite(x) for x in parts):
        return UnionSet(list(parts))
    out: set = set()
    for x in parts:
        out |= as_set(x)
    return frozenset(out)


def _times_set(*sets):
    return ProductSet(list(sets))


def _concat(a, b):
    if type(a) is str and type(b) is str:
        return a + b
    return _seq(a) + _seq(b)


def _len(s):
    if type(s) is str:
        return len(s)
    return len(_seq(s))


def _append(s, x):
    return seq_append(_seq(s), x)


def _head(s):
    s = _seq(s)
    if not s:
        raise EvalError("Head of the empty sequence")
    return s[0]


def _tail(s):
    s = _seq(s)
    if not s:
        raise EvalError("Tail of the empty sequence")
    return seq_tail(s)


def _subseq(s, m, n):
    s = _seq(s)
    m, n = num(m), num(n)
    if m > n:
        return ()
    if m < 1 or n > len(s):
        raise EvalError(f"SubSeq({fmt(s)}, {m}, {n}) is out of range")
    return s[m - 1:n]


def _selectseq(s, test):
    return tuple(x for x in _seq(s) if test(x) is True)


def _seqset(S):
    return SeqSet(S)


def _cardinality(S):
    return len(as_set(S))


def _is_finite(S):
    return not (isinstance(S, LazySet) and not S.finite())


def _colon_gt(a, b):
    return mk_fcn({a: b})


def _at_at(f, g):
    d = dict(fcn_items(g))
    d.update(dict(fcn_items(f)))
    return mk_fcn(d)


def _print(x, v):
    print(fmt(x), file=sys.stderr)
    return v


def _printt(x):
    print(fmt(x), file=sys.stderr)
    return True


def _assert(c, msg):
    if c is not True:
        exc = EvalError(f"Assert failed: {msg if isinstance(msg, str) else fmt(msg)}")
        exc.assert_failed = True  # type: ignore[attr-defined]
        raise exc
    return True


def _tostring(v):
    return fmt(v)


def _permutations(S):
    items = sorted_values(as_set(S))
    out = []
    for perm in itertools.permutations(items):
        out.append(mk_fcn(dict(zip(items, perm, strict=False))))
    return frozenset(out)


def _sortseq(s, lt):
    return sort_by_operator(_seq(s), lt)


# TLC's registers and the level of the state being evaluated (set by the engine)
TLC_CONTEXT: dict = {"level": 0, "registers": {}}
IMPURE = {"TLCGet", "TLCSet", "RandomElement", "JavaTime", "JsonSerialize", "ndJsonSerialize"}  # never cached
RANDOM = {"RandomElement"}  # a draw: cached only as a constant definition (TLC evaluates those once)
DYNAMIC = {"Trace", "_TETrace", "_TEPosition"}  # no arguments, yet a value per evaluation (compiler)


def _trace():
    """TLCExt's Trace: the behaviour from an initial state to the state being evaluated, a sequence of
    records (variable -> value); <<>> while initial states are computed."""
    engine = TLC_CONTEXT.get("engine")
    if engine is None:
        raise EvalError("Trace is only defined while a model is being checked")
    return tuple(Fcn(dict(s)) for s in engine.behaviour(TLC_CONTEXT.get("at", -1)))


def _te_only(name: str):
    def fail():
        raise EvalError(f"{name} (module Toolbox) has a value only in the Toolbox's trace explorer; "
                        f"TLC cannot evaluate it while model checking either")
    return fail


# the -D settings a spec may ask TLC about: action composition (\cdot) is always on in this engine
ENGINE_PROPERTIES = {"-Dtlc2.tool.impl.Tool.cdot": "true"}


def _tlcget(i):
    if i == "level":
        return TLC_CONTEXT["level"]
    if i == "config":  # what TLC reports about its own run; this engine explores breadth-first, one worker
        return Fcn({"mode": "bfs", "depth": -1, "deadlock": TLC_CONTEXT.get("deadlock", True), "worker": 1,
                    "seed": 0, "fingerprint": 0, "spec": TLC_CONTEXT.get("spec", ""),
                    "config": TLC_CONTEXT.get("config", ""), "install": "", "traces": -1})
    if i in ENGINE_PROPERTIES:  # TLCGet("-Dprop"): TLC's Java system property; here the engine's own setting
        return ENGINE_PROPERTIES[i]
    regs = TLC_CONTEXT["registers"]
    if type(i) is int and i in regs:
        return regs[i]
    raise EvalError(f"TLCGet({fmt(i)}): no such register or statistic in this engine")


def _tlcset(i, v):
    if type(i) is not int:
        raise EvalError(f"TLCSet({fmt(i)}, ...): the register must be an integer")
    TLC_CONTEXT["registers"][i] = v
    return True


_RNG = random.Random(0)  # Randomization and RandomElement: reproducible from run to run


def _random_element(S):
    els = ordered_elements(as_set(S))
    if not els:
        raise EvalError("RandomElement of the empty set")
    return _RNG.choice(els)


def _javatime():
    return int(time.time() * 1000) & 0x7FFFFFFF


def _any():
    raise EvalError("TLC's Any is not supported")


# Bags: a bag is a function from elements to positive counts
def _emptybag():
    return ()


def _setbag(S):
    return mk_fcn({x: 1 for x in as_set(S)})


def _bagtoset(b):
    return domain(b)


def _bagin(x, b):
    return x in domain(b)


def _copiesin(x, b):
    return apply_fcn(b, x) if x in domain(b) else 0


def _bagcup(a, b):
    d = dict(fcn_items(a))
    for k, v in fcn_items(b):
        d[k] = d.get(k, 0) + v
    return mk_fcn(d)


def _bagminus(a, b):
    d = dict(fcn_items(a))
    for k, v in fcn_items(b):
        if k in d:
            d[k] -= v
            if d[k] <= 0:
                del d[k]
    return mk_fcn(d)


def _bagcardinality(b):
    return sum(v for _, v in fcn_items(b))


def _subbag(a, b):
    db = dict(fcn_items(b))
    return all(db.get(k, 0) >= v for k, v in fcn_items(a))


def _bagofall(f, b):
    d: dict = {}
    for k, v in fcn_items(b):
        y = f(k)
        d[y] = d.get(y, 0) + v
    return mk_fcn(d)


def _bagunion(S):
    d: dict = {}
    for b in as_set(S):
        for k, v in fcn_items(b):
            d[k] = d.get(k, 0) + v
    return mk_fcn(d)


def _subbags(b):
    items = sorted_values(domain(b))
    counts = [range(apply_fcn(b, k) + 1) for k in items]
    out = set()
    for combo in itertools.product(*counts):
        out.add(mk_fcn({k: c for k, c in zip(items, combo, strict=True) if c > 0}))
    return frozenset(out)


def _isabag(b):
    return all(type(v) is int and v > 0 for _, v in fcn_items(b))


# name -> (arity, implementation[, positions of operator arguments]); arity 0: implementation is the value
OPERATORS: dict[str, tuple] = {
    "+": (2, _plus), "-": (2, _minus), "-.": (1, _negate), "*": (2, _times), "\\div": (2, _div), "%": (2, _mod), "^": (2, _pow),
    "<": (2, _lt), ">": (2, _gt), "<=": (2, _le), ">=": (2, _ge), "..": (2, _range),
    "\\cup": (2, _cup), "\\cap": (2, _cap), "\\": (2, _minus_set), "\\subseteq": (2, _subseteq),
    "SUBSET": (1, _subset), "UNION": (1, _union), "DOMAIN": (1, domain),
    "Nat": (0, NAT), "Int": (0, INT), "BOOLEAN": (0, frozenset({False, True})), "STRING": (0, STRING),
    "\\o": (2, _concat), "Len": (1, _len), "Append": (2, _append), "Head": (1, _head), "Tail": (1, _tail),
    "SubSeq": (3, _subseq), "SelectSeq": (2, _selectseq, (1,)), "Seq": (1, _seqset),
    "Cardinality": (1, _cardinality), "IsFiniteSet": (1, _is_finite),
    ":>": (2, _colon_gt), "@@": (2, _at_at), "Print": (2, _print), "PrintT": (1, _printt),
    "Assert": (2, _assert), "ToString": (1, _tostring), "Permutations": (1, _permutations),
    "SortSeq": (2, _sortseq, (1,)), "JavaTime": (0, 0), "\\X": (-1, _times_set), "TLCEval": (1, lambda v: v),
    "TLCGet": (1, _tlcget), "TLCSet": (2, _tlcset), "RandomElement": (1, _random_element),
    "EmptyBag": (0, ()), "SetToBag": (1, _setbag), "BagToSet": (1, _bagtoset), "BagIn": (2, _bagin),
    "CopiesIn": (2, _copiesin), "(+)": (2, _bagcup), "\\oplus": (2, _bagcup), "(-)": (2, _bagminus),
    "\\ominus": (2, _bagminus), "BagCardinality": (1, _bagcardinality), "\\sqsubseteq": (2, _subbag),
    "IsABag": (1, _isabag), "BagOfAll": (2, _bagofall, (0,)), "BagUnion": (1, _bagunion),
    "SubBag": (1, _subbags),
}

# standard operators this engine names as unsupported (rather than "undefined")
UNSUPPORTED = {
    "Any": "TLC module",
    "Real": "Reals module", "Infinity": "Reals module", "/": "Reals module",
}

_ARITH = ["+", "-", "*", "\\div", "%", "^", "<", ">", "<=", ">=", "..", "Nat"]
STANDARD_MODULES: dict[str, list[str]] = {
    "Naturals": _ARITH,
    "Integers": _ARITH + ["Int", "-."],  # -. is the prefix minus, which Naturals lacks
    "Sequences": ["Seq", "Len", "Append", "Head", "Tail", "SubSeq", "SelectSeq", "\\o"],
    "FiniteSets": ["Cardinality", "IsFiniteSet"],
    "TLC": [":>", "@@", "Print", "PrintT", "Assert", "ToString", "Permutations", "SortSeq", "JavaTime",
            "TLCEval", "TLCGet", "TLCSet", "RandomElement"],
    "Bags": ["EmptyBag", "SetToBag", "BagToSet", "BagIn", "CopiesIn", "(+)", "\\oplus", "(-)", "\\ominus",
             "BagCardinality", "\\sqsubseteq", "IsABag", "BagOfAll", "BagUnion", "SubBag"],
    "Reals": _ARITH + ["Int", "-."],
}
# operators of the language itself, defined without any EXTENDS; every other one needs its standard module
LANGUAGE_OPERATORS = frozenset(OPERATORS) - {op for ops in STANDARD_MODULES.values() for op in ops}


def defining_modules(op: str) -> list[str]:
    """The standard modules that define ``op`` (empty for the language's own operators)."""
    return [m for m, ops in STANDARD_MODULES.items() if op in ops]

# keep names importable for type checkers
_unused = (order_key, tla_eq, Fcn, RecordSet, FcnSet)
