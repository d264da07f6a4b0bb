"""Hybrid prefix cache: groups of different block sizes, a finer hash block size (0x01A, 0x03B, 0x07C, 0x07E).

Expected hits come from the seed's 0x07E numbers (at an alignment of 16) and from the vLLM profile's
coordinator (``reference/peers/vllm_hybrid.py``, an independent implementation), never from the cache."""

from __future__ import annotations

import math
import random

import pytest

from kvexact.reference import lifecycle
from kvexact.reference import prefix as px
from kvexact.reference.allocator import Allocator
from kvexact.reference.hybrid_prefix import HybridPrefixCache, HybridPrefixRejection
from kvexact.reference.keys import KeyInputs
from kvexact.reference.labs import prefix as px_lab
from kvexact.reference.namespaces import NamespaceRegistry
from kvexact.reference.peers.vllm_hashing import BlockHasher
from kvexact.reference.peers.vllm_hybrid import (
    GroupSpec,
    evict_block,
    find_longest_cache_hit,
    publish_request,
)
from kvexact.reference.peers.vllm_pool import new_pool
from kvexact.reference.pool import GroupConfig
from kvexact.reference.rejections import Rejected

S = px_lab.STREAM
R = HybridPrefixRejection


def alloc_for(sizes, blocks=64):
    groups = [GroupConfig(g, g, p, 8) for g, p in enumerate(sizes)]
    return Allocator(groups, [range(1, blocks + 1) for _ in sizes])


def store(cache, rid, tokens):
    """Admit ``tokens`` through its own hit, publish it, release it (blocks stay cached, EVICTABLE)."""
    cache.admit(cache.lookup(rid, KeyInputs(tokens)), tokens)
    cache.publish(rid, KeyInputs(tokens))
    lifecycle.release(cache.alloc, rid)


