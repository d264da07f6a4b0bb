"""A proof obligation and its discharge by z3, bounded by a deterministic resource limit.

Each obligation states a claim over integers and is proved by asking z3 for a counterexample to it:
``unsat`` proves the claim, ``sat`` refutes it (with a model), ``unknown`` is a failure too. Claims phrased
"exists" are proved by a satisfying witness instead.

Invariant: no verdict depends on the clock. z3 is bounded by its resource counter (``rlimit``), never by
a timeout, and every query runs in a fresh z3 context, so the same query under the same z3 version spends
the same count however loaded the machine is (a few units more or less with what the process asked z3
before, through the names of fresh terms).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs

# The z3 resource limit of one query. Measured with z3 5.4.1 (``kvexact prove --json`` gives each
# obligation's ``rlimit_used``): the costliest obligation, vattention-offset-in-reservation, spends
# 659,869, and the costliest of the 139 queries of tests/reference/test_reference1_formulas.py 108,454.
# Ten times the costliest (6,598,690), rounded up, leaves room for other z3 versions without letting a
# runaway query run for long.
# tests/conformance/test_conformance_proofs.py checks that every obligation stays within a tenth of it.
RLIMIT_SAFETY_FACTOR = 10
PROOF_RLIMIT = 7_000_000


class ProofVerdict(enum.Enum):
    PROVED = "proved"
    REFUTED = "refuted"
    RLIMIT_EXHAUSTED = "unknown: rlimit exhausted"  # z3 spent the whole resource limit without an answer
    UNKNOWN = "unknown"  # z3 gave up within the limit (an incomplete theory, for instance)


@attrs.frozen
class Answer:
    """What z3 said about a set of assertions: ``status`` is "sat", "unsat" or "unknown"."""

    status: str
    rlimit_used: int
    exhausted: bool  # unknown because the rlimit ran out
    reason: str = ""
    model: str = ""


@attrs.frozen
class ProofResult:
    name: str
    verdict: ProofVerdict
    seconds: float
    rlimit_used: int
    detail: str = ""


@attrs.frozen
class Obligation:
    """A named claim: ``build(z3)`` returns (constraints, claim, mode) with mode "forall" or "exists"."""

    name: str
    section: str
    description: str
    build: Callable[[Any], tuple[list[Any], Any, str]]


def solve(assertions: Sequence[Any], rlimit: int = PROOF_RLIMIT) -> Answer:
    """Ask z3 whether ``assertions`` hold together, in a fresh context, spending at most ``rlimit``."""
    import z3

    ctx = z3.Context()
    solver = z3.Solver(ctx=ctx)
    solver.set("rlimit", rlimit)
    solver.add(*(z3.BoolVal(a, ctx) if isinstance(a, bool) else a.translate(ctx) for a in assertions))
    answer = solver.check()
    stats = solver.statistics()
    used = int(stats.get_key_value("rlimit count")) if "rlimit count" in stats.keys() else 0
    if answer == z3.unknown:
        reason = solver.reason_unknown()
        return Answer("unknown", used, used >= rlimit or "resource limit" in reason, reason)
    return Answer(str(answer), used, False, model=str(solver.model()) if answer == z3.sat else "")


def discharge(ob: Obligation, rlimit: int = PROOF_RLIMIT) -> ProofResult:
    """Prove one obligation; an unknown (the rlimit's exhaustion by name) is never reported as proved."""
    import z3

    start = time.perf_counter()
    constraints, claim, mode = ob.build(z3)
    a = solve([*constraints, z3.Not(claim) if mode == "forall" else claim], rlimit)
    seconds = time.perf_counter() - start
    if a.status == "unknown":
        verdict = ProofVerdict.RLIMIT_EXHAUSTED if a.exhausted else ProofVerdict.UNKNOWN
        return ProofResult(ob.name, verdict, seconds, a.rlimit_used, f"{a.reason} (rlimit {rlimit})")
    found = a.status == "sat"
    if mode == "forall":
        return ProofResult(ob.name, ProofVerdict.REFUTED if found else ProofVerdict.PROVED, seconds,
                           a.rlimit_used, f"counterexample: {a.model}" if found else "")
    return ProofResult(ob.name, ProofVerdict.PROVED if found else ProofVerdict.REFUTED, seconds, a.rlimit_used,
                       f"witness: {a.model}" if found else "no witness exists")
