"""The SGLang 0.5.23 profile as an adapter for the conformance machines (issue 9).

:class:`SGLangAdapter` owns a :class:`~kvexact.reference.peers.sglang.RadixCache`, a real
``TokenToKVPoolAllocator`` (slots ``1..pool_slots``; SGLang reserves slot 0) and a request table, and
answers every call with plain values (ints, tuples, frozen records):

- ``reserve(request_id, n)`` -> the n slots now private to the request, or None when the pool is short;
- ``match(tokens)`` -> ``MatchObservation(matched_tokens, prefix_slot_ids)`` (may split an edge);
- ``insert(tokens, slot_ids, request_id)`` -> ``InsertObservation(prefix_tokens, duplicate_slot_ids)``;
  existing values win; the duplicates stay private to the request until ``release``;
- ``release(request_id, slot_ids=None)`` -> the private slots returned to the allocator;
- ``lock(tokens)`` -> ``LockObservation(lock_id, matched_tokens, delta)``; ``unlock(lock_id)`` -> delta.
  Unlocking the same id twice is *not* refused: SGLang drives ``lock_ref`` to -1 (the normative index
  rejects it as ``LOCK_UNDERFLOW``);
- ``evict(num_tokens)`` -> ``EvictObservation(released_tokens, freed_slot_ids)`` (whole edges, in order);
- request protocol: ``admit(request_id, tokens)``, ``checkpoint(request_id, up_to)``, ``finish(request_id)``;
- observables: ``partition()`` (tree / private / free slots and the three token counters),
  ``slot_tokens()`` (slot -> namespace and token path it holds), ``project()`` (a JSON-able state).

Every mutating call appends a trace record ``{"action", "params", "state"}``.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.reference.peers.sglang import (
    RadixCache,
    Req,
    TreeLock,
    admit,
    checkpoint,
    release_kv_cache,
)
from kvexact.reference.peers.sglang_key import RadixKey, SGLangError, SGLangRejection
from kvexact.reference.peers.sglang_pool import (
    PagedTokenToKVPoolAllocator,
    ReqToTokenPool,
    TokenToKVPoolAllocator,
)


@attrs.frozen
class MatchObservation:
    matched_tokens: int
    prefix_slot_ids: tuple[int, ...]


@attrs.frozen
class InsertObservation:
    """``prefix_tokens`` were already cached; ``duplicate_slot_ids`` are the caller's copies of them."""

    prefix_tokens: int
    duplicate_slot_ids: tuple[int, ...]


@attrs.frozen
class LockObservation:
    lock_id: int
    matched_tokens: int
    delta: int


@attrs.frozen
class EvictObservation:
    released_tokens: int
    freed_slot_ids: tuple[tuple[int, ...], ...]


@attrs.frozen
class PoolObservation:
    """The slot ledgers (as sorted tuples, repetitions kept so a double owner shows) and token counters."""

    tree_slot_ids: tuple[int, ...]
    private_slot_ids: tuple[int, ...]
    free_slot_ids: tuple[int, ...]
    pool_slot_ids: tuple[int, ...]
    total_tokens: int
    evictable_tokens: int
    protected_tokens: int

    @property
    def partition_holds(self) -> bool:
        """tree + private + free is a disjoint cover of the pool's slots."""
        everything = self.tree_slot_ids + self.private_slot_ids + self.free_slot_ids
        return sorted(everything) == list(self.pool_slot_ids)

    @property
    def i1_holds(self) -> bool:
        return self.evictable_tokens + self.protected_tokens == self.total_tokens


@attrs.frozen
class TraceRecord:
    action: str
    params: dict[str, Any]
    state: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "params": self.params, "state": self.state}


