"""The installed vLLM 0.33.0's ``KVCacheManager`` and ``BlockPool`` behind the allocator adapter protocol.

``kvexact conform --adapter kvexact.conformance.live.vllm:factory`` drives the real manager exactly as
the profile adapter (``reference/peers/vllm_protocol.py``) drives the profile: one full-attention
manager per cache group with ``blocks_per_group + 1`` blocks (block 0 is vLLM's null block), the
request hashed by vLLM's own block hasher (sha256, ``NONE_HASH`` from ``"vllm-none-hash"``), a start is
``get_computed_blocks`` then ``allocate_slots`` for the rest of the prompt, a decoded token is
``append_output_token_ids`` then ``allocate_slots(request, 1)``, a release is ``free``. Identical groups
fed identical streams hold identical states, so group 0's verdict is every group's.

A refused decode step is undone on the request (the token and the hashes it completed are dropped):
vLLM's scheduler would keep the request waiting with its old tokens, which is what the protocol's
"a rejection changes nothing" asks. :meth:`LiveVllmAdapter.project` gives the same snapshot as the
profile's ``VllmKVCacheManager.project`` so ``kvexact diff vllm`` compares them field by field.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from kvexact.conformance.live.runtime import require
from kvexact.reference.adapters import AdapterConfig
from kvexact.reference.peers.vllm_groups import VllmGroups

VERSION = require("vllm")

import torch  # noqa: E402
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import sha256  # noqa: E402
from vllm.v1.core.kv_cache_manager import KVCacheManager  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

MAX_MODEL_LEN = 1 << 20


def new_manager(num_blocks: int, block_size: int, events: bool = False, groups: Sequence[Any] | None = None,
                hash_block_size: int | None = None, caching: bool = True) -> KVCacheManager:
    """A real manager (prefix caching on unless ``caching`` is off, KV events when asked): one full-attention group of ``block_size`` tokens,
    or the given ``KVCacheGroupSpec`` list with ``block_size`` as the scheduler's block size and
    ``hash_block_size`` (default ``block_size``) as the hash block size. The one place kvexact builds one."""
    if groups is None:
        spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
        groups = [KVCacheGroupSpec(["layer.0"], spec)]
    config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=list(groups))
    return KVCacheManager(config, max_model_len=MAX_MODEL_LEN, scheduler_block_size=block_size,
                          hash_block_size=hash_block_size or block_size, enable_caching=caching,
                          enable_kv_cache_events=events)


def new_hasher(hash_block_size: int) -> Any:
    """vLLM's own request block hasher (sha256, ``NONE_HASH`` from ``"vllm-none-hash"``)."""
    init_none_hash(sha256)
    return get_request_block_hasher(hash_block_size, sha256)


def new_request(request_id: str, tokens: Sequence[int], hasher: Any) -> Request:
    """A request as the scheduler builds one (greedy, no output limit in practice)."""
    return Request(request_id, list(tokens), SamplingParams(max_tokens=MAX_MODEL_LEN), None, block_hasher=hasher)


def admit(manager: KVCacheManager, request: Request) -> int | None:
    """Look ``request`` up and allocate the rest of it (vLLM caches the full blocks as it allocates): the hit
    in tokens, or None (nothing allocated) without room."""
    blocks, hit, *_ = manager.get_computed_blocks(request)
    if manager.allocate_slots(request, request.num_tokens - hit, hit, blocks) is None:
        return None
    request.num_computed_tokens = request.num_tokens
    return hit


def decode(manager: KVCacheManager, request: Request, tokens: Sequence[int]) -> bool:
    """``tokens`` decoded onto ``request`` and their slots allocated; without room the tokens and the block
    hashes they completed are dropped again, so a refusal changes nothing (vLLM's scheduler would keep the
    request waiting with its old tokens)."""
    num_hashes, num_tokens = len(request.block_hashes), request.num_tokens
    request.append_output_token_ids(list(tokens))
    if manager.allocate_slots(request, len(tokens)) is None:
        del request._output_token_ids[len(request._output_token_ids) - len(tokens):]
        del request._all_token_ids[num_tokens:], request.block_hashes[num_hashes:]
        return False
    request.num_computed_tokens = request.num_tokens
    return True


