"""Every gate check, in the order the gate runs them: the packaging self-test, the specs, the kernels,
the conformance layer (proofs, the negative registry, the machines and the adapters)."""

from __future__ import annotations

from kvexact.gate import (
    conformance_checks,
    corpus_check,
    formula_checks,
    kernel_checks,
    packaging,
    reference_check,
    spec_checks,
)
from kvexact.gate.framework import GateCheck

CHECKS: tuple[GateCheck, ...] = (
    *packaging.CHECKS, *corpus_check.CHECKS, *spec_checks.CHECKS, *kernel_checks.CHECKS, *formula_checks.CHECKS,
    *reference_check.CHECKS, *conformance_checks.CHECKS,
)


def load_checks() -> list[GateCheck]:
    """Every check, in order; two checks of one name are an error."""
    names = [c.name for c in CHECKS]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate gate check names: {', '.join(duplicates)}")
    return list(CHECKS)