class SGLangAdapter:
    """A mutable driver over the profile, for state machines and user-facing comparisons."""

    def __init__(self, pool_slots: int, page_size: int = 1, eviction_policy: str = "lru",
                 is_eagle: bool = False, max_requests: int = 64, max_context_len: int = 4096,
                 kv_events: bool = False):
        self.pool_slots = pool_slots
        self.allocator: TokenToKVPoolAllocator = (
            TokenToKVPoolAllocator(pool_slots) if page_size == 1
            else PagedTokenToKVPoolAllocator(pool_slots, page_size))
        self.cache = RadixCache(page_size=page_size, allocator=self.allocator, is_eagle=is_eagle,
                                eviction_policy=eviction_policy, kv_events=kv_events,
                                req_to_token_pool=ReqToTokenPool(max_requests, max_context_len))
        self.private: dict[str, list[int]] = {}
        self.requests: dict[str, Req] = {}
        self.locks: dict[int, TreeLock] = {}
        self._lock_ids = itertools.count(1)
        self.trace: list[TraceRecord] = []

    def _record(self, action: str, **params: Any) -> None:
        self.trace.append(TraceRecord(action, params, self.project()))

    @staticmethod
    def _key(tokens: Sequence[int], extra_key: str | None, cache_salt: str | None) -> RadixKey:
        return RadixKey.of(tokens, extra_key, cache_salt)

    # ---- slot-level operations -------------------------------------------------------------------
    def reserve(self, request_id: str, n_slots: int) -> tuple[int, ...] | None:
        got = self.allocator.alloc(n_slots)
        if got is None:
            return None
        self.private.setdefault(request_id, []).extend(got)
        self._record("reserve", request_id=request_id, slot_ids=list(got))
        return tuple(got)

    def match(self, tokens: Sequence[int], extra_key: str | None = None,
              cache_salt: str | None = None) -> MatchObservation:
        r = self.cache.match_prefix(self._key(tokens, extra_key, cache_salt))
        self._record("match", tokens=list(tokens))
        return MatchObservation(r.device_prefix_len, self.cache.path_device_indices(r.last_device_node))

    def insert(self, tokens: Sequence[int], slot_ids: Sequence[int], request_id: str | None = None,
               extra_key: str | None = None, cache_salt: str | None = None,
               priority: int = 0) -> InsertObservation:
        """Insert; the new suffix's slots move from the request's private ledger to the tree. The
        duplicates are the caller's slots for already-cached positions that differ from the tree's."""
        res = self.cache.insert(self._key(tokens, extra_key, cache_salt), list(slot_ids), priority=priority)
        published = len(self.cache.cache_key(self._key(tokens, extra_key, cache_salt)))
        if request_id is not None:
            mine = self.private.get(request_id, [])
            for s in slot_ids[res.prefix_len:published]:
                if s in mine:
                    mine.remove(s)
        node = res.last_device_node
        tree_path = () if node is None else self.cache.path_device_indices(node)
        duplicates = tuple(s for s, t in zip(slot_ids[:res.prefix_len], tree_path, strict=False) if s != t)
        self._record("insert", tokens=list(tokens), slot_ids=list(slot_ids), prefix_tokens=res.prefix_len)
        return InsertObservation(res.prefix_len, duplicates)

    def release(self, request_id: str, slot_ids: Sequence[int] | None = None) -> tuple[int, ...]:
        mine = self.private.get(request_id, [])
        slots = list(mine) if slot_ids is None else list(slot_ids)
        for s in slots:
            if s in mine:
                mine.remove(s)
        self.allocator.free(slots)
        if not mine:
            self.private.pop(request_id, None)
        self._record("release", request_id=request_id, slot_ids=slots)
        return tuple(slots)

    def lock(self, tokens: Sequence[int], extra_key: str | None = None,
             cache_salt: str | None = None) -> LockObservation:
        r = self.cache.match_prefix(self._key(tokens, extra_key, cache_salt))
        delta = self.cache.inc_lock_ref(r.last_device_node).delta
        lock_id = next(self._lock_ids)
        self.locks[lock_id] = TreeLock(r.last_device_node)
        self._record("lock", tokens=list(tokens), lock_id=lock_id)
        return LockObservation(lock_id, r.device_prefix_len, delta)

    def unlock(self, lock_id: int) -> int:
        """Drop a lock. SGLang keeps no holder table, so an id unlocked twice unlocks twice."""
        delta = self.cache.unlock(self.locks[lock_id]).delta
        self._record("unlock", lock_id=lock_id)
        return delta

    def evict(self, num_tokens: int) -> EvictObservation:
        self.allocator.freed_log = []
        try:
            released = self.cache.evict(num_tokens)
            freed = tuple(self.allocator.freed_log)
        finally:
            self.allocator.freed_log = None
        self._record("evict", num_tokens=num_tokens, released_tokens=released)
        return EvictObservation(released, freed)

    # ---- request protocol ------------------------------------------------------------------------
    def admit(self, request_id: str, tokens: Sequence[int], extra_key: str | None = None,
              cache_salt: str | None = None, priority: int = 0) -> int | None:
        """Match, lock, allocate the rest; returns the matched length, or None when short."""
        req = Req(request_id, list(tokens), extra_key=extra_key, cache_salt=cache_salt, priority=priority)
        if not admit(self.cache, self.allocator, req):
            return None
        self.requests[request_id] = req
        self._sync_private(req)
        self._record("admit", request_id=request_id, tokens=list(tokens))
        return len(req.prefix_indices)

    def checkpoint(self, request_id: str, up_to: int) -> None:
        req = self._req(request_id)
        checkpoint(self.cache, req, up_to)
        self._sync_private(req)
        self._record("checkpoint", request_id=request_id, up_to=up_to)

    def finish(self, request_id: str) -> None:
        req = self._req(request_id)
        release_kv_cache(self.cache, req)
        del self.requests[request_id]
        self.private.pop(request_id, None)
        self._record("finish", request_id=request_id)

    def _req(self, request_id: str) -> Req:
        if request_id not in self.requests:
            raise SGLangError(SGLangRejection.NO_REQUEST_ROW, f"request {request_id!r} is not running")
        return self.requests[request_id]

    def _sync_private(self, req: Req) -> None:
        pool = self.cache.req_to_token_pool
        assert pool is not None and req.req_pool_idx is not None
        self.private[req.rid] = pool.read(req.req_pool_idx, req.cache_protected_len, req.owned_len)

    # ---- observables -----------------------------------------------------------------------------
    def partition(self) -> PoolObservation:
        c = self.cache
        ps = self.cache.page_size
        free = list(self.allocator.free_pages) + list(self.allocator.release_pages)
        universe = list(range(1, self.pool_slots + 1))
        if ps > 1:
            free = [p * ps + i for p in free for i in range(ps)]
            universe = [p * ps + i for p in range(1, self.pool_slots // ps + 1) for i in range(ps)]
        private = [s for slots in self.private.values() for s in slots]
        if ps > 1:  # a request's partial last page is its own, the slots past its tokens included
            private = [p * ps + i for p in sorted({s // ps for s in private}) for i in range(ps)]
        return PoolObservation(tuple(sorted(c.tree_slots())), tuple(sorted(private)), tuple(sorted(free)),
                               tuple(universe), c.total_size(), c.evictable_size_, c.protected_size_)

    def slot_tokens(self) -> dict[int, tuple[Any, tuple]]:
        """For every tree slot: ``((extra_key, cache_salt), token path ending at the slot's token)``."""
        out: dict[int, tuple[Any, tuple]] = {}
        for node in self.cache.nodes():
            above = self.cache.path_key_units(node.parent) if node.parent is not None else ()
            for i, slot in enumerate(node.value or ()):
                out[slot] = ((node.key.extra_key, node.key.cache_salt), above + node.key.units[: i + 1])
        return out

    def project(self) -> dict[str, Any]:
        p = self.partition()
        return {"edges": [[list(n.key.units), list(n.value or ()), n.lock_ref] for n in self.cache.nodes()],
                "free": list(p.free_slot_ids), "private": {k: list(v) for k, v in self.private.items()},
                "sizes": [p.total_tokens, p.evictable_tokens, p.protected_tokens]}
