"""The conformance layer's gate checks: z3 obligations (and, as they land, machines and registries)."""

from __future__ import annotations

from kvexact.conformance.gate import CheckCouldNotRun, CheckResult, GateCheck, GateContext, Verdict


def z3_obligations(ctx: GateContext) -> CheckResult:
    """Every obligation must be proved; a refutation or an 'unknown' fails the check."""
    try:
        import z3  # noqa: F401
    except ImportError as exc:
        raise CheckCouldNotRun("z3-solver is not installed") from exc
    from kvexact.conformance.proofs import all_obligations, discharge

    results = []
    for ob in all_obligations():
        ctx.status(ob.name)
        results.append(discharge(ob))
    bad = [r for r in results if r.verdict != "proved"]
    figures = {"obligations": len(results), "proved": len(results) - len(bad),
               "slowest_s": round(max((r.seconds for r in results), default=0.0), 3)}
    if bad:
        return CheckResult(Verdict.FAILED, figures, "; ".join(f"{r.name}: {r.verdict}" for r in bad))
    return CheckResult(Verdict.PASSED, figures)


CHECKS = [
    GateCheck("z3-obligations", "conformance", "z3 proof obligations (unknown fails)", z3_obligations),
]
