"""Peer profile: vLLM 0.33.0's ``HybridKVCacheCoordinator.find_longest_cache_hit`` (``docs/peers/vllm.md`` §2, §3, §7).

Invariant (as vLLM runs it): requests are hashed at ``hash_block_size`` (the gcd of the groups' block
sizes); a group of block size ``k * hash_block_size`` reads its block j under the fine hash at index
``(j + 1) * k - 1``; groups with one spec are looked up together; full attention goes first, is looked
up once and afterwards only trimmed (it is downward-closed); every finder may lower the candidate
length and the loop repeats until no finder lowers it (one pass for full attention plus one other
spec); hits are aligned to ``scheduler_block_size`` (the lcm). Out of scope: EAGLE drops, fine-grained
(Mamba "align") hits, DCP/PCP, Mamba, chunked-local and cross attention.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import attrs

from kvexact.reference.peers.vllm_hashing import key_with_group
from kvexact.reference.peers.vllm_pool import (
    PoolState,
    get_cached_block,
    get_new_blocks,
    insert_cached,
    maybe_evict_cached_block,
)
from kvexact.reference.rejections import Rejected


class HybridConfigRejection(enum.Enum):
    """Hash block sizes vLLM's ``HybridKVCacheCoordinator`` refuses (its constructor's assertions)."""

    BAD_HASH_BLOCK_SIZE = "hash_block_size must be a positive int"
    HASH_BLOCK_SIZE_NOT_DIVIDING = "every cacheable group's block size must be a multiple of hash_block_size"
    UNITARY_HASH_BLOCK_SIZE_MISMATCH = "one cache group (UnitaryKVCacheCoordinator) hashes at its own block size"


@attrs.frozen
class GroupSpec:
    """A KV cache group's spec: full attention (``sliding_window`` None) or sliding window."""

    block_size: int
    sliding_window: int | None = None


def check_hash_block_size(specs: Sequence[GroupSpec], hash_block_size: int) -> None:
    """Accept a hash block size that divides every group's block size (then it also divides the lcm,
    ``scheduler_block_size``), or for a single group equals its block size; refuse any other by name."""
    h = hash_block_size
    if not isinstance(h, int) or isinstance(h, bool) or h < 1:
        raise Rejected(HybridConfigRejection.BAD_HASH_BLOCK_SIZE, f"hash_block_size={h!r}")
    sizes = [s.block_size for s in specs]
    if any(p % h for p in sizes):
        raise Rejected(HybridConfigRejection.HASH_BLOCK_SIZE_NOT_DIVIDING, f"hash_block_size={h}, block sizes {sizes}")
    if len(sizes) == 1 and h != sizes[0]:
        raise Rejected(HybridConfigRejection.UNITARY_HASH_BLOCK_SIZE_MISMATCH, f"hash_block_size={h}, block size {sizes[0]}")


