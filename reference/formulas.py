"""The formula registry (0x10A): every formula once, with id, units, convention and seed location.

Each formula is a plain function ``fn(ops, **params)`` written over an arithmetic interface ``ops``.
:data:`INT_OPS` evaluates with Python ints (exact ``Fraction`` for ratios); :class:`Z3Ops` evaluates
the same code over z3 terms, introducing a fresh quotient witness for every floor or ceiling division
and recording its defining constraints in ``ops.side`` (z3 answers ``unknown`` on the direct
non-linear form; with witnesses the obligations stay decidable for concrete divisors). Operators
``+ - *`` and comparisons are used directly; they work on ints and z3 terms alike.

Invariants: ids are unique (a second registration raises); every formula names its units and its
accounting convention; :func:`evaluate` records which ids were exercised.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import Any

import attrs


class IntOps:
    """Exact integer arithmetic; divisors must be positive."""

    name = "int"

    @staticmethod
    def _divisor(b: Any) -> Any:
        if b <= 0:
            raise ValueError(f"divisor must be positive, got {b}")
        return b

    def floordiv(self, a: Any, b: Any) -> Any:
        return a // self._divisor(b)

    def ceildiv(self, a: Any, b: Any) -> Any:
        return -((-a) // self._divisor(b))

    def mod(self, a: Any, b: Any) -> Any:
        return a % self._divisor(b)

    def ratio(self, a: Any, b: Any) -> Any:
        return Fraction(a, self._divisor(b))

    def minimum(self, *xs: Any) -> Any:
        return min(xs)

    def maximum(self, *xs: Any) -> Any:
        return max(xs)

    def total(self, xs: Iterable[Any]) -> Any:
        return sum(xs)

    def indicator(self, cond: Any) -> Any:
        return 1 if cond else 0

    def all_of(self, *conds: Any) -> Any:
        return all(conds)


INT_OPS = IntOps()


class Z3Ops:
    """z3 arithmetic: each division introduces a witness ``q`` constrained in ``self.side``.

    ``floordiv(a, b) = q`` with ``b*q <= a < b*q + b``; ``ceildiv(a, b) = q`` with
    ``b*q - b < a <= b*q``; both also record ``b > 0``. Add ``ops.side`` to the solver.
    """

    name = "z3"
    _counter = itertools.count()

    def __init__(self) -> None:
        import z3

        self.z3 = z3
        self.side: list[Any] = []

    def _witness(self, prefix: str) -> Any:
        return self.z3.Int(f"{prefix}_{next(self._counter)}")

    def floordiv(self, a: Any, b: Any) -> Any:
        q = self._witness("floor")
        self.side += [b > 0, b * q <= a, a < b * q + b]
        return q

    def ceildiv(self, a: Any, b: Any) -> Any:
        q = self._witness("ceil")
        self.side += [b > 0, b * q >= a, b * q - b < a]
        return q

    def mod(self, a: Any, b: Any) -> Any:
        return a - b * self.floordiv(a, b)

    def ratio(self, a: Any, b: Any) -> Any:
        a, b = (self.z3.IntVal(x) if isinstance(x, int) else x for x in (a, b))
        self.side.append(b > 0)
        return self.z3.ToReal(a) / self.z3.ToReal(b)

    def minimum(self, *xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = self.z3.If(x < out, x, out)
        return out

    def maximum(self, *xs: Any) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = self.z3.If(x > out, x, out)
        return out

    def total(self, xs: Iterable[Any]) -> Any:
        items = list(xs)
        return self.z3.Sum(items) if items else self.z3.IntVal(0)

    def indicator(self, cond: Any) -> Any:
        return self.z3.If(cond, 1, 0)

    def all_of(self, *conds: Any) -> Any:
        return self.z3.And(*conds)


@attrs.frozen
class Formula:
    """A registered formula: ``fn(ops, **params)``; ``units`` of the result; where the seed states it.

    ``arithmetic`` formulas also evaluate over :class:`Z3Ops`; the others (hashes, sequences, sets, floats
    with ``log``) have the integer/Python form only.
    """

    id: str
    units: str
    convention: str
    location: str
    params: tuple[str, ...]
    fn: Callable[..., Any]
    arithmetic: bool = True

    def __call__(self, ops: Any = INT_OPS, **kwargs: Any) -> Any:
        missing = set(self.params) - set(kwargs)
        extra = set(kwargs) - set(self.params)
        if missing or extra:
            raise TypeError(f"formula {self.id}: missing {sorted(missing)}, unexpected {sorted(extra)}")
        _EXERCISED.add(self.id)
        return self.fn(ops, **kwargs)


REGISTRY: dict[str, Formula] = {}
_EXERCISED: set[str] = set()


def formula(id: str, *, units: str, convention: str, location: str,
            arithmetic: bool = True) -> Callable[[Callable[..., Any]], Formula]:
    """Decorator registering ``fn(ops, **params)`` once under ``id``."""

    def register(fn: Callable[..., Any]) -> Formula:
        import inspect

        if id in REGISTRY:
            raise ValueError(f"formula id registered twice: {id}")
        if not units.strip() or not convention.strip() or not location.strip():
            raise ValueError(f"formula {id} needs units, a convention and a seed location")
        params = tuple(p for p in inspect.signature(fn).parameters if p != "ops")
        f = Formula(id, units, convention, location, params, fn, arithmetic)
        REGISTRY[id] = f
        return f

    return register


def evaluate(id: str, ops: Any = INT_OPS, **kwargs: Any) -> Any:
    """Evaluate the registered formula ``id`` (and mark it exercised)."""
    return REGISTRY[id](ops, **kwargs)


def exercised() -> frozenset[str]:
    """Ids evaluated (through :func:`evaluate` or a call) since the process started or the last reset."""
    return frozenset(_EXERCISED)


def reset_exercised() -> None:
    _EXERCISED.clear()
