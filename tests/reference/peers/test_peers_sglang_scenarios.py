"""docs/peers/sglang.md §8: every scenario S1-S29 with the note's numbers (expected values are the note's)."""

from __future__ import annotations

import pytest

from kvexact.reference.peers.sglang import (
    RadixCache,
    RadixKey,
    Req,
    admit,
    checkpoint,
    pool_accounting,
    release_kv_cache,
)
from kvexact.reference.peers.sglang_pool import RecordingAllocator, ReqToTokenPool, TokenToKVPoolAllocator
from kvexact.reference.peers.sglang_sched import dfs_weight_order, lpm_order


def m(cache: RadixCache, key):
    r = cache.match_prefix(key)
    return r.device_prefix_len, list(cache.path_device_indices(r.last_device_node))


def shape(cache: RadixCache):
    """The tree as nested {edge units: subtree} for comparison with the note's pictures."""

    def sub(node):
        return {tuple(c.key.units): sub(c) for c in node.children.values()}

    return sub(cache.root_node)


def node_of(cache: RadixCache, key):
    return cache.match_prefix(key).last_device_node


def test_s1_basic_match_splits_without_changing_sizes():
    c = RadixCache()
    assert c.insert([1, 2, 3], [10, 20, 30]).prefix_len == 0
    assert c.sizes() == (3, 3, 0)
    assert m(c, [1, 2, 3]) == (3, [10, 20, 30])
    assert m(c, [1, 2]) == (2, [10, 20])
    assert shape(c) == {(1, 2): {(3,): {}}}
    assert c.sizes() == (3, 3, 0)
    c.check_invariants()


def test_s2_disabled_cache():
    c = RadixCache(disable=True)
    assert c.insert([1, 2, 3]).prefix_len == 0
    assert c.total_size() == 0
    r = c.match_prefix([1, 2, 3])
    assert r.device_prefix_len == 0 and r.last_device_node is c.root_node


def test_s3_insert_without_values_stores_tokens():
    c = RadixCache()
    assert c.insert([1, 2, 3], None).prefix_len == 0
    assert c.total_size() == 3
    assert c.all_values_flatten() == (1, 2, 3)


def test_s4_flatten_and_reset():
    c = RadixCache()
    c.insert([1, 2, 3], [10, 20, 30])
    assert c.total_size() == 3
    c.insert([4, 5], [40, 50])
    assert c.total_size() == 5
    assert set(c.all_values_flatten()) == {10, 20, 30, 40, 50}
    c.reset()
    assert c.sizes() == (0, 0, 0)
    assert c.root_node.children == {}


def test_s5_prefix_lens_and_tree():
    c = RadixCache()
    lens = [c.insert(k).prefix_len for k in ([1, 2, 3], [1, 2, 3], [1, 2, 4, 5], [1, 2, 4, 5, 6, 7],
                                              [8, 9, 10, 11, 12])]
    assert lens == [0, 3, 2, 4, 0]
    assert c.sizes() == (12, 12, 0)
    assert m(c, [1, 2, 3, 13, 14])[0] == 3
    assert shape(c) == {(1, 2): {(3,): {}, (4, 5): {(6, 7): {}}}, (8, 9, 10, 11, 12): {}}
    c.check_invariants()


def test_s6_extra_key_namespaces():
    c = RadixCache()
    c.insert(RadixKey.of([1, 2, 3], "key1"), [10, 20, 30])
    c.insert(RadixKey.of([1, 2, 3], "key2"), [40, 50, 60])
    c.insert(RadixKey.of([1, 2, 3]), [70, 80, 90])
    assert m(c, RadixKey.of([1, 2, 3], "key1")) == (3, [10, 20, 30])
    assert m(c, RadixKey.of([1, 2, 3], "key2")) == (3, [40, 50, 60])
    assert m(c, RadixKey.of([1, 2, 3])) == (3, [70, 80, 90])
    assert m(c, RadixKey.of([1, 2, 3], "nonexistent")) == (0, [])
    assert list(c.root_node.children) == [("key1", 1), ("key2", 1), 1]


def test_s7_cache_salt_namespaces():
    c = RadixCache()
    c.insert(RadixKey.of([1, 2, 3], "bc", cache_salt="a"), [10, 20, 30])
    c.insert(RadixKey.of([1, 2, 3], "c", cache_salt="ab"), [40, 50, 60])
    assert m(c, RadixKey.of([1, 2, 3], "bc", cache_salt="a")) == (3, [10, 20, 30])
    assert m(c, RadixKey.of([1, 2, 3], "c", cache_salt="ab")) == (3, [40, 50, 60])
    assert m(c, RadixKey.of([1, 2, 3], "bc")) == (0, [])


