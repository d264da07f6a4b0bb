"""The gate's check of the formula registry against the seed's worked numbers (``formulas-golden``).

Invariant: it passes only when every registered formula with a case in
:mod:`kvexact.reference.labs.formulas_golden` gives the case's value over the integers; each mismatch is named.
"""

from __future__ import annotations

from kvexact.gate.framework import CheckResult, GateCheck, GateContext, Verdict


def formulas_golden(ctx: GateContext) -> CheckResult:
    from kvexact.reference.formulas import INT_OPS, evaluate
    from kvexact.reference.formulas_all import load_all
    from kvexact.reference.labs.formulas_golden import DERIVED, GOLDEN

    load_all()
    cases = [(fid, kwargs, expected) for table in (GOLDEN, DERIVED) for fid, rows in table.items()
             for kwargs, expected in rows]
    wrong = []
    for fid, kwargs, expected in cases:
        got = evaluate(fid, INT_OPS, **kwargs)
        if got != expected:
            wrong.append(f"{fid}({kwargs}) = {got}, the seed says {expected}")
    figures = {"formulas": len({fid for fid, _k, _e in cases}), "cases": len(cases)}
    if wrong:
        return CheckResult(Verdict.FAILED, figures, "; ".join(wrong[:5]), examples=len(cases))
    return CheckResult(Verdict.PASSED, figures, "every formula gives the seed's worked numbers", examples=len(cases))


CHECKS = [GateCheck("formulas-golden", "reference", "every registered formula gives the seed's worked numbers",
                    formulas_golden)]
