"""SGLang 0.5.23's KV event recorder (``mem_cache/events.py``, ``KVCacheEventRecorder``), for the profile.

Events are SGLang's tagged maps (``{"type": "BlockStored", ...}``, optional fields left out). A page's hash
is an opaque identity of the whole path up to the end of that page (SGLang chains each page's hash to the
one before it; here a digest of the path stands for it). Invariants, as in 0.5.23:

- an insert that adds a node stores it: one ``BlockStored`` per page, each with the page before it as
  parent (the first page: the parent node's last page, or ``None`` under the root);
- an eviction removes a node: one ``BlockRemoved`` with all its page hashes; a split records nothing;
- ``reset`` records ``AllBlocksCleared`` (the constructor resets, so a log begins with it);
- ``enqueue`` merges a store into the queue's last store when its parent is that store's last hash, and
  merges consecutive removals.
"""

from __future__ import annotations

import hashlib
from typing import Any

MEDIUM = "GPU"


def page_hash(units: tuple) -> int:
    """The signed 64-bit identity of a path (the units root..end of one page)."""
    digest = hashlib.blake2b(repr(units).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class EventRecorder:
    """Collects one cache's events; ``take`` hands them over and empties the queue."""

    def __init__(self, page_size: int, enabled: bool = True):
        self.page_size = page_size
        self.enabled = enabled
        self._queue: list[dict[str, Any]] = []

    def enqueue(self, event: dict[str, Any]) -> None:
        if self._queue:
            tail = self._queue[-1]
            if tail["type"] == event["type"] == "BlockRemoved":
                tail["block_hashes"].extend(event["block_hashes"])
                return
            if tail["type"] == event["type"] == "BlockStored" and tail["block_size"] == event["block_size"] \
                    and event["parent_block_hash"] == tail["block_hashes"][-1]:
                tail["block_hashes"].extend(event["block_hashes"])
                tail["token_ids"].extend(event["token_ids"])
                return
        self._queue.append(event)

    def _pages(self, above: tuple, units: tuple) -> list[tuple[int, list]]:
        """(hash, page units) for each page of a node whose path above it is ``above``."""
        out = []
        for start in range(0, len(units), self.page_size):
            page = units[start:start + self.page_size]
            out.append((page_hash(above + units[:start + len(page)]), list(page)))
        return out

    def record_store(self, above: tuple, units: tuple) -> None:
        if not self.enabled:
            return
        parent = page_hash(above) if above else None
        for h, page in self._pages(above, units):
            self.enqueue({"type": "BlockStored", "block_hashes": [h], "parent_block_hash": parent,
                          "token_ids": page, "block_size": len(page), "lora_id": None, "medium": MEDIUM})
            parent = h

    def record_remove(self, above: tuple, units: tuple) -> None:
        if not self.enabled:
            return
        hashes = [h for h, _page in self._pages(above, units)]
        if hashes:
            self.enqueue({"type": "BlockRemoved", "block_hashes": hashes, "medium": MEDIUM})

    def record_all_cleared(self) -> None:
        if self.enabled:
            self.enqueue({"type": "AllBlocksCleared"})

    def take(self) -> list[dict[str, Any]]:
        events, self._queue = self._queue, []
        return events


def random_event_log(seed: int, ops: int = 40, page_size: int = 1, tokens: int = 2, max_pages: int = 3,
                     capacity_pages: int = 6) -> list[dict[str, Any]]:
    """The events of the profile's cache under a random stream: inserts of random prompts, prefix matches
    (which split edges), leases held for a few operations, evictions (also when the pool is over capacity)
    and rare resets with nothing leased."""
    import random

    from kvexact.reference.peers.sglang import RadixCache

    rng = random.Random(seed)
    cache = RadixCache(page_size=page_size, kv_events=True)
    leases: list = []
    for _ in range(ops):
        prompt = [rng.randint(1, tokens) for _ in range(page_size * rng.randint(1, max_pages))]
        op = rng.random()
        if op < 0.45:
            cache.insert(prompt)
        elif op < 0.65:
            node = cache.match_prefix(prompt).last_device_node
            if node is not cache.root_node and rng.random() < 0.5:
                leases.append(cache.lock(node))
        elif op < 0.9:
            cache.evict(page_size * rng.randint(1, 2))
        elif leases:
            cache.unlock(leases.pop(rng.randrange(len(leases))))
        elif rng.random() < 0.3:
            cache.reset()
        over = cache.total_size() - capacity_pages * page_size
        if over > 0:
            cache.evict(over)
    return cache.kv_events.take()
