"""TLA+ values as Python objects, with TLC's equality, order and printing.

Representation (invariant: one Python form per TLA+ value, so ``==`` and ``hash`` agree with TLA+ equality):
int -> int, BOOLEAN -> bool, string -> str, model value -> :class:`ModelValue`, finite set -> frozenset,
function with domain 1..n (n >= 0: tuples, sequences, ``<<>>``) -> tuple, any other function or record ->
:class:`Fcn`. Large or infinite sets (Nat, SUBSET S, [S -> T], Seq(S), ...) are lazy :class:`LazySet`
objects that answer membership without enumerating. Booleans are tagged in :func:`canon` so a state
fingerprint never confuses ``TRUE`` with ``1``.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any


class EvalError(Exception):
    """An evaluation error (TLC exit 75); ``location`` is filled in by the compiled expression."""

    def __init__(self, message: str, location: str = ""):
        super().__init__(message)
        self.message = message
        self.location = location

    def __str__(self) -> str:
        return f"{self.message} ({self.location})" if self.location else self.message


class ModelValue:
    """A TLC model value: equal only to itself (interned by name)."""

    __slots__ = ("name", "index")
    _interned: dict[str, ModelValue] = {}
    name: str
    index: int

    def __new__(cls, name: str) -> ModelValue:
        mv = cls._interned.get(name)
        if mv is None:
            mv = object.__new__(cls)
            mv.name = name
            mv.index = len(cls._interned)
            cls._interned[name] = mv
        return mv

    def __reduce__(self):
        return (ModelValue, (self.name,))

    def __repr__(self) -> str:
        return f"ModelValue({self.name!r})"


class Fcn:
    """A function (or record) whose domain is not 1..n; immutable, hashable."""

    __slots__ = ("d", "_h", "_c", "_o")

    def __init__(self, d: dict):
        self.d = d
        self._h: int | None = None
        self._c: Any = None  # canon key, once computed
        self._o: Any = None  # order_key, once computed

    def __hash__(self) -> int:
        if self._h is None:
            self._h = hash(frozenset(self.d.items()))
        return self._h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fcn) and self.d == other.d

    def __reduce__(self):
        return (Fcn, (self.d,))

    def __repr__(self) -> str:
        return f"Fcn({self.d!r})"


def mk_fcn(d: dict) -> Any:
    """Normalize a function given as a dict: domain 1..n becomes a tuple."""
    n = len(d)
    if n == 0:
        return ()
    if 1 not in d or n not in d:  # neither 1 nor TRUE (== 1) is a key, or n is not: not 1..n
        return Fcn(d)
    if all(type(k) is int for k in d) and all(i in d for i in range(1, n + 1)):
        return tuple(d[i] for i in range(1, n + 1))
    return Fcn(d)


def seq_length(S: frozenset) -> int:
    """n when the set S is 1..n with n >= 1 (so a function on S is a tuple), else -1. One pass, no memo:
    a memo keyed by the set would confuse {TRUE} with {1}, which Python holds equal."""
    k = len(S)
    if k == 0 or 1 not in S or k not in S:
        return -1
    for x in S:
        if type(x) is not int or x < 1 or x > k:
            return -1
    return k


class LazySet:
    """A set given by a membership test; ``elements()`` enumerates it when it is finite."""

    name = "set"
    _order: tuple | None = None  # ordered_elements, once computed

    def contains(self, v: Any) -> bool:
        raise NotImplementedError

    def elements(self) -> frozenset:
        raise EvalError(f"cannot enumerate the infinite set {self.name}")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazySet) and not self.finite():
            return self is other or (type(self) is type(other) and self.key() == other.key())
        if isinstance(other, (LazySet, frozenset)):
            return self.elements() == as_set(other)
        return False

    def __hash__(self) -> int:
        return hash(self.elements()) if self.finite() else hash(self.key())

    def finite(self) -> bool:
        return True

    def key(self) -> Any:
        return (type(self).__name__,)

    def __reduce__(self):
        return (frozenset, (tuple(self.elements()),))


class InfiniteSet(LazySet):
    def __init__(self, name: str, test: Callable[[Any], bool]):
        self.name = name
        self.test = test

    def contains(self, v: Any) -> bool:
        return self.test(v)

    def finite(self) -> bool:
        return False

    def key(self) -> Any:
        return self.name


NAT = InfiniteSet("Nat", lambda v: type(v) is int and v >= 0)
INT = InfiniteSet("Int", lambda v: type(v) is int)
STRING = InfiniteSet("STRING", lambda v: type(v) is str)


class UnionSet(LazySet):
    """S1 \\cup S2 \\cup ... (also UNION of a finite set of sets) where some part is infinite."""

    def __init__(self, parts: list):
        self.parts = parts
        self.name = " \\cup ".join(getattr(p, "name", "{...}") for p in parts)

    def contains(self, v: Any) -> bool:
        return any(member(v, p) for p in self.parts)

    def finite(self) -> bool:
        return all(not isinstance(p, LazySet) or p.finite() for p in self.parts)

    def elements(self) -> frozenset:
        if not self.finite():
            raise EvalError(f"cannot enumerate the infinite set {self.name}")
        return frozenset().union(*[as_set(p) for p in self.parts])

    def key(self) -> Any:
        return ("Union", tuple(self.parts))


class FilterSet(LazySet):
    """{x \\in S : P(x)} over a lazy S (infinite, or large such as SUBSET SUBSET T), as TLC's SetPredValue:
    membership is S's and P's, without enumerating S; enumerated (once) only when its elements are needed."""

    def __init__(self, base: LazySet, test: Callable[[Any], bool]):
        self.base = base
        self.test = test
        self.name = f"{{x \\in {base.name} : ...}}"
        self._els: frozenset | None = None

    def contains(self, v: Any) -> bool:
        return self.base.contains(v) and self.test(v)

    def finite(self) -> bool:
        return self.base.finite()

    def elements(self) -> frozenset:
        if self._els is None:
            if not self.base.finite():
                raise EvalError(f"cannot enumerate the infinite set {self.name}")
            self._els = frozenset([x for x in ordered_elements(self.base) if self.test(x)])
        return self._els

    def key(self) -> Any:
        return ("Filter", id(self))  # equal only to itself: TLC cannot compare such sets either


def is_infinite(v: Any) -> bool:
    return isinstance(v, LazySet) and not v.finite()


class SeqSet(LazySet):
    """Seq(S): every finite sequence over S."""

    def __init__(self, base: Any):
        self.base = base
        self.name = "Seq(...)"

    def contains(self, v: Any) -> bool:
        return type(v) is tuple and all(member(x, self.base) for x in v)

    def finite(self) -> bool:
        return False

    def key(self) -> Any:
        return ("Seq", self.base)


class PowerSet(LazySet):
    def __init__(self, base: Any):
        self.base = base
        self._el: frozenset | None = None

    def contains(self, v: Any) -> bool:
        if isinstance(v, LazySet):
            v = v.elements()
        if type(v) is not frozenset:
            return False
        base = self.base
        if type(base) is frozenset:  # a subset test in one step; one element tells the kinds apart
            if not v <= base:
                return False
            if v and base:
                x = next(iter(v))
                if (type(x) is bool) != (type(next(iter(base))) is bool):
                    same_kind(x, base)
            return True
        return all(member(x, base) for x in v)

    def elements(self) -> frozenset:
        if self._el is None:
            items = sorted_values(as_set(self.base))
            self._el = frozenset(
                frozenset(c) for r in range(len(items) + 1) for c in itertools.combinations(items, r))
        return self._el

    def ordered(self) -> list:
        items = sorted_values(as_set(self.base))
        return [frozenset(c) for r in range(len(items) + 1) for c in itertools.combinations(items, r)]


# A finite function set or record set (a constant, as in a type invariant: [RM -> [Acceptor -> [...]]])
# remembers the functions found to be members by their fingerprint keys, when a key was already made
# (Fcn._c: the state's fingerprint makes it before the invariant is checked): a state that changed one
# record of a nested function tests the one record, not every level again. Equal keys are equal TLA+
# values (TRUE and 1 apart), and membership is a function of the value; only TRUE answers are kept.
def _known_key(v: Any) -> Any:
    if type(v) is Fcn:
        c = v._c
        if c is not None:
            return v if c is _OWN else c
    return None


def _remember(known: set, key: Any) -> None:
    if len(known) > 100_000:
        known.clear()
    known.add(key)


class FcnSet(LazySet):
    """[D -> R]."""

    def __init__(self, dom: Any, rng: Any):
        self.dom = dom if is_infinite(dom) else as_set(dom)
        self.rng = rng
        self._el: frozenset | None = None
        self.name = "[... -> ...]"
        self._known: set = set()  # see _known_key

    def finite(self) -> bool:
        return not is_infinite(self.dom) and not is_infinite(self.rng)

    def key(self) -> Any:
        return ("FcnSet", self.dom, self.rng)

    def contains(self, v: Any) -> bool:
        dom = self.dom
        if type(dom) is not frozenset:  # an infinite domain: no finite function value has it
            return False
        key = _known_key(v)
        if key is not None and key in self._known:
            return True
        if self._contains(v, dom):
            if key is not None:
                _remember(self._known, key)
            return True
        return False

    def _contains(self, v: Any, dom: frozenset) -> bool:
        if type(v) is tuple:
            n = len(v)
            if len(dom) != n or (n and (1 not in dom or n not in dom or any(i not in dom for i in range(2, n)))):
                return False
            vals: Any = v
        elif type(v) is Fcn:
            if v.d.keys() != dom:
                return False
            vals = v.d.values()
        else:
            return False
        rng = self.rng
        if type(rng) is frozenset:
            for x in vals:
                if x not in rng:
                    return False
                if type(x) is bool or (type(x) is int and (x == 0 or x == 1)):
                    same_kind(x, rng)
            return True
        for x in vals:
            if not member(x, rng):
                return False
        return True

    def ordered(self) -> list:
        keys = sorted_values(self.dom)
        rng = sorted_values(as_set(self.rng))
        n = len(keys)
        if keys == list(range(1, n + 1)):  # a sequence: the tuple itself (mk_fcn's form)
            return [combo for combo in itertools.product(rng, repeat=n)] if n else [()]
        return [Fcn(dict(zip(keys, combo, strict=True))) for combo in itertools.product(rng, repeat=n)]

    def elements(self) -> frozenset:
        if self._el is None:
            self._el = frozenset(self.ordered())
        return self._el


class RecordSet(LazySet):
    """[a : S, b : T]."""

    def __init__(self, fields: dict[str, Any]):
        self.fields = fields
        self._el: frozenset | None = None
        self._known: set = set()  # see _known_key

    def contains(self, v: Any) -> bool:
        if type(v) is not Fcn or v.d.keys() != self.fields.keys():
            return False
        c = v._c
        if c is not None:
            key = v if c is _OWN else c
            if key in self._known:
                return True
            if self._contains(v):
                _remember(self._known, key)
                return True
            return False
        return self._contains(v)

    def _contains(self, v: Fcn) -> bool:
        d = v.d
        for k, S in self.fields.items():
            x = d[k]
            if type(S) is frozenset and type(x) is not bool and not (type(x) is int and (x == 0 or x == 1)):
                if x not in S:
                    return False
            elif not member(x, S):
                return False
        return True

    def finite(self) -> bool:
        return not any(is_infinite(s) for s in self.fields.values())

    def key(self) -> Any:
        return ("Records", tuple(sorted(self.fields.items())))

    def ordered(self) -> list:
        names = sorted(self.fields)
        sets = [sorted_values(as_set(self.fields[k])) for k in names]
        return [Fcn(dict(zip(names, combo, strict=False))) for combo in itertools.product(*sets)]

    def elements(self) -> frozenset:
        if self._el is None:
            self._el = frozenset(self.ordered())
        return self._el


class ProductSet(LazySet):
    """S \\X T \\X ..."""

    def __init__(self, sets: list):
        self.sets = sets
        self._el: frozenset | None = None

    def contains(self, v: Any) -> bool:
        if type(v) is not tuple or len(v) != len(self.sets):
            return False
        for x, S in zip(v, self.sets, strict=True):
            if type(S) is frozenset and type(x) is not bool and not (type(x) is int and (x == 0 or x == 1)):
                if x not in S:
                    return False
            elif not member(x, S):
                return False
        return True

    def finite(self) -> bool:
        return not any(is_infinite(s) for s in self.sets)

    def key(self) -> Any:
        return ("Product", tuple(self.sets))

    def ordered(self) -> list:
        return list(itertools.product(*[sorted_values(as_set(s)) for s in self.sets]))

    def elements(self) -> frozenset:
        if self._el is None:
            self._el = frozenset(self.ordered())
        return self._el


class LazyFcn:
    """A function defined recursively (``f[x \\in S] == ...``): applied on demand, memoized."""

    __slots__ = ("dom", "compute", "memo", "_full")

    def __init__(self, dom: Any, compute: Callable[[Any], Any]):
        if isinstance(dom, (ProductSet, FcnSet, RecordSet)) and dom.finite():
            dom = dom.elements()
        self.dom = dom
        self.compute = compute
        self.memo: dict = {}
        self._full: Any = None

    def apply(self, x: Any) -> Any:
        try:
            return self.memo[x]
        except KeyError:
            pass
        if not member(x, self.dom):
            raise EvalError(f"function applied to {fmt(x)}, outside its domain")
        v = self.compute(x)
        self.memo[x] = v
        return v

    def materialize(self) -> Any:
        if self._full is None:
            self._full = mk_fcn({x: self.apply(x) for x in as_set(self.dom)})
        return self._full

    def __eq__(self, other: object) -> bool:
        return self.materialize() == (other.materialize() if isinstance(other, LazyFcn) else other)

    def __hash__(self) -> int:
        return hash(self.materialize())


def as_set(v: Any) -> frozenset:
    """The elements of a set value; an error for a non-set."""
    if type(v) is frozenset:
        return v
    if isinstance(v, LazySet):
        return v.elements()
    raise EvalError(f"expected a set, got {fmt(v)}")


def member(x: Any, s: Any) -> bool:
    if type(s) is frozenset:
        if x in s:
            tx = type(x)
            if tx is bool or (tx is int and (x == 0 or x == 1)):
                same_kind(x, s)  # Python's 1 == TRUE: the set must hold x's kind
            return True
        return False
    if isinstance(s, LazySet):
        return s.contains(x)
    raise EvalError(f"\\in applied to {fmt(s)}, which is not a set")


def same_kind(x: Any, s: frozenset) -> None:
    """``x in s`` found an equal element: raise as TLC does when it is a boolean and x an integer (or
    the reverse); TLC's sets hold one kind of value, so one element tells."""
    y = next(iter(s))
    if (type(y) is bool) != (type(x) is bool):
        raise EvalError(f"attempted to compare {kind(x)} {fmt(x)} with {kind(y)} {fmt(y)}")


