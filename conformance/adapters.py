"""The adapter protocols: how a system under test (a runtime's allocator or prefix index) takes the
reference's place.

A runtime developer wraps their allocator in a class with the methods of :class:`AllocatorAdapter` (or
their radix / prefix index in one with the methods of :class:`PrefixIndexAdapter`) and passes
``--adapter module:factory`` to ``kvexact conform``, ``fuzz`` or ``gate``; ``factory(config)`` returns the
adapter. A factory declares its protocol with the attribute ``adapter_protocol`` (``"allocator"``, the
default, or ``"prefix-index"``); an allocator adapter stands in for the reference in the KVAllocation and
CowPublication machines, a prefix-index adapter in the Radix machine. The machines drive the adapter and the normative reference in lockstep: both must
accept and reject the same operations (with the same rejection names where the adapter reports them),
and the adapter's block tables drive a real paged pool through the kernels, so a wrong block shows up as
wrong attention numbers. The adapter reports only observable facts: block tables and lengths.

Invariant of every adapter method: a rejected operation returns ``OpResult(accepted=False, ...)`` and
leaves the adapter's observable state (tables, lengths, digest when it has one) unchanged.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs


@attrs.frozen
class AdapterConfig:
    """Pool geometry shared by the reference and the adapter under test."""

    block_tokens: int = 2
    num_groups: int = 2
    blocks_per_group: int = 6
    row_bytes: tuple[int, ...] = (8, 4)


@attrs.frozen
class OpResult:
    accepted: bool
    rejection: str | None = None  # the adapter's rejection name (None when accepted or unnamed)
    hit_tokens: int = 0  # for start(): rows reused from the prefix cache (not written by this operation)


@runtime_checkable
class AllocatorAdapter(Protocol):
    """What a system under test provides to the allocator machine (block ids are slots of its pool)."""

    name: str
    config: AdapterConfig

    def block_ids(self, group: int) -> Sequence[int]: ...
    def start(self, request_id: str, prompt: Sequence[int]) -> OpResult: ...
    def append(self, request_id: str, token: int) -> OpResult: ...
    def release(self, request_id: str) -> OpResult: ...
    def table(self, request_id: str, group: int) -> Sequence[int]: ...
    def length(self, request_id: str) -> int: ...
    def self_check(self) -> None: ...


# Optional methods a machine uses when present: fork(parent, child), truncate(request, keep_tokens),
# cache(request) (publish full blocks as prefix identities), inject_failure() (the next append fails
# between group reservations), digest() -> str (state digest, unchanged by rejections).

AdapterFactory = Callable[[Any], Any]


@attrs.frozen
class IndexConfig:
    """Pool of a prefix index under test: one K/V row per slot, slot ids ``1..pool_slots``."""

    pool_slots: int = 16


@runtime_checkable
class PrefixIndexAdapter(Protocol):
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


INDEX_METHODS = ("admit", "extend", "finish", "cancel", "evict", "slot_ids", "free_slot_ids", "self_check")
PROTOCOLS = ("allocator", "prefix-index")


class AdapterError(ValueError):
    """A ``--adapter`` value that cannot be loaded: says which part is wrong."""


def load_adapter_factory(spec: str) -> AdapterFactory:
    """``module:factory`` -> the factory; errors name the module or attribute that is missing."""
    if ":" not in spec:
        raise AdapterError(f"--adapter {spec!r}: expected MODULE:FACTORY")
    module_name, attr = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise AdapterError(f"--adapter {spec!r}: cannot import {module_name}: {exc}") from None
    factory = getattr(module, attr, None)
    if not callable(factory):
        raise AdapterError(f"--adapter {spec!r}: {module_name} has no callable {attr!r}")
    return factory


def adapter_protocol(factory: AdapterFactory) -> str:
    """The protocol a factory declares (``adapter_protocol`` attribute; ``allocator`` when absent)."""
    protocol = getattr(factory, "adapter_protocol", "allocator")
    if protocol not in PROTOCOLS:
        raise AdapterError(f"adapter factory {getattr(factory, '__name__', factory)!r} declares protocol "
                           f"{protocol!r}; expected one of {', '.join(PROTOCOLS)}")
    return protocol


def check_index_adapter(adapter: Any) -> None:
    """Reject a prefix-index adapter that lacks a required method, naming the first missing one."""
    for method in INDEX_METHODS:
        if not callable(getattr(adapter, method, None)):
            raise AdapterError(f"prefix-index adapter {type(adapter).__name__} has no method {method}()")
    if not isinstance(getattr(adapter, "config", None), IndexConfig):
        raise AdapterError(f"prefix-index adapter {type(adapter).__name__} has no IndexConfig 'config'")


def check_adapter(adapter: Any) -> None:
    """Reject an object that lacks a required method, naming the first missing one."""
    for method in ("block_ids", "start", "append", "release", "table", "length", "self_check"):
        if not callable(getattr(adapter, method, None)):
            raise AdapterError(f"adapter {type(adapter).__name__} has no method {method}()")
    if not isinstance(getattr(adapter, "config", None), AdapterConfig):
        raise AdapterError(f"adapter {type(adapter).__name__} has no AdapterConfig 'config'")
