"""The gate's thin self-check of the reference (``reference-seed``): it passes on the installed reference and fails,
naming the case and the row, when one of its handful of seed numbers is missed or a case raises."""

from __future__ import annotations

from kvexact.gate import reference_check
from kvexact.gate.framework import GateContext, Verdict
from kvexact.reference import ledgers


def test_the_self_check_passes_on_the_reference():
    result = reference_check.reference_seed(GateContext())
    assert result.verdict is Verdict.PASSED, result.detail
    assert result.figures == {"cases": 4, "comparisons": 6}


def test_a_ledger_off_by_one_slot_fails_it_by_case_and_row(monkeypatch):
    real = ledgers.compute_ledger
    monkeypatch.setattr(ledgers, "compute_ledger", lambda f: __import__("attrs").evolve(
        real(f), unique_slots=real(f).unique_slots + 1))
    result = reference_check.reference_seed(GateContext())
    assert result.verdict is Verdict.FAILED
    assert result.detail == "ledger 0x0D: unique blocks, rows, slots = (3, 33, 49), expected (3, 33, 48)"


def test_a_case_that_raises_fails_it_by_name(monkeypatch):
    monkeypatch.setitem(reference_check.CASES, "radix 0x08F", lambda: [][0])
    result = reference_check.reference_seed(GateContext())
    assert result.verdict is Verdict.FAILED and result.detail == "radix 0x08F: IndexError: list index out of range"
