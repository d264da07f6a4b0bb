"""The Hybrid machine: two cache groups of drawn block sizes behind the hybrid prefix cache. It passes on the
reference, and it catches a cache whose hit is not the common frontier of every group, or not lcm-aligned."""

from __future__ import annotations

import pytest
from hypothesis import settings

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.machines.hybrid import HybridMachine
from kvexact.conformance.runner import MACHINES, machine_settings, run_machine
from kvexact.reference import hybrid_prefix
from kvexact.reference.keys import KeyInputs


def _fresh() -> HybridMachine:
    return type("HybridCase", (HybridMachine,), {"stats": {}})()


def test_hybrid_is_one_of_the_gates_machines_and_passes_on_the_reference():
    assert "Hybrid" in MACHINES
    run = run_machine("Hybrid", None, settings(machine_settings("ci", shrink=False), max_examples=15,
                                               stateful_step_count=25), seed=38)
    assert run.passed, run.error
    assert run.stats.get("mixed_sizes", 0) > 0 and run.stats.get("hash_finer_than_a_group", 0) > 0
    assert run.stats.get("hits", 0) > 0 and run.stats.get("rule:evict", 0) > 0


def test_a_group_losing_a_block_lowers_the_expected_hit():
    """Groups of 2 and 4 tokens hashed at 2: after group 1 loses [0, 1, 0, 1] only 0 tokens are common."""
    m = _fresh()
    m.configure(2, 4, 1)
    m.admit([0, 1, 0, 1, 1], True)  # its own lookup misses
    m.lookup_seen(0, 5, [])  # hit 4
    assert (m.stats["hits"], m.stats["misses"]) == (1, 1)
    m.evict(1, 0)
    m.lookup_seen(0, 5, [])
    assert (m.stats["hits"], m.stats["misses"]) == (1, 2)


class _OneGroupHit(hybrid_prefix.HybridPrefixCache):
    """A cache that trusts group 0 alone: a prefix group 1 lost still counts (the bug 0x07C names)."""

    def lookup(self, request_id, inputs, requires_logits=True):
        r = super().lookup(request_id, inputs, requires_logits)
        hit = min(r.served_tokens[0], r.cap_tokens)
        return type(r)(r.request_id, r.index_snapshot_id, r.prompt_tokens, r.cap_tokens, r.alignment_tokens,
                       r.served_tokens, hit - hit % r.alignment_tokens, r.group_handles)


def test_the_machine_catches_a_hit_that_one_group_alone_serves():
    m = _fresh()
    m.configure(2, 4, 1)
    m.cache.__class__ = _OneGroupHit
    m.admit([0, 1, 0, 1, 1], True)
    m.evict(1, 0)
    with pytest.raises(ConformanceFailure, match="expected 0"):
        m.lookup_seen(0, 5, [])
    assert m.cache.group_keys(KeyInputs([0, 1, 0, 1]))[1]  # the evicted prefix had a group-1 key