def project(manager: KVCacheManager) -> dict[str, Any]:
    """The profile's projection (``VllmKVCacheManager.project``) of a real manager."""
    pool = manager.block_pool
    single = manager.coordinator.single_type_managers[0]
    cached: dict[str, list[int]] = {}
    for key, found in pool.cached_block_hash_to_block._cache.items():
        cached[bytes(key).hex()] = [found.block_id] if hasattr(found, "block_id") else list(found)
    return {
        "free_queue": [b.block_id for b in pool.free_block_queue.get_all_free_blocks()],
        "ref_cnt": {str(b.block_id): b.ref_cnt for b in pool.blocks if b.ref_cnt and not b.is_null},
        "cached": cached,
        "requests": {rid: [b.block_id for b in blocks] for rid, blocks in single.req_to_blocks.items()},
        "num_cached_block": dict(single.num_cached_block),
    }


class LiveVllmAdapter(VllmGroups):
    """``AllocatorAdapter`` over real vLLM managers, one per cache group (the border is :class:`VllmGroups`)."""

    name = f"vllm-{VERSION}-live"

    def __init__(self, config: AdapterConfig):
        super().__init__(config)
        self.hasher = new_hasher(config.block_tokens)
        self.managers = [new_manager(config.blocks_per_group + 1, config.block_tokens, events=True)
                         for _ in range(config.num_groups)]
        self.requests: dict[str, list[Request]] = {}
        self.prefix_of: dict[bytes, tuple[int, ...]] = {}  # every block hash a request computed -> its token prefix

    def holds(self, request_id: str) -> bool:
        return request_id in self.requests

    def tokens(self, request_id: str) -> int:
        return self.requests[request_id][0].num_tokens

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        requests: list[Request] = []
        hits: set[int] = set()
        for manager in self.managers:
            request = new_request(request_id, prompt, self.hasher)
            hit = admit(manager, request)
            if hit is None:
                assert not requests, "identical groups disagree on capacity"
                return None
            requests.append(request)
            hits.add(hit)
        assert len(hits) == 1, "identical groups hit differently"
        self.requests[request_id] = requests
        self._remember(requests[0])
        return hits.pop()

    def decode(self, request_id: str, token: int) -> bool:
        for index, (manager, request) in enumerate(zip(self.managers, self.requests[request_id], strict=True)):
            if not decode(manager, request, [token]):
                assert index == 0, "identical groups disagree on capacity"
                return False
        self._remember(self.requests[request_id][0])
        return True

    def _remember(self, request: Request) -> None:
        p = self.config.block_tokens
        for j, block_hash in enumerate(request.block_hashes):
            self.prefix_of[bytes(block_hash)] = tuple(request.all_token_ids[: (j + 1) * p])

    def cached_prefixes(self) -> list[tuple[int, ...]]:
        """The token prefixes whose block hash every group's block pool holds now (``get_cached_block``)."""
        return sorted(tokens for block_hash, tokens in self.prefix_of.items()
                      if all(m.block_pool.get_cached_block(block_hash, [0]) is not None for m in self.managers))

    def kv_events(self) -> list[dict[str, Any]]:
        """vLLM's own KV events since the previous call (``take_events``), each group's with ``group_idx`` set to the
        group, as maps with a ``type`` (what a KV-aware router reads)."""
        out: list[dict[str, Any]] = []
        for g, manager in enumerate(self.managers):
            for event in manager.take_events():
                fields = {name: getattr(event, name) for name in event.__struct_fields__}
                out.append({**fields, "type": type(event).__name__, "group_idx": g})
        return out

    def free(self, request_id: str) -> None:
        for manager, request in zip(self.managers, self.requests.pop(request_id), strict=True):
            manager.free(request)

    def observe(self) -> dict[str, Any]:
        """vLLM's free block queue per group, head first (what the machines hold to the queue promises), and each
        group's ``block_pool.get_usage()`` (the mapped share; it makes refusals for lack of blocks checkable)."""
        return {"queues": {"free": {g: [b.block_id for b in m.block_pool.free_block_queue.get_all_free_blocks()]
                                    for g, m in enumerate(self.managers)}},
                "usage": {g: m.block_pool.get_usage() for g, m in enumerate(self.managers)}}

    def table(self, request_id: str, group: int) -> list[int]:
        return list(self.managers[group].get_block_ids(request_id)[0]) if request_id in self.requests else []

    def length(self, request_id: str) -> int:
        requests = self.requests.get(request_id)
        return 0 if requests is None else requests[0].num_tokens

    def project(self, group: int = 0) -> dict[str, Any]:
        return project(self.managers[group])

    def self_check(self) -> None:
        """Ref counts equal the number of running requests holding each block; free blocks hold none."""
        for group, manager in enumerate(self.managers):
            snap = project(manager)
            held: dict[str, int] = {}
            for blocks in snap["requests"].values():
                for b in blocks:
                    held[str(b)] = held.get(str(b), 0) + 1
            if held != snap["ref_cnt"]:
                raise AssertionError(f"vLLM group {group}: ref counts {snap['ref_cnt']} != holders {held}")
            if set(map(str, snap["free_queue"])) & set(held):
                raise AssertionError(f"vLLM group {group}: a held block is in the free queue")

    def digest(self) -> str:
        """SHA-256 over the managers' projections and the request tokens (unchanged by rejections)."""
        text = repr([project(m) for m in self.managers]) + repr(sorted(
            (rid, list(rs[0].all_token_ids)) for rid, rs in self.requests.items()))
        return hashlib.sha256(text.encode()).hexdigest()


