"""The full-attention scenarios of docs/peers/vllm.md §8, with the note's measured numbers.

Scenarios 17, 18, 22, 23, 24 (SWA half), 25 and 30 concern sliding window, hybrid groups or EAGLE and
are out of scope for this profile (docs/readme/vllm.md).
"""

from __future__ import annotations

import pytest

from kvexact.reference.peers import vllm_pool as bp
from kvexact.reference.peers.vllm import (
    AllocateReceipt,
    ManagerRejection,
    VllmConfig,
    VllmKVCacheManager,
)
from kvexact.reference.peers.vllm_hashing import (
    BlockHasher,
    LoraRef,
    MMFeature,
    RequestExtras,
    external_hash,
    key_with_group,
)
from kvexact.reference.rejections import Rejected, rejection_of

C48 = [0] * 16 + [1] * 16 + [2] * 16


def manager(num_blocks, block_size=16, **kw) -> VllmKVCacheManager:
    return VllmKVCacheManager.create(VllmConfig(num_blocks, block_size, **kw))


def admit(m, rid, tokens, lookup=True, **kw):
    """Scheduler-style prefill: lookup (unless told not to), then allocate the rest of the prompt."""
    req = m.make_request(rid, tokens, **kw)
    hit = m.get_computed_blocks(req) if lookup else m.get_computed_blocks(req, 0)
    m2, receipt = m.allocate_slots(req, req.num_tokens - hit.num_computed_tokens, hit.num_computed_tokens,
                                   hit.block_ids)
    m2.check()
    return m2, req, hit, receipt


def queue(m):
    return list(m.pool.free.blocks)


def refs(m, ids):
    return [m.pool.ref_cnt[b] for b in ids]


def test_vllm_s01_prefill_free_evict_order():
    m = manager(11)
    m, r0, hit, rc = admit(m, "r0", C48 + [3] * 7)
    assert hit.num_computed_tokens == 0 and len(r0.block_hashes) == 3 and rc.block_ids == (1, 2, 3, 4)
    assert [m.pool.block_key[b] is not None for b in (1, 2, 3, 4)] == [True, True, True, False]
    m, r1, hit, rc = admit(m, "r1", C48 + [3] * 5)
    assert (hit.num_computed_tokens, hit.block_ids, rc.block_ids) == (48, (1, 2, 3), (5,))
    assert refs(m, range(1, 6)) == [2, 2, 2, 1, 1] and m.pool.num_free_blocks == 5
    m, _ = m.free("r0")
    assert queue(m) == [4, 6, 7, 8, 9, 10]
    m, _ = m.free("r1")
    assert queue(m) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]
    m, _, hit, rc = admit(m, "r2", C48 + [3] * 6)
    assert hit.block_ids == (1, 2, 3) and rc.block_ids == (5,)
    assert m.pool.num_free_blocks == 6 and queue(m) == [4, 6, 7, 8, 9, 10]
    m, _ = m.free("r2")
    assert queue(m) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]
    m, _, hit, rc = admit(m, "r3", [99] * 160)
    assert hit.num_computed_tokens == 0 and rc.block_ids == (5, 4, 6, 7, 8, 9, 10, 3, 2, 1)
    assert len(m.pool.cached) == 10


def test_vllm_s02_decode():
    m = manager(11)
    m, r0, _, rc = admit(m, "r0", C48 + [3] * 7)
    assert rc.block_ids == (1, 2, 3, 4)
    r0 = r0.with_computed(55).append_output(m.hasher, [8] * 4)
    m, rc = m.allocate_slots(r0, 4)
    assert rc.block_ids == () and m.pool.block_key[4] is None
    r0 = r0.with_computed(59).append_output(m.hasher, [9] * 19)
    m, rc = m.allocate_slots(r0, 19)
    assert rc.block_ids == (5,)
    assert m.pool.block_key[4] is not None and m.pool.block_key[5] is None and len(r0.block_hashes) == 4


