"""The hybrid-cache adapter protocol (``adapter_protocol = "hybrid-cache"``) and the normative cache behind it.

A runtime whose KV cache has several cache groups of different block sizes, hashed at a finer hash block
size (0x01A, 0x03B), wraps its manager in a class with the methods of :class:`HybridCache` and passes
``--adapter module:factory`` to ``kvexact conform --spec Hybrid`` or ``kvexact gate``; ``factory(config)``
gets a :class:`HybridCacheConfig` drawn by the Hybrid machine and returns the adapter. The machine runs
the adapter and the normative :class:`~kvexact.reference.hybrid_prefix.HybridPrefixCache` in lockstep and
fails at the first step whose hit or admission differs.

Invariant of every implementation (what vLLM's ``KVCacheManager`` does): a request's full blocks are cached
as soon as its length passes a multiple of ``A = lcm(block_sizes)`` (at admission and on each appended
token), never beyond the last such multiple; a hit is the longest A-aligned prefix, at most one token short
of the prompt, that every group holds; a freed request's cached blocks stay cached; ``evict`` drops every
cached block of one group whose key is the given prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from kvexact.reference import lifecycle
from kvexact.reference.adapters import AdapterError, AdapterProblem, adapter_kind, check_methods
from kvexact.reference.allocator import Allocator
from kvexact.reference.hybrid_prefix import HybridPrefixCache
from kvexact.reference.keys import KeyInputs
from kvexact.reference.pool import GroupConfig, PoolRejection
from kvexact.reference.rejections import Rejected

# method -> how many positional arguments the Hybrid machine passes it
HYBRID_METHODS = {"admit": 2, "append": 2, "free": 1, "lookup": 1, "evict": 2, "self_check": 0}


@attrs.frozen
class HybridCacheConfig:
    """Cache groups of ``block_sizes`` tokens each, keyed at ``hash_block_size`` (which divides every block
    size), with ``pool_blocks`` blocks per group (ids from 1); the machine never needs a block reused."""

    block_sizes: tuple[int, ...] = (4, 2)
    hash_block_size: int = 2
    pool_blocks: int = 200


@runtime_checkable
class HybridCache(Protocol):
    """What a hybrid-group prefix cache provides to the Hybrid machine."""

    name: str
    config: HybridCacheConfig

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        """Look the prompt up, map its hit, allocate the rest, cache its A-aligned full blocks; the hit in
        tokens, or None (changing nothing) when the pool is short."""
    def append(self, request_id: str, token: int) -> bool:
        """One decoded token (its block allocated, a newly A-aligned prefix cached); False: no room."""
    def free(self, request_id: str) -> None:
        """The request ends; its cached blocks stay cached."""
    def lookup(self, prompt: Sequence[int]) -> int:
        """The hit ``admit`` would give ``prompt`` now; changes nothing."""
    def evict(self, group: int, prefix: Sequence[int]) -> bool:
        """Drop group ``group``'s cached blocks keyed by ``prefix`` (whole blocks of that group); False:
        none was cached."""
    def self_check(self) -> None: ...


def check_hybrid(adapter: Any) -> None:
    """Reject an object that is not a hybrid cache, naming the first missing or ill-formed method."""
    check_methods(adapter, "hybrid-cache", HYBRID_METHODS, {})
    if not isinstance(getattr(adapter, "config", None), HybridCacheConfig):
        raise AdapterError(AdapterProblem.MISSING_METHOD,
                           f"hybrid-cache adapter {adapter_kind(adapter)} has no HybridCacheConfig 'config'")


def _room(step: Callable[[], Any]) -> bool:
    """Run an allocating step; False (the allocator's transaction undone) when a pool is out of blocks."""
    try:
        step()
    except Rejected as exc:
        if exc.reason is not PoolRejection.OUT_OF_MEMORY:
            raise
        return False
    return True


class ReferenceHybridCache:
    """The normative :class:`HybridPrefixCache` as a :class:`HybridCache`: every admission and append is
    followed by a publication (which keys only up to the A-aligned length)."""

    name = "reference-hybrid"

    def __init__(self, config: HybridCacheConfig):
        self.config = config
        groups = [GroupConfig(g, g, p, 8) for g, p in enumerate(config.block_sizes)]
        alloc = Allocator(groups, [range(1, config.pool_blocks + 1)] * len(groups))
        self.cache = HybridPrefixCache(alloc, config.hash_block_size)
        self.tokens: dict[str, list[int]] = {}

    def _hit(self, request_id: str, prompt: Sequence[int]) -> Any:
        return self.cache.lookup(request_id, KeyInputs(list(prompt)))

    def admit(self, request_id: str, prompt: Sequence[int]) -> int | None:
        receipt = self._hit(request_id, prompt)
        if not _room(lambda: self.cache.admit(receipt, list(prompt))):
            return None
        self.tokens[request_id] = list(prompt)
        self.cache.publish(request_id, KeyInputs(self.tokens[request_id]))
        return receipt.hit_tokens

    def append(self, request_id: str, token: int) -> bool:
        if not _room(lambda: self.cache.alloc.append(request_id, token)):
            return False
        self.tokens[request_id].append(token)
        self.cache.publish(request_id, KeyInputs(self.tokens[request_id]))
        return True

    def free(self, request_id: str) -> None:
        lifecycle.release(self.cache.alloc, request_id)
        del self.tokens[request_id]

    def lookup(self, prompt: Sequence[int]) -> int:
        return int(self._hit("probe", prompt).hit_tokens)

    def evict(self, group: int, prefix: Sequence[int]) -> bool:
        key = self.cache.group_keys(KeyInputs(list(prefix)))[group][-1]
        return self.cache.evict(group, key) is not None

    def self_check(self) -> None:
        self.cache.alloc.self_check()


def hybrid_factory(config: HybridCacheConfig) -> ReferenceHybridCache:
    """``--adapter kvexact.reference.hybrid_adapter:hybrid_factory``: the normative cache as a system under test."""
    return ReferenceHybridCache(config)


hybrid_factory.adapter_protocol = "hybrid-cache"  # type: ignore[attr-defined]
