"""The gate's formulas-golden check: passes on the registry, fails naming a formula that misses the seed."""

from __future__ import annotations

from kvexact.gate import formula_checks
from kvexact.gate.framework import GateContext, Verdict
from kvexact.reference.labs import formulas_golden


def test_every_formula_gives_the_seeds_numbers():
    result = formula_checks.formulas_golden(GateContext())
    assert result.verdict is Verdict.PASSED, result.detail
    assert result.examples == sum(len(v) for t in (formulas_golden.GOLDEN, formulas_golden.DERIVED) for v in t.values())
    assert result.figures["formulas"] > 70


def test_a_formula_that_misses_its_seed_value_fails_by_name(monkeypatch):
    kwargs, expected = formulas_golden.GOLDEN["vmm.va_bytes"][0]
    monkeypatch.setitem(formulas_golden.GOLDEN, "vmm.va_bytes", [(kwargs, expected + 1)])
    result = formula_checks.formulas_golden(GateContext())
    assert result.verdict is Verdict.FAILED
    assert "vmm.va_bytes" in result.detail
