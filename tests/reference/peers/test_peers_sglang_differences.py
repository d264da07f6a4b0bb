"""Where the SGLang profile differs from the normative radix index by design (the table in docs/peers/sglang.md), each shown."""

from __future__ import annotations

import pytest

from kvexact.reference import radix
from kvexact.reference.peers.sglang import RadixCache
from kvexact.reference.peers.sglang_adapter import SGLangAdapter
from kvexact.reference.peers.sglang_pool import RecordingAllocator
from kvexact.reference.rejections import Rejected


def test_extra_unlock_goes_negative_in_sglang_and_is_rejected_by_name_in_the_index():
    c = RadixCache()
    c.insert([1, 2, 3])
    node = c.match_prefix([1, 2, 3]).last_device_node
    c.inc_lock_ref(node)
    c.dec_lock_ref(node)
    before = c.sizes()
    assert c.dec_lock_ref(node).delta == 0
    assert node.lock_ref == -1 and c.sizes() == before == (3, 3, 0)
    # a later lock only brings it back to 0: the edge is not protected (the counter stays off by one)
    assert c.inc_lock_ref(node).delta == 0
    assert node.lock_ref == 0 and c.sizes() == (3, 3, 0)

    s = radix.RadixState.empty(4, first_slot_id=1)
    s, _ = radix.reserve(s, "r", [1, 2, 3])
    s, ins = radix.insert(s, [1, 2, 3], [1, 2, 3], "r")
    s, _ = radix.lock(s, ins.terminal_node_id)
    s, _ = radix.unlock(s, ins.terminal_node_id)
    with pytest.raises(Rejected) as info:
        radix.unlock(s, ins.terminal_node_id)
    assert info.value.reason is radix.RadixRejection.LOCK_UNDERFLOW


def test_negative_lock_node_is_still_an_eviction_candidate():
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2])
    node = c.match_prefix([1, 2]).last_device_node
    c.dec_lock_ref(node)
    assert c.evict(2) == 2 and a.freed == [(1, 2)]
    c.check_invariants()


def test_lookup_refreshes_the_split_lower_edge_in_sglang_only():
    """SGLang stamps the child it splits with the lookup's time; the normative index refreshes only
    edges it fully traverses, so LRU picks different victims after a mid-edge lookup."""
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2, 3, 4], [1, 2, 3, 4])
    c.insert([5, 6], [5, 6])
    c.match_prefix([1, 2, 9])
    c.evict(2)
    assert a.freed == [(5, 6)]

    s = radix.RadixState.empty(6, first_slot_id=1)
    s, _ = radix.reserve(s, "r", [1, 2, 3, 4, 5, 6])
    s, _ = radix.insert(s, [1, 2, 3, 4], [1, 2, 3, 4], "r")
    s, _ = radix.insert(s, [5, 6], [5, 6], "r")
    s, _ = radix.match(s, [1, 2, 9])
    s, receipt = radix.evict(s, 2)
    assert receipt.freed_slot_ids == ((3, 4),)


def test_sglang_insert_takes_any_values_the_index_checks_ownership():
    sg = SGLangAdapter(8)
    slots = sg.reserve("a", 2)
    sg.insert([1, 2], slots, "a")
    sg.insert([7], [slots[0]])  # a tree-owned slot offered again: SGLang stores it
    assert not sg.partition().partition_holds

    s = radix.RadixState.empty(8, first_slot_id=1)
    s, _ = radix.reserve(s, "a", [1, 2])
    s, _ = radix.insert(s, [1, 2], [1, 2], "a")
    with pytest.raises(Rejected) as info:
        radix.insert(s, [7], [1])
    assert info.value.reason is radix.RadixRejection.OWNED_SLOT_REUSE


def test_sglang_lock_count_has_no_holder_table():
    """Two unlocks through one receipt are two unlocks in SGLang; the index derives counts from holders."""
    sg = SGLangAdapter(8)
    slots = sg.reserve("a", 2)
    sg.insert([1, 2], slots, "a")
    held = sg.lock([1, 2])
    other = sg.lock([1, 2])
    assert sg.unlock(held.lock_id) == 0
    assert sg.unlock(held.lock_id) == 2  # releases the other holder's protection
    assert sg.partition().protected_tokens == 0
    assert sg.unlock(other.lock_id) == 0


def test_finish_with_output_splits_the_edge_at_the_prompt_in_sglang_only():
    """SGLang's checkpoint re-inserts the prompt-only prefix (priority + 1), splitting the cached edge
    at the prompt boundary; the normative ``cache_finished`` keeps the whole path on one edge."""
    from kvexact.reference.index import IndexConfig
    from kvexact.reference.peers.sglang_protocol import SGLangIndexAdapter

    sg = SGLangIndexAdapter(IndexConfig(8))
    assert sg.admit("r", [1, 2]) == 0
    assert sg.extend("r", 3)
    row = list(sg.slot_ids("r"))
    sg.finish("r")
    edges = [(list(n.key.units), list(n.value or ())) for n in sg.sglang.cache.nodes() if n.key.units]
    assert sorted(edges) == [([1, 2], row[:2]), ([3], row[2:])]

    s = radix.RadixState.empty(8, first_slot_id=1)
    s, _ = radix.match_and_lock(s, "r", 0, [1, 2])
    s, _ = radix.reserve(s, "r", row)
    s, _ = radix.cache_finished(s, "r", [1, 2, 3], row)
    assert sorted(n.token_ids for n in s.nodes.values() if n.node_id != radix.ROOT) == [(1, 2, 3)]
