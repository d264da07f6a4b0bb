"""A random workload over the SGLang profile's cache with KV events on (the event logs the tests validate)."""

from __future__ import annotations

import random
from typing import Any

from kvexact.reference.peers.sglang import RadixCache


def random_event_log(seed: int, ops: int = 40, page_size: int = 1, tokens: int = 2, max_pages: int = 3,
                     capacity_pages: int = 6) -> list[dict[str, Any]]:
    """The events of the profile's cache under a random stream: inserts of random prompts, prefix matches
    (which split edges), leases held for a few operations, evictions (also when the pool is over capacity)
    and rare resets with nothing leased."""
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
