"""Keys (the §8 RadixKey.match oracle, §9), allocators (§7), policies (§4), scheduler orders (§6), adapter."""

from __future__ import annotations

import pytest

from kvexact.reference.peers.sglang import RadixCache, Req, admit, pool_accounting, release_kv_cache
from kvexact.reference.peers.sglang_adapter import SGLangAdapter
from kvexact.reference.peers.sglang_key import RadixKey, SGLangError, SGLangRejection
from kvexact.reference.peers.sglang_pool import (
    PagedTokenToKVPoolAllocator,
    RecordingAllocator,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
)
from kvexact.reference.peers.sglang_sched import compute_prefix_matches, lpm_order


def K(*toks, **kw):
    return RadixKey.of(list(toks), **kw)


@pytest.mark.parametrize("a, b, ps, expected", [
    ([1, 2, 3, 4], [1, 2, 3, 4], 1, 4), ([1, 2, 3, 4], [1, 2, 9, 9], 1, 2), ([9, 2, 3], [1, 2, 3], 1, 0),
    ([1, 2, 3, 4], [1, 2, 3], 1, 3), ([], [1, 2], 1, 0), ([1, 2], [], 1, 0),
    ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 9, 8], 4, 4), ([1, 2, 3, 4], [1, 9, 3, 4], 4, 0),
    ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 6, 7, 8], 4, 4),
    ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8], 4, 8), ([1, 2, 3], [1, 2, 3], 4, 0),
])
def test_key_match_oracle(a, b, ps, expected):
    assert RadixKey.of(a).match(RadixKey.of(b), ps) == expected


@pytest.mark.parametrize("a, b, expected", [([1, 2, 3, 4, 5], [1, 2, 3, 9, 5], 2),
                                            ([1, 2, 3, 4, 5], [1, 2, 3, 4, 5], 4), ([1, 2], [1, 2], 1)])
def test_key_match_oracle_bigram(a, b, expected):
    assert RadixKey.of(a).bigram_view().match(RadixKey.of(b).bigram_view()) == expected


@pytest.mark.parametrize("other", [K(1, 2, extra_key="x"), K(1, 2, cache_salt="s"), K(1, 2, 3).bigram_view()])
def test_key_match_across_namespaces_is_named(other):
    with pytest.raises(SGLangError) as info:
        K(1, 2).match(other)
    assert info.value.reason is SGLangRejection.NAMESPACE_MISMATCH
    assert isinstance(info.value, ValueError)


def test_key_behaviour_of_section_9():
    k = K(1, 2, 3, extra_key="test")
    assert len(k) == 3 and list(k) == [1, 2, 3]
    assert k[0].units == (1,) and k[-1].units == (3,)
    assert k[1:].extra_key == "test" and k[1:].units == (2, 3) and len(k[5:]) == 0
    with pytest.raises(SGLangError) as info:
        k[3]
    assert info.value.reason is SGLangRejection.KEY_INDEX_OUT_OF_RANGE
    r = repr(k)
    assert "RadixKey" in r and "extra_key='test'" in r and "[1, 2, 3]" in r and not r.endswith("...)")
    assert repr(RadixKey.of(range(11))).endswith("...)")
    assert K(1, 2, 3, 4, 5).page_aligned(2).units == (1, 2, 3, 4)
    assert RadixKey.of([1, 2, 3, 4], limit=2).units == (1, 2)
    assert K(1, 2, 3).bigram_view().units == ((1, 2), (2, 3))


def test_child_keys():
    assert K(5, 6).child_key() == 5
    assert K(5, 6, 7).child_key(2) == (5, 6)
    assert K(5, extra_key="e").child_key() == ("e", 5)
    assert K(5, extra_key="e", cache_salt="s").child_key() == (("e", "s"), 5)


def test_bad_token_is_named():
    with pytest.raises(SGLangError) as info:
        RadixKey.of([1, "2"])
    assert info.value.reason is SGLangRejection.BAD_TOKEN and "token 1" in str(info.value)


def test_token_allocator():
    a = TokenToKVPoolAllocator(6)
    assert a.alloc(4) == [1, 2, 3, 4] and a.available_size() == 2
    assert a.alloc(3) is None
    a.free([2, 1])
    assert a.free_pages == [5, 6, 2, 1]
    a.free_group_begin()
    a.free([3])
    a.free([4])
    assert a.available_size() == 4
    a.free_group_end()
    assert a.available_size() == 6
    s = TokenToKVPoolAllocator(4, need_sort=True)
    got = s.alloc(4)
    s.free(list(reversed(got)))
    assert s.free_pages == [] and s.available_size() == 4
    assert s.alloc(2) == [1, 2]


