"""The spec checks at each gate level: quick searches a bounded prefix of a CI model, full the whole."""

from __future__ import annotations

from kvexact.gate import spec_checks
from kvexact.gate.framework import GateContext, Verdict


def test_quick_searches_the_first_states_of_a_large_model_and_says_so():
    result = spec_checks._model_check("KVAllocation")(GateContext(level="quick"))
    assert result.verdict is Verdict.PASSED, result.detail
    assert result.figures["complete"] is False and "first" in result.detail and "--level full" in result.detail
    assert spec_checks.QUICK_STATES <= result.states < 2 * spec_checks.QUICK_STATES


def test_a_model_smaller_than_the_quick_bound_is_checked_whole_with_its_coverage():
    quick = spec_checks._model_check("VirtualMapping")(GateContext(level="quick"))
    full = spec_checks._model_check("VirtualMapping")(GateContext(level="full"))
    assert quick.verdict is full.verdict is Verdict.PASSED
    assert quick.figures["complete"] and quick.states == full.states < spec_checks.QUICK_STATES
    assert "every action fired" in quick.detail


def test_quick_mutants_sample_one_per_spec():
    result = spec_checks._expected_violations("mutant")(GateContext(level="quick"))
    assert result.verdict is Verdict.PASSED, result.detail
    assert result.figures["models"] == len(spec_checks.SPECS) and result.figures["kill_rate"] == 1.0
    assert 0 < result.figures["most_states"] <= result.figures["state_limit"]