def test_vllm_s03_lru_with_partial_tail():
    m = manager(11)
    m, _, _, rc = admit(m, "r0", list(range(87)))
    assert rc.block_ids == (1, 2, 3, 4, 5, 6)
    m, _, _, rc = admit(m, "r1", list(range(87, 135)))
    assert rc.block_ids == (7, 8, 9) and m.pool.num_free_blocks == 1
    m, _ = m.free("r0")
    assert queue(m) == [6, 10, 5, 4, 3, 2, 1]
    m, _ = m.free("r1")
    assert queue(m) == [6, 10, 5, 4, 3, 2, 1, 9, 8, 7]
    m, _, hit, rc = admit(m, "r2", list(range(35)))
    assert (hit.num_computed_tokens, hit.block_ids, rc.block_ids) == (32, (1, 2), (6,))
    assert m.pool.num_free_blocks == 7 and queue(m) == [10, 5, 4, 3, 9, 8, 7]


def test_vllm_s04_reused_block_loses_hash():
    m = manager(2)
    m, _, _, _ = admit(m, "r0", list(range(16)))
    m, _ = m.free("r0")
    assert queue(m) == [1] and m.pool.block_key[1] is not None
    m, _, hit, rc = admit(m, "r1", list(range(15)))
    assert hit.num_computed_tokens == 0 and rc.block_ids == (1,) and m.pool.block_key[1] is None
    assert len(m.pool.cached) == 0


def test_vllm_s05_hit_blocks_not_evicted_for_same_request():
    m = manager(3)
    m, r0, _, rc0 = admit(m, "r0", list(range(16)))
    m, r1, _, rc1 = admit(m, "r1", list(range(16, 32)))
    assert (rc0.block_ids, rc1.block_ids) == ((1,), (2,))
    m, _ = m.free("r0")
    m, _ = m.free("r1")
    assert queue(m) == [1, 2]
    m, r2, hit, rc = admit(m, "r2", list(range(32)))
    assert (hit.num_computed_tokens, hit.block_ids, rc.block_ids) == (16, (1,), (2,))
    stale = key_with_group(r1.block_hashes[0], 0)
    assert m.pool.cached.get_one(stale) is None
    assert m.pool.block_key[2] == key_with_group(r2.block_hashes[1], 0)


def test_vllm_s06_caching_disabled():
    m = manager(5, 4, enable_caching=False)
    m, _, hit, rc = admit(m, "r1", list(range(10)))
    assert hit.num_computed_tokens == 0 and rc.block_ids == (1, 2, 3)
    m, _ = m.free("r1")
    assert queue(m) == [3, 2, 1, 4]
    m, _, _, rc = admit(m, "r2", list(range(16)))
    assert rc.block_ids == (3, 2, 1, 4)
    m2, _, _, rc = admit(m, "r3", list(range(4)))
    assert rc.block_ids is None and m2 is m and rc.rejection is ManagerRejection.INSUFFICIENT_BLOCKS


def test_vllm_s07_cache_full_blocks_direct():
    pool = bp.new_pool(5)
    hasher = BlockHasher(4)
    hashes, keys = hasher.extend(list(range(14)), RequestExtras(), (), ())
    source = bp.CacheSource(tuple(range(14)), hashes, keys)
    pool, ids = bp.get_new_blocks(pool, 4)
    pool = bp.cache_full_blocks(pool, source, ids, 0, 2, 4)
    assert len(pool.cached) == 2
    pool = bp.cache_full_blocks(pool, source, ids, 2, 3, 4)
    assert len(pool.cached) == 3
    assert pool.block_key[ids[2]] == key_with_group(hashes[2], 0)


def test_vllm_s08_multi_group_keys():
    pool = bp.new_pool(10)
    hashes, keys = BlockHasher(4).extend(list(range(14)), RequestExtras(), (), ())
    source = bp.CacheSource(tuple(range(14)), hashes, keys)
    pool, g0 = bp.get_new_blocks(pool, 4)
    pool, g1 = bp.get_new_blocks(pool, 4)
    pool = bp.cache_full_blocks(pool, source, g0, 0, 2, 4, group_id=0)
    pool = bp.cache_full_blocks(pool, source, g1, 0, 3, 4, group_id=1)
    assert len(pool.cached) == 5
    hit = [[bp.get_cached_block(pool, h, groups) is not None for h in hashes] for groups in ([0], [1], [0, 1])]
    assert hit == [[True, True, False], [True, True, True], [True, True, False]]


