"""KV-cache events replayed inside the machines (``kvexact.conformance.machines.kv_events``): a runtime whose
``kv_events()`` a router would misread fails, by name. Planted in the vLLM and SGLang profiles: a wrong parent
hash, a wrong path above a stored node, dropped removals; and, through the Radix machine's twin requests, an
insert that under-counts the prefix it found cached (so a duplicate slot leaks)."""

from __future__ import annotations

import pytest
from hypothesis import settings
from planting import planted_module

from kvexact.conformance.machines.kv_events import EventMirror, EventProblem, KVEventFailure, page_prefixes
from kvexact.conformance.runner import machine_settings, run_machine

RUN = settings(machine_settings("ci", shrink=False), max_examples=10, stateful_step_count=30)
VLLM = "kvexact.reference.peers.vllm_protocol:vllm_factory"
DELAYED = "kvexact.reference.peers.vllm_protocol:vllm_delayed_caching_factory"
SGLANG = "kvexact.reference.peers.sglang_protocol:sglang_factory"


def stored(hashes, parent, tokens, size=2, group=0):
    return {"type": "BlockStored", "block_hashes": hashes, "parent_block_hash": parent, "token_ids": tokens,
            "block_size": size, "group_idx": group}


def removed(hashes, group=0):
    return {"type": "BlockRemoved", "block_hashes": hashes, "group_idx": group}


# ---- the mirror -------------------------------------------------------------------------------------------
def test_a_stored_hash_stands_for_its_parents_prefix_and_its_own_tokens():
    mirror = EventMirror(1, "rt")
    mirror.apply([stored([10, 11], None, [1, 2, 3, 4]), stored([12], 11, [5, 6])], "start")
    assert mirror.prefixes(0) == {(1, 2), (1, 2, 3, 4), (1, 2, 3, 4, 5, 6)}
    mirror.apply([removed([12])], "evict")
    assert mirror.prefixes(0) == {(1, 2), (1, 2, 3, 4)}


def test_a_hash_stored_twice_stays_until_removed_twice():
    """vLLM may hold two blocks of one prefix: each is stored and removed on its own."""
    mirror = EventMirror(1, "rt")
    mirror.apply([stored([10], None, [1, 2]), stored([10], None, [1, 2]), removed([10])], "two starts")
    assert mirror.prefixes(0) == {(1, 2)}
    mirror.apply([removed([10])], "evict")
    assert mirror.prefixes(0) == set()


def test_all_blocks_cleared_empties_every_group_and_objects_read_like_maps():
    class BlockStored:  # vLLM hands over objects of these class names
        def __init__(self, **fields):
            self.__dict__.update(fields)

    class AllBlocksCleared:
        pass

    mirror = EventMirror(2, "rt")
    mirror.apply([BlockStored(block_hashes=[1], parent_block_hash=None, token_ids=[7, 7], block_size=2, group_idx=1),
                  stored([2], None, [8, 8])], "start")
    assert mirror.prefixes(1) == {(7, 7)} and mirror.prefixes(0) == {(8, 8)}
    assert mirror.held_by_every_group() == set()
    mirror.apply([AllBlocksCleared()], "reset")
    assert mirror.prefixes(0) == mirror.prefixes(1) == set()


BAD = {
    EventProblem.NOT_AN_EVENT: [{"type": "BlockMoved"}],
    EventProblem.UNKNOWN_PARENT: [stored([11], 10, [1, 2])],
    EventProblem.UNKNOWN_HASH: [stored([10], None, [1, 2]), removed([11])],
    EventProblem.TOKEN_COUNT: [stored([10, 11], None, [1, 2, 3])],
    EventProblem.HASH_AT_TWO_PREFIXES: [stored([10], None, [1, 2]), stored([10], None, [3, 4])],
    EventProblem.UNKNOWN_GROUP: [stored([10], None, [1, 2], group=3)],
}


@pytest.mark.parametrize("problem", sorted(BAD, key=lambda p: p.name), ids=lambda p: p.name)
def test_events_a_router_would_misread_are_named(problem):
    with pytest.raises(KVEventFailure) as caught:
        EventMirror(1, "rt").apply(BAD[problem], "a step")
    assert caught.value.problem is problem
    assert "rt, event" in str(caught.value)


