"""The real vLLM 0.33.0 hybrid coordinator on a CPU, for comparison with ``reference/peers/vllm_hybrid.py``.

One :func:`hybrid_hit` builds a real ``KVCacheManager`` over cache groups of different block sizes (full
attention and sliding window, one shared ``BlockPool``, ``hash_block_size`` by default the gcd and
``scheduler_block_size`` = lcm of the block sizes), runs each stored prompt through
``get_computed_blocks`` / ``allocate_slots`` / ``free`` (vLLM caches at allocation), evicts the listed
(request, group, block) identities through ``BlockPool.evict_blocks``, and returns what
``get_computed_blocks`` finds for the query: the hit length and the number of blocks per group.

:class:`LiveHybridCache` is the same real manager (full-attention groups of the drawn block sizes, one
shared pool) behind the hybrid-cache protocol: ``kvexact conform --spec Hybrid --adapter
kvexact.conformance.live.vllm_hybrid:hybrid_factory`` runs the Hybrid machine through it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kvexact.conformance.live.runtime import require

VERSION = require("vllm")

import torch  # noqa: E402
from vllm.v1.core.kv_cache_utils import make_block_hash_with_group_id  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheGroupSpec, SlidingWindowSpec  # noqa: E402

from kvexact.conformance.live.vllm import admit, decode, new_hasher, new_manager, new_request  # noqa: E402
from kvexact.reference.hybrid_adapter import HybridCacheConfig  # noqa: E402


def _spec(block_size: int, window: int | None):
    common = dict(block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
    return FullAttentionSpec(**common) if window is None else SlidingWindowSpec(**common, sliding_window=window)


def _manager(specs: Sequence[tuple[int, int | None]], h: int, num_blocks: int, enable_caching: bool = True
             ) -> Any:
    """vLLM's manager over these groups (scheduler block size the lcm of theirs, hash block size ``h``)."""
    groups = [KVCacheGroupSpec([f"layer.{i}"], _spec(b, w)) for i, (b, w) in enumerate(specs)]
    return new_manager(num_blocks, math.lcm(*(b for b, _ in specs)), groups=groups, hash_block_size=h,
                       caching=enable_caching)


def manager_refusal(specs: Sequence[tuple[int, int | None]], hash_block_size: int,
                    enable_caching: bool = True) -> str | None:
    """None when vLLM builds a manager for these groups and hash block size, else its assertion's text."""
    try:
        _manager(specs, hash_block_size, 16, enable_caching)
    except AssertionError as e:
        return str(e) or "AssertionError"
    return None


def hybrid_hit(specs: Sequence[tuple[int, int | None]], stored: Sequence[Sequence[int]],
               evicted: Sequence[tuple[int, int, int]], query: Sequence[int],
               hash_block_size: int | None = None) -> tuple[int, tuple[int, ...]]:
    """Store, evict, look up once; returns (hit tokens, blocks returned per group). The hash block size
    defaults to the gcd of the block sizes."""
    sizes = [b for b, _ in specs]
    h = math.gcd(*sizes) if hash_block_size is None else hash_block_size
    num_blocks = 4 + sum(len(t) // b + 2 for t in (*stored, query) for b in sizes)
    manager = _manager(specs, h, num_blocks)
    hasher = new_hasher(h)
    for i, tokens in enumerate(stored):
        r = new_request(f"stored-{i}", tokens, hasher)
        if admit(manager, r) is None:
            raise RuntimeError(f"pool of {num_blocks} blocks too small for stored prompt {i}")
        manager.free(r)
    pool = manager.block_pool
    for r_index, group, j in evicted:
        hashes = new_request("probe", stored[r_index], hasher).block_hashes
        index = (j + 1) * (sizes[group] // h) - 1
        if index < len(hashes):
            block = pool.cached_block_hash_to_block.get_one_block(make_block_hash_with_group_id(hashes[index], group))
            if block is not None:
                pool.evict_blocks({block.block_id})
    blocks, hit, *_ = manager.get_computed_blocks(new_request("query", query, hasher))
    return hit, tuple(len(b) for b in blocks.blocks)


class LiveHybridCache:
    """A real ``KVCacheManager`` over full-attention groups of the configured block sizes (hash block size
    as configured, ``pool_blocks`` per group in one pool plus vLLM's null block) as a ``HybridCache``."""

    name = f"vllm-{VERSION}-hybrid-live"

    def __init__(self, config: HybridCacheConfig):
        self.config = config
        specs = [(p, None) for p in config.block_sizes]
        self.manager = _manager(specs, config.hash_block_size, config.pool_blocks * len(specs) + 1)
        self.hasher = new_hasher(config.hash_block_size)
        self.requests: dict[str, Any] = {}

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        request = new_request(request_id, prompt, self.hasher)
        hit = admit(self.manager, request)
        if hit is not None:
            self.requests[request_id] = request
        return hit

    def append(self, request_id: str, token: int) -> bool:
        return decode(self.manager, self.requests[request_id], [token])

    def free(self, request_id: str) -> None:
        self.manager.free(self.requests.pop(request_id))

    def lookup(self, prompt: Sequence[int]) -> int:
        return int(self.manager.get_computed_blocks(new_request("probe", prompt, self.hasher))[1])

    def evict(self, group: int, prefix: Sequence[int]) -> bool:
        """Every block of ``group`` cached under the prefix's last hash goes (``BlockPool.evict_blocks``)."""
        key = make_block_hash_with_group_id(new_request("probe", prefix, self.hasher).block_hashes[-1], group)
        pool, dropped = self.manager.block_pool, False
        while (block := pool.cached_block_hash_to_block.get_one_block(key)) is not None:
            pool.evict_blocks({block.block_id})
            dropped = True
        return dropped

    def self_check(self) -> None:
        """Each block's ref count is the number of (request, group) tables holding it; none of those is free."""
        held: dict[int, int] = {}
        for single in self.manager.coordinator.single_type_managers:
            for blocks in single.req_to_blocks.values():
                for b in blocks:
                    if not b.is_null:
                        held[b.block_id] = held.get(b.block_id, 0) + 1
        pool = self.manager.block_pool
        counts = {b.block_id: b.ref_cnt for b in pool.blocks if b.ref_cnt and not b.is_null}
        if counts != held:
            raise AssertionError(f"vLLM hybrid pool: ref counts {counts} != holders {held}")
        if {b.block_id for b in pool.free_block_queue.get_all_free_blocks()} & set(held):
            raise AssertionError("vLLM hybrid pool: a held block is in the free queue")


def hybrid_factory(config: HybridCacheConfig) -> LiveHybridCache:
    """``--adapter kvexact.conformance.live.vllm_hybrid:hybrid_factory``."""
    return LiveHybridCache(config)


hybrid_factory.adapter_protocol = "hybrid-cache"  # type: ignore[attr-defined]
