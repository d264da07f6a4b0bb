"""The request lifecycle around the allocator (seed 0x05A-0x05G): fork, truncate, release and cancel, cache
publication, prefix hits and eviction, read leases, reader snapshots, the delayed writer's ABA fence, the
0x05D copy-on-write transaction and compensation.

Invariants: truncate removes only a suffix; release and cancel drop every strong reference of a request
and differ only in the receipt's reason; cache and evict touch only weak identities (evict never
revokes a live mapping); a prefix hit maps cached blocks into a new request, taking zero-ref ones out of
the queue; a stale handle (older generation) is rejected before it can touch a block (0x05F). Each
function marked :func:`~kvexact.reference.allocator.step` is the twin of the spec action of its name.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kvexact.reference.allocator import (
    AllocationReceipt,
    Allocator,
    AllocRejection,
    ReleaseResult,
    RequestRecord,
    ceil_div,
    check_operation,
    step,
)
from kvexact.reference.handles import BlockHandle
from kvexact.reference.pool import BlockState, PoolRejection
from kvexact.reference.rejections import Rejected


def _ended(alloc: Allocator, request_id: str, rec: RequestRecord) -> None:
    del alloc.requests[request_id]
    alloc.ended[request_id] = rec.request_generation


def _drop(alloc: Allocator, handles: Sequence[BlockHandle]) -> tuple[tuple[BlockHandle, ...], tuple[BlockHandle, ...]]:
    """Drop one strong reference per handle, tail first; return (freed, evictable) handles."""
    freed, evictable = [], []
    for h in reversed(handles):
        pool = alloc.pools[h.cache_group_id]
        pool.check_handle(h)
        pool.decref(h.block_id)
        state = pool.state_of(h.block_id)
        if state is BlockState.FREE:
            freed.append(h)
        elif state is BlockState.EVICTABLE:
            evictable.append(h)
    return tuple(freed), tuple(evictable)


@step
def fork(alloc: Allocator, parent_id: str, child_id: str, expected_generation: int | None = None,
         expected_table_version: int | None = None) -> RequestRecord:
    """Map every block of ``parent_id`` into a new request ``child_id`` (+1 strong ref each, version 1)."""

    def run() -> RequestRecord:
        alloc._require_no_txn()
        if child_id == parent_id:
            raise Rejected(AllocRejection.FORK_ONTO_SELF, parent_id)
        rec = alloc.validate_expected(parent_id, expected_generation, expected_table_version, None)
        if child_id in alloc.requests:
            raise Rejected(AllocRejection.DUPLICATE_REQUEST, f"request {child_id!r}")
        child = RequestRecord(request_generation=alloc.ended.get(child_id, 0) + 1, table_version=1,
                              context_tokens=rec.context_tokens, tables=rec.tables)
        for table in rec.tables:
            for h in table:
                alloc.pools[h.cache_group_id].incref(h.block_id)
        alloc.requests[child_id] = child
        alloc.emit({"r": parent_id, "c": child_id})
        return child

    return alloc.transact(run)


@step
def truncate(alloc: Allocator, request_id: str, keep_tokens: int, expected_generation: int | None = None,
             expected_table_version: int | None = None) -> ReleaseResult:
    """Keep the first ``keep_tokens`` rows: ceil(keep_tokens / P_g) blocks per group (a partial last block stays
    mapped, its rows past the new length dead); the suffix blocks beyond them lose this request's reference."""

    def run() -> ReleaseResult:
        alloc._require_no_txn()
        before = alloc.digest()
        rec = alloc.validate_expected(request_id, expected_generation, expected_table_version, None)
        if not 0 <= keep_tokens < rec.context_tokens:
            raise Rejected(AllocRejection.TRUNCATE_NOT_SHORTER, f"{request_id}: keep {keep_tokens} of "
                           f"{rec.context_tokens}")
        kept, dropped = [], []
        for g, table in enumerate(rec.tables):
            n = ceil_div(keep_tokens, alloc.groups[g].block_tokens)
            kept.append(table[:n])
            dropped.extend(table[n:])
        freed, evictable = _drop(alloc, dropped)
        alloc.requests[request_id] = attrs.evolve(rec, table_version=rec.table_version + 1,
                                                  context_tokens=keep_tokens, tables=tuple(kept))
        alloc.emit({"r": request_id, "n": keep_tokens})
        return ReleaseResult(request_id, "truncate", before, alloc.digest(), tuple(dropped), freed, evictable,
                             alloc.epoch, rec.table_version + 1)

    return alloc.transact(run)


