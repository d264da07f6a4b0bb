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
    published key names: the machine finds it (by hand: A = 1 2 3 1 | 2 3 published, B = its first 5 rows
    without logits shares the tail's first row, A is handed over, B appends 1)."""
    from kvexact.conformance.machines import ConformanceFailure
    from kvexact.conformance.machines.tails import SharedTailMachine
    from kvexact.reference import tails

    def drive() -> None:
        m = SharedTailMachine()
        m.publish([1, 2, 3, 1, 2, 3])
        m.share_tail(0, 1, False)
        m.hand_over(0)
        m.append(0, 1)
        m.allocator_consistent()
        m.published_tails_unchanged()

    drive()  # with the pin: B's divergent row is copied first
    monkeypatch.setattr(tails, "pin_tail", lambda alloc, tail: ())
    with pytest.raises(ConformanceFailure, match="published tail"):
        drive()
    run = run_machine("SharedTail", None, settings(machine_settings("ci"), max_examples=10, stateful_step_count=30),
                      shrink_seconds=2)
    assert not run.passed and "published tail" in run.error, run.error


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


def test_chunk_attention_machine_checks_chunk_trees_from_the_radix_index():
    assert "ChunkAttention" in MACHINES
    stats = _run("ChunkAttention", examples=5, steps=15).stats
    assert stats["attention_checks"] == stats["steps"] > 0  # the kernel checked after every step
    assert stats.get("chunk_first_checks", 0) > 0 and stats.get("depth=2", 0) > 0, stats


def test_chunk_tree_of_two_branches_and_a_planted_chunk_first_bug(monkeypatch):
    """[1 2 3] and [1 2 4] share the chunk [1 2]: with threshold 1 it is attended chunk-first. A plan that
    drops the chunk-first work must be caught by the float64 comparison."""
    import dataclasses

    from kvexact.conformance.machines import ConformanceFailure
    from kvexact.conformance.machines.chunk_attention import ChunkAttentionMachine, chunk_tree
    from kvexact.kernels import shared

    def drive() -> ChunkAttentionMachine:
        m = ChunkAttentionMachine()
        m.insert([1, 2, 3])
        m.insert([1, 2, 4])
        m.choose(2 ** 16 - 1, 1)
        m.chunk_attention_matches_float64()
        return m

    m = drive()
    leaves = sorted(n for n, node in m.state.nodes.items() if n and not node.children)
    chunks, order = chunk_tree(m.state, leaves)
    assert [(c.length_tokens, c.seq_begin, c.seq_end) for c in chunks] == [(2, 0, 2), (1, 0, 1), (1, 1, 2)]
    assert [m.state.path_tokens(n) for n in order] == [(1, 2, 3), (1, 2, 4)]
    chunks, _ = chunk_tree(m.state, sorted(n for n in m.state.nodes if n))  # the split node [1 2] too
    assert [(c.length_tokens, c.seq_begin, c.seq_end) for c in chunks] == [(2, 0, 3), (1, 1, 2), (1, 2, 3)]
    plan = shared.plan_chunks
    monkeypatch.setattr(shared, "plan_chunks", lambda *a, **k: dataclasses.replace(plan(*a, **k), work=()))
    with pytest.raises(ConformanceFailure, match="differs from float64"):
        drive()
