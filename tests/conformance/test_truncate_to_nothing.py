"""A truncate to zero tokens is a truncate, not a release (0x05E): KVAllocation's Truncate(r, 0) empties the
request's tables and keeps the request, which grows again. The allocator machines ask it of every adapter with
``truncate`` (one truncate in five of the truncate rule, then an append), so a runtime that refuses it, or that drops
the request as a release would, fails in lockstep."""

from __future__ import annotations

from hypothesis import settings

from kvexact.conformance.runner import machine_settings, run_machine
from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
from kvexact.reference.adapters import OpResult

FACTORY = "kvexact.conformance.simple_runtime:SimpleRuntimeAllocator"


class RefusesTruncateToNothing(SimpleRuntimeAllocator):
    """The example runtime with a planted bug: zero tokens kept is refused as not shorter."""

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        if keep_tokens == 0 and request_id in self.tables:
            return OpResult(False, "TRUNCATE_NOT_SHORTER")
        return super().truncate(request_id, keep_tokens)


class ReleasesOnTruncateToNothing(SimpleRuntimeAllocator):
    """The example runtime with a planted bug: a truncate to zero tokens ends the request."""

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        result = super().truncate(request_id, keep_tokens)
        if result.accepted and keep_tokens == 0:
            self.release(request_id)
        return result


def _settings() -> settings:
    return settings(machine_settings("ci", shrink=False), max_examples=15, stateful_step_count=30)


def test_the_example_runtime_truncates_to_nothing_and_grows_again():
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)
    assert run.passed, run.error
    assert run.stats.get("truncate:to_nothing", 0) > 0


def test_a_runtime_that_refuses_a_truncate_to_nothing_fails(monkeypatch):
    monkeypatch.setattr("kvexact.conformance.simple_runtime.SimpleRuntimeAllocator", RefusesTruncateToNothing)
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)
    assert not run.passed
    assert run.error is not None and "truncate('r" in run.error and "rejected it (TRUNCATE_NOT_SHORTER)" in run.error


def test_a_runtime_that_releases_on_a_truncate_to_nothing_fails(monkeypatch):
    monkeypatch.setattr("kvexact.conformance.simple_runtime.SimpleRuntimeAllocator", ReleasesOnTruncateToNothing)
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)
    assert not run.passed
    assert run.error is not None and run.error.startswith("ConformanceFailure:")
    assert "a truncate keeps the request, even with 0 tokens" in run.error