def hash_view(hashes: Sequence[bytes], hash_block_size: int, block_size: int) -> tuple[bytes, ...]:
    """``BlockHashListWithBlockSize``: the last fine hash inside each whole block of ``block_size``."""
    k = block_size // hash_block_size
    return tuple(hashes[(j + 1) * k - 1] for j in range(len(hashes) // k))


def _trim_to_alignment(blocks: list[list[int]], block_size: int, alignment_tokens: int) -> None:
    while block_size != alignment_tokens and len(blocks[0]) * block_size % alignment_tokens:
        for b in blocks:
            b.pop()


def full_attention_hit(pool: PoolState, hashes: Sequence[bytes], group_ids: Sequence[int], block_size: int,
                       max_length: int, alignment_tokens: int) -> tuple[list[list[int]], int]:
    """Cached blocks from block 0 up to the first miss, then rounded down to the alignment."""
    blocks: list[list[int]] = [[] for _ in group_ids]
    for block_hash in hashes[:max_length // block_size]:
        found = get_cached_block(pool, block_hash, group_ids)
        if found is None:
            break
        for b, block_id in zip(blocks, found, strict=True):
            b.append(block_id)
    hit = len(blocks[0]) * block_size
    hit -= hit % alignment_tokens
    for b in blocks:
        del b[math.ceil(hit / block_size):]
    return blocks, hit


def sliding_window_hit(pool: PoolState, hashes: Sequence[bytes], group_ids: Sequence[int], block_size: int,
                       window: int, max_length: int, alignment_tokens: int) -> tuple[list[list[int]], int]:
    """Scan right to left for ``ceil((W - 1) / P)`` contiguous cached blocks whose right edge is aligned;
    without one, the cached run from block 0 (null blocks, id 0, stand left of a run)."""
    needed = math.ceil((window - 1) / block_size)
    max_blocks = max_length // block_size
    blocks = [[0] * max_blocks for _ in group_ids]
    run, found_run = 0, False
    for i in range(max_blocks - 1, -1, -1):
        found = get_cached_block(pool, hashes[i], group_ids)
        if found is None:
            run = 0
            continue
        if run == 0 and block_size != alignment_tokens and (i + 1) * block_size % alignment_tokens:
            continue
        for b, block_id in zip(blocks, found, strict=True):
            b[i] = block_id
        run += 1
        if run >= needed:
            for b in blocks:
                del b[i + run:]
            found_run = True
            break
    if not found_run:
        for b in blocks:
            del b[run:]
        _trim_to_alignment(blocks, block_size, alignment_tokens)
    return blocks, len(blocks[0]) * block_size


@attrs.frozen
class HybridHit:
    blocks_by_group: tuple[tuple[int, ...], ...]
    hit_length: int
    uncached_common_prefix: int  # longest single-spec hit minus the converged hit


def find_longest_cache_hit(pool: PoolState, specs: Sequence[GroupSpec], hashes: Sequence[bytes],
                           hash_block_size: int, max_cache_hit_length: int) -> HybridHit:
    """The coordinator's fixed point over spec groups (full attention first)."""
    alignment_tokens = math.lcm(*(s.block_size for s in specs))
    buckets: list[tuple[GroupSpec, list[int]]] = []
    for gid, spec in enumerate(specs):
        for bucket_spec, ids in buckets:
            if bucket_spec == spec:
                ids.append(gid)
                break
        else:
            buckets.append((spec, [gid]))
    buckets.sort(key=lambda b: b[0].sliding_window is not None)
    simple = len(buckets) == 2 and buckets[0][0].sliding_window is None
    by_group: list[list[int] | None] = [None] * len(specs)
    length_by_group = [0] * len(specs)
    hit_length, longest = max_cache_hit_length, 0
    while True:
        current = hit_length
        for spec, ids in buckets:
            view = hash_view(hashes, hash_block_size, spec.block_size)
            if spec.sliding_window is None and by_group[ids[0]] is not None:
                current = min(current, length_by_group[ids[0]])
                continue
            if spec.sliding_window is None:
                found, new = full_attention_hit(pool, view, ids, spec.block_size, current, alignment_tokens)
            else:
                found, new = sliding_window_hit(pool, view, ids, spec.block_size, spec.sliding_window, current,
                                                alignment_tokens)
            current = new
            for gid, b in zip(ids, found, strict=True):
                by_group[gid], length_by_group[gid] = b, new
            longest = max(longest, current)
        if current >= hit_length:
            break
        hit_length = current
        if simple:
            break
    for spec, ids in buckets:
        if spec.sliding_window is None:
            for gid in ids:
                kept = by_group[gid]
                if kept is not None:
                    del kept[math.ceil(hit_length / spec.block_size):]
    return HybridHit(tuple(tuple(b or ()) for b in by_group), hit_length, longest - hit_length)


def publish_request(pool: PoolState, specs: Sequence[GroupSpec], hashes: Sequence[bytes], hash_block_size: int,
                    num_tokens: int) -> PoolState:
    """Admit a prompt and cache it as vLLM does: its own hit (``get_computed_blocks``) is reused; in each
    group the blocks from the hit up to ``num_tokens`` rounded down to ``scheduler_block_size``
    (``get_num_cacheable_tokens``) are fresh blocks, inserted even when their key is already cached
    (duplicates are kept, as ``BlockHashToBlockMap`` keeps them)."""
    hit = find_longest_cache_hit(pool, specs, hashes, hash_block_size, num_tokens - 1).hit_length
    cacheable = num_tokens - num_tokens % math.lcm(*(s.block_size for s in specs))
    for gid, spec in enumerate(specs):
        view = hash_view(hashes, hash_block_size, spec.block_size)
        for block_hash in view[hit // spec.block_size:cacheable // spec.block_size]:
            pool, (block_id,) = get_new_blocks(pool, 1)
            pool = insert_cached(pool, block_id, key_with_group(block_hash, gid))
    return pool


def evict_block(pool: PoolState, spec: GroupSpec, group_id: int, hashes: Sequence[bytes], hash_block_size: int,
                index: int) -> PoolState:
    """Evict the first cached block of block ``index``'s key (at the group's block size), if any."""
    view = hash_view(hashes, hash_block_size, spec.block_size)
    block_id = pool.cached.get_one(key_with_group(view[index], group_id)) if index < len(view) else None
    return pool if block_id is None else maybe_evict_cached_block(pool, block_id)[0]


def stored_then_lookup(specs: Sequence[GroupSpec], stored: Sequence[Sequence[int]],
                       evicted: Sequence[tuple[int, int, int]], query: Sequence[int],
                       hash_block_size: int | None = None) -> HybridHit:
    """One scenario: publish each stored prompt, evict (request, group, block) identities, look ``query`` up
    (sha256 hashes at ``hash_block_size``, by default the gcd; a pool large enough that nothing else is
    evicted)."""
    from kvexact.reference.peers.vllm_hashing import BlockHasher
    from kvexact.reference.peers.vllm_pool import new_pool

    h = math.gcd(*(s.block_size for s in specs)) if hash_block_size is None else hash_block_size
    check_hash_block_size(specs, h)
    hasher = BlockHasher(h)
    pool = new_pool(2 + sum(len(t) // h for t in stored) * len(specs))
    for tokens in stored:
        pool = publish_request(pool, specs, hasher.hashes(tokens), h, len(tokens))
    for r, g, j in evicted:
        pool = evict_block(pool, specs[g], g, hasher.hashes(stored[r]), h, j)
    return find_longest_cache_hit(pool, specs, hasher.hashes(query), h, len(query) - 1)
