"""The vLLM 0.33.0 profile behind the conformance adapter protocol (``kvexact.reference.adapters``).

``--adapter kvexact.reference.peers.vllm_protocol:vllm_factory`` puts vLLM's observable behaviour in the
place of a runtime under test. Each of the config's ``num_groups`` cache groups is an identical
full-attention group served by its own profile manager with ``blocks_per_group + 1`` blocks (block 0 is
vLLM's null block, so the usable ids are ``1..blocks_per_group`` as the protocol expects). vLLM 0.33.0
shares one pool among groups; with identical groups and identical token streams the only difference is
the numbering of blocks. An operation is accepted in every group or in none (the managers are immutable,
so a group that cannot follow simply keeps its predecessor state).

``lockstep`` is False: vLLM caches every full block at allocation and hits on it at once, while the
normative adapter reuses only what ``cache()`` published, so the two legitimately accept different
operations under memory pressure. The machines still check every accepted step's block tables through
the kernels (exact attention over each request's history). ``cache()`` is accepted and changes nothing
(vLLM has already cached the full blocks). Rejection names: ``DUPLICATE_REQUEST``, ``EMPTY_APPEND``,
``UNKNOWN_REQUEST`` as the reference names them, and ``INSUFFICIENT_BLOCKS`` where vLLM returns None.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from kvexact.reference.adapters import AdapterConfig, OpResult
from kvexact.reference.peers.vllm import ManagerRejection, VllmConfig, VllmKVCacheManager, VllmRequest


class VllmProtocolAdapter:
    """``AllocatorAdapter`` over one profile manager per cache group."""

    name = "vllm-0.33.0"
    lockstep = False

    def __init__(self, config: AdapterConfig):
        self.config = config
        manager = VllmKVCacheManager.create(VllmConfig(config.blocks_per_group + 1, config.block_tokens))
        self.managers = [manager] * config.num_groups
        self.requests: dict[str, VllmRequest] = {}

    def block_ids(self, group: int) -> Sequence[int]:
        return list(range(1, self.config.blocks_per_group + 1))

    def start(self, request_id: str, prompt: Sequence[int]) -> OpResult:
        """Lookup, then allocate the rest of the prompt, in every group or none."""
        if request_id in self.requests:
            return OpResult(False, "DUPLICATE_REQUEST")
        if not prompt:
            return OpResult(False, "EMPTY_APPEND")
        request = self.managers[0].make_request(request_id, prompt)
        successors, hits = [], set()
        for manager in self.managers:
            hit = manager.get_computed_blocks(request)
            manager, receipt = manager.allocate_slots(request, request.num_tokens - hit.num_computed_tokens,
                                                      hit.num_computed_tokens, hit.block_ids)
            if receipt.block_ids is None:
                return OpResult(False, ManagerRejection.INSUFFICIENT_BLOCKS.name)
            successors.append(manager)
            hits.add(hit.num_computed_tokens)
        assert len(hits) == 1, "identical groups hit differently"
        self.managers = successors
        self.requests[request_id] = request.with_computed(request.num_tokens)
        return OpResult(True, None, hits.pop())

    def append(self, request_id: str, token: int) -> OpResult:
        request = self.requests.get(request_id)
        if request is None:
            return OpResult(False, "UNKNOWN_REQUEST")
        grown = request.append_output(self.managers[0].hasher, [token])
        successors = []
        for manager in self.managers:
            manager, receipt = manager.allocate_slots(grown, 1)
            if receipt.block_ids is None:
                return OpResult(False, ManagerRejection.INSUFFICIENT_BLOCKS.name)
            successors.append(manager)
        self.managers = successors
        self.requests[request_id] = grown.with_computed(grown.num_tokens)
        return OpResult(True)

    def release(self, request_id: str) -> OpResult:
        if request_id not in self.requests:
            return OpResult(False, "UNKNOWN_REQUEST")
        self.managers = [manager.free(request_id)[0] for manager in self.managers]
        del self.requests[request_id]
        return OpResult(True)

    def cache(self, request_id: str) -> OpResult:
        """vLLM cached the request's full blocks when it allocated them: nothing left to publish."""
        if request_id not in self.requests:
            return OpResult(False, "UNKNOWN_REQUEST")
        return OpResult(True)

    def observe(self) -> dict:
        """vLLM's free queue per group, head first: a hit takes a block out (``touch``), a freed cached block
        joins the tail, a freed uncached one the head."""
        return {"queues": {"free": {g: list(m.pool.free.blocks) for g, m in enumerate(self.managers)}}}

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


def vllm_factory(config: AdapterConfig) -> VllmProtocolAdapter:
    """``--adapter kvexact.reference.peers.vllm_protocol:vllm_factory``."""
    return VllmProtocolAdapter(config)
