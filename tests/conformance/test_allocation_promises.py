"""What an allocator adapter's declarations promise about its cache, checked without a golden case: one that
declares ``caches_at_allocation`` holds every full block of every live request after each step, and the pressure
probe at the end of an example refuses a start whose hit blocks all sit in the free queue with one block short
(round 12's survivors ``vllm:264`` and ``vllm:223``, planted in the vLLM profile)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from planting import planted_module

from kvexact.conformance.machines import ConformanceFailure
from kvexact.conformance.machines.allocator import machine_class
from kvexact.conformance.runner import machine_settings, run_machine
from kvexact.reference.adapters import AdapterConfig, OpResult
from kvexact.reference.peers import vllm
from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter, vllm_factory
from kvexact.reference.rejections import Rejected

VLLM = "kvexact.reference.peers.vllm_protocol:vllm_factory"
RUN = settings(machine_settings("ci", shrink=False), max_examples=25, stateful_step_count=30)
CACHED_TOKENS = "num_tokens_to_cache = min(total_computed + num_new_tokens, request.num_tokens)"
EVICTABLE = "if b != bp.NULL_BLOCK_ID and self.pool.ref_cnt[b] == 0)"


def _plant(monkeypatch, original: str, mutated: str, method: str) -> None:
    planted = planted_module(vllm, original, mutated)
    monkeypatch.setattr(vllm.VllmKVCacheManager, method, getattr(planted.VllmKVCacheManager, method))


def _probe_machine(factory=vllm_factory, config: AdapterConfig | None = None):
    """A fresh machine on ``factory`` that has taken no step (the probe runs on an empty cache)."""
    return machine_class("KVAllocation", factory, check_kernels=False, validate_trace=False, config=config)()


def test_the_correct_vllm_profile_keeps_its_promises_and_refuses_the_pressure_probe():
    run = run_machine("KVAllocation", VLLM, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]
    assert run.stats.get("promised_blocks_checked", 0) > 0, run.stats
    assert run.stats.get("pressure_at_the_end:INSUFFICIENT_BLOCKS", 0) > 0, run.stats


@pytest.mark.parametrize("mutated", ["total_computed ^ num_new_tokens", "total_computed - num_new_tokens"])
def test_vllm_profile_that_caches_fewer_full_blocks_at_allocation_is_caught(monkeypatch, mutated):
    """Round 12's ``vllm:264``: fewer tokens cached than the allocation made full. Caching less is legal for a cache
    in general, but the profile declares caches_at_allocation, and its cached_prefixes() shows the gap."""
    _plant(monkeypatch, CACHED_TOKENS, CACHED_TOKENS.replace("total_computed + num_new_tokens", mutated),
           "allocate_slots")
    run = run_machine("KVAllocation", VLLM, RUN, 0, check_kernels=False)
    assert not run.passed and "declares caches_at_allocation, but its cached_prefixes() lacks" in run.error, \
        run.error[:400]


def test_without_the_declaration_caching_fewer_blocks_is_not_held_against_it(monkeypatch):
    _plant(monkeypatch, CACHED_TOKENS, CACHED_TOKENS.replace("+", "^"), "allocate_slots")
    monkeypatch.setattr(VllmProtocolAdapter, "caches_at_allocation", False)
    machine = _probe_machine()
    machine.cache_keeps_its_promises()  # nothing promised, nothing checked
    assert "promised_blocks_checked" not in machine.stats


@pytest.mark.parametrize("mutated", [EVICTABLE.replace("!=", "<"), EVICTABLE.replace("== 0)", "== 1)")])
def test_vllm_profile_that_forgets_the_hit_blocks_still_in_the_free_queue_fails_the_pressure_probe(monkeypatch,
                                                                                                   mutated):
    """Round 12's ``vllm:223``: an allocation that counts a hit block at ref count 0 (still in the free queue) as
    already held needs one block fewer than it takes; on a full pool it pops a block that is not there."""
    _plant(monkeypatch, EVICTABLE, mutated, "num_blocks_to_allocate")
    with pytest.raises(Rejected, match="CANNOT_GET_FREE_BLOCKS"):
        _probe_machine()._pressure_at_the_end()


def test_the_pressure_probe_names_an_adapter_that_accepts_the_start_it_has_no_room_for():
    class OverAccepts(VllmProtocolAdapter):
        def start(self, request_id, prompt):
            result = super().start(request_id, prompt)
            return OpResult(True, None, 0) if request_id == "r2" and not result.accepted else result

    with pytest.raises(ConformanceFailure, match=r"start\(r2, .*accepted it .* needs 3 blocks"):
        _probe_machine(OverAccepts)._pressure_at_the_end()


def test_the_pressure_probe_names_an_adapter_that_refuses_a_start_with_every_block_free():
    class RefusesLongPrompts(VllmProtocolAdapter):
        def start(self, request_id, prompt):
            return OpResult(False, "INSUFFICIENT_BLOCKS") if len(prompt) > 6 else super().start(request_id, prompt)

    with pytest.raises(ConformanceFailure, match=r"start\(r1, .*refused it \(INSUFFICIENT_BLOCKS\) with no block"):
        _probe_machine(RefusesLongPrompts)._pressure_at_the_end()


def test_the_pressure_probe_is_counted_as_not_applicable_on_a_pool_of_three_blocks():
    machine = _probe_machine(config=AdapterConfig(blocks_per_group=3))
    machine._pressure_at_the_end()
    assert any("pressure_at_the_end:pool_too_small" in k for k in machine.stats), machine.stats
