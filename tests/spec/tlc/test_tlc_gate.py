"""The gate's spec checks with TLC present: TLC checks the whole CI model, the embedded engine must agree."""

from __future__ import annotations

import attrs

from kvexact.gate import spec_checks
from kvexact.gate.framework import GateContext, Verdict


def test_full_level_cross_checks_tlc_and_the_embedded_engine(tlc_jar):
    r = spec_checks._model_check("VirtualMapping")(GateContext(level="full", tlc_jar=tlc_jar))
    assert r.verdict is Verdict.PASSED, r.detail
    assert "TLC agrees (result, distinct and generated states)" in r.detail
    assert r.figures["tlc"]["distinct_states"] == r.figures["distinct_states"]
    assert r.figures["tlc"]["generated_states"] == r.figures["generated_states"]


def test_a_count_tlc_does_not_share_fails_the_check(monkeypatch, tlc_jar):
    import kvexact.spec.tlc as tlc

    real = tlc.run_tlc

    def one_more_generated(*a, **k):
        t = real(*a, **k)
        return attrs.evolve(t, generated_states=t.generated_states + 1)

    monkeypatch.setattr(tlc, "run_tlc", one_more_generated)
    r = spec_checks._model_check("VirtualMapping")(GateContext(level="full", tlc_jar=tlc_jar))
    assert r.verdict is Verdict.FAILED and "the engines disagree" in r.detail


def test_a_model_tlc_rejects_fails_the_check_at_quick(monkeypatch, tlc_jar):
    """A TLC parse error (exit 150) on the CI model fails the check even at quick, with TLC's error."""
    import kvexact.spec.tlc as tlc
    from kvexact.spec.checker.result import ModelCheckResult, Outcome, Violation

    monkeypatch.setattr(tlc, "run_tlc", lambda *a, **k: ModelCheckResult(
        engine="tlc", outcome=Outcome.PARSE, violation=Violation("parse", "parse", "Could not parse")))
    r = spec_checks._model_check("KVAllocation")(GateContext(level="quick", tlc_jar=tlc_jar))
    assert r.verdict is Verdict.FAILED and "TLC: parse (exit 150)" in r.detail