def _mixed(x: Any, y: Any) -> EvalError:
    return EvalError(f"attempted to compare {kind(x)} {fmt(x)} with {kind(y)} {fmt(y)}: a set cannot hold both "
                     f"integers and booleans (TLC cannot compare them; Python would merge 1 and TRUE)")


def set_of(items: tuple | list) -> frozenset:
    """The set {items...}: an error when it holds both an integer and a boolean, which TLC cannot compare
    (and Python holds equal: {1, TRUE} would be {1}). Other mixes (a set and an integer, as in
    SUBSET {1} \\cup {2}) TLC accepts, and so does this."""
    t = type(items[0]) if items else None
    for x in items:
        if type(x) is not t:
            break
    else:  # one type: the common case
        return frozenset(items)
    first_int = first_bool = None
    for x in items:
        tx = type(x)
        if tx is int and first_int is None:
            first_int = x
        elif tx is bool and first_bool is None:
            first_bool = x
    if first_int is not None and first_bool is not None:
        raise _mixed(first_int, first_bool)
    return frozenset(items)


def set_union(a: frozenset, b: frozenset) -> frozenset:
    """a \\cup b of two finite sets: an error when one holds integers and the other booleans (see set_of).
    When a's fingerprint key is known and b is small, the union's key is derived from it (a set that grows
    by one element per step, as a message set does, would otherwise rebuild it from every element)."""
    if not a:
        return b
    if not b:
        return a
    x, y = next(iter(a)), next(iter(b))  # TLC's sets hold one kind of value: one element each tells
    tx, ty = type(x), type(y)
    if (tx is int and ty is bool) or (tx is bool and ty is int):
        raise _mixed(x, y)
    if len(b) > len(a):
        a, b = b, a
    if len(b) <= 4 and b <= a:  # nothing new (a message sent again): the larger set itself, keys and all
        return a
    r = a | b
    if len(b) <= 4 and len(r) > len(a):
        hit = _CANON.get(id(a))
        if hit is not None:
            ca = hit[1][1]
            if ca is a:  # every element is its own key
                for z in b:
                    if type(z) not in _SIMPLE and canon(z) is not z:
                        return r
                c = ("$S", r)
            else:
                c = ("$S", ca | frozenset([canon(z) for z in b]))
            if len(_CANON) > 400_000:
                _CANON.clear()
            _CANON[id(r)] = (r, c)
    return r