def drop_logical_block(alloc: Allocator, request_id: str, logical_block: int) -> ReleaseResult:
    """Remove one logical block: only the last one (a suffix), else INTERIOR_BLOCK_REMOVAL."""
    rec = alloc.request(request_id)
    n = len(rec.tables[0])
    if not 0 <= logical_block < n:
        raise Rejected(AllocRejection.BAD_LOGICAL_BLOCK, f"{request_id}: block {logical_block} of {n}")
    if logical_block != n - 1:
        raise Rejected(AllocRejection.INTERIOR_BLOCK_REMOVAL, f"{request_id}: block {logical_block} of {n}")
    return truncate(alloc, request_id, logical_block * alloc.groups[0].block_tokens)


@step
def release(alloc: Allocator, request_id: str, expected_generation: int | None = None,
            reason: str = "release") -> ReleaseResult:
    """Every strong reference of the request goes; cached full blocks become EVICTABLE. ``reason`` is
    "release" (normal completion) or "cancel": the same physical mechanics, another receipt (0x05E)."""

    def run() -> ReleaseResult:
        alloc._require_no_txn()
        before = alloc.digest()
        rec = alloc.validate_expected(request_id, expected_generation, None, None)
        dropped = [h for table in rec.tables for h in table]
        _ended(alloc, request_id, rec)
        freed, evictable = _drop(alloc, dropped)
        alloc.emit({"r": request_id, "reason": reason})
        return ReleaseResult(request_id, reason, before, alloc.digest(), tuple(dropped), freed, evictable,
                             alloc.epoch)

    return alloc.transact(run)


def cancel(alloc: Allocator, request_id: str, expected_generation: int | None = None) -> ReleaseResult:
    """A cancelled request is released (the spec's ``Release``); its receipt says "cancel"."""
    return release(alloc, request_id, expected_generation, reason="cancel")


@step
def cache_block(alloc: Allocator, request_id: str, logical_block: int, key: str) -> tuple[BlockHandle, ...]:
    """Publish a weak identity ``key`` for a full logical block of a request, in every cache group."""

    def run() -> tuple[BlockHandle, ...]:
        rec = alloc.request(request_id)
        out = []
        for g, table in enumerate(rec.tables):
            if not 0 <= logical_block < len(table):
                raise Rejected(AllocRejection.BAD_LOGICAL_BLOCK, f"{request_id}: block {logical_block}")
            visible = alloc.tail_rows(rec, g) if logical_block == len(table) - 1 else alloc.groups[g].block_tokens
            if visible != alloc.groups[g].block_tokens:
                raise Rejected(AllocRejection.CACHE_PARTIAL_BLOCK, f"{request_id} block {logical_block} group "
                               f"{g}: {visible} of {alloc.groups[g].block_tokens} rows")
            h = table[logical_block]
            bound = alloc.index.get((g, key))
            if bound is not None and bound != h:
                raise Rejected(AllocRejection.CACHE_KEY_CONFLICT, f"{key!r} already names {bound}")
            current = alloc.pools[g].blocks[h.block_id].cache_key
            if current is not None:
                raise Rejected(AllocRejection.CACHE_BLOCK_ALREADY_KEYED, f"{h} carries {current!r}")
            alloc.index[(g, key)] = h
            alloc.pools[g].set_cache_key(h.block_id, key)
            out.append(h)
        alloc.emit({"r": request_id, "j": logical_block + 1, "key": key})
        return tuple(out)

    return alloc.transact(run)


def lookup_all_groups(alloc: Allocator, key: str) -> tuple[BlockHandle, ...] | None:
    """The cached bundle for ``key`` when every cache group holds a current entry, else None (0x07C)."""
    out = []
    for g in range(len(alloc.groups)):
        h = alloc.index.get((g, key))
        if h is None or alloc.pools[g].blocks[h.block_id].generation != h.generation:
            return None
        out.append(h)
    return tuple(out)


