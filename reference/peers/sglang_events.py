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