def test_s8_inc_dec_lock():
    c = RadixCache()
    c.insert([1, 2, 3])
    n = node_of(c, [1, 2, 3])
    assert c.inc_lock_ref(n).delta == -3
    assert c.sizes() == (3, 0, 3)
    assert c.dec_lock_ref(n).delta == 3
    assert c.sizes() == (3, 3, 0)


def test_s9_evict_oldest():
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2], [10, 20])
    c.insert([3, 4], [30, 40])
    assert c.evict(2) == 2
    assert a.freed == [(10, 20)]
    assert c.sizes() == (2, 2, 0)
    assert shape(c) == {(3, 4): {}}


@pytest.mark.parametrize("page_size, length, matched", [(1, 5, 5), (2, 5, 4), (4, 6, 4)])
def test_s10_page_alignment(page_size, length, matched):
    c = RadixCache(page_size=page_size)
    c.insert(list(range(length)))
    assert c.match_prefix(list(range(length))).device_prefix_len == matched
    assert c.total_size() == matched


@pytest.mark.parametrize("page_size", [1, 2])
def test_s11_matches_never_change_sizes(page_size):
    c = RadixCache(page_size=page_size)
    s1 = [1, 2, 3, 4, 5, 6, 7, 8]
    s2 = [1, 2, 9, 10]
    c.insert(s1, [10 * t for t in s1])
    c.insert(s2, [10 * t for t in s2])  # existing [1,2] values win; the tail keeps 90, 100
    assert c.total_size() == 10
    assert m(c, [1, 2, 3, 4, 999, 1000]) == (4, [10, 20, 30, 40])
    assert m(c, s1)[0] == 8
    assert m(c, [1, 2, 3, 4, 5, 6, 777, 888]) == (6, [10, 20, 30, 40, 50, 60])
    assert m(c, s2) == (4, [10, 20, 90, 100])
    assert c.total_size() == 10
    assert shape(c) == {(1, 2): {(3, 4): {(5, 6): {(7, 8): {}}}, (9, 10): {}}}
    c.check_invariants()


@pytest.mark.parametrize("budget, freed", [(3, [(4, 5, 6)]), (6, [(4, 5, 6), (7, 8, 9)])])
def test_s12_lru_order_after_access(budget, freed):
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    for k in ([1, 2, 3], [4, 5, 6], [7, 8, 9]):
        c.insert(k)
    m(c, [1, 2, 3])
    assert c.evict(budget) == budget
    assert a.freed == freed


def test_s13_whole_edge_overshoot():
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert(list(range(1, 11)))
    assert c.evict(1) == 10
    assert c.sizes() == (0, 0, 0)


@pytest.mark.parametrize("budget, evicted, freed, sizes", [
    (4, 4, [(3, 4), (5, 6)], (2, 2, 0)),
    (5, 6, [(3, 4), (5, 6), (1, 2)], (0, 0, 0)),
])
def test_s14_parent_repushed(budget, evicted, freed, sizes):
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 5, 6])
    assert c.evict(budget) == evicted
    assert a.freed == freed
    assert c.sizes() == sizes
    c.check_invariants()


def test_s15_locked_leaf_survives():
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2, 3])
    c.insert([4, 5, 6])
    c.inc_lock_ref(node_of(c, [1, 2, 3]))
    assert c.evict(100) == 3
    assert a.freed == [(4, 5, 6)]
    assert c.sizes() == (3, 0, 3)


def test_s16_locked_path_survives():
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 5, 6])
    n34 = node_of(c, [1, 2, 3, 4])
    assert c.inc_lock_ref(n34).delta == -4
    assert c.sizes() == (6, 2, 4)
    assert c.evict(100) == 2
    assert a.freed == [(5, 6)]
    assert shape(c) == {(1, 2): {(3, 4): {}}}
    assert n34.lock_ref == 1 and n34.parent.lock_ref == 1
    c.check_invariants()