@step
def prefix_hit(alloc: Allocator, request_id: str, keys: Sequence[str]) -> RequestRecord:
    """Admit ``request_id`` mapping the cached bundles of ``keys`` (+1 ref; zero-ref ones leave the queue)."""

    def run() -> RequestRecord:
        alloc._require_no_txn()
        if request_id in alloc.requests:
            raise Rejected(AllocRejection.DUPLICATE_REQUEST, f"request {request_id!r}")
        if not keys:
            raise Rejected(AllocRejection.EMPTY_APPEND, f"prefix hit of {request_id} without keys")
        sizes = {g.block_tokens for g in alloc.groups}
        tables: list[list[BlockHandle]] = [[] for _ in alloc.groups]
        for key in keys:
            bundle = lookup_all_groups(alloc, key)
            if bundle is None:
                raise Rejected(AllocRejection.CACHE_IDENTITY_MISSING, f"{key!r}")
            for h in bundle:
                alloc.pools[h.cache_group_id].incref(h.block_id)
                tables[h.cache_group_id].append(h)
        rec = RequestRecord(request_generation=alloc.ended.get(request_id, 0) + 1, table_version=1,
                            context_tokens=len(keys) * min(sizes), tables=tuple(tuple(t) for t in tables))
        alloc.requests[request_id] = rec
        alloc.emit({"r": request_id, "k": len(keys), "keys": tuple(keys)})
        return rec

    return alloc.transact(run)


@step
def evict(alloc: Allocator, key: str) -> tuple[BlockHandle, ...]:
    """Remove the weak identity ``key`` from every group; a zero-ref block turns FREE, mappings stay."""

    def run() -> tuple[BlockHandle, ...]:
        out = []
        for g in range(len(alloc.groups)):
            h = alloc.index.get((g, key))
            if h is not None:
                del alloc.index[(g, key)]
                alloc.pools[g].set_cache_key(h.block_id, None)
                out.append(h)
                alloc.emit({"g": g, "b": h.block_id, "key": key})
        if not out:
            raise Rejected(AllocRejection.CACHE_IDENTITY_MISSING, f"{key!r}")
        return tuple(out)

    return alloc.transact(run)


@step
def retain_read(alloc: Allocator, handle: BlockHandle) -> int:
    """Take a read lease on a current handle (+1 ref); a stale generation is rejected (0x05F)."""

    def run() -> int:
        pool = alloc.pools[handle.cache_group_id] if handle.cache_group_id < len(alloc.pools) else None
        if pool is None:
            raise Rejected(PoolRejection.FOREIGN_POOL_HANDLE, f"{handle}")
        pool.check_handle(handle)
        if pool.state_of(handle.block_id) is not BlockState.REFERENCED:
            raise Rejected(AllocRejection.CACHE_IDENTITY_MISSING, f"{handle} is not mapped by any request")
        lease_id = alloc.scalars["next_lease"]
        alloc.scalars["next_lease"] = lease_id + 1
        alloc.leases[lease_id] = handle
        pool.incref(handle.block_id)
        alloc.emit({"g": handle.cache_group_id, "b": handle.block_id, "lease": lease_id})
        return lease_id

    return alloc.transact(run)


@step
def release_lease(alloc: Allocator, lease_id: int) -> None:
    def run() -> None:
        alloc._drop_leases([lease_id])
        alloc.emit({"lease": lease_id})

    alloc.transact(run)


def delayed_write(alloc: Allocator, handle: BlockHandle, offset: int, token: int) -> None:
    """A writer that holds only a handle (D's delayed writer of 0x05E): the generation fence decides.

    A stale generation, or a current one whose block is back in the queue (a retired handle), is rejected
    (:func:`stale_write_rejected` records it); the state is unchanged.
    """
    if handle.cache_group_id >= len(alloc.pools):
        raise Rejected(PoolRejection.FOREIGN_POOL_HANDLE, f"{handle}")
    pool = alloc.pools[handle.cache_group_id]
    try:
        pool.check_handle(handle)
        if pool.state_of(handle.block_id) in (BlockState.FREE, BlockState.EVICTABLE):
            raise Rejected(PoolRejection.HANDLE_NOT_OWNED, f"{handle}")
    except Rejected as exc:
        if exc.reason in (PoolRejection.STALE_BLOCK_GENERATION, PoolRejection.HANDLE_NOT_OWNED):
            stale_write_rejected(alloc, handle)
        raise
    owner = pool.blocks[handle.block_id].reserved_by
    if owner is None:
        raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"{handle} is published; write through append")
    txn = alloc.txns[owner]
    write = alloc.cow_write if txn.plan[handle.cache_group_id] == "cow" else alloc.write_rows
    write(owner, handle.cache_group_id, handle, offset, (token,))


