"""The normative reference behind the adapter protocol, with its trace recorder attached.

Prefix reuse: full blocks are published under content keys; ``start`` maps the longest cached chain
(capped one token short of the prompt, 0x07A's logits cap) and appends the rest, all in one reference
transaction. Keys are either one small integer per distinct token prefix (``content`` identity) or, as
``KVAllocation.tla`` models identity, the 1-based block position within one canonical token ``stream``
(``position`` identity: only blocks whose whole prefix follows the stream are cacheable).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kvexact.conformance.adapters import AdapterConfig, OpResult
from kvexact.reference import lifecycle
from kvexact.reference.allocator import Allocator, AllocRejection
from kvexact.reference.pool import GroupConfig, QueuePolicy
from kvexact.reference.projection import TraceRecorder
from kvexact.reference.rejections import Rejected


class ReferenceAdapter:
    """Adapter over :class:`kvexact.reference.allocator.Allocator` (the normative contract)."""

    name = "reference"
    lockstep = True

    def __init__(self, config: AdapterConfig, spec: str | None = "KVAllocation",
                 requests: Sequence[str] = (), readers: Sequence[str] = (), check_every_op: bool = True,
                 policy: QueuePolicy = QueuePolicy.LRU, stream: Sequence[int] | None = None):
        self.config = config
        groups = [GroupConfig(g, g, config.block_tokens, config.row_bytes[g % len(config.row_bytes)])
                  for g in range(config.num_groups)]
        ids = list(range(1, config.blocks_per_group + 1))
        self.alloc = Allocator(groups, [ids] * config.num_groups, policy=policy, check_every_op=check_every_op)
        self.keys: dict[tuple[int, ...], str] = {}
        self.stream = tuple(stream) if stream is not None else None
        self.recorder: TraceRecorder | None = None
        if spec is not None:
            self.recorder = TraceRecorder(spec, requests=list(requests), readers=list(readers)).attach(self.alloc)

    # ---- protocol ---------------------------------------------------------------------------------------
    def block_ids(self, group: int) -> Sequence[int]:
        return list(range(1, self.config.blocks_per_group + 1))

    def _run(self, fn: Any) -> OpResult:
        try:
            outcome = fn()
        except Rejected as exc:
            return OpResult(False, exc.reason.name)
        if getattr(outcome, "outcome", None) == "ROLLED_BACK":
            return OpResult(False, "ROLLED_BACK")
        return OpResult(True)

    def _key(self, prefix: tuple[int, ...]) -> str | None:
        """The identity key of a full-block prefix, or None when it cannot be cached (position identity)."""
        if self.stream is None:
            return self.keys.setdefault(prefix, str(len(self.keys) + 1))
        if prefix != self.stream[: len(prefix)]:
            return None
        key = str(len(prefix) // self.config.block_tokens)
        self.keys[prefix] = key
        return key

    def start(self, request_id: str, prompt: Sequence[int]) -> OpResult:
        p = self.config.block_tokens
        hit: list[str] = []
        for j in range((len(prompt) - 1) // p):
            key = self.keys.get(tuple(prompt[: (j + 1) * p]))
            if key is None or lifecycle.lookup_all_groups(self.alloc, key) is None:
                break
            hit.append(key)

        def run():
            if hit:
                lifecycle.prefix_hit(self.alloc, request_id, hit)
            elif not prompt:
                raise Rejected(AllocRejection.EMPTY_APPEND, request_id)
            for t in prompt[len(hit) * p:]:
                receipt = self.alloc.append(request_id, t)
                if receipt.outcome != "PUBLISHED":
                    raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, "append rolled back during start")
            return None

        result = self._run(lambda: self.alloc.transact(run))
        return OpResult(result.accepted, result.rejection, len(hit) * p if result.accepted else 0)

    def append(self, request_id: str, token: int) -> OpResult:
        return self._run(lambda: self.alloc.append(request_id, token))

    def append_with_failure(self, request_id: str, token: int) -> OpResult:
        """Append with a fault injected after the first group's reservation (0x04F): must roll back."""
        self.alloc.fault_after.update({("append_reserve", 0), ("cow_reserve", 0)})
        try:
            return self.append(request_id, token)
        finally:
            self.alloc.fault_after.clear()

    def release(self, request_id: str) -> OpResult:
        return self._run(lambda: lifecycle.release(self.alloc, request_id))

    def fork(self, parent_id: str, child_id: str) -> OpResult:
        return self._run(lambda: lifecycle.fork(self.alloc, parent_id, child_id))

    def truncate(self, request_id: str, keep_tokens: int) -> OpResult:
        return self._run(lambda: lifecycle.truncate(self.alloc, request_id, keep_tokens))

    def cache(self, request_id: str) -> OpResult:
        """Publish every full, not yet keyed block of the request under its content key."""
        if request_id not in self.alloc.requests:
            return OpResult(False, "UNKNOWN_REQUEST")
        tokens = self.alloc.tokens_of(request_id)
        p = self.config.block_tokens
        for j in range(len(tokens) // p):
            key = self._key(tuple(tokens[: (j + 1) * p]))
            if key is None:
                break
            if lifecycle.lookup_all_groups(self.alloc, key) is not None:
                continue
            rec = self.alloc.request(request_id)
            if any(self.alloc.pools[g].blocks[rec.tables[g][j].block_id].cache_key is not None
                   for g in range(self.config.num_groups)):
                continue
            result = self._run(lambda j=j, key=key: lifecycle.cache_block(self.alloc, request_id, j, key))
            if not result.accepted:
                return result
        return OpResult(True)

    def evict(self, prefix: tuple[int, ...]) -> OpResult:
        key = self.keys.get(prefix)
        if key is None:
            return OpResult(False, "CACHE_IDENTITY_MISSING")
        return self._run(lambda: lifecycle.evict(self.alloc, key))

    def stale_write(self, group: int, block_id: int, generation: int) -> OpResult:
        from kvexact.reference.handles import BlockHandle

        return self._run(lambda: lifecycle.delayed_write(self.alloc, BlockHandle(group, group, block_id, generation),
                                                   0, 1))

    def table(self, request_id: str, group: int) -> list[int]:
        return [h.block_id for h in self.alloc.request(request_id).tables[group]]

    def length(self, request_id: str) -> int:
        return self.alloc.request(request_id).context_tokens

    def self_check(self) -> None:
        self.alloc.self_check()

    def digest(self) -> str:
        return self.alloc.digest()


def reference_factory(config: AdapterConfig) -> ReferenceAdapter:
    """``--adapter kvexact.conformance.reference_adapter:reference_factory`` (the default)."""
    return ReferenceAdapter(config, spec=None)
