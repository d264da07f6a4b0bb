"""The streams on which the profile diverged from the real SGLang 0.5.23 code (issue 19: S1, S2, S3).

Each test replays the issue's stream on the profile and checks what the real code does there.
"""

from __future__ import annotations

import pytest

from kvexact.reference.peers.sglang import RadixCache
from kvexact.reference.peers.sglang_key import SGLangError, SGLangRejection
from kvexact.reference.peers.sglang_pool import PagedTokenToKVPoolAllocator


def test_s1_paged_release_puts_segment_pages_in_front_in_segment_order():
    """Page size 4, insert 4 tokens on slots 4-7, evict 3: 0.5.23 frees page 1 in front -> [1..8]."""
    allocator = PagedTokenToKVPoolAllocator(32, 4)
    cache = RadixCache(page_size=4, allocator=allocator)
    slots = allocator.alloc(4)
    assert slots == [4, 5, 6, 7] and allocator.free_pages == [2, 3, 4, 5, 6, 7, 8]
    cache.insert([11, 12, 13, 14], slots)
    assert cache.evict(3) == 4
    assert allocator.free_pages == [1, 2, 3, 4, 5, 6, 7, 8]


def test_s1_free_segment_keeps_segment_order_while_free_sorts():
    allocator = PagedTokenToKVPoolAllocator(32, 4)
    allocator.alloc(16)  # pages 1..4
    allocator.free_segment([12, 13, 14, 15, 4, 5, 6, 7], start_pos=0)  # pages 3 then 1
    assert allocator.free_pages == [3, 1, 5, 6, 7, 8]
    allocator.free([9, 8])  # pages 2 (twice touched) and 2: one page, sorted unique
    assert allocator.free_pages == [2, 3, 1, 5, 6, 7, 8]


def test_s1_need_sort_stages_pages_and_sorts_when_an_alloc_runs_short():
    allocator = PagedTokenToKVPoolAllocator(16, 4, need_sort=True)
    allocator.alloc(16)
    allocator.free_segment([12, 13, 14, 15, 4, 5, 6, 7], start_pos=0)
    assert allocator.free_pages == [] and allocator.release_pages == [3, 1]
    assert allocator.alloc(4) == [4, 5, 6, 7]  # merged and sorted: page 1 first
    assert allocator.free_pages == [3]


def test_s1_free_group_releases_frees_then_segments():
    allocator = PagedTokenToKVPoolAllocator(32, 4)
    allocator.alloc(16)
    allocator.free_group_begin()
    allocator.free_segment([12, 13, 14, 15], start_pos=0)
    allocator.free([9, 4])
    assert allocator.free_pages == [5, 6, 7, 8]  # nothing released inside the group
    allocator.free_group_end()
    assert allocator.free_pages == [3, 1, 2, 5, 6, 7, 8]


def test_s2_disabled_insert_returns_no_last_node():
    cache = RadixCache(disable=True)
    result = cache.insert([1, 2, 3])
    assert result.prefix_len == 0 and result.last_device_node is None
    assert cache.match_prefix([1, 2, 3]).last_device_node is cache.root_node


def test_s3_unlock_after_eviction_then_evict_fails_like_sglang():
    """0.5.23 asserts in ``_delete_leaf``; the profile names it and never drives sizes negative."""
    cache = RadixCache()
    cache.insert([1, 2, 3])
    node = cache.match_prefix([1, 2, 3]).last_device_node
    lock = cache.lock(node)
    cache.unlock(lock)
    assert cache.evict(3) == 3
    cache.unlock(lock)  # lock_ref 0 -> -1: the evicted node becomes an eviction candidate again
    with pytest.raises(SGLangError) as info:
        cache.evict(3)
    assert info.value.reason is SGLangRejection.LEAF_NOT_IN_TREE
    assert cache.evictable_size() == 0


def test_short_alloc_without_staged_pages_keeps_the_free_order():
    """Issue 38: 0.5.23's ``merge_and_sort_free`` returns at once when no page is staged, so with ``need_sort`` off
    an alloc that runs short leaves the free list in release order (the real allocator, run on these calls, gives
    None, then ``[3, 1]``, then slots ``[6, 7]``); the profile used to sort it here."""
    allocator = PagedTokenToKVPoolAllocator(8, 2)
    assert allocator.alloc(8) == [2, 3, 4, 5, 6, 7, 8, 9]
    allocator.free_segment([6, 7, 2, 3], start_pos=0)
    assert allocator.free_pages == [3, 1]
    assert allocator.alloc(6) is None
    assert allocator.free_pages == [3, 1]
    assert allocator.alloc(2) == [6, 7] and allocator.free_pages == [1]


def test_short_alloc_merges_and_sorts_only_staged_pages():
    """With ``need_sort`` on, a short alloc merges the staged pages into the free list and sorts it."""
    allocator = PagedTokenToKVPoolAllocator(8, 2, need_sort=True)
    allocator.alloc(8)
    allocator.free_segment([6, 7, 2, 3], start_pos=0)
    assert allocator.free_pages == [] and allocator.release_pages == [3, 1]
    assert allocator.alloc(2) == [2, 3] and allocator.free_pages == [3] and allocator.release_pages == []


# Issue 38: the differential's stream (seed 7, minimised) on which the old profile's free list differed from the
# live SGLang 0.5.23 after an eviction batch and admissions at page size 2; the live runtime's free list, in
# allocator order, after the last admission (recorded from `kvexact diff sglang --seed 7` in the runtime env).
SEED7_STREAM = [("admit", "r0", (1, 1, 3, 1, 3, 3, 3)), ("admit", "r2", (2, 1, 2, 1)), ("admit", "r4", (3, 2, 3)),
                ("finish", "r0"), ("admit", "r7", (3, 1, 3, 1, 1, 2)), ("cancel", "r2"), ("evict", 5),
                ("admit", "r11", (2, 3, 2, 2, 3, 3, 3)), ("cancel", "r7"), ("cancel", "r11"),
                ("admit", "r18", (1, 1, 2, 1, 3)), ("admit", "r20", (1, 3, 2, 2, 2)),
                ("admit", "r22", (3, 2, 3, 1, 2, 2, 2))]
SEED7_LIVE_FREE_PAGES = [10, 6, 11]


def test_the_profile_keeps_the_live_free_order_after_an_eviction_batch_at_page_size_2():
    from kvexact.reference.index import IndexConfig
    from kvexact.reference.peers.sglang_protocol import sglang_factory

    adapter = sglang_factory(IndexConfig(pool_slots=22, page_size=2))
    for op, *args in SEED7_STREAM:
        getattr(adapter, op)(*args)
    allocator = adapter.sglang.allocator
    assert list(allocator.free_pages) + list(allocator.release_pages) == SEED7_LIVE_FREE_PAGES
    adapter.self_check()


def test_the_sglang_differential_draws_pages_1_2_4_with_eviction_batches_between_admissions():
    import random

    from kvexact.conformance.differential import sglang_stream

    rng = random.Random(7)
    streams = [sglang_stream(rng, 24) for _ in range(60)]
    assert {s.config.page_size for s in streams} == {1, 2, 4}
    assert all(s.config.pool_slots % s.config.page_size == 0 for s in streams)
    paged = [s for s in streams if s.config.page_size > 1]
    batch_then_admit = sum(any(a.kind == "evict" and a.args[0] > s.config.page_size and b.kind == "admit"
                               for a, b in zip(s.ops, s.ops[1:], strict=False)) for s in paged)
    assert batch_then_admit > 0