@step
def stale_write_rejected(alloc: Allocator, handle: BlockHandle) -> None:
    """The fence refused a delayed writer's handle: recorded, the state unchanged (0x05F)."""
    alloc.record_outside_state({"g": handle.cache_group_id, "h": {"block": handle.block_id,
                                                                  "gen": handle.generation}})


@step
def reader_snapshot(alloc: Allocator, reader_id: str, request_id: str) -> RequestRecord:
    """A reader snapshots a request's published tables, leasing every handle (+1 ref each)."""

    def run() -> RequestRecord:
        if reader_id in alloc.readers:
            raise Rejected(AllocRejection.READER_BUSY, f"reader {reader_id!r}")
        rec = alloc.request(request_id)
        for table in rec.tables:
            for h in table:
                alloc.pools[h.cache_group_id].incref(h.block_id)
        alloc.readers[reader_id] = (rec, alloc.tokens_of(request_id))
        alloc.emit({"x": reader_id, "r": request_id})
        return rec

    return alloc.transact(run)


@step
def reader_release(alloc: Allocator, reader_id: str) -> None:
    """The reader is done: its leases go; blocks left without references return to the queue."""

    def run() -> None:
        if reader_id not in alloc.readers:
            raise Rejected(AllocRejection.LEASE_NOT_HELD, f"reader {reader_id!r}")
        rec, _tokens = alloc.readers[reader_id]
        del alloc.readers[reader_id]
        _drop(alloc, [h for table in rec.tables for h in table])
        alloc.emit({"x": reader_id})

    alloc.transact(run)


def cow_append(alloc: Allocator, request_id: str, token: int, expected_generation: int,
               expected_table_version: int, expected_tail: Sequence[BlockHandle] | None = None
               ) -> AllocationReceipt:
    """The reference transaction of 0x05D: validate, lease sources, reserve, copy, write, publish, release.

    ``expected_tail`` (one handle per group) is step 2 of 0x05C: a stale or different source is rejected.
    """
    rec = alloc.validate_expected(request_id, expected_generation, expected_table_version, None)
    if expected_tail is not None:
        for g, h in enumerate(expected_tail):
            alloc.pools[g].check_handle(h)
            if not rec.tables[g] or rec.tables[g][-1] != h:
                raise Rejected(AllocRejection.UNEXPECTED_SOURCE_HANDLE, f"group {g}: {h}")
    return alloc.append(request_id, token, expected_generation, expected_table_version)


def compensate(alloc: Allocator, receipt: AllocationReceipt) -> AllocationReceipt:
    """After publication history stays: publish a successor that undoes the receipt's effect (0x04F)."""
    if receipt.outcome != "PUBLISHED":
        raise Rejected(AllocRejection.NOTHING_TO_COMPENSATE, f"{receipt.transaction_id}: {receipt.outcome}")
    check_operation(receipt.operation)  # only an allocate or an append publishes a receipt that can be undone
    before = alloc.digest()
    if receipt.operation == "allocate":
        result = cancel(alloc, receipt.request_id)
        version = None
    else:
        rec = alloc.request(receipt.request_id)
        result = truncate(alloc, receipt.request_id, rec.context_tokens - receipt.useful_new_rows)
        version = result.table_version_after
    return AllocationReceipt(
        transaction_id=f"{receipt.transaction_id}-compensation", request_id=receipt.request_id,
        operation=f"compensate-{receipt.operation}", predecessor_digest=before,
        successor_digest=alloc.digest(), useful_new_rows=0, new_physical_blocks=0, copied_rows=0,
        copy_payload_bytes=0, refcount_deltas=tuple((h, -1) for h in result.dropped_handles),
        allocator_epoch_after=alloc.epoch, outcome="COMPENSATED", table_version_after=version)