def ordered_elements(s: Any) -> Sequence:
    """A set's elements in TLC's deterministic order (used for \\E branches, CHOOSE, x' \\in S); a lazy
    set (immutable, as every value) keeps its order once computed."""
    if type(s) is frozenset:  # the common case first
        if len(s) < 2:
            return list(s)
        hit = _ORDER.get(id(s))
        if hit is not None:
            return hit[1]
        els = sorted_values(s)  # shared by every caller: read, never changed
        if len(_ORDER) > 100_000:
            _ORDER.clear()
        _ORDER[id(s)] = (s, els)  # s kept alive with its entry, so its id is not reused meanwhile
        return els
    if isinstance(s, (FcnSet, RecordSet, ProductSet, PowerSet)):
        order = s._order
        if order is None:
            order = s._order = tuple(s.ordered())
        return order
    return sorted_values(as_set(s))


_ORDER: dict[int, tuple] = {}  # id(frozenset) -> (the set, its elements in TLC's order)


def kind(v: Any) -> str:
    t = type(v)
    if t is bool:
        return "boolean"
    if t is int:
        return "integer"
    if t is str:
        return "string"
    if t is ModelValue:
        return "model value"
    if t is frozenset or isinstance(v, LazySet):
        return "set"
    if t is tuple or t is Fcn or t is LazyFcn:
        return "function"
    return t.__name__


