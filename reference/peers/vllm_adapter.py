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

Every mutating call appends trace records ``{"action", "params", "state"}`` in the shape of the normative
reference's KVAllocation records (``kvexact.reference.adapters``, its TraceRecorder) where the concepts
coincide: one record per sub-step, named like the spec action it matches (``prefix_hit(r, k)``,
``evict(g, b)``, ``cache_block(r, j)``, ``release(r)``); vLLM steps with no spec twin
(``allocate_block(r, g, b)``, ``reset_prefix_cache``) carry ``"in_spec": false``. The state after each
sub-step is :func:`project_kv_allocation` of the profile: ``ref``, ``ident``, ``rows``, ``tables``, ``len``
only (vLLM has no generations, reservations, table versions, epochs or transactions). Sub-steps are
replayed from the same pure pool transitions, and the last record's state is checked to equal the
manager's real state after the operation.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.reference.peers import vllm_pool as bp
from kvexact.reference.peers.vllm import (
    GROUP_ID,
    AllocateReceipt,
    ManagerRejection,
    VllmConfig,
    VllmKVCacheManager,
    VllmRequest,
)
from kvexact.reference.peers.vllm_hashing import NO_EXTRAS, RequestExtras, external_hash, key_with_group
from kvexact.reference.rejections import Rejected
from kvexact.spec import itf
from kvexact.spec.checker.model import action_of
from kvexact.spec.itf import Fn


def in_spec(step: str) -> bool:
    """Whether a recorded step is one of ``KVAllocation``'s actions (the checker's list from ``Next``);
    the others (vLLM's own allocation and cache reset) are marked ``in_spec: false`` in the trace."""
    return action_of("KVAllocation", step) is not None


class AdapterRejection(enum.Enum):
    FORK_UNSUPPORTED = "vLLM 0.33.0 has no fork: requests share blocks only through prefix hits"
    EMPTY_PROMPT = "a request needs at least one token"


@attrs.frozen
class TraceRecord:
    """One step: the action's name, its parameters and the projected state after it (ITF values)."""

    action: str
    params: dict[str, Any]
    state: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        out = {"action": self.action, "params": itf.encode_plain(self.params), "state": itf.encode_plain(self.state)}
        if not in_spec(self.action):
            out["in_spec"] = False
        return out


def project_kv_allocation(manager: VllmKVCacheManager, tokens: dict[str, int]) -> dict[str, Any]:
    """The KVAllocation variables vLLM has, for group 0 and blocks ``1..num_blocks-1`` (not the null block).

    ``ref[g][b]`` the ref count; ``ident[g][b]`` the 64-bit external hash of the block's key, 0 without
    one; ``rows[g][b]`` the tokens written (the most any holder wrote; a full block for a cached block
    without holders, 0 for a free one); ``tables[r][g]`` ``[{"block": b}]`` (no generations);
    ``len[r]`` the request's tokens (``tokens`` maps each live request to its token count).
    """
    size = manager.config.block_size
    pool = manager.pool
    blocks = range(1, manager.config.num_blocks)
    rows = {b: 0 for b in blocks}
    tables, lens = Fn(), Fn()
    for rid, ids in manager.req_blocks:
        n = tokens.get(rid, 0)
        tables[rid] = Fn({GROUP_ID: [{"block": b} for b in ids]})
        lens[rid] = n
        for i, b in enumerate(ids):
            rows[b] = max(rows[b], min(size, n - i * size))
    for b in blocks:
        if pool.block_key[b] is not None:
            rows[b] = size
    ident = Fn({b: 0 if pool.block_key[b] is None else external_hash(pool.block_key[b][:-4]) for b in blocks})
    return {"ref": Fn({GROUP_ID: Fn({b: pool.ref_cnt[b] for b in blocks})}), "ident": Fn({GROUP_ID: ident}),
            "rows": Fn({GROUP_ID: Fn(rows)}), "tables": tables, "len": lens}


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

    def _counts(self, extra: VllmRequest | None = None) -> dict[str, int]:
        counts = {rid: r.num_tokens for rid, r in self.requests.items()}
        if extra is not None:
            counts[extra.request_id] = extra.num_tokens
        return counts

    def _record(self, action: str, manager: VllmKVCacheManager, extra: VllmRequest | None = None,
                **params: Any) -> None:
        self.trace.append(TraceRecord(action, params, project_kv_allocation(manager, self._counts(extra))))

    def _trace_allocation(self, before: VllmKVCacheManager, request: VllmRequest, hits: tuple[int, ...],
                          receipt: AllocateReceipt, after: VllmKVCacheManager) -> None:
        """Replay ``allocate_slots`` as sub-steps (touch, evict + allocate per block, cache per block)."""
        rid = request.request_id
        pool, blocks = before.pool, before.blocks_of(rid)

        def state() -> VllmKVCacheManager:
            return attrs.evolve(before, pool=pool, req_blocks=tuple(dict(before.req_blocks, **{rid: blocks}).items()))

        if hits:
            pool, blocks = bp.touch(pool, hits), hits
            self._record("prefix_hit", state(), request, r=rid, k=len(hits))
        for b in receipt.block_ids or ():
            pool, evicted = bp.maybe_evict_cached_block(pool, b)
            if evicted:
                self._record("evict", state(), request, g=GROUP_ID, b=b)
            pool, _ = bp.get_new_blocks(pool, 1)
            blocks = blocks + (b,)
            self._record("allocate_block", state(), request, r=rid, g=GROUP_ID, b=b)
        for b in receipt.newly_cached_block_ids:
            j = blocks.index(b)
            pool = bp.insert_cached(pool, b, key_with_group(request.block_hashes[j], GROUP_ID))
            self._record("cache_block", state(), request, r=rid, j=j)
        assert project_kv_allocation(state(), self._counts(request)) == \
            project_kv_allocation(after, self._counts(request)), "trace replay left the real transition"

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
        self._trace_allocation(self.manager, request, hit.block_ids, receipt, manager)
        self.manager = manager
        self.requests[request_id] = request.with_computed(request.num_tokens)
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
        self._trace_allocation(self.manager, grown, (), receipt, manager)
        self.manager = manager
        self.requests[request_id] = grown.with_computed(grown.num_tokens)
        return receipt.block_ids

    def free(self, request_id: str) -> tuple[int, ...]:
        """Finish a request: its blocks go back to the pool, tail first."""
        self._request(request_id)
        self.manager, receipt = self.manager.free(request_id)
        del self.requests[request_id]
        self._record("release", self.manager, r=request_id)
        return receipt.freed_block_ids

    def fork(self, parent_id: str, child_id: str) -> None:
        raise Rejected(AdapterRejection.FORK_UNSUPPORTED, f"fork({parent_id!r}, {child_id!r})")

    def reset_prefix_cache(self) -> bool:
        self.manager, done = self.manager.reset_prefix_cache()
        self._record("reset_prefix_cache", self.manager, succeeded=done)
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
