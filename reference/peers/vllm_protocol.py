"""The vLLM 0.33.0 profile behind the conformance adapter protocol (``kvexact.reference.adapters``).

``--adapter kvexact.reference.peers.vllm_protocol:vllm_factory`` puts vLLM's observable behaviour in the
place of a runtime under test. The protocol's border and the group layout are :class:`VllmGroups`'s
(shared with the live adapter over the real manager): each cache group is an identical full-attention
group served by its own profile manager. vLLM 0.33.0 shares one pool among groups; with identical groups
and identical token streams the only difference is the numbering of blocks. The managers are immutable,
so a group that cannot follow simply keeps its predecessor state.

``lockstep`` is False: vLLM caches every full block at allocation and hits on it at once, while the
normative adapter reuses only what ``cache()`` published, so the two legitimately accept different
operations under memory pressure. The machines still check every accepted step's block tables through
the kernels (exact attention over each request's history). ``cache()`` is accepted and changes nothing
(vLLM has already cached the full blocks), except in :class:`DelayedCachingAdapter`
(``vllm_delayed_caching_factory``, vLLM's ``delay_cache_blocks``), where it calls ``cache_blocks``. Rejection names: ``DUPLICATE_REQUEST``, ``EMPTY_APPEND``,
``UNKNOWN_REQUEST`` as the reference names them, and ``INSUFFICIENT_BLOCKS`` where vLLM returns None.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import attrs

from kvexact.reference.adapters import AdapterConfig, OpResult
from kvexact.reference.peers import vllm_pool
from kvexact.reference.peers.vllm import GROUP_ID, VllmConfig, VllmKVCacheManager, VllmRequest
from kvexact.reference.peers.vllm_groups import VllmGroups


class VllmProtocolAdapter(VllmGroups):
    """``AllocatorAdapter`` over one profile manager per cache group (the border is :class:`VllmGroups`)."""

    name = "vllm-0.33.0"
    caches_at_allocation = True  # every full block is cached when allocated: the machines check hits against it
    delay_cache_blocks = False  # P/D disaggregation's setting: allocate without caching, cache_blocks() later

    def __init__(self, config: AdapterConfig):
        super().__init__(config)
        manager = VllmKVCacheManager.create(VllmConfig(config.blocks_per_group + 1, config.block_tokens,
                                                      enable_kv_cache_events=True))
        self.managers = [manager] * config.num_groups
        self.requests: dict[str, VllmRequest] = {}
        self.prefix_of: dict[bytes, tuple[int, ...]] = {}  # every block hash computed so far -> its token prefix

    def holds(self, request_id: str) -> bool:
        return request_id in self.requests

    def tokens(self, request_id: str) -> int:
        return self.requests[request_id].num_tokens

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        """Lookup, then allocate the rest of the prompt, in every group or none."""
        request = self.managers[0].make_request(request_id, prompt)
        successors, hits = [], set()
        for manager in self.managers:
            hit = manager.get_computed_blocks(request)
            manager, receipt = manager.allocate_slots(request, request.num_tokens - hit.num_computed_tokens,
                                                      hit.num_computed_tokens, hit.block_ids,
                                                      delay_cache_blocks=self.delay_cache_blocks)
            if receipt.block_ids is None:
                return None
            successors.append(manager)
            hits.add(hit.num_computed_tokens)
        assert len(hits) == 1, "identical groups hit differently"
        self.managers = successors
        self.requests[request_id] = request.with_computed(request.num_tokens)
        self._remember(request)
        return hits.pop()

    def decode(self, request_id: str, token: int) -> bool:
        grown = self.requests[request_id].append_output(self.managers[0].hasher, [token])
        successors = []
        for manager in self.managers:
            manager, receipt = manager.allocate_slots(grown, 1, delay_cache_blocks=self.delay_cache_blocks)
            if receipt.block_ids is None:
                return False
            successors.append(manager)
        self.managers = successors
        self.requests[request_id] = grown.with_computed(grown.num_tokens)
        self._remember(grown)
        return True

    def _remember(self, request: VllmRequest) -> None:
        p = self.config.block_tokens
        for j, block_hash in enumerate(request.block_hashes):
            self.prefix_of[block_hash] = tuple(request.all_token_ids[: (j + 1) * p])

    def cached_prefixes(self) -> list[tuple[int, ...]]:
        """The token prefixes whose block hash every group's cache holds now (what ``get_computed_blocks`` finds)."""
        return sorted(tokens for block_hash, tokens in self.prefix_of.items()
                      if all(vllm_pool.get_cached_block(m.pool, block_hash, (GROUP_ID,)) is not None
                             for m in self.managers))

    def kv_events(self) -> list[vllm_pool.KVEvent]:
        """vLLM's KV events since the previous call, each group's with ``group_idx`` set to the group (what a
        KV-aware router reads; the machines replay them against ``cached_prefixes()``)."""
        events, successors = [], []
        for g, manager in enumerate(self.managers):
            manager, taken = manager.take_events()
            successors.append(manager)
            events += [e if isinstance(e, vllm_pool.AllBlocksCleared) else attrs.evolve(e, group_idx=g) for e in taken]
        self.managers = successors
        return events

    def free(self, request_id: str) -> None:
        self.managers = [manager.free(request_id)[0] for manager in self.managers]
        del self.requests[request_id]

    def reset_prefix_cache(self) -> OpResult:
        """vLLM's ``reset_prefix_cache`` in every group or none: refused (BLOCKS_IN_USE) while a request holds a
        block, otherwise every cached identity is forgotten."""
        successors = []
        for manager in self.managers:
            manager, done = manager.reset_prefix_cache()
            if not done:
                return OpResult(False, "BLOCKS_IN_USE")
            successors.append(manager)
        self.managers = successors
        return OpResult(True)

    def observe(self) -> dict:
        """vLLM's free queue per group, head first: a hit takes a block out (``touch``), a freed cached block
        joins the tail, a freed uncached one the head; and each group's ``usage()``."""
        return {"queues": {"free": {g: list(m.pool.free.blocks) for g, m in enumerate(self.managers)}},
                "usage": {g: m.usage() for g, m in enumerate(self.managers)}}

    def table(self, request_id: str, group: int) -> list[int]:
        return list(self.managers[group].blocks_of(request_id))

    def length(self, request_id: str) -> int:
        request = self.requests.get(request_id)
        return 0 if request is None else request.num_tokens

    def self_check(self) -> None:
        for manager in self.managers:
            manager.check()

    def digest(self) -> str:
        """SHA-256 over the managers' projections and the request lengths (unchanged by rejections)."""
        text = repr([m.project() for m in self.managers]) + repr(sorted(
            (rid, r.all_token_ids) for rid, r in self.requests.items()))
        return hashlib.sha256(text.encode()).hexdigest()


