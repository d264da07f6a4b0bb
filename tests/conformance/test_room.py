"""Refusals for lack of blocks, held to the runtime's own memory: off lockstep, an adapter whose ``observe()``
reports usage may refuse a start or an append only when it needs more blocks than live tables leave unmapped
(``kvexact.conformance.machines.room``). Planted in the vLLM profile: an allocation that fits exactly refused,
and hit blocks counted as needing room the wrong way round."""

from __future__ import annotations

import pytest
from hypothesis import settings
from planting import planted_module

from kvexact.conformance.machines.room import BlockPrefixes, append_need, start_need
from kvexact.conformance.runner import machine_settings, run_machine

RUN = settings(machine_settings("ci", shrink=False), max_examples=40, stateful_step_count=40)
VLLM = "kvexact.reference.peers.vllm_protocol:vllm_factory"
DELAYED = "kvexact.reference.peers.vllm_protocol:vllm_delayed_caching_factory"
ROOM = "refused it for lack of blocks"


# ---- the bound on need ------------------------------------------------------------------------------------
def test_a_start_needs_a_block_per_position_less_the_surely_mapped_hits():
    prefixes = BlockPrefixes(1)
    prefixes.note({"a": [[3, 4, 5]]}, {"a": [1, 2, 3, 4, 5]}, 2)  # blocks 3 and 4 full, 5 partial
    assert start_need([1, 2, 3, 4, 9], 2, 2, 0, prefixes, {3, 4, 5}) == 1
    assert start_need([1, 2, 3, 4, 9], 2, 1, 0, prefixes, {3, 4, 5}) == 2  # only one block of the chain is hit
    assert start_need([1, 2, 3, 4, 9], 2, 0, 0, prefixes, {3, 4, 5}) == 3


def test_a_hit_whose_prefix_an_unmapped_block_may_hold_still_needs_a_block():
    """A released block that held the prefix may be the one the cache hits on (and takes from the free queue)."""
    prefixes = BlockPrefixes(1)
    prefixes.note({"a": [[3]], "b": [[6]]}, {"a": [1, 2], "b": [1, 2]}, 2)  # 3 and 6 both held (1, 2) full
    assert start_need([1, 2, 7], 2, 1, 0, prefixes, {3, 6}) == 1
    assert start_need([1, 2, 7], 2, 1, 0, prefixes, {3}) == 2  # b released: 6 may be the cached one


def test_a_block_handed_out_again_and_filled_holds_its_new_prefix():
    prefixes = BlockPrefixes(1)
    prefixes.note({"a": [[3]]}, {"a": [1, 2]}, 2)
    prefixes.note({"c": [[3]]}, {"c": [8, 8]}, 2)
    assert not prefixes.surely_mapped(0, (1, 2), {3})  # nothing holds (1, 2) any more: no hit to count
    assert prefixes.surely_mapped(0, (8, 8), {3})


def test_an_append_needs_a_block_at_a_boundary_or_to_copy_a_shared_tail():
    assert append_need(4, 2, False) == 1
    assert append_need(3, 2, False) == 0
    assert append_need(3, 2, True) == 1


# ---- the machines -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("factory", [VLLM, DELAYED])
def test_the_correct_vllm_profiles_pass_with_their_refusals_checked(factory):
    run = run_machine("KVAllocation", factory, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]
    assert run.stats.get("refusals_for_blocks_checked", 0) > 0, run.stats


PLANTED = {
    "an allocation that fits exactly refused": ("if required > free_now - reserved_blocks:",
                                                "if required >= free_now - reserved_blocks:"),
    "held hits counted as taking free blocks": ("and self.pool.ref_cnt[b] == 0)", "and self.pool.ref_cnt[b] != 0)"),
}


def _plant(monkeypatch, original: str, mutated: str) -> None:
    from kvexact.reference.peers import vllm, vllm_protocol

    monkeypatch.setattr(vllm_protocol, "VllmKVCacheManager", planted_module(vllm, original, mutated).VllmKVCacheManager)


@pytest.mark.parametrize("bug", sorted(PLANTED))
def test_vllm_profile_refusing_an_allocation_with_room_is_caught(monkeypatch, bug):
    """The second bug also stops counting the hit blocks still in the free queue, which the pressure probe at the end
    of an example catches first (tests/conformance/test_allocation_promises.py): it is switched off here, so the
    refusal with room is what the run must name."""
    from kvexact.conformance.machines.allocator import AllocatorMachine

    _plant(monkeypatch, *PLANTED[bug])
    monkeypatch.setattr(AllocatorMachine, "_pressure_at_the_end", lambda self: None)
    run = run_machine("KVAllocation", VLLM, RUN, 0, check_kernels=False)
    assert not run.passed and ROOM in run.error, run.error[:400]


def test_without_a_reported_usage_an_allocation_that_fits_exactly_may_be_refused(monkeypatch):
    """The promise comes from usage: a runtime that does not report it may keep unmapped blocks it cannot free,
    so the same planted bug passes."""
    from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter

    _plant(monkeypatch, *PLANTED["an allocation that fits exactly refused"])
    monkeypatch.setattr(VllmProtocolAdapter, "observe", lambda self: {})
    run = run_machine("KVAllocation", VLLM, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]