def order_key(v: Any) -> Any:
    """TLC's total order within one kind (sets by size, then elements)."""
    t = type(v)
    if t is int:
        return (1, v)
    if t is bool:
        return (0, int(v))
    if t is str:
        return (2, v)
    if t is ModelValue:
        return (3, v.index)
    if t is tuple:
        for x in v:
            if type(x) is not int:
                return (4, len(v), tuple(order_key(x) for x in v))
        return (4, len(v), v)
    if t is Fcn:
        o = v._o
        if o is None:
            o = v._o = (5, len(v.d), tuple(sorted([(order_key(k), order_key(x)) for k, x in v.d.items()])))
        return o
    if t is frozenset or isinstance(v, LazySet):
        els = as_set(v)
        return (6, len(els), tuple(sorted(order_key(x) for x in els)))
    if t is LazyFcn:
        return order_key(v.materialize())
    return (9, repr(v))


_MIN_CACHE: dict = {}


def min_value(s: Any) -> Any:
    """The first element of a set in TLC's order (CHOOSE x \\in S : TRUE); cached per set value."""
    els = as_set(s)
    try:
        return _MIN_CACHE[els]
    except KeyError:
        pass
    v = _min_value(els)
    if len(_MIN_CACHE) > 100_000:
        _MIN_CACHE.clear()
    _MIN_CACHE[els] = v
    return v