class DelayedCachingAdapter(VllmProtocolAdapter):
    """vLLM with ``delay_cache_blocks`` (prefill/decode disaggregation): a block is cached only when ``cache()``
    calls ``cache_blocks`` with the request's computed tokens, so a prefix hit needs a ``cache()`` first."""

    name = "vllm-0.33.0-delayed-caching"
    caches_at_allocation = False
    keeps_published_blocks = True  # a block cache() cached stays findable while a live request maps it
    delay_cache_blocks = True

    def cache(self, request_id: str) -> OpResult:
        """``cache_blocks(request, num_computed_tokens)`` in every group: every full computed block is cached."""
        if not self.holds(request_id):
            return OpResult(False, "UNKNOWN_REQUEST")
        request = self.requests[request_id]
        self.managers = [m.cache_blocks(request, request.num_computed_tokens) for m in self.managers]
        return OpResult(True)


def vllm_factory(config: AdapterConfig) -> VllmProtocolAdapter:
    """``--adapter kvexact.reference.peers.vllm_protocol:vllm_factory``."""
    return VllmProtocolAdapter(config)


def vllm_delayed_caching_factory(config: AdapterConfig) -> DelayedCachingAdapter:
    """``--adapter kvexact.reference.peers.vllm_protocol:vllm_delayed_caching_factory``."""
    return DelayedCachingAdapter(config)