def test_vllm_s09_multimodal_hits():
    tokens = (list(range(10)) + [-1] * 6 + [-1] * 4 + list(range(10, 20)) + [-1] * 2 + [-1] * 16
              + [-1] * 7 + [100] * 4)
    images = (MMFeature("aaa", 11, 10), MMFeature("bbb", 30, 18), MMFeature("ccc", 48, 7))
    m = manager(11)
    m, r0, _, rc = admit(m, "r0", tokens, extras=RequestExtras(mm=images))
    assert len(r0.block_hashes) == 3 and rc.block_ids == (1, 2, 3, 4)
    r0 = r0.with_computed(59).append_output(m.hasher, [5] * 5)
    assert r0.block_extra_keys[3] == (("mm", "ccc", 0),)
    same = m.make_request("r1", tokens[:48] + [200] * 5, RequestExtras(mm=images))
    assert m.get_computed_blocks(same).num_computed_tokens == 48
    other = (images[0], MMFeature("zzz", 30, 18), images[2])
    changed = m.make_request("r2", tokens[:48] + [200] * 5, RequestExtras(mm=other))
    assert m.get_computed_blocks(changed).num_computed_tokens == 16


def test_vllm_s10_cache_salt():
    m = manager(11)
    m, r0, _, rc = admit(m, "r0", C48 + [3] * 11, extras=RequestExtras(cache_salt="salt1"))
    assert r0.block_extra_keys == ((("cache_salt", "salt1"),), None, None) and rc.block_ids == (1, 2, 3, 4)
    probe = m.make_request("p", C48 + [7] * 4, RequestExtras(cache_salt="salt1"))
    hit = m.get_computed_blocks(probe)
    assert (hit.num_computed_tokens, hit.block_ids) == (48, (1, 2, 3))
    assert m.get_computed_blocks(m.make_request("p", C48 + [7] * 4, RequestExtras(cache_salt="salt2"))) \
        .num_computed_tokens == 0
    assert m.get_computed_blocks(m.make_request("p", C48 + [7] * 4)).num_computed_tokens == 0


def test_vllm_s11_failure_leaves_state_untouched():
    m = manager(11)
    m, _, _, rc = admit(m, "r0", C48)
    assert rc.block_ids == (1, 2, 3)
    m, _, hit, rc = admit(m, "r1", C48 * 2)
    assert (hit.num_computed_tokens, rc.block_ids) == (48, (4, 5, 6))
    m, _ = m.free("r1")
    assert refs(m, range(1, 7)) == [1, 1, 1, 0, 0, 0] and queue(m) == [7, 8, 9, 10, 6, 5, 4]
    m, _, _, rc = admit(m, "r2", [7] * 32)
    assert rc.block_ids == (7, 8) and m.pool.num_free_blocks == 5
    r3 = m.make_request("r3", C48 * 3)
    hit = m.get_computed_blocks(r3)
    assert (hit.num_computed_tokens, hit.block_ids) == (96, (1, 2, 3, 4, 5, 6))
    before = m
    m2, rc = m.allocate_slots(r3, 48, 96, hit.block_ids)
    assert rc == AllocateReceipt(None, 6, 5) and m2 is before
    assert queue(m2) == [9, 10, 6, 5, 4] and refs(m2, range(1, 9)) == [1, 1, 1, 0, 0, 0, 1, 1]
    assert not m2.is_running("r3")


def test_vllm_s12_reset_prefix_cache():
    m = manager(11, enable_kv_cache_events=True)
    m, _, _, rc = admit(m, "r0", C48 + [3] * 7)
    m, _, _, rc = admit(m, "r1", C48 + [4] * 7)
    assert rc.block_ids == (5,)
    m, _ = m.take_events()
    m, done = m.reset_prefix_cache()
    assert done is False and len(m.pool.cached) == 3 and m.take_events()[1] == ()
    m, _ = m.free("r0")
    m, _ = m.free("r1")
    m, done = m.reset_prefix_cache()
    assert done is True and len(m.pool.cached) == 0 and set(m.pool.block_key) == {None}
    assert m.take_events()[1] == (bp.AllBlocksCleared(),)
    assert queue(m) == [5, 4, 6, 7, 8, 9, 10, 3, 2, 1]