@pytest.mark.parametrize("prompt, runtime", [(48, 32), (50, 48), (16, 0)])
def test_0x07e_edge_with_groups_of_16_and_8_hashed_at_8(prompt, runtime):
    """A = lcm(16, 8) = 16 and H = 8 != P_0 = 16: the hits are 0x07E's full-block hits at P = 16."""
    cache = HybridPrefixCache(alloc_for([16, 8]), 8)
    store(cache, "A", S[:48])
    r = cache.lookup("B", KeyInputs(S[:prompt]))
    assert (r.cap_tokens, r.hit_tokens) == (prompt - 1, runtime)
    assert [len(h) for h in r.group_handles] == [runtime // 16, runtime // 8]


def test_coarsest_alignment_rounds_the_0x07d_hit_down():
    """50 tokens with P = 16 hit 48 (0x07D); with a second group of P = 32 only 32 = 48 - 48 % 32 is common."""
    cache = HybridPrefixCache(alloc_for([16, 32]), 16)
    store(cache, "A", S[:64])
    r = cache.lookup("B", KeyInputs(S[:50]))
    assert r.alignment_tokens == 32 and r.served_tokens == (48, 32) and r.hit_tokens == 32
    rec = cache.admit(r, S[:50])
    assert [len(t) for t in rec.tables] == [math.ceil(50 / 16), math.ceil(50 / 32)]
    assert cache.alloc.tokens_of("B") == tuple(S[:50])
    cache.alloc.self_check()


def test_a_prefix_only_one_group_holds_is_no_hit():
    """0x07C: group 0 still holds all of it, group 1 lost its block 1: the common frontier is 16."""
    cache = HybridPrefixCache(alloc_for([8, 16]), 8)
    store(cache, "A", S[:40])
    key = cache.group_keys(KeyInputs(S[:40]))[1][1]
    assert cache.evict(1, key) is not None
    r = cache.lookup("B", KeyInputs(S[:40]))
    assert r.served_tokens == (32, 16) and r.hit_tokens == 16


def test_lookup_changes_nothing_and_a_stale_receipt_is_refused():
    cache = HybridPrefixCache(alloc_for([4, 8]), 4)
    store(cache, "A", S[:17])
    before = cache.alloc.digest()
    r = cache.lookup("B", KeyInputs(S[:17]))
    assert cache.alloc.digest() == before and r.hit_tokens == 16
    cache.alloc.append("C", 3)  # the allocator moves on
    with pytest.raises(Rejected) as e:
        cache.admit(r, S[:17])
    assert e.value.reason is R.STALE_INDEX_SNAPSHOT


@pytest.mark.parametrize("hash_block, reason", [(0, R.BAD_HASH_BLOCK_SIZE), (True, R.BAD_HASH_BLOCK_SIZE),
                                                (8, R.HASH_BLOCK_SIZE_NOT_DIVIDING),
                                                (3, R.HASH_BLOCK_SIZE_NOT_DIVIDING)])
def test_hash_block_size_refusals(hash_block, reason):
    with pytest.raises(Rejected) as e:
        HybridPrefixCache(alloc_for([4, 8]), hash_block)
    assert e.value.reason is reason


def test_forged_receipts_are_refused_by_name_and_change_nothing():
    import attrs
    cache = HybridPrefixCache(alloc_for([4, 8]), 2)
    store(cache, "A", S[:17])
    r = cache.lookup("B", KeyInputs(S[:17]))
    before = cache.alloc.digest()
    forged = [(attrs.evolve(r, hit_tokens=12, group_handles=(r.group_handles[0][:3], r.group_handles[1][:1])),
               R.HIT_NOT_ALIGNED),
              (attrs.evolve(r, hit_tokens=24, cap_tokens=16), R.HIT_EXCEEDS_CAP),
              (attrs.evolve(r, group_handles=(r.group_handles[0], r.group_handles[1][:1])), R.GROUP_HANDLES_MISMATCH)]
    for receipt, reason in forged:
        with pytest.raises(Rejected) as e:
            cache.admit(receipt, S[:17])
        assert e.value.reason is reason
        assert cache.alloc.digest() == before


def test_publish_needs_the_requests_own_tokens():
    cache = HybridPrefixCache(alloc_for([2, 4]), 2)
    cache.alloc.allocate("A", S[:8])
    with pytest.raises(Rejected) as e:
        cache.publish("A", KeyInputs(S[1:9]))
    assert e.value.reason is R.NOT_THE_REQUESTS_TOKENS


def test_plain_prefix_cache_refuses_mixed_block_sizes_by_name():
    """16 and 32 used to surface as BAD_LOGICAL_BLOCK deep in publication; now the constructor names it."""
    with pytest.raises(Rejected) as e:
        px.PrefixCache(alloc_for([16, 32]), NamespaceRegistry(), "m")
    assert e.value.reason is px.PrefixRejection.GROUP_BLOCK_SIZES_DIFFER
    px.PrefixCache(alloc_for([16, 16]), NamespaceRegistry(), "m")  # 0x03B's two groups of P = 16 stay plain


def profile_hit(sizes, stored, evicted, query):
    """vLLM's coordinator over full-attention groups, hashed at the gcd; an evicted key loses every copy."""
    h = math.gcd(*sizes)
    specs = [GroupSpec(p) for p in sizes]
    hasher = BlockHasher(h)
    pool = new_pool(4 + sum(len(t) // h + 1 for t in stored) * len(sizes))
    for tokens in stored:
        pool = publish_request(pool, specs, hasher.hashes(tokens), h, len(tokens))
    for r, g, j in evicted:
        for _ in range(len(stored)):
            pool = evict_block(pool, specs[g], g, hasher.hashes(stored[r]), h, j)
    hit = find_longest_cache_hit(pool, specs, hasher.hashes(query), h, len(query) - 1)
    return hit.hit_length, [len(b) for b in hit.blocks_by_group]


def test_converged_hit_agrees_with_the_vllm_profile_on_random_scenarios():
    """Groups of 2, 4, 6 or 8 tokens hashed at any divisor of their gcd (often finer than every group)."""
    rng = random.Random(38)
    nonzero = 0
    for _ in range(150):
        sizes = [rng.choice([2, 4, 6, 8]) for _ in range(rng.randint(1, 3))]
        h = rng.choice([d for d in range(1, math.gcd(*sizes) + 1) if math.gcd(*sizes) % d == 0])
        stored = [[rng.randint(0, 1) for _ in range(rng.randint(6, 26))] for _ in range(rng.randint(1, 3))]
        evicted = [(rng.randrange(len(stored)), rng.randrange(len(sizes)), rng.randint(0, 4))
                   for _ in range(rng.randint(0, 2))]
        base = rng.choice(stored)
        query = base[:rng.randint(len(base) // 2, len(base))] + [rng.randint(0, 1) for _ in range(rng.randint(0, 5))]
        query = query or [0]
        cache = HybridPrefixCache(alloc_for(sizes, blocks=80), h)
        for i, tokens in enumerate(stored):
            store(cache, f"s{i}", tokens)
        for r, g, j in evicted:
            keys = cache.group_keys(KeyInputs(stored[r]))[g]
            if j < len(keys):
                cache.evict(g, keys[j])
        got = cache.lookup("q", KeyInputs(query))
        want = profile_hit(sizes, stored, evicted, query)
        assert (got.hit_tokens, [len(t) for t in got.group_handles]) == want, (sizes, h, stored, evicted, query)
        nonzero += got.hit_tokens > 0
        cache.alloc.self_check()
    assert nonzero > 40  # the scenarios reach real hits
