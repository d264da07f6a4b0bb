"""The SharedTail machine (0x07D partial-tail policies), run through the shared runner as the gate runs it."""

from __future__ import annotations

import pytest
from hypothesis import settings

from kvexact.conformance.runner import MACHINES, machine_settings, run_machine


def _run(name: str, examples: int = 10, steps: int = 25):
    run = run_machine(name, None, settings(machine_settings("ci"), max_examples=examples, stateful_step_count=steps))
    assert run.passed, run.error + run.falsifying
    assert set(run.rules_fired()) == set(run.rules), run.stats
    return run


def test_shared_tail_machine_shares_tails_and_copies_at_the_first_divergent_write():
    assert "SharedTail" in MACHINES
    stats = _run("SharedTail", examples=25).stats
    assert stats.get("shared_tail_hits", 0) > 0 and stats.get("eager_tail_hits", 0) > 0, stats
    assert stats.get("rows_shared", 0) > 0 and stats.get("copies_on_write", 0) > 0, stats


def test_shared_tail_machine_catches_an_unpinned_published_tail(monkeypatch):
    """Without the cache's pin, the sole holder of a shared tail writes its divergent row in place, over rows a
    published key names: the machine's invariant says so (the rules driven by hand: A = 1 2 3 1 | 2 3 is
    published, B = its first 5 rows without logits shares the tail's first row, A is handed over, B appends 1)."""
    from kvexact.conformance.machines import ConformanceFailure
    from kvexact.conformance.machines.tails import SharedTailMachine
    from kvexact.reference import tails

    def drive() -> None:
        m = SharedTailMachine()
        m.publish([1, 2, 3, 1, 2, 3])
        m.admit(0, 5, [], False, True)
        m.hand_over(0)
        m.append(0, 1)
        m.allocator_consistent()
        m.published_tails_unchanged()

    drive()  # with the pin: B's divergent row is copied first
    monkeypatch.setattr(tails, "pin_tail", lambda alloc, tail: ())
    with pytest.raises(ConformanceFailure, match="published tail"):
        drive()


def test_prompt_cache_machine_populates_uses_and_invalidates():
    assert "PromptCache" in MACHINES
    stats = _run("PromptCache", examples=25).stats
    assert stats.get("cache_segments", 0) > 0 and stats.get("dropped_modules", 0) > 0, stats
    assert stats.get("prompt:unauthorized", 0) > 0, stats


def test_prompt_cache_machine_catches_a_drop_that_keeps_its_blocks(monkeypatch):
    """An invalidation that evicts the identities but never releases the owner leaks the old generation's
    blocks: the store's check must say so."""
    from kvexact.reference import module_blocks

    monkeypatch.setattr(module_blocks.lifecycle, "release", lambda alloc, request_id: None)
    run = run_machine("PromptCache", None, settings(machine_settings("ci"), max_examples=10, stateful_step_count=25),
                      shrink_seconds=5)
    assert not run.passed and "dropped modules still own blocks" in run.error, run.error