def test_vllm_s13_duplicate_keys_eviction():
    pool = bp.new_pool(4)
    k0, k1, k2 = (key_with_group(bytes([i]) * 32, 0) for i in range(3))
    for block, key in ((0, k0), (3, k0), (1, k1), (2, k2)):
        pool = bp.insert_cached(pool, block, key)
    assert pool.cached.as_dict() == {k0: (0, 3), k1: (1,), k2: (2,)}
    expected = [{k0: (0, 3), k2: (2,)}, {k0: (3,), k2: (2,)}, {k0: (3,)}, {}]
    for block, want in zip((1, 0, 2, 3), expected, strict=True):
        pool, evicted = bp.maybe_evict_cached_block(pool, block)
        assert evicted and pool.cached.as_dict() == want


@pytest.mark.parametrize("n", [2, 3])
def test_vllm_s14_events(n):
    m = manager(n + 1, enable_kv_cache_events=True)
    tokens = list(range(16 * n))
    m, r0, _, _ = admit(m, "r0", tokens)
    m, events = m.take_events()
    (stored,) = events
    assert stored.block_hashes == tuple(external_hash(h) for h in r0.block_hashes) and len(stored.block_hashes) == n
    assert (stored.parent_block_hash, stored.token_ids, stored.block_size, stored.group_idx) == (
        None, tuple(tokens), 16, 0)
    assert stored.kv_cache_spec_kind == "full_attention" and stored.medium == "GPU"
    m, _ = m.free("r0")
    m, _, _, _ = admit(m, "r1", tokens, lookup=False)
    m, events = m.take_events()
    assert [type(e) for e in events] == [bp.BlockRemoved] * n + [bp.BlockStored]
    assert sorted(e.block_hashes[0] for e in events[:n]) == sorted(external_hash(h) for h in r0.block_hashes)
    m, _ = m.free("r1")
    m, _ = m.reset_prefix_cache()
    assert m.take_events()[1] == (bp.AllBlocksCleared(),)


def test_vllm_s14_incremental_events():
    m = manager(11, 4, enable_kv_cache_events=True)
    m, r0, _, _ = admit(m, "r0", [1, 2, 3, 4, 5, 6])
    m, events = m.take_events()
    assert [(e.block_hashes, e.parent_block_hash, e.token_ids) for e in events] == [
        ((external_hash(r0.block_hashes[0]),), None, (1, 2, 3, 4))]
    r0 = r0.with_computed(6).append_output(m.hasher, [7, 8])
    m, _ = m.allocate_slots(r0, 2)
    m, events = m.take_events()
    parent = int.from_bytes(r0.block_hashes[0][-8:], "big")
    assert [(e.block_hashes, e.parent_block_hash, e.token_ids) for e in events] == [
        ((external_hash(r0.block_hashes[1]),), parent, (5, 6, 7, 8))]


def test_vllm_events_carry_lora_and_untagged_extra_keys():
    m = manager(11, 4, enable_kv_cache_events=True, use_int_block_hashes=False)
    extras = RequestExtras(lora=LoraRef("ad", "/p", adapter_id=7), cache_salt="s")
    m, r0, _, _ = admit(m, "r0", list(range(9)), extras=extras)
    (stored,) = m.take_events()[1]
    assert (stored.lora_id, stored.lora_name) == (7, "ad")
    assert stored.extra_keys == (("ad", "s"), ("ad",)) and stored.block_hashes == r0.block_hashes


def test_vllm_s15_prompt_logprobs_skip_reading_but_write():
    m = manager(11)
    m, r0, hit, rc = admit(m, "r0", C48 + [3] * 7, prompt_logprobs=True)
    assert r0.skip_reading_prefix_cache and hit.num_computed_tokens == 0 and rc.block_ids == (1, 2, 3, 4)
    m, _, hit, rc = admit(m, "r1", C48 + [3] * 7)
    assert hit.num_computed_tokens == 48 and rc.block_ids == (5,)
    m, _ = m.free("r0")
    m, _ = m.free("r1")
    m, _, hit, rc = admit(m, "r2", C48 + [3] * 7, prompt_logprobs=True)
    assert hit.num_computed_tokens == 0 and rc.block_ids == (5, 4, 6, 7)
    dupes = {k: ids for k, ids in m.pool.cached.entries if len(ids) > 1}
    assert sorted(dupes.values()) == [(1, 5), (2, 4), (3, 6)]


