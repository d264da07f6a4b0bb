"""Block-side cases of the quick check ``reference-seed`` (registered in :mod:`kvexact.gate.seed_checks`): the
allocator, its lifecycle steps, the adapter protocol's reference adapter, the hybrid index and the vLLM / SGLang
peer profiles' block bookkeeping.

Invariant: each case returns ``(what, got, expected)`` rows whose expected values come from the seed
(``0x0..`` sections), from ``notes/vllm.md`` / ``notes/sglang.md``, or from the arithmetic written beside them,
never from the reference's own output; a row that differs (or a case that raises) fails ``reference-seed`` by name.
"""

from __future__ import annotations

from typing import Any

Rows = list[tuple[str, Any, Any]]


def allocator_epochs() -> Rows:
    """0x05C step 1: a transaction carries the allocator epoch it expects; the check is by value, so an epoch read
    back from a wire (a fresh integer object, here past CPython's small-int cache) is accepted when equal and
    refused (EPOCH_MISMATCH) when not; a transaction that reserves blocks advances the epoch by one (DESIGN.md
    "Counters"). ``run_txn`` knows two
    operations, allocate and append (0x04E); any other name is refused by name (UNKNOWN_OPERATION), also in a
    receipt given to compensate (0x04F)."""
    import attrs

    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator, AllocRejection
    from kvexact.reference.pool import GroupConfig
    from kvexact.reference.rejections import rejection_of

    def fresh(n: int) -> int:
        return int(str(n))  # the same value, another object

    alloc = Allocator([GroupConfig(0, 0, 2, 8)], [[1, 2, 3, 4]], epoch=1000)
    first = alloc.allocate("r", (1, 2, 3, 4), expected_epoch=fresh(1000))  # two full 2-token blocks
    stale = rejection_of(lambda: alloc.append("r", 5, expected_epoch=fresh(1000)))
    second = alloc.append("r", 5, expected_epoch=fresh(1001))  # a boundary append: reserves a block
    unknown = [rejection_of(lambda op=op: alloc.run_txn(op, "r", (6,))) for op in ("aaa", "extend", "")]
    begun = rejection_of(lambda: alloc.begin("aaa", "q", ("alloc",), (1,)))
    renamed = rejection_of(lambda: lifecycle.compensate(alloc, attrs.evolve(second, operation="aaa")))
    return [("allocate at a fresh 1000, then append at a fresh 1001: outcomes, epochs after",
             (first.outcome, first.allocator_epoch_after, second.outcome, second.allocator_epoch_after),
             ("PUBLISHED", 1001, "PUBLISHED", 1002)),
            ("append expecting the superseded epoch 1000 rejected as", stale, AllocRejection.EPOCH_MISMATCH),
            ("operations aaa, extend and '' rejected as", unknown, [AllocRejection.UNKNOWN_OPERATION] * 3),
            ("begin of operation aaa rejected as", begun, AllocRejection.UNKNOWN_OPERATION),
            ("compensation of a published receipt of operation aaa rejected as", renamed,
             AllocRejection.UNKNOWN_OPERATION),
            ("r after the refused operations: context, epoch", (alloc.request("r").context_tokens, alloc.epoch),
             (5, 1002))]


def lifecycle_release() -> Rows:
    """0x05E: release drops every strong reference; a block nobody else holds goes back to the free queue, a cached
    full block becomes EVICTABLE instead. r holds 5 tokens in 2-token blocks (3 blocks a group, 2 groups) and its
    block 0 is cached: 2 x 2 = 4 handles freed, 2 evictable; a second request forked from r keeps every block, so
    releasing r then frees nothing."""
    from kvexact.reference import lifecycle
    from kvexact.reference.allocator import Allocator
    from kvexact.reference.pool import GroupConfig

    def made() -> Allocator:
        alloc = Allocator([GroupConfig(0, 0, 2, 8), GroupConfig(1, 1, 2, 4)], [[1, 2, 3, 4, 5, 6]] * 2)
        alloc.allocate("r", [1, 2, 3, 4, 5])
        return alloc

    alloc = made()
    lifecycle.cache_block(alloc, "r", 0, "k0")
    r = alloc.request("r")
    out = lifecycle.release(alloc, "r")
    tables = [[h.block_id for h in t] for t in r.tables]
    forked = made()
    lifecycle.fork(forked, "r", "s")
    kept = lifecycle.release(forked, "r")
    return [("release r: freed, evictable handles (block id per group)",
             (sorted((h.cache_group_id, h.block_id) for h in out.freed_handles),
              sorted((h.cache_group_id, h.block_id) for h in out.evictable_handles)),
             (sorted((g, b) for g in (0, 1) for b in tables[g][1:]), [(0, tables[0][0]), (1, tables[1][0])])),
            ("release r with its fork s alive: freed, evictable", (kept.freed_handles, kept.evictable_handles),
             ((), ()))]