def _min_value(els: frozenset) -> Any:
    if not els:
        raise EvalError("CHOOSE from the empty set")
    for x in els:
        if type(x) is not int:
            return min(els, key=order_key)
    return min(els)


def sorted_values(s: Iterable) -> list:
    items = list(s)
    if all(type(x) is int for x in items):
        return sorted(items)
    return sorted(items, key=order_key)


def sort_by_operator(items: tuple, lt: Callable[[Any, Any], Any]) -> tuple:
    """``items`` sorted by the TLA+ less-than operator ``lt`` (SortSeq, SetToSortSeq); a stable sort, so
    elements ``lt`` leaves unordered either way keep their order."""
    import functools

    def compare(a: Any, b: Any) -> int:
        if lt(a, b) is True:
            return -1
        if lt(b, a) is True:
            return 1
        return 0
    return tuple(sorted(items, key=functools.cmp_to_key(compare)))


def tla_eq(a: Any, b: Any) -> bool:
    """TLA+ equality; comparing values of different kinds is an error, as in TLC (model values excepted)."""
    ta, tb = type(a), type(b)
    if ta is tb and (ta is int or ta is str or ta is bool):
        return a == b
    ka, kb = kind(a), kind(b)
    if ka != kb:
        if ka == "model value" or kb == "model value":
            return False
        raise EvalError(f"attempted to compare {ka} {fmt(a)} with {kb} {fmt(b)}")
    if ka == "set":
        if isinstance(a, LazySet) and isinstance(b, LazySet) and not (a.finite() and b.finite()):
            return a == b
        return as_set(a) == as_set(b)
    if ta is LazyFcn:
        a = a.materialize()
    if tb is LazyFcn:
        b = b.materialize()
    return a == b


