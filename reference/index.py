"""The prefix-index interface (:class:`PrefixIndex`) and the normative radix index behind it.

One interface for every token-to-slot prefix index: the normative index (:class:`RadixIndex`, over
``radix.py``) and the peer profiles (SGLang's, ``peers/sglang_protocol.py``) implement it, and a runtime's
own index plugs into the Radix machine the same way (``--adapter module:factory`` with
``factory.adapter_protocol = "prefix-index"``).

Invariant of every implementation: a refused ``admit`` or ``extend`` changes nothing; slot ids are
``1..config.pool_slots``; every slot is free, held by one request's row, or cached in the index.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from kvexact.reference import radix
from kvexact.reference.adapters import AdapterError, AdapterProblem, adapter_kind, check_methods

# method -> how many positional arguments the Radix machine passes it
INDEX_METHODS = {"admit": 2, "extend": 2, "finish": 1, "cancel": 1, "evict": 1, "slot_ids": 1, "free_slot_ids": 0,
                 "self_check": 0}
# optional: ``cache_sizes() -> (evictable_tokens, protected_tokens)``, SGLang's evictable_size() and protected_size();
# ``kv_events()``: SGLang's KV-cache events since the previous call, which must replay to the cached paths' pages;
# ``computed_prefix_tokens(request_id)``: the prompt tokens an admitted request takes from the cache instead of
# computing them (SGLang's ``num_matched_prefix_tokens``), which the logits cap keeps below the prompt's length
INDEX_OPTIONAL_METHODS = {"cache_sizes": 0, "kv_events": 0, "computed_prefix_tokens": 1}


@attrs.frozen
class IndexConfig:
    """Pool of a prefix index under test: one K/V row per slot, slot ids ``1..pool_slots``.

    ``page_size`` P > 1 (SGLang's paged pool): slots come in pages of P, page 0 is padding, so the slot ids are
    ``P..P * (pool_slots // P + 1) - 1``; matches and cached paths are whole pages."""

    pool_slots: int = 16
    page_size: int = attrs.field(default=1, validator=attrs.validators.ge(1))


@runtime_checkable
class PrefixIndex(Protocol):
    """What a radix / prefix index provides to the Radix machine (SGLang's request protocol, seed 0x08).

    The machine is the scheduler: it calls ``evict`` when ``admit`` or ``extend`` reports the pool short,
    then retries once. Slot ids are ``1..config.pool_slots``; one slot holds one token's K/V row.
    """

    name: str
    config: IndexConfig

    def admit(self, request_id: str, tokens: Sequence[int]) -> int | None:
        """Match the longest cached prefix, lock it, reserve slots for the rest; the matched length, or
        None (changing nothing) when the free pool is short."""
    def extend(self, request_id: str, token: int) -> bool:
        """Reserve one slot for a decoded token; False (changing nothing) when no slot is free."""
    def finish(self, request_id: str) -> None:
        """Cache the request's token path, free its duplicate copies, unlock, forget the request."""
    def cancel(self, request_id: str) -> None:
        """Free the request's private slots and unlock its prefix without caching anything."""
    def evict(self, num_tokens: int) -> Sequence[Sequence[int]]:
        """Free at least ``num_tokens`` cached tokens (fewer only when no unlocked leaf is left), whole
        leaves at a time; returns each evicted leaf's slots, in order."""
    def slot_ids(self, request_id: str) -> Sequence[int]:
        """The request's row: the slot holding each of its tokens' K/V."""
    def free_slot_ids(self) -> Collection[int]: ...
    def self_check(self) -> None: ...
    # optional: def cache_sizes(self) -> tuple[int, int]: the cached tokens no request locks (evictable) and
    # those some request locks (protected); the machine holds them to the normative index's after every step
    # optional: def kv_events(self) -> list: the KV-cache events since the previous call (SGLang's BlockStored,
    # BlockRemoved, AllBlocksCleared); replayed after every step, they must store exactly the whole-page prefixes of
    # the cached paths (kvexact.conformance.machines.kv_events)
    # optional: eviction_order = "lru" (EVICTION_ORDERS): evict() takes the unlocked leaf used least recently first,
    # a use being a lookup or an insert that walks into the edge; the machine checks every victim against that.
    # "lfu": the unlocked leaf cached through by the fewest finished requests since it was cached first, ties least
    # recently used first; "slru": leaves cached through by two or more finished requests (the protected segment)
    # last, least recently used first within a segment (SGLang's lfu and slru rankings)




EVICTION_ORDERS = ("lru", "lfu", "slru")  # the victim orders an adapter may declare (eviction_order) and the machine checks


def check_index(adapter: Any) -> None:
    """Reject an object that is not a prefix index, naming the first missing or ill-formed method or an unknown
    ``eviction_order``."""
    check_methods(adapter, "prefix-index", INDEX_METHODS, INDEX_OPTIONAL_METHODS)
    order = getattr(adapter, "eviction_order", None)
    if order is not None and order not in EVICTION_ORDERS:
        raise AdapterError(AdapterProblem.BAD_DECLARATION,
                           f"prefix-index adapter {adapter_kind(adapter)} declares eviction_order={order!r}; the "
                           f"machines check {', '.join(EVICTION_ORDERS)} (or declare none)")
    if not isinstance(getattr(adapter, "config", None), IndexConfig):
        raise AdapterError(AdapterProblem.MISSING_METHOD,
                           f"prefix-index adapter {adapter_kind(adapter)} has no IndexConfig 'config'")


class RadixIndex:
    """The normative radix index (``radix.py``) as a :class:`PrefixIndex`: admission locks the longest
    cached prefix and reserves the lowest free slots for the rest; eviction takes whole unlocked leaves in
    LRU order."""

    name = "reference-radix"

    eviction_order = "lru"  # radix.evict's default ranking

    def __init__(self, config: IndexConfig):
        self.config = config
        self.state = radix.RadixState.empty(config.pool_slots, first_slot_id=1)
        self.rows: dict[str, list[int]] = {}
        self.tokens: dict[str, list[int]] = {}

    def admit(self, request_id: str, tokens: Sequence[int]) -> int | None:
        state, receipt = radix.match_and_lock(self.state, request_id, 0, tokens)
        need = len(tokens) - receipt.matched_tokens
        if need > len(state.free_slot_ids):
            return None
        slots = sorted(state.free_slot_ids)[:need]
        if slots:
            state, _ = radix.reserve(state, request_id, slots)
        self.state = state
        self.rows[request_id] = [*receipt.prefix_slot_ids, *slots]
        self.tokens[request_id] = list(tokens)
        return receipt.matched_tokens

    def extend(self, request_id: str, token: int) -> bool:
        if not self.state.free_slot_ids:
            return False
        slot = min(self.state.free_slot_ids)
        self.state, _ = radix.reserve(self.state, request_id, [slot])
        self.rows[request_id].append(slot)
        self.tokens[request_id].append(token)
        return True

    def finish(self, request_id: str) -> None:
        self.state, _ = radix.cache_finished(self.state, request_id, self.tokens.pop(request_id),
                                             self.rows.pop(request_id))

    def cancel(self, request_id: str) -> None:
        self.tokens.pop(request_id)
        self.rows.pop(request_id)
        self.state, _ = radix.release_request(self.state, request_id)

    def evict(self, num_tokens: int) -> Sequence[Sequence[int]]:
        self.state, receipt = radix.evict(self.state, num_tokens)
        return receipt.freed_slot_ids

    def slot_ids(self, request_id: str) -> Sequence[int]:
        return list(self.rows[request_id])

    def free_slot_ids(self) -> Collection[int]:
        return self.state.free_slot_ids

    def self_check(self) -> None:
        radix.check_state(self.state)

    def cache_sizes(self) -> tuple[int, int]:
        return radix.cache_sizes(self.state)


def radix_factory(config: IndexConfig) -> RadixIndex:
    """``--adapter kvexact.reference.index:radix_factory``: the normative index as a system under test."""
    return RadixIndex(config)


radix_factory.adapter_protocol = "prefix-index"  # type: ignore[attr-defined]
