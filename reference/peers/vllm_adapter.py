"""The vLLM 0.33.0 profile as an adapter for the conformance machines (issue 9).

:class:`VllmAdapter` drives a :class:`~kvexact.reference.peers.vllm.VllmKVCacheManager` the way vLLM's
scheduler does, one operation at a time, and answers with plain values (ints, tuples, dicts):

- ``allocate(request_id, token_ids)`` -> ``AllocateOutcome | None``: prefix lookup, then
  ``allocate_slots`` for the whole prompt (one prefill step); None when the pool is short (vLLM's
  ``None``: nothing changed);
- ``append(request_id, token_ids)`` -> new block ids, or None when short (nothing changed): the
  request's tokens so far count as computed, the new tokens are appended as output and scheduled;
- ``free(request_id)`` -> the released block ids in release order (tail first);
- ``lookup(token_ids)`` -> hit length in tokens (pure);
- ``fork``: vLLM has no fork (sharing happens only through prefix hits); ``supports_fork`` is False
  and ``fork`` raises ``Rejected(AdapterRejection.FORK_UNSUPPORTED)``.

Every mutating call appends a trace record ``{"action", "params", "state"}`` whose state is
``VllmKVCacheManager.project()`` after the step.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.reference.peers.vllm import ManagerRejection, VllmConfig, VllmKVCacheManager, VllmRequest
from kvexact.reference.peers.vllm_hashing import NO_EXTRAS, RequestExtras
from kvexact.reference.rejections import Rejected


class AdapterRejection(enum.Enum):
    FORK_UNSUPPORTED = "vLLM 0.33.0 has no fork: requests share blocks only through prefix hits"
    EMPTY_PROMPT = "a request needs at least one token"


@attrs.frozen
class TraceRecord:
    """One step: the operation's name, its parameters and the projected state after it."""

    action: str
    params: dict[str, Any]
    state: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "params": self.params, "state": self.state}


@attrs.frozen
class AllocateOutcome:
    """A successful prefill: hit length, the hit blocks, the new blocks, the request's whole table."""

    num_hit_tokens: int
    hit_block_ids: tuple[int, ...]
    new_block_ids: tuple[int, ...]

    @property
    def block_ids(self) -> tuple[int, ...]:
        return self.hit_block_ids + self.new_block_ids


class VllmAdapter:
    """A mutable handle on the immutable manager, for state machines and user-facing drivers."""

    supports_fork = False

    def __init__(self, num_blocks: int, block_size: int, **config: Any):
        self.manager = VllmKVCacheManager.create(VllmConfig(num_blocks, block_size, **config))
        self.requests: dict[str, VllmRequest] = {}
        self.trace: list[TraceRecord] = []

    @property
    def block_size(self) -> int:
        return self.manager.config.block_size

    def _record(self, action: str, **params: Any) -> None:
        self.trace.append(TraceRecord(action, params, self.manager.project()))

    def lookup(self, token_ids: Sequence[int], extras: RequestExtras = NO_EXTRAS) -> int:
        """Hit length in tokens for a prompt (the ``num_tokens - 1`` cap applies); changes nothing."""
        probe = self.manager.make_request("__lookup__", token_ids, extras)
        return self.manager.get_computed_blocks(probe).num_computed_tokens

    def allocate(self, request_id: str, token_ids: Sequence[int], extras: RequestExtras = NO_EXTRAS,
                 prompt_logprobs: bool = False) -> AllocateOutcome | None:
        """Admit a request: look up its prefix, then allocate slots for the rest of its prompt."""
        if request_id in self.requests:
            raise Rejected(ManagerRejection.DUPLICATE_REQUEST, f"request {request_id!r}")
        if len(token_ids) == 0:
            raise Rejected(AdapterRejection.EMPTY_PROMPT, f"request {request_id!r}")
        request = self.manager.make_request(request_id, token_ids, extras, prompt_logprobs)
        hit = self.manager.get_computed_blocks(request)
        manager, receipt = self.manager.allocate_slots(
            request, request.num_tokens - hit.num_computed_tokens, hit.num_computed_tokens, hit.block_ids)
        if receipt.block_ids is None:
            return None
        self.manager = manager
        self.requests[request_id] = request.with_computed(request.num_tokens)
        self._record("allocate", request_id=request_id, num_tokens=request.num_tokens,
                     num_hit_tokens=hit.num_computed_tokens)
        return AllocateOutcome(hit.num_computed_tokens, hit.block_ids, receipt.block_ids)

    def append(self, request_id: str, token_ids: Sequence[int]) -> tuple[int, ...] | None:
        """Decode step: append tokens to a running request and allocate their slots."""
        request = self._request(request_id)
        if len(token_ids) == 0:
            return ()
        grown = request.append_output(self.manager.hasher, token_ids)
        manager, receipt = self.manager.allocate_slots(grown, len(token_ids))
        if receipt.block_ids is None:
            return None
        self.manager = manager
        self.requests[request_id] = grown.with_computed(grown.num_tokens)
        self._record("append", request_id=request_id, num_tokens=len(token_ids))
        return receipt.block_ids

    def free(self, request_id: str) -> tuple[int, ...]:
        """Finish a request: its blocks go back to the pool, tail first."""
        self._request(request_id)
        self.manager, receipt = self.manager.free(request_id)
        del self.requests[request_id]
        self._record("free", request_id=request_id)
        return receipt.freed_block_ids

    def fork(self, parent_id: str, child_id: str) -> None:
        raise Rejected(AdapterRejection.FORK_UNSUPPORTED, f"fork({parent_id!r}, {child_id!r})")

    def reset_prefix_cache(self) -> bool:
        self.manager, done = self.manager.reset_prefix_cache()
        self._record("reset_prefix_cache", succeeded=done)
        return done

    # --- observables --------------------------------------------------------------------------

    def _request(self, request_id: str) -> VllmRequest:
        if request_id not in self.requests:
            raise Rejected(ManagerRejection.UNKNOWN_REQUEST, f"request {request_id!r}")
        return self.requests[request_id]

    def tokens_of(self, request_id: str) -> tuple[int, ...]:
        return self._request(request_id).all_token_ids

    def blocks_of(self, request_id: str) -> tuple[int, ...]:
        return self.manager.blocks_of(request_id)

    def ref_count(self, block_id: int) -> int:
        return self.manager.pool.ref_cnt[block_id]

    def free_queue(self) -> tuple[int, ...]:
        return self.manager.pool.free.blocks

    def num_free_blocks(self) -> int:
        return self.manager.pool.num_free_blocks

    def cached_block_ids(self) -> frozenset[int]:
        return frozenset(b for _key, ids in self.manager.pool.cached.entries for b in ids)