def apply_fcn(f: Any, x: Any) -> Any:
    t = type(f)
    if t is tuple:
        if type(x) is int and 1 <= x <= len(f):
            return f[x - 1]
        raise EvalError(f"sequence/tuple {fmt(f)} applied to {fmt(x)}, outside its domain 1..{len(f)}")
    if t is Fcn:
        try:
            return f.d[x]
        except KeyError:
            raise EvalError(f"function {fmt(f)} applied to {fmt(x)}, outside its domain") from None
    if t is LazyFcn:
        return f.apply(x)
    raise EvalError(f"applied {fmt(f)} as a function, but it is a {kind(f)}")


def domain(f: Any) -> frozenset:
    t = type(f)
    if t is tuple:
        return frozenset(range(1, len(f) + 1))
    if t is Fcn:
        return frozenset(f.d)
    if t is LazyFcn:
        return as_set(f.dom)
    raise EvalError(f"DOMAIN applied to {fmt(f)}, which is not a function")


def fcn_items(f: Any) -> Iterator:
    if type(f) is tuple:
        return iter(enumerate(f, 1))
    if type(f) is Fcn:
        return iter(f.d.items())
    if type(f) is LazyFcn:
        return iter(fcn_items(f.materialize()))
    raise EvalError(f"expected a function, got {fmt(f)}")


def fcn_update(f: Any, x: Any, v: Any) -> Any:
    """[f EXCEPT ![x] = v]: f with x mapped to v (f itself when x is not in DOMAIN f)."""
    if type(f) is Fcn:  # the common case first
        d = f.d
        if x not in d:
            return f  # TLA+: unchanged when x is not in DOMAIN f
        if d[x] is v:
            return f  # the same value: the same function (its keys already built)
        d = d.copy()
        d[x] = v
        h = Fcn(d)
        c = f._c
        if c is _OWN:
            if type(v) in SELF_KEYED:  # still its own key
                h._c = _OWN
        elif c is not None and len(d) > _FOLLOW_MIN and type(v) not in SELF_KEYED:
            # the fingerprint key follows the update (h holds v, so h is not its own key)
            ck = canon(x)
            h._c = ("$F", (c[1] - {(ck, canon(f.d[x]))}) | {(ck, canon(v))})
        return h
    if type(f) is tuple:
        if type(x) is int and 1 <= x <= len(f):
            if f[x - 1] is v:
                return f
            g = f[: x - 1] + (v,) + f[x:]
            hit = _CANON.get(id(f)) if type(v) not in SELF_KEYED else None
            if hit is not None:  # the fingerprint key follows the update (g holds v: not flat)
                c = hit[1]
                _CANON[id(g)] = (g, c[:x] + (canon(v),) + c[x + 1:])
            return g
        return f  # TLA+: [f EXCEPT ![x] = v] is f when x is not in DOMAIN f
    if type(f) is LazyFcn:
        return fcn_update(f.materialize(), x, v)
    raise EvalError(f"EXCEPT applied to {fmt(f)}, which is not a function")