class EventDriver:
    """One real manager with KV events on, behind ``vllm_wire.random_stream_log``'s workload calls; a
    refused call changes nothing (a refused decode drops its tokens and the hashes they completed)."""

    def __init__(self, num_blocks: int, block_size: int):
        self.hasher = new_hasher(block_size)
        self.manager = new_manager(num_blocks, block_size, events=True)
        self.requests: dict[str, Request] = {}

    def allocate(self, request_id: str, tokens: Sequence[int]) -> bool | None:
        request = new_request(request_id, tokens, self.hasher)
        if admit(self.manager, request) is None:
            return None
        self.requests[request_id] = request
        return True

    def append(self, request_id: str, tokens: Sequence[int]) -> bool | None:
        return True if decode(self.manager, self.requests[request_id], tokens) else None

    def free(self, request_id: str) -> None:
        self.manager.free(self.requests.pop(request_id))

    def reset_prefix_cache(self) -> bool:
        return self.manager.reset_prefix_cache()

    def take_events(self) -> list[Any]:
        return self.manager.take_events()


def record_event_log(seed: int, ops: int, num_blocks: int = 9, block_size: int = 2) -> bytes:
    """vLLM's own KV events under ``vllm_wire.random_stream_log``'s workload, as its publisher serializes
    them: one MessagePack ``KVEventBatch`` per operation that emitted events, concatenated."""
    import msgspec
    from vllm.distributed.kv_events import KVEventBatch

    from kvexact.reference.peers.vllm_wire import random_stream_log

    batches = random_stream_log(seed, ops, num_blocks, block_size, driver=EventDriver(num_blocks, block_size))
    encoder = msgspec.msgpack.Encoder()
    return b"".join(encoder.encode(KVEventBatch(ts=0.0, events=list(events))) for events in batches)


def factory(config: AdapterConfig) -> LiveVllmAdapter:
    """``--adapter kvexact.conformance.live.vllm:factory``."""
    return LiveVllmAdapter(config)