def test_vllm_s16_hit_cap():
    m = manager(11)
    m, _, _, _ = admit(m, "r0", C48)
    same = m.make_request("a", C48)
    hit = m.get_computed_blocks(same)
    assert (hit.num_computed_tokens, hit.block_ids) == (32, (1, 2))
    assert m.get_computed_blocks(m.make_request("b", C48 + [5])).num_computed_tokens == 48
    assert m.get_computed_blocks(same, max_cache_hit_length=48).num_computed_tokens == 48


def test_vllm_s19_hash_to_block_map():
    key = b"K" * 36
    table = bp.HashToBlockMap().insert(key, 0).insert(key, 1)
    assert table.get_one(key) == 0
    table, popped = table.pop(key, 7)
    assert popped is None and table.get_one(key) == 0
    table, popped = table.pop(key, 0)
    assert popped == 0 and table.get_one(key) == 1
    single = bp.HashToBlockMap().insert(key, 4)
    kept, popped = single.pop(key, 5)
    assert popped is None and kept.get_one(key) == 4 and len(kept) == 1


def test_vllm_s20_queue_primitives():
    q = bp.FreeQueue(range(5))
    q, first = q.popleft()
    assert first == 0
    q = q.remove(2)
    assert q.blocks == (1, 3, 4)
    q = q.append(2)
    assert q.blocks == (1, 3, 4, 2)
    q = q.prepend_n([5, 0])
    assert q.blocks == (5, 0, 1, 3, 4, 2)
    q, popped = q.popleft_n(3)
    assert popped == (5, 0, 1) and len(q) == 3
    assert rejection_of(lambda: bp.FreeQueue().popleft()) is bp.PoolRejection.NO_FREE_BLOCKS


def test_vllm_s21_raw_pool_order():
    pool = bp.new_pool(8)
    assert pool.free.blocks == (1, 2, 3, 4, 5, 6, 7)
    pool, ids = bp.get_new_blocks(pool, 4)
    assert ids == (1, 2, 3, 4)
    hashes, keys = BlockHasher(2).extend([1, 2, 3, 4], RequestExtras(), (), ())
    pool = bp.cache_full_blocks(pool, bp.CacheSource((1, 2, 3, 4), hashes, keys), ids, 0, 2, 2)
    pool = bp.free_blocks(pool, [4, 3, 2, 1])
    assert pool.free.blocks == (4, 3, 5, 6, 7, 2, 1)
    with pytest.raises(Rejected) as exc:
        bp.get_new_blocks(pool, 99)
    assert exc.value.reason is bp.PoolRejection.CANNOT_GET_FREE_BLOCKS
    assert "Cannot get 99 free blocks from the pool" in str(exc.value)


def test_vllm_s24_tight_pool_counts_evictable_hits():
    m = manager(5, 4)
    m, _, _, rc = admit(m, "r0", list(range(12)))
    m, _ = m.free("r0")
    assert rc.block_ids == (1, 2, 3) and queue(m) == [4, 3, 2, 1]
    ok, _, hit, rc = admit(m, "r1", list(range(12)) + [50])
    assert hit.block_ids == (1, 2, 3) and rc.block_ids == (4,)
    short, _, hit, rc = admit(m, "r2", list(range(12)) + [50] * 5)
    assert hit.block_ids == (1, 2, 3) and rc.block_ids is None and rc.num_required_blocks == 5 and short is m


def test_vllm_s27_lookahead_slots_never_cached():
    m = manager(11)
    req = m.make_request("r0", list(range(20)))
    m, rc = m.allocate_slots(req, 20, num_lookahead_tokens=20)
    assert rc.block_ids == (1, 2, 3) and rc.newly_cached_block_ids == (1,) and len(m.pool.cached) == 1


def test_vllm_s28_chunked_prefill():
    m = manager(11, 4)
    req = m.make_request("r0", list(range(10)))
    m, rc = m.allocate_slots(req, 5)
    assert rc.block_ids == (1, 2) and dict(m.num_cached_block)["r0"] == 1
    m, rc = m.allocate_slots(req.with_computed(5), 5)
    assert rc.block_ids == (3,) and dict(m.num_cached_block)["r0"] == 2
    hit = m.get_computed_blocks(m.make_request("r1", list(range(10)) + [99]))
    assert (hit.num_computed_tokens, hit.block_ids) == (8, (1, 2))