def adapter_keys() -> Rows:
    """The reference adapter without a token stream keys each distinct full-block prefix by its own small integer:
    a published 6-token request (three 2-token blocks) gives three keys, and a later request with the same prompt
    and one more token hits all 6 tokens on r's own physical blocks, block by block (the hit maps the same blocks,
    0x07C), in both groups."""
    from kvexact.reference import adapters as ad

    a = ad.ReferenceAdapter(ad.AdapterConfig(), spec=None)
    prompt = [5, 6, 7, 8, 9, 10]
    a.start("r", prompt)
    a.cache("r")
    hit = a.start("s", [*prompt, 11]).hit_tokens
    return [("distinct keys of r's three prefixes", len(set(a.keys.values())), 3),
            ("s's hit; s's first three blocks are r's, per group",
             (hit, [a.table("s", g)[:3] == a.table("r", g) for g in (0, 1)]), (6, [True, True]))]


def hybrid_windows_s17() -> Rows:
    """0x07C with sliding windows, on notes/vllm.md scenario 17 (full attention and two sliding-window groups of
    window 32, 16-token blocks): r0 = C48 + [3] x 7 is published; C48 + [3] x 5 then hits 48 tokens, and after
    removing the keys (block index, group) {(0,1),(0,2)}, {(0,0)}, {(2,0),(2,1),(2,2)}, {(2,0)}, {(2,1)},
    {(2,0),(0,1),(0,2)}, {(1,1)} it hits 3, 0, 2, 2, 2, 0, 1 blocks (the notes' figures, x 16 tokens): a window
    group needs only the ceil(31 / 16) = 2 blocks just before the hit's end."""
    from kvexact.reference.hybrid import CacheGroup, HybridIndex

    c48 = [0] * 16 + [1] * 16 + [2] * 16
    r0, query = [*c48, *[3] * 7], [*c48, *[3] * 5]
    index = HybridIndex.empty([CacheGroup(16), CacheGroup(16, 32), CacheGroup(16, 32)]).publish(r0)
    removals = [[(0, 1), (0, 2)], [(0, 0)], [(2, 0), (2, 1), (2, 2)], [(2, 0)], [(2, 1)], [(2, 0), (0, 1), (0, 2)],
                [(1, 1)]]

    def without(keys: list[tuple[int, int]]) -> int:
        out = index
        for j, g in keys:
            out = out.evict(g, query[:(j + 1) * 16])
        return out.lookup(query)

    return [("C48 + [3] x 5 hit", index.lookup(query), 48),
            ("hits after each removal", [without(k) for k in removals], [16 * b for b in (3, 0, 2, 2, 2, 0, 1)])]