def record_of(cache: dict, keys: tuple, vals: tuple) -> Fcn:
    """The record [keys[i] |-> vals[i]] built at one construction site whose ``cache`` (a dict of its
    own) maps the value tuples it has built to their records when every value is an integer, string or
    model value (Python's equality of such tuples is TLA+'s: no boolean, no nested value that Python
    would hold equal to another kind). Such a record is its own fingerprint key (_OWN), and the one
    object keeps its hash: a record rebuilt for every binding of every state (a membership test
    ``[type |-> "2b", acc |-> a] \\in msgs``) is hashed once."""
    if SELF_KEYED.issuperset(map(type, vals)):
        r = cache.get(vals)
        if r is None:
            if len(cache) > 20_000:
                cache.clear()
            r = cache[vals] = Fcn(dict(zip(keys, vals, strict=True)))
            r._c = _OWN
        return r
    return Fcn(dict(zip(keys, vals, strict=True)))


def seq_append(s: tuple, x: Any) -> tuple:
    """Append(s, x) of a sequence s; when s's fingerprint key is known, the result's is s's and x's (a
    queue that grows by one element per step would otherwise rebuild it from every element)."""
    r = s + (x,)
    if s:
        hit = _CANON.get(id(s))
        if hit is not None:
            if len(_CANON) > 400_000:
                _CANON.clear()
            _CANON[id(r)] = (r, hit[1] + (x if type(x) in SELF_KEYED else canon(x),))
    return r


def seq_tail(s: tuple) -> tuple:
    """Tail(s) of a non-empty sequence s; its fingerprint key derived from s's when that is known."""
    r = s[1:]
    if len(r) > 1 and not is_flat(r):
        hit = _CANON.get(id(s))
        if hit is not None:
            c = hit[1]
            if len(_CANON) > 400_000:
                _CANON.clear()
            _CANON[id(r)] = (r, c[:1] + c[2:])
    return r


# A function's fingerprint key follows an EXCEPT only past this many entries: a small one's key is
# rebuilt from its values' keys when a state needs it, which costs less than following every update (a
# nested EXCEPT updates each level once per change, and replacing a pair compares nested keys deeply).
_FOLLOW_MIN = 16
_BTRUE = ("$B", True)
_BFALSE = ("$B", False)


_CANON: dict[int, tuple] = {}  # id(container) -> (container, canon): states share most sub-values
# Fcn._c of a function whose keys and values are all integers, strings or model values: the function
# is its own key (Python's equality is TLA+'s on such values); a sequence of such values whose first is
# not a string starting with "$" (a tag of the keys below) is its own key too (see is_flat)
_OWN = ("$own",)
_SIMPLE = (int, str, ModelValue)
SELF_KEYED = frozenset(_SIMPLE)  # the types that are their own canon key: a container's elements skip the call


def is_flat(v: tuple) -> bool:
    """A sequence that is its own fingerprint key: every element an integer, string or model value (no
    boolean, so Python's equality is TLA+'s), the first not a string starting with "$", so that it
    never equals a tagged key such as canon(<<1>>) = ("$T", 1)."""
    for x in v:
        if type(x) not in SELF_KEYED:
            return False
    return not v or type(v[0]) is not str or v[0][:1] != "$"


def canon(v: Any) -> Any:
    """A hashable fingerprint key that tags booleans, so TRUE and 1 (or {TRUE} and {1}) differ. Equal
    TLA+ values have equal keys; keys of sequences and sets are remembered per object (kept alive in
    the memo, so an id is never reused while its entry exists). A function or sequence of integers,
    strings and model values only is its own key (see _OWN and is_flat), as is a set of such values."""
    t = type(v)
    if t is int or t is str or t is ModelValue:
        return v
    if t is bool:
        return _BTRUE if v else _BFALSE
    if t is Fcn:
        c = v._c
        if c is None:
            d = v.d
            if SELF_KEYED.issuperset(map(type, d.values())) and SELF_KEYED.issuperset(map(type, d)):
                v._c = _OWN
                return v
            c = v._c = ("$F", frozenset([(k if type(k) in SELF_KEYED else canon(k),
                                          x if type(x) in SELF_KEYED else canon(x)) for k, x in d.items()]))
        elif c is _OWN:
            return v
        return c
    if t is tuple or t is frozenset:
        if t is tuple:  # is_flat(v), inline: a sequence of sequences stops at its first element
            for x in v:
                if type(x) not in SELF_KEYED:
                    break
            else:
                if not v or type(v[0]) is not str or v[0][:1] != "$":
                    return v
        hit = _CANON.get(id(v))
        if hit is not None:
            return hit[1]
        if t is tuple:
            c = ("$T",) + tuple([x if type(x) in SELF_KEYED else canon(x) for x in v])
        else:
            c = ("$S", v)
            for x in v:
                if type(x) not in _SIMPLE:
                    keys = [canon(y) for y in v]
                    if not all(map(operator.is_, keys, v)):  # else every element is its own key
                        c = ("$S", frozenset(keys))
                    break
        if len(_CANON) > 400_000:
            _CANON.clear()
        _CANON[id(v)] = (v, c)
        return c
    if t is LazyFcn:
        return canon(v.materialize())
    if isinstance(v, LazySet):
        return ("$S", frozenset(canon(x) for x in v.elements())) if v.finite() else ("$L", v.key())
    return v