def test_s17_split_copies_lock():
    c = RadixCache()
    c.insert([1, 2, 3, 4])
    n = node_of(c, [1, 2, 3, 4])
    c.inc_lock_ref(n)
    assert c.sizes() == (4, 0, 4)
    assert m(c, [1, 2, 9]) == (2, [1, 2])
    assert n.lock_ref == 1 and n.parent.lock_ref == 1 and list(n.parent.key.units) == [1, 2]
    assert c.sizes() == (4, 0, 4)
    assert c.dec_lock_ref(n).delta == 4
    assert c.sizes() == (4, 4, 0)
    c.check_invariants()


def test_s18_s19_page_size_4():
    c = RadixCache(page_size=4)
    assert c.insert(list(range(1, 11)), list(range(101, 111))).prefix_len == 0
    assert c.total_size() == 8
    assert m(c, list(range(1, 11))) == (8, list(range(101, 109)))
    assert m(c, [1, 2, 3, 4, 5, 6, 9, 9]) == (4, [101, 102, 103, 104])
    assert shape(c) == {(1, 2, 3, 4): {(5, 6, 7, 8): {}}}
    assert m(c, [1, 2, 3]) == (0, [])
    # S19
    assert c.insert([1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13]).prefix_len == 4
    assert shape(c) == {(1, 2, 3, 4): {(5, 6, 7, 8): {}, (5, 6, 7, 9, 10, 11, 12, 13): {}}}
    assert c.sizes() == (16, 16, 0)
    c.check_invariants()


def test_s19_page_size_2_no_sub_page_sharing():
    c = RadixCache(page_size=2)
    c.insert([1, 2, 3, 4])
    c.insert([1, 3, 5, 6])
    assert set(c.root_node.children) == {(1, 2), (1, 3)}
    assert m(c, [1, 2, 3, 4])[0] == 4
    assert m(c, [1, 3, 5, 6])[0] == 4
    assert c.total_size() == 8


def test_s20_eagle_bigram():
    c = RadixCache(is_eagle=True)
    assert c.insert([1, 2, 3, 4], [10, 20, 30, 40]).prefix_len == 0
    assert c.total_size() == 3
    assert m(c, [1, 2, 3, 9]) == (2, [10, 20])
    assert m(c, [1, 2, 3, 4]) == (3, [10, 20, 30])
    assert list(c.root_node.children) == [(1, 2)]
    assert c.insert([1, 2, 3, 4, 5]).prefix_len == 3
    assert c.total_size() == 4


def test_s21_priority_policy():
    a = RecordingAllocator()
    c = RadixCache(allocator=a, eviction_policy="priority")
    c.insert([1, 2], priority=5)
    c.insert([3, 4], priority=0)
    c.evict(2)
    assert a.freed == [(3, 4)]


def test_s22_priority_propagates_max():
    c = RadixCache()
    c.insert([1, 2, 3, 4], priority=0)
    c.insert([1, 2, 5, 6], priority=10)
    n34 = node_of(c, [1, 2, 3, 4])
    n56 = node_of(c, [1, 2, 5, 6])
    assert (n34.parent.priority, n34.priority, n56.priority) == (10, 0, 10)


def test_s23_empty_match_and_zero_evict():
    c = RadixCache(allocator=RecordingAllocator())
    c.insert([1, 2])
    r = c.match_prefix([])
    assert r.device_prefix_len == 0 and r.last_device_node is c.root_node
    assert c.evict(0) == 0


def test_s24_hit_count_and_lfu():
    c = RadixCache()
    c.insert([1, 2, 3])
    c.insert([1, 2, 3])
    c.insert([1, 2, 4])
    n3, n4 = node_of(c, [1, 2, 3]), node_of(c, [1, 2, 4])
    assert (n3.parent.hit_count, n3.hit_count, n4.hit_count) == (3, 2, 1)
    a = RecordingAllocator()
    lfu = RadixCache(allocator=a, eviction_policy="lfu")
    lfu.insert([1, 2])
    lfu.insert([1, 2])
    lfu.insert([3, 4])
    lfu.evict(2)
    assert a.freed == [(3, 4)]


def test_s25_dfs_weight_order():
    c = RadixCache()
    for k in ([1, 2, 3], [1, 2, 4], [5, 6]):
        c.insert(k)
    nodes = [node_of(c, k) for k in ([5, 6], [1, 2, 3], [1, 2, 4], [1, 2, 4])]
    assert dfs_weight_order(c, nodes) == [2, 3, 1, 0]


