"""The registry of the golden cases and their runner, shared by ``test_golden.py`` (one test per case) and the
mutant tests (a mutated line makes the named case fail).

A case is a function returning ``(what, got, expected)`` rows: its table of the seed's worked numbers (or a peer
profile's measured ones), each expected value written beside the arithmetic that gives it, the section ids in the
case's name or docstring. Invariant: a case passes only when it does not raise and every row's ``got`` equals its
``expected``; a failure names the case and the row.
"""

from __future__ import annotations

import enum
import inspect
import re
import types
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pytest
import seed_cases
import seed_cases_accounting
import seed_cases_adapters
import seed_cases_blocks
import seed_cases_core
import seed_cases_index
import seed_cases_peers

from kvexact.reference import formulas

Rows = list[tuple[str, Any, Any]]
Case = Callable[[], Rows]

SEED_CASES: dict[str, Case] = {**seed_cases.SEED_CASES, **seed_cases_index.INDEX_CASES, **seed_cases_blocks.CASES,
                               **seed_cases_adapters.CASES, **seed_cases_core.CASES, **seed_cases_peers.CASES,
                               **seed_cases_accounting.CASES}
PEER_CASES: dict[str, Case] = dict(seed_cases.PEER_CASES)
CASES: dict[str, Case] = {**SEED_CASES, **PEER_CASES}
SECTION_ID = re.compile(r"\b0x[0-9A-F]{2}[A-Z]?\b")


def sections(name: str) -> list[str]:
    """The seed section ids a case cites (in its name or docstring), in order, once each."""
    text = f"{name} {CASES[name].__doc__ or ''}"
    return list(dict.fromkeys(SECTION_ID.findall(text)))


def mismatches(name: str) -> list[str]:
    """The rows of the named case that do not give their expected value (or the exception the case raised)."""
    try:
        rows = CASES[name]()
    except Exception as exc:  # a crash inside a case is that case's failure
        return [f"{name}: {type(exc).__name__}: {exc}"]
    return [f"{name}: {what} = {got!r}, expected {expected!r}" for what, got, expected in rows if got != expected]


@attrs.frozen
class GoldenRun:
    """The mismatches of a run of several cases, and how many cases ran."""

    failures: tuple[str, ...]
    cases: int

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def detail(self) -> str:
        return "; ".join(self.failures)


def run_cases(names: Iterable[str]) -> GoldenRun:
    names = list(names)
    return GoldenRun(tuple(f for n in names for f in mismatches(n)), len(names))


def run_case(name: str) -> GoldenRun:
    """One golden case run alone (the result its test gives)."""
    return run_cases([name])


def run_all() -> GoldenRun:
    return run_cases(CASES)


def formula_ids() -> list[str]:
    """The registered formulas with golden rows (the seed's worked numbers in ``reference.labs.formulas_golden``)."""
    from kvexact.reference.labs.formulas_golden import DERIVED, GOLDEN

    return list(dict.fromkeys([*GOLDEN, *DERIVED]))


def formula_mismatches(fid: str) -> list[str]:
    """The golden rows of formula ``fid`` it misses, evaluated over the integers."""
    from kvexact.reference.formulas import INT_OPS, evaluate
    from kvexact.reference.formulas_all import load_all
    from kvexact.reference.labs.formulas_golden import DERIVED, GOLDEN

    load_all()
    rows = [*GOLDEN.get(fid, ()), *DERIVED.get(fid, ())]
    return [f"{fid}({kwargs}) = {got}, the seed says {expected}" for kwargs, expected in rows
            if (got := evaluate(fid, INT_OPS, **kwargs)) != expected]


def assert_cases_pass_and_are_registered(cases: dict[str, Case]) -> None:
    """Every case of one case module is registered and passes on the real reference."""
    assert set(cases) <= set(CASES)
    for name in cases:
        assert mismatches(name) == []


def mutant_module(monkeypatch: pytest.MonkeyPatch, module: types.ModuleType, before: str, after: str) -> types.ModuleType:
    """A copy of ``module`` with the one line ``before`` replaced by ``after`` (as cosmic-ray writes it); the
    copy registers its formulas in a registry of its own."""
    source = inspect.getsource(module)
    assert source.count(before) == 1, f"{before!r} is not one line of {module.__name__}"
    copy = types.ModuleType(module.__name__ + "_mutant")
    copy.__file__ = module.__file__
    with monkeypatch.context() as m:
        m.setattr(formulas, "REGISTRY", {})
        exec(compile(source.replace(before, after), module.__file__, "exec"), copy.__dict__)
    for name, value in list(vars(copy).items()):  # the copy raises the real rejection enums, not its own copies
        if isinstance(value, type) and issubclass(value, enum.Enum) and isinstance(getattr(module, name, None), type):
            setattr(copy, name, getattr(module, name))
    return copy
