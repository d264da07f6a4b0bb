"""The installed SGLang 0.5.23's ``RadixCache`` and token allocator behind the prefix-index protocol.

``kvexact conform --adapter kvexact.conformance.live.sglang:factory`` puts the real tree (match, insert,
lock receipts, LRU eviction) and the real ``TokenToKVPoolAllocator`` (page size 1, slots
``1..pool_slots``) in the Radix machine, in the profile adapter's place
(``reference/peers/sglang_protocol.py``). The request protocol is driven here over the real objects, step
for step as 0.5.23 runs it: admission matches, allocates the rest and locks the last node; a decoded
token takes one slot; ``finish`` checkpoints the whole row (insert, re-insert the prompt with priority
+1 when the row holds output, free the row's duplicates with ``free_segment``, re-match, repoint the
row, move the lock), frees the rest and unlocks; ``cancel`` does the same without the checkpoint.
SGLang's ``Req``/``release_kv_cache`` scheduler objects are not used: they need the whole scheduler.

Loading needs :mod:`kvexact.conformance.live.sglang_standins` (the GPU memory-pool module).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.conformance.live import sglang_standins
from kvexact.conformance.live.runtime import require
from kvexact.reference.index import IndexConfig

VERSION = require("sglang")
sglang_standins.install()

import torch  # noqa: E402
from sglang.srt.mem_cache import radix_cache  # noqa: E402
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator  # noqa: E402
from sglang.srt.mem_cache.allocator.token import TokenToKVPoolAllocator  # noqa: E402
from sglang.srt.mem_cache.base_prefix_cache import EvictParams, InsertParams, MatchPrefixParams  # noqa: E402
from sglang.srt.mem_cache.cache_init_params import CacheInitParams  # noqa: E402


@attrs.define
class Row:
    """One running request: its tokens, the slot of each, the protected prefix and its lock."""

    tokens: list[int]
    prompt_len: int
    slots: list[int]
    lock: Any
    protected: int = 0
    inserted: int = 0


def _key(tokens: Sequence[int]) -> Any:
    return radix_cache.RadixKey(array("q", tokens))


def _ints(tensor: Any) -> list[int]:
    return [int(x) for x in tensor.tolist()]


class LiveSGLangAdapter:
    """``PrefixIndexAdapter`` over a real ``RadixCache`` and ``TokenToKVPoolAllocator`` (page size 1) or
    ``PagedTokenToKVPoolAllocator`` (``config.page_size`` > 1, ``need_sort`` off)."""

    name = f"sglang-{VERSION}-live"
    eviction_order = "lru"  # RadixCache's default eviction policy, which this adapter runs

    def __init__(self, config: IndexConfig, kv_events: bool = True):
        self.config = config
        self.page = page = config.page_size
        radix_cache.time = sglang_standins.CounterClock()  # type: ignore[assignment]
        self.allocator: Any = (
            TokenToKVPoolAllocator(config.pool_slots, torch.int64, "cpu", None, need_sort=False) if page == 1
            else PagedTokenToKVPoolAllocator(config.pool_slots, page, torch.int64, "cpu", None, need_sort=False))
        self.cache = radix_cache.RadixCache(CacheInitParams(
            disable=False, req_to_token_pool=None, token_to_kv_pool_allocator=self.allocator, page_size=page,
            enable_kv_cache_events=kv_events))
        self.rows: dict[str, Row] = {}

    def admit(self, request_id: str, tokens: Sequence[int]) -> int | None:
        match = self.cache.match_prefix(MatchPrefixParams(key=_key(tokens)))
        prefix = _ints(self.cache.path_device_indices(match.last_device_node))
        need = len(tokens) - len(prefix)  # the prefix is whole pages: the rest starts a page
        got = self.allocator.alloc(-(-need // self.page) * self.page) if need else None
        if need and got is None:
            return None
        slots = [] if got is None else _ints(got)[:need]
        lock = self.cache.lock(match.last_device_node)
        self.rows[request_id] = Row(list(tokens), len(tokens), prefix + slots, lock, len(prefix))
        return len(prefix)

    def extend(self, request_id: str, token: int) -> bool:
        """One slot: the next of the row's last page, else the first of a new page (alloc_decode's choice)."""
        row = self.rows[request_id]
        if len(row.slots) % self.page:
            row.slots.append(row.slots[-1] + 1)
        else:
            got = self.allocator.alloc(self.page)
            if got is None:
                return False
            row.slots.append(_ints(got)[0])
        row.tokens.append(token)
        return True

    def _checkpoint(self, row: Row) -> None:
        """0.5.23's ``RadixCache.checkpoint(req, up_to=len(row))`` over this row (its whole pages: a partial last
        page stays in the row, past ``protected``)."""
        aligned = len(row.tokens) - len(row.tokens) % self.page
        prompt = row.prompt_len - row.prompt_len % self.page
        values = torch.tensor(row.slots[:aligned], dtype=torch.int64)
        result = self.cache.insert(InsertParams(key=_key(row.tokens[:aligned]), value=values.clone(),
                                                inserted_len=row.inserted, priority=0))
        row.inserted = max(row.inserted, aligned)
        if 0 < prompt < aligned:
            self.cache.insert(InsertParams(key=_key(row.tokens[:prompt]), value=values[:prompt].clone(),
                                           inserted_len=prompt, priority=1))
        self.allocator.free_segment(values[row.protected:result.prefix_len], start_pos=row.protected)
        match = self.cache.match_prefix(MatchPrefixParams(key=_key(row.tokens[:aligned])))
        indices = _ints(self.cache.path_device_indices(match.last_device_node))
        assert len(indices) == aligned, f"re-match {len(indices)} of {aligned}"
        row.slots[row.protected:aligned] = indices[row.protected:]
        row.protected = len(indices)
        self.cache.unlock(row.lock)
        row.lock = self.cache.lock(match.last_device_node)

    def _release(self, request_id: str, checkpoint: bool) -> None:
        row = self.rows.pop(request_id)
        if checkpoint:
            self._checkpoint(row)
        rest = torch.tensor(row.slots[row.protected:], dtype=torch.int64)
        self.allocator.free_segment(rest, start_pos=row.protected)
        self.cache.unlock(row.lock)

    def finish(self, request_id: str) -> None:
        self._release(request_id, checkpoint=True)

    def cancel(self, request_id: str) -> None:
        self._release(request_id, checkpoint=False)

    def evict(self, num_tokens: int) -> Sequence[Sequence[int]]:
        """The real ``evict``; each leaf's slots as the cache hands them to ``free_segment``."""
        freed: list[list[int]] = []
        real = self.allocator.free_segment

        def recording(free_index: Any, *, start_pos: int) -> None:
            freed.append(_ints(free_index))
            real(free_index, start_pos=start_pos)

        self.allocator.free_segment = recording  # type: ignore[method-assign]
        try:
            self.cache.evict(EvictParams(num_tokens=num_tokens))
        finally:
            del self.allocator.free_segment
        return freed

    def kv_events(self) -> list[Any]:
        """SGLang's own KV events since the previous call (its recorder's queue, as a KV-aware router reads it); none
        when the adapter was built with ``kv_events=False``, whose machines then see no stored prefixes."""
        if not self.cache.kv_events.enabled:
            raise RuntimeError(f"{self.name}: built with kv_events=False, so it records no KV events")
        return self.cache.kv_events.take()

    def slot_ids(self, request_id: str) -> Sequence[int]:
        return list(self.rows[request_id].slots)

    def free_order(self) -> list[int]:
        """The allocator's free list then its released (staged) ones: slot ids at page size 1, else page ids."""
        staged = getattr(self.allocator, "staged_pages", None)
        if staged is not None:
            return _ints(self.allocator.free_pages) + [p for part in staged for p in _ints(part)]
        return _ints(self.allocator.free_pages) + _ints(self.allocator.release_pages)

    def free_slot_ids(self) -> list[int]:
        """Free slots in the allocator's order (every slot of each free page)."""
        return [p * self.page + i for p in self.free_order() for i in range(self.page)]

    def sizes(self) -> tuple[int, int, int]:
        return self.cache.total_size(), self.cache.evictable_size(), self.cache.protected_size()

    def cache_sizes(self) -> tuple[int, int]:
        """SGLang's own counters, held by the Radix machine to the normative tree's (evictable, protected)."""
        return self.cache.evictable_size(), self.cache.protected_size()

    def self_check(self) -> None:
        """I1 (evictable + protected == total) and the slot partition: tree + rows' private + free."""
        total, evictable, protected = self.sizes()
        if evictable + protected != total:
            raise AssertionError(f"SGLang live: I1 broken: {evictable} + {protected} != {total}")
        page = self.page
        rows = {s // page for row in self.rows.values() for s in row.slots[row.protected:]}
        private = [p * page + i for p in rows for i in range(page)]  # a partial last page is the row's
        tree = _ints(self.cache.all_values_flatten()) if self.cache.root_node.children else []
        every = sorted(tree + private + self.free_slot_ids())
        if every != list(range(page, page * (self.config.pool_slots // page + 1))):
            raise AssertionError(f"SGLang live: slots are not partitioned: {every}")


def event_batches(seed: int, ops: int, pool_slots: int = 8) -> list[Any]:
    """0.5.23's own KV events (its recorder's ``KVEventBatch`` objects) under a random stream over this adapter:
    admissions of short prompts over two tokens (evicting when the pool is short), decode steps, finishes
    (which insert) and cancels; one batch per operation that recorded events."""
    import random

    from sglang.srt.disaggregation.kv_events import KVEventBatch

    rng = random.Random(seed)
    adapter = LiveSGLangAdapter(IndexConfig(pool_slots=pool_slots), kv_events=True)
    out = [KVEventBatch(ts=0.0, events=adapter.cache.kv_events.take())]
    for n in range(ops):
        running = sorted(adapter.rows)
        op = rng.random()
        if op < 0.4 or not running:
            prompt = [rng.randint(1, 2) for _ in range(rng.randint(1, 3))]
            if adapter.admit(f"q{n}", prompt) is None:
                adapter.evict(len(prompt))
        elif op < 0.6:
            adapter.extend(rng.choice(running), rng.randint(1, 2))
        elif op < 0.9:
            adapter.finish(rng.choice(running))
        else:
            adapter.cancel(rng.choice(running))
        events = adapter.cache.kv_events.take()
        if events:
            out.append(KVEventBatch(ts=float(n), events=events))
    return out


def record_event_log(seed: int, ops: int, pool_slots: int = 8) -> bytes:
    """:func:`event_batches` in 0.5.23's MessagePack encoding, concatenated (a file its publisher could send)."""
    import msgspec

    encoder = msgspec.msgpack.Encoder()
    return b"".join(encoder.encode(b) for b in event_batches(seed, ops, pool_slots))


def publish_event_log(seed: int, ops: int, drop: int | None = None, wait_s: float = 120.0) -> None:
    """Publish :func:`event_batches` (without the 0-based event ``drop``) through 0.5.23's own
    ``ZmqEventPublisher`` on a free localhost port: print ``ENDPOINT BATCHES``, wait for a subscriber, publish,
    and shut down when it unsubscribes. The publisher's PUB socket is an XPUB (the same sending side, plus
    subscription messages) so that nothing is published before the subscriber has joined."""
    import sys

    import zmq
    from sglang.srt.disaggregation.kv_events import KVEventBatch, ZmqEventPublisher

    class Publisher(ZmqEventPublisher):
        _pub: Any

        def _socket_setup(self) -> None:
            if self._pub is None:
                self._pub = self._ctx.socket(zmq.XPUB)
                self._pub.bind(self._endpoint)
                self._local_pub_endpoint = self._bound_endpoint(self._pub)
            super()._socket_setup()

    batches, n = [], 0
    for b in event_batches(seed, ops):
        kept = [ev for i, ev in enumerate(b.events, start=n) if i != drop]
        n += len(b.events)
        if kept:
            batches.append(KVEventBatch(ts=b.ts, events=kept))
    pub = Publisher(0, endpoint="tcp://127.0.0.1:*", bind=True)
    sock = pub._pub
    assert sock is not None
    print(pub._local_pub_endpoint, len(batches), flush=True)
    if not sock.poll(int(wait_s * 1000)):
        sys.exit("SGLang live publisher: no subscriber joined")
    sock.recv()  # the subscription: the publisher thread has not touched the socket yet
    for b in batches:
        pub.publish(b)
    pub._event_queue.join()  # every batch handed to the socket
    if not sock.poll(int(wait_s * 1000)):  # the unsubscription, when the subscriber closes
        sys.exit("SGLang live publisher: the subscriber did not leave")
    pub.shutdown()


def factory(config: IndexConfig) -> LiveSGLangAdapter:
    """``--adapter kvexact.conformance.live.sglang:factory``."""
    return LiveSGLangAdapter(config)


factory.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
factory.page_sizes = (1, 2, 4)  # type: ignore[attr-defined]  # the paged allocator above 1
