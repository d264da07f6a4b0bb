"""The vLLM 0.33.0 profile's hybrid coordinator (``vllm_hybrid.py``) over one shared block pool
(``vllm_pool.py``), behind the hybrid-cache protocol (:class:`kvexact.reference.hybrid_adapter.HybridCache`).

``--adapter kvexact.reference.peers.vllm_hybrid_cache:vllm_hybrid_factory`` runs it in the Hybrid machine.
Invariant (as vLLM's ``KVCacheManager`` runs full-attention groups): an admission touches the converged
hit's blocks and takes fresh blocks for the rest, all groups or none; each group caches its blocks from its
last cached one up to the length rounded down to ``scheduler_block_size`` (the lcm), as it allocates,
keeping duplicates; a freed request's blocks go back to the queue, still cached; an eviction drops every
block of the group cached under the prefix's key (``BlockPool.evict_blocks``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from kvexact.reference.hybrid_adapter import HybridCacheConfig
from kvexact.reference.peers.vllm_hashing import BlockHasher, key_with_group
from kvexact.reference.peers.vllm_hybrid import (
    GroupSpec,
    check_hash_block_size,
    find_longest_cache_hit,
    hash_view,
)
from kvexact.reference.peers.vllm_pool import (
    free_blocks,
    get_new_blocks,
    insert_cached,
    maybe_evict_cached_block,
    new_pool,
    touch,
)


@attrs.define
class _Request:
    tokens: list[int]
    blocks: list[list[int]]  # per group, the request's block ids in order
    cached: list[int]  # per group, how many of its blocks are cached (vLLM's num_cached_block)


class VllmHybridCache:
    """The profile's manager: full-attention groups of the configured block sizes in one pool."""

    name = "vllm-0.33.0-hybrid-profile"

    def __init__(self, config: HybridCacheConfig):
        self.config = config
        self.specs = [GroupSpec(p) for p in config.block_sizes]
        check_hash_block_size(self.specs, config.hash_block_size)
        self.hasher = BlockHasher(config.hash_block_size)
        self.alignment = math.lcm(*config.block_sizes)
        self.pool = new_pool(config.pool_blocks * len(config.block_sizes) + 1)
        self.requests: dict[str, _Request] = {}

    def _hit(self, tokens: Sequence[int]) -> tuple[int, tuple[tuple[int, ...], ...]]:
        found = find_longest_cache_hit(self.pool, self.specs, self.hasher.hashes(tokens),
                                       self.config.hash_block_size, len(tokens) - 1)
        return found.hit_length, found.blocks_by_group

    def _cache(self, req: _Request) -> None:
        """Cache each group's blocks up to the A-aligned length (``cache_blocks`` at allocation)."""
        hashes = self.hasher.hashes(req.tokens)
        stop = len(req.tokens) - len(req.tokens) % self.alignment
        for g, p in enumerate(self.config.block_sizes):
            view = hash_view(hashes, self.config.hash_block_size, p)
            for j in range(req.cached[g], stop // p):
                self.pool = insert_cached(self.pool, req.blocks[g][j], key_with_group(view[j], g))
            req.cached[g] = max(req.cached[g], stop // p)

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        hit, found = self._hit(prompt)
        sizes = self.config.block_sizes
        need = [-(-len(prompt) // p) - hit // p for p in sizes]
        if sum(need) > self.pool.num_free_blocks:
            return None
        blocks: list[list[int]] = []
        for g, n in enumerate(need):
            self.pool = touch(self.pool, found[g])
            self.pool, fresh = get_new_blocks(self.pool, n)
            blocks.append([*found[g], *fresh])
        req = _Request(list(prompt), blocks, [hit // p for p in sizes])
        self.requests[request_id] = req
        self._cache(req)
        return hit

    def append(self, request_id: str, token: int) -> bool:
        req = self.requests[request_id]
        grow = [g for g, p in enumerate(self.config.block_sizes) if len(req.tokens) + 1 > len(req.blocks[g]) * p]
        if len(grow) > self.pool.num_free_blocks:
            return False
        for g in grow:
            self.pool, (block_id,) = get_new_blocks(self.pool, 1)
            req.blocks[g].append(block_id)
        req.tokens.append(token)
        self._cache(req)
        return True

    def free(self, request_id: str) -> None:
        for blocks in self.requests.pop(request_id).blocks:
            self.pool = free_blocks(self.pool, reversed(blocks))

    def lookup(self, prompt: Sequence[int]) -> int:
        return self._hit(prompt)[0]

    def evict(self, group: int, prefix: Sequence[int]) -> bool:
        view = hash_view(self.hasher.hashes(prefix), self.config.hash_block_size, self.config.block_sizes[group])
        key = key_with_group(view[-1], group)
        dropped = False
        while (block_id := self.pool.cached.get_one(key)) is not None:
            self.pool, _ = maybe_evict_cached_block(self.pool, block_id)
            dropped = True
        return dropped

    def self_check(self) -> None:
        self.pool.check()


def vllm_hybrid_factory(config: HybridCacheConfig) -> VllmHybridCache:
    """``--adapter kvexact.reference.peers.vllm_hybrid_cache:vllm_hybrid_factory``."""
    return VllmHybridCache(config)


vllm_hybrid_factory.adapter_protocol = "hybrid-cache"  # type: ignore[attr-defined]
