"""A proof obligation and its discharge by z3.

Each obligation states a claim over integers and is proved by asking z3 for a counterexample to it:
``unsat`` proves the claim, ``sat`` refutes it (with a model), ``unknown`` (a timeout included) is a
failure too. Claims phrased "exists" are proved by a satisfying witness instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import attrs


@attrs.frozen
class ProofResult:
    name: str
    verdict: str  # "proved", "refuted", "unknown"
    seconds: float
    detail: str = ""


@attrs.frozen
class Obligation:
    """A named claim: ``build(z3)`` returns (constraints, claim, mode) with mode "forall" or "exists"."""

    name: str
    section: str
    description: str
    build: Callable[[Any], tuple[list[Any], Any, str]]


def discharge(ob: Obligation, timeout_ms: int = 10_000) -> ProofResult:
    """Prove one obligation; 'unknown' (including a timeout) is reported as such, never as proved."""
    import z3

    start = time.perf_counter()
    constraints, claim, mode = ob.build(z3)
    solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(*constraints)
    solver.add(z3.Not(claim) if mode == "forall" else claim)
    answer = solver.check()
    seconds = time.perf_counter() - start
    if answer == z3.unknown:
        return ProofResult(ob.name, "unknown", seconds, solver.reason_unknown())
    found = answer == z3.sat
    if mode == "forall":
        return ProofResult(ob.name, "refuted" if found else "proved", seconds,
                           f"counterexample: {solver.model()}" if found else "")
    return ProofResult(ob.name, "proved" if found else "refuted", seconds,
                       f"witness: {solver.model()}" if found else "no witness exists")