def vllm_golden_hashes() -> Rows:
    """notes/vllm.md §3 (measured, PYTHONHASHSEED unset): NONE_HASH and the block hashes of tokens [0, 1, 2, 3]
    then [4, 5, 6, 7] under sha256 (pickle) and sha256_cbor (canonical CBOR), and sha256_cbor's block 0 with cache
    salt "s1"."""
    from kvexact.reference.peers.vllm_hashing import BlockHasher, HashAlgo

    def chain(algo: HashAlgo) -> list[str]:
        h = BlockHasher(4, algo)
        b0 = h.hash_block(None, [0, 1, 2, 3], None)
        return [h.none_hash.hex(), b0.hex(), h.hash_block(b0, [4, 5, 6, 7], None).hex()]

    cbor = BlockHasher(4, HashAlgo.SHA256_CBOR)
    return [("sha256: NONE_HASH, blocks 0 and 1", chain(HashAlgo.SHA256),
             ["066b1e8987e027138e98701c46128929378935f9b6cd1549105ae6b4f0d71198",
              "9da1c53089c000ad1a79a77c143b68dda00e2a85315bc1f690bbd03ba4a195dd",
              "1c9b6c0620e875631f1c5395ed56f2243aa113f88fc842f04fbb0654074b8d43"]),
            ("sha256_cbor: NONE_HASH, blocks 0 and 1", chain(HashAlgo.SHA256_CBOR),
             ["9bd96a485ad84efdafb72ee48a1d7a69bcead0f8f0433173941b276b9581eef0",
              "c49ab11fb576db6f376aef58c24f728a0ba1807e8cac5f940f1a5c4c20741898",
              "9d0a7c928c548f9aeea31ae98471cf515045a206851732ac14cb3083c18d40f9"]),
            ("sha256_cbor block 0 with salt s1", cbor.hash_block(None, [0, 1, 2, 3], (("cache_salt", "s1"),)).hex(),
             "484761d76512b019413b1505b9061753e461d4de1b84f54f7983aec4e1c357e8")]


def vllm_hybrid_alignment() -> Rows:
    """notes/vllm.md §4: a full-attention group's hit is rounded down to the alignment (the lcm of the groups'
    block sizes), and a prompt is cached only up to ``num_tokens`` rounded down to the scheduler block size (the
    lcm). Full attention in 16-token blocks with a window group of 32-token blocks (window 64): after a 128-token
    prompt, a 50-token query (cap 49: 3 full-attention blocks, 48) hits 32 = 2 + 1 blocks and no group alone
    reaches further than 32; publishing 112 distinct tokens of scenario 18's geometry (blocks of 32 and 16) caches
    96 tokens: 3 + 6 blocks taken from a 100-block pool (99 usable). Full attention in 2-token blocks with a window
    group of 1-token blocks (window 4: a run of ceil(3 / 1) = 3 blocks whose right edge is a multiple of 2): 8
    published tokens give a 9-token query the run 5..7 (8 tokens; blocks 0-4 of the window group are null blocks);
    once its window blocks 2 and 5 are gone no aligned run of 3 is left, so the hit is the run from block 0 (blocks
    0, 1: 2 tokens, aligned), the full-attention group keeps 1 block, and 8 - 2 = 6 tokens are a longest single-group
    hit left uncached."""
    from kvexact.reference.peers.vllm_hashing import BlockHasher
    from kvexact.reference.peers.vllm_hybrid import GroupSpec, publish_request, stored_then_lookup
    from kvexact.reference.peers.vllm_pool import new_pool

    t = list(range(1000, 1160))
    hit = stored_then_lookup([GroupSpec(16), GroupSpec(32, 64)], [t[:128]], [], t[:50])
    pool = publish_request(new_pool(100), [GroupSpec(32), GroupSpec(16, 32)], BlockHasher(16).hashes(t[:112]), 16, 112)
    specs = [GroupSpec(2), GroupSpec(1, 4)]
    whole = stored_then_lookup(specs, [t[:8]], [], t[:9])
    holes = stored_then_lookup(specs, [t[:8]], [(0, 1, 2), (0, 1, 5)], t[:9])
    return [("blocks 2 / 1 with window 4: hit, group lengths, null blocks of the window group",
             (whole.hit_length, [len(b) for b in whole.blocks_by_group], whole.blocks_by_group[1][:5]),
             (8, [4, 8], (0,) * 5)),
            ("window blocks 2 and 5 removed: hit, group lengths, uncached common prefix",
             (holes.hit_length, [len(b) for b in holes.blocks_by_group], holes.uncached_common_prefix), (2, [1, 2], 6)),
            ("50-token query: hit, group lengths, uncached common prefix",
             (hit.hit_length, [len(b) for b in hit.blocks_by_group], hit.uncached_common_prefix), (32, [2, 1], 0)),
            ("112 tokens published: free blocks left", pool.num_free_blocks, 99 - (3 + 6))]


CASES = {"allocator epochs": allocator_epochs, "lifecycle release": lifecycle_release, "adapter keys": adapter_keys,
         "hybrid windows s17": hybrid_windows_s17, "vllm golden hashes": vllm_golden_hashes,
         "vllm hybrid alignment": vllm_hybrid_alignment}