def test_stored_prefixes_that_differ_from_the_cache_are_named():
    mirror = EventMirror(1, "rt")
    mirror.apply([stored([10], None, [1, 2])], "start")
    mirror.compare(mirror.prefixes(0), {(1, 2)}, "start")
    with pytest.raises(KVEventFailure) as caught:
        mirror.compare(mirror.prefixes(0), {(1, 2), (1, 2, 3, 4)}, "start")
    assert caught.value.problem is EventProblem.DISAGREES_WITH_CACHE
    assert "cached but not stored: [1, 2, 3, 4]" in str(caught.value)


def test_page_prefixes_are_the_whole_pages_of_every_path():
    assert page_prefixes([(1, 2, 3, 4, 5), (1, 2, 9, 9)], 2) == {(1, 2), (1, 2, 3, 4), (1, 2, 9, 9)}


# ---- the machines -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("spec", "factory"), [("KVAllocation", VLLM), ("KVAllocation", DELAYED), ("Radix", SGLANG),
                                               ("Radix@page2", SGLANG)])
def test_the_correct_profiles_events_replay_to_their_caches(spec, factory):
    run = run_machine(spec, factory, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]
    assert run.stats.get("kv_events:replayed", 0) > 0, run.stats


def test_a_vllm_stored_event_with_the_wrong_parent_is_caught(monkeypatch):
    from kvexact.reference.peers import vllm_pool

    planted = planted_module(vllm_pool, "parent = source.block_hashes[num_cached_blocks - 1]",
                             "parent = source.block_hashes[num_cached_blocks]")
    monkeypatch.setattr(vllm_pool, "cache_full_blocks", planted.cache_full_blocks)
    run = run_machine("KVAllocation", VLLM, RUN, 0, check_kernels=False)
    assert not run.passed and EventProblem.UNKNOWN_PARENT.value in run.error, run.error[:400]


def test_a_vllm_runtime_that_drops_its_removals_is_caught(monkeypatch):
    from kvexact.reference.peers import vllm_pool
    from kvexact.reference.peers.vllm_protocol import VllmProtocolAdapter

    kept = VllmProtocolAdapter.kv_events
    monkeypatch.setattr(VllmProtocolAdapter, "kv_events",
                        lambda self: [e for e in kept(self) if not isinstance(e, vllm_pool.BlockRemoved)])
    run = run_machine("KVAllocation", VLLM, settings(RUN, max_examples=40), 0, check_kernels=False)
    assert not run.passed and EventProblem.DISAGREES_WITH_CACHE.value in run.error, run.error[:400]


@pytest.mark.parametrize("mutated", ["node is self.root_node:", "node > self.root_node:"])
def test_sglang_events_with_the_wrong_path_above_a_node_are_caught(monkeypatch, mutated):
    from kvexact.reference.peers import sglang

    planted = _planted_walk(sglang, mutated)
    monkeypatch.setattr(sglang.RadixCache, "path_key_units", planted.RadixCache.path_key_units)
    run = run_machine("Radix", SGLANG, RUN, 0, check_kernels=False)
    assert not run.passed and "KV events: " in run.error, run.error[:400]  # a wrong hash: unknown or misplaced


def _planted_walk(sglang, mutated: str):
    """The profile with ``path_key_units``'s walk up to the root changed (its twin ``path_device_indices`` kept)."""
    walk = "    def path_key_units(self, node: TreeNode) -> tuple:\n        parts = []\n        while node is not None and "
    return planted_module(sglang, walk + "node is not self.root_node:", walk + mutated)


def test_twin_requests_catch_an_insert_that_undercounts_its_cached_prefix(monkeypatch):
    """Two requests with one prompt: the second to finish holds duplicates; an insert that reports one token
    fewer cached leaves one of them neither freed nor cached."""
    from kvexact.reference.peers import sglang

    planted = planted_module(sglang, "total, pos = 0, 0", "total, pos = -1, 0")
    monkeypatch.setattr(sglang.RadixCache, "insert", planted.RadixCache.insert)
    run = run_machine("Radix", SGLANG, RUN, 0, check_kernels=False)
    assert not run.passed and "free slots" in run.error, run.error[:400]


def test_twin_requests_finish_with_duplicates():
    run = run_machine("Radix", SGLANG, RUN, 0, check_kernels=False)
    assert run.passed, run.error[:400]
    assert run.stats.get("twin:admitted", 0) > 0 and run.stats.get("finish:duplicates_released", 0) > 0