def test_vllm_s29_duplicates_without_lookup():
    m = manager(6, 4)
    m, r0, _, rc0 = admit(m, "r0", list(range(5)), lookup=False)
    m, _, _, rc1 = admit(m, "r1", list(range(5)), lookup=False)
    assert (rc0.block_ids, rc1.block_ids) == ((1, 2), (3, 4))
    assert m.pool.cached.as_dict()[key_with_group(r0.block_hashes[0], 0)] == (1, 3)
    assert m.get_computed_blocks(m.make_request("r2", list(range(5)))).block_ids == (1,)


def test_vllm_lookup_has_no_side_effects():
    m = manager(11)
    m, _, _, _ = admit(m, "r0", C48 + [3] * 7)
    m, _ = m.free("r0")
    before = m
    m.get_computed_blocks(m.make_request("r1", C48 + [3] * 7))
    assert m == before and queue(m) == [4, 5, 6, 7, 8, 9, 10, 3, 2, 1]


def test_vllm_usage_and_free_unknown_request():
    m = manager(11)
    assert m.usage() == 0.0
    m, _, _, _ = admit(m, "r0", list(range(40)))
    assert m.usage() == pytest.approx(0.3)
    same, receipt = m.free("nobody")
    assert same is m and receipt.freed_block_ids == ()


def test_vllm_evict_blocks_hook_keeps_refs_and_queue():
    m = manager(11, enable_kv_cache_events=True)
    m, _, _, _ = admit(m, "r0", C48 + [3])
    m, _ = m.take_events()
    m2 = m.evict_blocks([2])
    assert m2.pool.ref_cnt == m.pool.ref_cnt and queue(m2) == queue(m)
    assert m2.pool.block_key[2] is None and len(m2.pool.cached) == 2
    assert [type(e) for e in m2.take_events()[1]] == [bp.BlockRemoved]
    assert m2.get_computed_blocks(m2.make_request("x", C48 + [3])).num_computed_tokens == 16


def test_vllm_named_rejections():
    m = manager(11)
    req = m.make_request("r0", list(range(20)))
    assert rejection_of(lambda: m.allocate_slots(req, 0)) is ManagerRejection.NO_TOKENS_TO_SCHEDULE
    assert rejection_of(lambda: m.allocate_slots(req, -1)) is ManagerRejection.BAD_ARGUMENT
    assert rejection_of(lambda: VllmConfig(0, 16)) is ManagerRejection.BAD_CONFIG
    m, _ = m.allocate_slots(req, 20)
    assert rejection_of(lambda: m.allocate_slots(req, 1, 0, (1,))) is ManagerRejection.HITS_FOR_RUNNING_REQUEST
    assert rejection_of(lambda: bp.free_blocks(m.pool, [5])) is bp.PoolRejection.BLOCK_ALREADY_FREE
    assert rejection_of(lambda: bp.touch(m.pool, [99])) is bp.PoolRejection.UNKNOWN_BLOCK
    assert rejection_of(lambda: bp.insert_cached(m.pool, 1, b"x" * 36)) is bp.PoolRejection.BLOCK_ALREADY_HASHED
    assert rejection_of(lambda: bp.new_pool(0)) is bp.PoolRejection.BAD_POOL_SIZE


def test_vllm_recomputed_content_is_cached_again_after_eviction():
    m = manager(3, 4)
    prompt = [1, 1, 1, 1, 2]
    m, _, _, _ = admit(m, "r0", prompt)
    m, _ = m.free("r0")
    m, _, _, rc = admit(m, "r1", [9] * 8)
    assert rc.block_ids == (2, 1)  # the unhashed block first, then the cached one (its identity evicted)
    m, _ = m.free("r1")
    m, _, hit, _ = admit(m, "r2", prompt)
    assert hit.num_computed_tokens == 0
    m, _ = m.free("r2")
    assert m.get_computed_blocks(m.make_request("r3", prompt)).num_computed_tokens == 4
