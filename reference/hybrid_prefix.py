"""Prefix caching over cache groups of different block sizes, hashed at a finer block size (0x01A, 0x03B, 0x07C).

Invariants kept by :class:`HybridPrefixCache`:

* the hash block size ``H`` divides every group block size ``P_g`` (else HASH_BLOCK_SIZE_NOT_DIVIDING);
  group ``g``'s block ``j`` is keyed by the fine hash ``(j + 1) * P_g / H - 1``, which chains its whole prefix;
* a hit ``L`` is a multiple of ``A = lcm(P_g)``, ``L <= S_prompt - 1`` for a logits-producing request,
  and every group holds a current cached block for each of its blocks ``j < L / P_g`` (the longest prefix
  every group serves, as vLLM's coordinator converges for full-attention groups); a prefix held by one
  group only is no hit;
* publication keys a request's full blocks only up to its A-aligned length, in one transaction;
* lookup never mutates the allocator; :meth:`HybridPrefixCache.admit` maps a receipt's blocks (group ``g``
  maps ``L / P_g`` of them) only while the allocator is exactly as the lookup saw it, then appends the rest.

Sliding-window groups are not in this path (their out-of-window blocks would need null blocks); the
window rule is in ``hybrid.py`` and the vLLM profile.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import attrs

from kvexact.reference.allocator import Allocator, AllocRejection, RequestRecord
from kvexact.reference.handles import BlockHandle
from kvexact.reference.keys import KeyInputs, group_block_hashes, hash_full_blocks
from kvexact.reference.rejections import Rejected


class HybridPrefixRejection(enum.Enum):
    """Named refusals of the hybrid prefix cache."""

    BAD_HASH_BLOCK_SIZE = "the hash block size must be a positive integer"
    HASH_BLOCK_SIZE_NOT_DIVIDING = "the hash block size must divide every cache group's block size"
    NOT_THE_REQUESTS_TOKENS = "published key inputs must be exactly the request's tokens"
    EMPTY_PROMPT_WITH_LOGITS = "a logits-producing request needs at least one prompt token"
    STALE_INDEX_SNAPSHOT = "the allocator changed since the receipt's lookup"
    HIT_NOT_ALIGNED = "a hybrid hit must be a multiple of the lcm of the group block sizes"
    HIT_EXCEEDS_CAP = "a hit must leave the last prompt row of a logits-producing request to compute"
    GROUP_HANDLES_MISMATCH = "a group must map exactly hit / P_g blocks of the receipt"


@attrs.frozen
class HybridReceipt:
    """What a hybrid lookup proved: the converged hit and, per group, the cached blocks that serve it."""

    request_id: str
    index_snapshot_id: str
    prompt_tokens: int
    cap_tokens: int
    alignment_tokens: int
    served_tokens: tuple[int, ...]  # per group: its own longest cached prefix (before convergence)
    hit_tokens: int
    group_handles: tuple[tuple[BlockHandle, ...], ...]


class HybridPrefixCache:
    """Weak per-group identities in the allocator's index, keyed at the hash block size."""

    def __init__(self, alloc: Allocator, hash_block_tokens: int) -> None:
        if not isinstance(hash_block_tokens, int) or isinstance(hash_block_tokens, bool) or hash_block_tokens < 1:
            raise Rejected(HybridPrefixRejection.BAD_HASH_BLOCK_SIZE, f"hash block size {hash_block_tokens!r}")
        sizes = [g.block_tokens for g in alloc.groups]
        bad = [p for p in sizes if p % hash_block_tokens]
        if bad:
            raise Rejected(HybridPrefixRejection.HASH_BLOCK_SIZE_NOT_DIVIDING,
                           f"hash block size {hash_block_tokens}, group block sizes {sizes}")
        self.alloc = alloc
        self.hash_block_tokens = hash_block_tokens
        self.alignment_tokens = math.lcm(*sizes)

    def group_keys(self, inputs: KeyInputs) -> list[list[str]]:
        """Per group, the key of each full block at that group's block size."""
        fine = hash_full_blocks(inputs, self.hash_block_tokens)
        return [[h.hex() for h in group_block_hashes(fine, self.hash_block_tokens, g.block_tokens)]
                for g in self.alloc.groups]

    def _cached(self, group: int, key: str) -> BlockHandle | None:
        h = self.alloc.index.get((group, key))
        if h is None or self.alloc.pools[group].blocks[h.block_id].generation != h.generation:
            return None
        return h

    def publish(self, request_id: str, inputs: KeyInputs) -> int:
        """Key the request's full blocks of every group up to its A-aligned length; returns how many
        blocks got a key (a block whose key a current block already carries stays unkeyed)."""
        tokens = self.alloc.tokens_of(request_id)
        if tuple(inputs.tokens) != tokens:
            raise Rejected(HybridPrefixRejection.NOT_THE_REQUESTS_TOKENS, f"{request_id}: key inputs differ")
        stop = len(tokens) - len(tokens) % self.alignment_tokens
        keys = self.group_keys(inputs)
        rec = self.alloc.request(request_id)

        def run() -> int:
            added = 0
            for g, group in enumerate(self.alloc.groups):
                pool = self.alloc.pools[g]
                for j, key in enumerate(keys[g][:stop // group.block_tokens]):
                    h = rec.tables[g][j]
                    if pool.blocks[h.block_id].cache_key is not None or self._cached(g, key) is not None:
                        continue
                    self.alloc.index[(g, key)] = h
                    pool.set_cache_key(h.block_id, key)
                    added += 1
            return added

        return self.alloc.transact(run)

    def evict(self, group: int, key: str) -> BlockHandle | None:
        """Drop group ``group``'s weak identity ``key`` (its block keeps its mappings); None: not cached."""

        def run() -> BlockHandle | None:
            h = self.alloc.index.get((group, key))
            if h is not None:
                del self.alloc.index[(group, key)]
                self.alloc.pools[group].set_cache_key(h.block_id, None)
            return h

        return self.alloc.transact(run)

    def lookup(self, request_id: str, inputs: KeyInputs, requires_logits: bool = True) -> HybridReceipt:
        """The longest A-aligned prefix every group holds, capped for logits (0x07C). Read-only."""
        s_prompt = len(inputs.tokens)
        if requires_logits and s_prompt < 1:
            raise Rejected(HybridPrefixRejection.EMPTY_PROMPT_WITH_LOGITS, request_id)
        cap = s_prompt - 1 if requires_logits else s_prompt
        found: list[list[BlockHandle]] = []
        for g, keys in enumerate(self.group_keys(inputs)):
            run: list[BlockHandle] = []
            for key in keys:
                h = self._cached(g, key)
                if h is None:
                    break
                run.append(h)
            found.append(run)
        served = tuple(len(run) * g.block_tokens for run, g in zip(found, self.alloc.groups, strict=True))
        hit = min(min(served), cap)
        hit -= hit % self.alignment_tokens
        handles = tuple(tuple(run[:hit // g.block_tokens]) for run, g in zip(found, self.alloc.groups, strict=True))
        return HybridReceipt(request_id, self.alloc.digest(), s_prompt, cap, self.alignment_tokens, served, hit,
                             handles)

    def admit(self, receipt: HybridReceipt, tokens: Sequence[int]) -> RequestRecord:
        """Map the receipt's blocks into a new request (+1 ref each) and append the rest of ``tokens``."""
        alloc = self.alloc
        if receipt.index_snapshot_id != alloc.digest():
            raise Rejected(HybridPrefixRejection.STALE_INDEX_SNAPSHOT, receipt.request_id)
        hit = receipt.hit_tokens
        if hit % self.alignment_tokens:
            raise Rejected(HybridPrefixRejection.HIT_NOT_ALIGNED, f"hit {hit}, alignment {self.alignment_tokens}")
        if hit > receipt.cap_tokens or hit > len(tokens):
            raise Rejected(HybridPrefixRejection.HIT_EXCEEDS_CAP, f"hit {hit}, cap {receipt.cap_tokens}")
        if len(receipt.group_handles) != len(alloc.groups) or any(
                len(hs) != hit // g.block_tokens for hs, g in zip(receipt.group_handles, alloc.groups, strict=True)):
            raise Rejected(HybridPrefixRejection.GROUP_HANDLES_MISMATCH,
                           f"{[len(hs) for hs in receipt.group_handles]} for hit {hit}")

        def run() -> RequestRecord:
            rid = receipt.request_id
            if hit:
                alloc._require_no_txn()
                if rid in alloc.requests:
                    raise Rejected(AllocRejection.DUPLICATE_REQUEST, f"request {rid!r}")
                for hs in receipt.group_handles:
                    for h in hs:
                        alloc.pools[h.cache_group_id].incref(h.block_id)
                alloc.requests[rid] = RequestRecord(alloc.ended.get(rid, 0) + 1, 1, hit, receipt.group_handles)
            for t in tokens[hit:]:
                alloc.append(rid, t)
            return alloc.request(rid)

        return alloc.transact(run)