def test_paged_allocator():
    a = PagedTokenToKVPoolAllocator(16, 4)
    assert a.available_size() == 16
    assert a.alloc(8) == [4, 5, 6, 7, 8, 9, 10, 11]
    with pytest.raises(SGLangError) as info:
        a.alloc(3)
    assert info.value.reason is SGLangRejection.PAGE_MISALIGNED_ALLOC
    a.free([9, 5])  # touches pages 2 and 1: both released whole, sorted, in front of the free list
    assert a.free_pages == [1, 2, 3, 4] and a.available_size() == 16
    with pytest.raises(SGLangError) as info:
        a.free_segment([5], start_pos=1)
    assert info.value.reason is SGLangRejection.PAGE_MISALIGNED_SEGMENT


def test_req_to_token_pool():
    p = ReqToTokenPool(2, 8)
    assert p.alloc(1) == [1] and p.alloc(2) is None
    p.write(1, 2, [7, 8])
    assert p.read(1, 0, 4) == [0, 0, 7, 8]


def _evict_order(policy, setup):
    a = RecordingAllocator()
    c = RadixCache(allocator=a, eviction_policy=policy)
    setup(c)
    c.evict(100)
    return a.freed


def _three(c):
    c.insert([1, 1])
    c.insert([2, 2])
    c.insert([3, 3])
    c.match_prefix([1, 1])


@pytest.mark.parametrize("policy, order", [
    ("lru", [(2, 2), (3, 3), (1, 1)]), ("mru", [(1, 1), (3, 3), (2, 2)]),
    ("fifo", [(1, 1), (2, 2), (3, 3)]), ("filo", [(3, 3), (2, 2), (1, 1)]),
])
def test_time_policies(policy, order):
    assert _evict_order(policy, _three) == order


def test_slru_protects_hit_twice_segment():
    def setup(c):
        c.insert([1, 1])
        c.insert([1, 1])  # hit_count 2: protected segment
        c.insert([2, 2])
    assert _evict_order("slru", setup) == [(2, 2), (1, 1)]


@pytest.mark.parametrize("name, reason", [("lrux", SGLangRejection.UNKNOWN_EVICTION_POLICY),
                                          ("tlru", SGLangRejection.POLICY_NOT_REPRODUCED)])
def test_policy_names(name, reason):
    with pytest.raises(SGLangError) as info:
        RadixCache(eviction_policy=name)
    assert info.value.reason is reason


def test_disabled_cache_forces_lru_and_does_nothing():
    c = RadixCache(disable=True, eviction_policy="nonsense")
    assert c.eviction_policy == "lru"
    assert c.evict(5) == 0 and c.inc_lock_ref(c.root_node).delta == 0


def test_foreign_node_lock_is_named():
    a, b = RadixCache(), RadixCache()
    a.insert([1])
    with pytest.raises(SGLangError) as info:
        b.dec_lock_ref(a.match_prefix([1]).last_device_node)
    assert info.value.reason is SGLangRejection.FOREIGN_NODE


def test_value_shorter_than_key_is_named():
    with pytest.raises(SGLangError) as info:
        RadixCache().insert([1, 2, 3], [10])
    assert info.value.reason is SGLangRejection.VALUE_SHORTER_THAN_KEY


def test_root_lock_is_noop_and_hit_count_respects_inserted_len():
    c = RadixCache()
    assert c.inc_lock_ref(c.root_node).delta == 0 and c.root_node.lock_ref == 1
    c.insert([1, 2, 3, 4])
    c.insert([1, 2, 3, 4, 5, 6], inserted_len=4)  # [1..4] was already inserted by this request
    n56 = c.match_prefix([1, 2, 3, 4, 5, 6]).last_device_node
    assert n56.parent.hit_count == 1 and n56.hit_count == 1


