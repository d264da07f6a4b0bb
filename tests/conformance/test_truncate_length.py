"""After an accepted truncate the allocator machines ask the SUT how many tokens the request holds: a runtime that
keeps the old length, or that drops the request as a release would (0x05E), fails by name instead of through
whatever call touches the request next."""

from __future__ import annotations

from hypothesis import settings

from kvexact.conformance.runner import machine_settings, run_machine
from kvexact.conformance.simple_runtime import SimpleRuntimeAllocator
from kvexact.reference.adapters import OpResult

FACTORY = "kvexact.conformance.simple_runtime:SimpleRuntimeAllocator"


class KeepsTheOldLength(SimpleRuntimeAllocator):
    """The example runtime with a planted bug: a truncate frees the blocks but leaves the length as it was."""

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        before = self.lengths.get(request_id)
        result = super().truncate(request_id, keep_tokens)
        if result.accepted:
            self.lengths[request_id] = before
        return result


class ReleasesOnTruncate(SimpleRuntimeAllocator):
    """The example runtime with a planted bug: an accepted truncate ends the request."""

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        result = super().truncate(request_id, keep_tokens)
        if result.accepted:
            self.release(request_id)
        return result


def _settings() -> settings:
    return settings(machine_settings("ci", shrink=False), max_examples=10, stateful_step_count=30)


def test_the_example_runtime_reports_the_kept_length():
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)
    assert run.passed, run.error
    assert run.stats.get("truncate:ok", 0) > 0


def test_a_runtime_that_keeps_the_old_length_fails_by_name(monkeypatch):
    monkeypatch.setattr("kvexact.conformance.simple_runtime.SimpleRuntimeAllocator", KeepsTheOldLength)
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)
    assert not run.passed
    assert run.error is not None and run.error.startswith("ConformanceFailure:") and "was accepted but" in run.error
    assert "tokens for r" in run.error


def test_a_runtime_that_releases_on_truncate_fails_by_name(monkeypatch):
    monkeypatch.setattr("kvexact.conformance.simple_runtime.SimpleRuntimeAllocator", ReleasesOnTruncate)
    run = run_machine("KVAllocation", FACTORY, _settings(), 0, check_kernels=False)
    assert not run.passed
    assert run.error is not None and "a truncate keeps the request (0x05E)" in run.error