def memo_key(v: Any) -> Any:
    """A memo's key for a value: equal only for equal TLA+ values, so TRUE and 1 (or <<TRUE>> and <<1>>),
    which Python holds equal and hashes alike, get different entries."""
    t = type(v)
    if t is int or t is str or t is ModelValue:
        return v
    if t is tuple:  # often made for the call (F(SelectSeq(s, T))): its key is not remembered
        for x in v:  # is_flat(v), inline
            if type(x) not in SELF_KEYED:
                break
        else:
            if not v or type(v[0]) is not str or v[0][:1] != "$":
                return v
        hit = _CANON.get(id(v))
        if hit is not None:
            return hit[1]
        return ("$T",) + tuple([x if type(x) in SELF_KEYED else canon(x) for x in v])
    return canon(v)


def memo_keys(vals: Iterable) -> tuple:
    """memo_key of several argument values, as one key."""
    return tuple([v if type(v) in SELF_KEYED else memo_key(v) for v in vals])


def fmt(v: Any) -> str:
    """TLA+ text of a value, as TLC prints it."""
    t = type(v)
    if t is bool:
        return "TRUE" if v else "FALSE"
    if t is int:
        return str(v)
    if t is str:
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if t is ModelValue:
        return v.name
    if t is tuple:
        return "<<" + ", ".join(fmt(x) for x in v) + ">>"
    if t is frozenset:
        return "{" + ", ".join(fmt(x) for x in sorted_values(v)) + "}"
    if t is Fcn:
        if v.d and all(type(k) is str for k in v.d):
            return "[" + ", ".join(f"{k} |-> {fmt(x)}" for k, x in sorted(v.d.items())) + "]"
        return "(" + " @@ ".join(f"{fmt(k)} :> {fmt(x)}" for k, x in
                                 sorted(v.d.items(), key=lambda kv: order_key(kv[0]))) + ")"
    if t is LazyFcn:
        return fmt(v.materialize())
    if isinstance(v, LazySet):
        return fmt(v.elements()) if v.finite() else v.name
    if callable(v):
        return "<operator>"
    return repr(v)


def from_python(v: Any) -> Any:
    """Python -> TLA+: int, bool, str, set/frozenset, tuple/list (sequence), dict (function/record),
    ModelValue."""
    if isinstance(v, (bool, int, str, ModelValue)):
        return v
    if isinstance(v, (set, frozenset)):
        return frozenset(from_python(x) for x in v)
    if isinstance(v, (tuple, list)):
        return tuple(from_python(x) for x in v)
    if isinstance(v, dict):
        return mk_fcn({from_python(k): from_python(x) for k, x in v.items()})
    if isinstance(v, (Fcn, LazySet, LazyFcn)):
        return v
    raise TypeError(f"no TLA+ value for Python {type(v).__name__} {v!r}")


def to_python(v: Any) -> Any:
    """TLA+ -> Python: sets become frozensets, sequences tuples, functions and records dicts."""
    t = type(v)
    if t in (bool, int, str, ModelValue):
        return v
    if t is tuple:
        return tuple(to_python(x) for x in v)
    if t is frozenset or isinstance(v, LazySet):
        return frozenset(to_python(x) for x in as_set(v))
    if t is Fcn:
        return {to_python(k): to_python(x) for k, x in v.d.items()}
    if t is LazyFcn:
        return to_python(v.materialize())
    return v