def test_s26_reinsert_after_evict_takes_new_values():
    a = RecordingAllocator()
    c = RadixCache(allocator=a)
    c.insert([1, 2, 3], [7, 8, 9])
    c.evict(3)
    assert c.insert([1, 2, 3], [17, 18, 19]).prefix_len == 0
    assert m(c, [1, 2, 3]) == (3, [17, 18, 19])
    assert c.sizes() == (3, 3, 0)


@pytest.mark.parametrize("first, second", [([1, 2], [1, 2, 3, 4]), ([1, 2, 3, 4], [1, 2])])
def test_s27_insert_order_independent(first, second):
    c = RadixCache()
    c.insert(first)
    assert c.insert(second).prefix_len == 2
    assert shape(c) == {(1, 2): {(3, 4): {}}}
    assert c.sizes() == (4, 4, 0)


def _pool16():
    alloc = TokenToKVPoolAllocator(16)
    cache = RadixCache(allocator=alloc, req_to_token_pool=ReqToTokenPool(4, 16))
    return alloc, cache


def test_s28_s29_request_protocol():
    alloc, c = _pool16()
    r1, r2 = Req("r1", [1, 2, 3, 4]), Req("r2", [1, 2, 3, 4])
    assert admit(c, alloc, r1) and admit(c, alloc, r2)
    assert r1.cache_protected_len == 0 and r2.cache_protected_len == 0
    assert c.req_to_token_pool.read(r1.req_pool_idx, 0, 4) == [1, 2, 3, 4]
    row2 = c.req_to_token_pool.req_to_token[r2.req_pool_idx]
    assert row2[:4] == [5, 6, 7, 8]
    assert (alloc.available_size(), c.total_size()) == (8, 0)
    assert pool_accounting(c, alloc, 16, [r1, r2]).holds
    release_kv_cache(c, r1)
    assert (alloc.available_size(), c.total_size()) == (8, 4)
    alloc.freed_log = []
    checkpoint(c, r2, 4)
    assert alloc.freed_log == [(5, 6, 7, 8)]  # R2's copies freed as duplicates
    alloc.freed_log = None
    assert row2[:4] == [1, 2, 3, 4]  # repointed to the tree's slots
    release_kv_cache(c, r2)
    assert (alloc.available_size(), c.total_size()) == (12, 4)
    assert pool_accounting(c, alloc, 16).holds
    # S29
    r3 = Req("r3", [1, 2, 3, 4, 9, 10])
    assert admit(c, alloc, r3)
    assert r3.num_matched_prefix_tokens == 4 and r3.cache_protected_len == 4
    assert c.req_to_token_pool.read(r3.req_pool_idx, 0, 6) == [1, 2, 3, 4, 9, 10]
    assert c.sizes() == (4, 0, 4)
    assert pool_accounting(c, alloc, 16, [r3]).holds
    checkpoint(c, r3, 5)
    assert r3.cache_protected_len == 5 and list(r3.last_node.key.units) == [9]
    assert c.sizes() == (5, 0, 5)
    assert pool_accounting(c, alloc, 16, [r3]).holds
    release_kv_cache(c, r3)
    assert alloc.available_size() == 10
    assert c.sizes() == (6, 6, 0)
    assert c.evict(100) == 6
    assert alloc.available_size() == 16
    c.check_invariants()


def test_lpm_1dfefb58():
    c = RadixCache()
    c.insert([1, 2, 3, 4])
    req = Req("r", [1, 2, 3, 4])
    assert lpm_order(c, [req]) == [0]
    assert len(req.prefix_indices) == 4 and req.cache_protected_len == 4
    assert req.num_matched_prefix_tokens == 3  # capped at input_len - 1 (§2)


def test_match_refreshes_every_visited_node_with_one_timestamp():
    c = RadixCache()
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 5])
    n34 = node_of(c, [1, 2, 3, 4])
    c.match_prefix([1, 2, 3, 4])
    stamp = c.root_node.last_access_time
    assert n34.last_access_time == n34.parent.last_access_time == stamp
    assert node_of(c, [1, 2, 5]).last_access_time > stamp  # later call, later time


def test_section_9_tree_node_and_simulated_cache():
    c = RadixCache.create_simulated()
    assert len(c.root_node.key) == 0 and c.root_node.lock_ref == 1 and not c.root_node.evicted
    c.insert([1])
    c.insert([2])
    n1, n2 = node_of(c, [1]), node_of(c, [2])
    assert n1 < n2 and not n2 < n1  # ordered by last access time: [2] was matched last
    assert "#tokens: 2" in c.pretty_print()