def test_lpm_order_and_deprioritization():
    c = RadixCache()
    c.insert([7, 7, 7, 7])
    queue = [Req("a", [1, 2]), Req("b", [7, 7, 7, 7, 1]), Req("c", [7, 7, 1])]
    assert lpm_order(c, queue) == [1, 2, 0]
    long_prompt = list(range(100, 140))
    q2 = [Req("x", long_prompt), Req("y", long_prompt + [1]), Req("z", [5])]
    pm = compute_prefix_matches(RadixCache(), q2)
    assert pm.deprioritized == {1}
    assert lpm_order(RadixCache(), q2) == [0, 2, 1]
    assert compute_prefix_matches(RadixCache(), q2, check_threshold=-1).deprioritized == frozenset()


def test_lpm_falls_back_to_fcfs_over_128():
    c = RadixCache()
    c.insert([9, 9])
    queue = [Req(str(i), [i % 7 + 1]) for i in range(128)] + [Req("hit", [9, 9, 9])]
    assert lpm_order(c, queue) == list(range(129))
    assert lpm_order(c, queue[-3:]) == [2, 0, 1]


def test_paged_request_protocol_frees_unaligned_tail():
    alloc = PagedTokenToKVPoolAllocator(16, 2)
    c = RadixCache(page_size=2, allocator=alloc, req_to_token_pool=ReqToTokenPool(2, 16))
    r = Req("r", [1, 2, 3, 4])
    assert admit(c, alloc, r)
    r.output_ids = [5]
    r.owned_len = 5
    row = c.req_to_token_pool.req_to_token[r.req_pool_idx]
    assert row[:4] == [2, 3, 4, 5]  # pages 1 and 2
    page = alloc.alloc(2)  # the decode token's page
    assert page == [6, 7]
    row[4] = page[0]
    release_kv_cache(c, r)
    assert c.total_size() == 4  # [1,2,3,4] cached; token 5 (unaligned) released with its page
    assert alloc.available_size() == 16 - 4
    c.check_invariants()


def test_eagle_request_protocol():
    alloc = TokenToKVPoolAllocator(8)
    c = RadixCache(is_eagle=True, allocator=alloc, req_to_token_pool=ReqToTokenPool(2, 8))
    r = Req("r", [1, 2, 3, 4])
    assert admit(c, alloc, r)
    release_kv_cache(c, r)
    assert c.total_size() == 3 and alloc.available_size() == 8 - 3
    assert pool_accounting(c, alloc, 8).holds


def test_adapter_observations_and_trace():
    sg = SGLangAdapter(8)
    assert sg.admit("a", [1, 2, 3]) == 0
    assert sg.partition().private_slot_ids == (1, 2, 3)
    sg.finish("a")
    p = sg.partition()
    assert p.tree_slot_ids == (1, 2, 3) and p.private_slot_ids == () and p.partition_holds and p.i1_holds
    assert sg.match([1, 2, 9]).prefix_slot_ids == (1, 2)
    assert sg.slot_tokens() == {1: ((None, None), (1,)), 2: ((None, None), (1, 2)), 3: ((None, None), (1, 2, 3))}
    assert sg.admit("b", [1, 2, 3, 4, 5]) == 3
    sg.checkpoint("b", 4)
    assert sg.partition().protected_tokens == 4
    assert sg.evict(100).freed_slot_ids == ()
    sg.finish("b")
    ev = sg.evict(1)
    assert ev.released_tokens == 1 and ev.freed_slot_ids == ((5,),)  # the checkpoint left a boundary at 4
    assert [t.action for t in sg.trace] == ["admit", "finish", "match", "admit", "checkpoint", "evict",
                                            "finish", "evict"]
    assert sg.trace[-1].as_dict()["state"]["sizes"] == [4, 4, 0]
    assert sg.reserve("c", 100) is None


def test_adapter_paged_partition():
    sg = SGLangAdapter(8, page_size=2)
    got = sg.reserve("a", 4)
    assert got == (2, 3, 4, 5)
    sg.insert([1, 2, 3, 4], got, "a")
    p = sg.partition()
    assert p.partition_holds and p.tree_slot_ids == (2, 3, 4, 5)


def test_adapter_duplicates_exclude_the_trees_own_slots():
    sg = SGLangAdapter(8)
    first = sg.reserve("a", 2)
    sg.insert([1, 2], first, "a")
    more = sg.reserve("b", 2)
    got = sg.insert([1, 2, 3, 4], [first[0], more[0], more[1], 99], "b")  # position 0 reuses the tree slot
    assert got.prefix_tokens == 2 and got.duplicate_slot_ids == (more[0],)
