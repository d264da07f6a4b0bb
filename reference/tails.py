"""Partial-tail policies of a prefix hit (seed 0x07D): copy the cached tail's rows at admission, or share it.

``eager`` (the default) copies the ``copy_valid_partial_rows`` rows of a partial-tail hit into a fresh block
of the admitted request. ``shared`` maps the cached tail block itself into the request, which sees only its
first ``rows`` rows; the first write either holder makes onto it copies the rows into a block of its own
(the allocator's copy-on-write append, 0x04E), so the shared rows are never written in place; a row the
block already holds is not a write (:func:`append_shared` moves the frontier over it).

Invariants:

* a shared tail is mapped by the new request with its current generation and ``rows`` visible rows,
  ``1 <= rows <= valid rows of the block`` and ``rows < P``: the request's logical rows are the block's rows;
* a published partial tail that was shared is pinned by leases of the cache (``PrefixCache.tail_pins``) until
  :func:`unpublish_tail` drops it, so every holder's next append onto it sees two strong references and
  copies: the block's valid rows never change while its key is published;
* a failing admission leaves the allocator exactly as it was (one transaction).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from kvexact.reference import lifecycle
from kvexact.reference.allocator import AllocationReceipt, Allocator, AllocRejection, RequestRecord
from kvexact.reference.handles import BlockHandle
from kvexact.reference.rejections import Rejected

TAIL_POLICIES = ("eager", "shared")  # eager: copy at admission (today's path); shared: copy at the first write


class TailRejection(enum.Enum):
    """Named malformed shared-tail admissions and tail unpublications (0x07D)."""

    UNKNOWN_TAIL_POLICY = "a tail policy is eager or shared"
    TAIL_ROWS_OUT_OF_RANGE = "a shared tail shows 1..valid rows of its block, fewer than P"
    TAIL_BUNDLE_MISMATCH = "a shared tail names one current block per cache group"
    TAIL_NOT_PUBLISHED = "no published partial tail carries this key"


def check_tail_policy(policy: str) -> None:
    """Refuse a tail policy other than eager and shared by name (UNKNOWN_TAIL_POLICY)."""
    if policy not in TAIL_POLICIES:
        raise Rejected(TailRejection.UNKNOWN_TAIL_POLICY, f"tail policy {policy!r}; known: {', '.join(TAIL_POLICIES)}")


def prefix_hit_tail(alloc: Allocator, request_id: str, keys: Sequence[str], tail: Sequence[BlockHandle],
                    rows: int) -> RequestRecord:
    """Admit ``request_id`` mapping the cached bundles of ``keys`` and then the shared ``tail`` bundle, of
    which it sees ``rows`` rows (+1 reference on every mapped block). Nothing changes on a rejection."""

    def run() -> RequestRecord:
        alloc._require_no_txn()
        if request_id in alloc.requests:
            raise Rejected(AllocRejection.DUPLICATE_REQUEST, f"request {request_id!r}")
        sizes = {g.block_tokens for g in alloc.groups}
        p = min(sizes)
        if len(tail) != len(alloc.groups) or sorted(h.cache_group_id for h in tail) != list(range(len(alloc.groups))):
            raise Rejected(TailRejection.TAIL_BUNDLE_MISMATCH, f"{tuple(tail)} for {len(alloc.groups)} cache groups")
        tables: list[list[BlockHandle]] = [[] for _ in alloc.groups]
        for key in keys:
            bundle = lifecycle.lookup_all_groups(alloc, key)
            if bundle is None:
                raise Rejected(AllocRejection.CACHE_IDENTITY_MISSING, f"{key!r}")
            for h in bundle:
                tables[h.cache_group_id].append(h)
        for h in sorted(tail, key=lambda h: h.cache_group_id):
            block = alloc.pools[h.cache_group_id].check_handle(h)  # a stale generation is the pool's rejection
            if not 1 <= rows <= min(block.valid_rows, p - 1) or block.reserved_by is not None:
                raise Rejected(TailRejection.TAIL_ROWS_OUT_OF_RANGE, f"{rows} rows of {h}, which holds "
                               f"{block.valid_rows} (P={p})")
            tables[h.cache_group_id].append(h)
        for table in tables:
            for h in table:
                alloc.pools[h.cache_group_id].incref(h.block_id)
        rec = RequestRecord(request_generation=alloc.ended.get(request_id, 0) + 1, table_version=1,
                            context_tokens=len(keys) * p + rows, tables=tuple(tuple(t) for t in tables))
        alloc.requests[request_id] = rec
        return rec

    return alloc.transact(run)


def append_shared(alloc: Allocator, request_id: str, token: int) -> AllocationReceipt | None:
    """Append ``token`` under the shared policy: when the request's tail block already holds ``token`` in
    its next row in every group (a row the tail's publisher wrote), the request's frontier moves over it
    and nothing is written or copied (None); the first divergent row goes through :meth:`Allocator.append`,
    which copies a tail with another holder or a cache identity before writing (its receipt)."""

    def run() -> AllocationReceipt | None:
        alloc._require_no_txn()
        rec = alloc.request(request_id)
        for g, table in enumerate(rec.tables):
            visible = alloc.tail_rows(rec, g)
            if not table or visible == alloc.groups[g].block_tokens:
                return alloc.append(request_id, token)
            rows = alloc.pools[g].check_handle(table[-1]).rows
            if len(rows) <= visible or rows[visible] != token:
                return alloc.append(request_id, token)
        alloc.requests[request_id] = attrs.evolve(rec, table_version=rec.table_version + 1,
                                                  context_tokens=rec.context_tokens + 1)
        return None

    return alloc.transact(run)


def pin_tail(alloc: Allocator, tail: Sequence[BlockHandle]) -> tuple[int, ...]:
    """Lease every block of a published tail (the cache's pin), so that no holder writes it in place; the
    lease ids, which the caller records once its transaction commits."""
    return tuple(lifecycle.retain_read(alloc, h) for h in tail)


def unpublish_tail(cache: Any, key: str) -> None:
    """Withdraw the published partial tail ``key`` from the prefix cache and drop its pin: the block is
    an ordinary tail again (its holders may write it in place once they are its only holder)."""
    pins: dict[str, tuple[int, ...]] = cache.tail_pins  # partial-tail key -> the cache's lease ids
    tails: dict = cache._tail_blocks
    if key not in tails:
        raise Rejected(TailRejection.TAIL_NOT_PUBLISHED, f"key {key[:12]}")
    alloc: Allocator = cache.alloc

    def run() -> None:
        for lease_id in pins.get(key, ()):
            lifecycle.release_lease(alloc, lease_id)

    alloc.transact(run)
    pins.pop(key, None)
    del tails[key]
    cache.forget(key)
