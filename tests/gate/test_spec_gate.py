"""The spec checks at each gate level: quick searches a bounded prefix of a CI model, full the whole.

The quick level's bounded search of KVAllocation and its one-mutant-per-spec sample are asserted on the
whole gate's report (tests/gate/test_conformance_gate.py), which runs both checks anyway."""

from __future__ import annotations

from kvexact.gate import spec_checks
from kvexact.gate.framework import GateContext, Verdict


def test_a_model_smaller_than_the_quick_bound_is_checked_whole_with_its_coverage():
    quick = spec_checks._model_check("VirtualMapping")(GateContext(level="quick"))
    full = spec_checks._model_check("VirtualMapping")(GateContext(level="full"))
    assert quick.verdict is full.verdict is Verdict.PASSED
    assert quick.figures["complete"] and quick.states == full.states < spec_checks.QUICK_STATES
    assert "every action fired" in quick.detail
