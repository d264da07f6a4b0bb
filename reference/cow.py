"""Fork, copy-on-write append and the distinct reference-dropping operations (seed 0x05A-0x05G).

Invariants: truncate removes only a suffix; release and cancel drop every strong reference of a request
and differ only in the receipt's reason; cache and evict touch only weak identities (evict never
revokes a live mapping); touch maps cached blocks into a new request, taking zero-ref ones out of the
queue; a stale handle (older generation) is rejected before it can touch a block (0x05F). Each is one
spec action; :func:`self_check` recomputes everything derived after every committed operation.
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
)
from kvexact.reference.handles import BlockHandle
from kvexact.reference.pool import BlockRecord, BlockState, GroupConfig, PoolRejection, QueuePolicy
from kvexact.reference.rejections import Rejected

KiB = 1024
MiB = 1024 * KiB


class SelfCheckFailed(AssertionError):
    """The committed state broke an invariant the pool self-check recomputes."""


# ---- 0x05A / 0x09C copy accounting --------------------------------------------------------------------
@attrs.frozen
class CowCost:
    """Copy payload, traffic and capacity of one COW append of ``valid_tail_rows`` rows (0x05A, 0x09C)."""

    valid_tail_rows: int
    bundle_row_bytes: int
    block_tokens: int

    @property
    def copy_payload_bytes(self) -> int:
        return self.valid_tail_rows * self.bundle_row_bytes

    @property
    def copy_read_write_bytes(self) -> int:
        return 2 * self.copy_payload_bytes

    @property
    def traffic_bytes(self) -> int:
        return self.copy_read_write_bytes + self.bundle_row_bytes

    @property
    def amplification(self) -> float:
        """Traffic relative to a one-row append: 2r + 1."""
        return self.traffic_bytes / self.bundle_row_bytes

    @property
    def new_capacity_bytes(self) -> int:
        return self.block_tokens * self.bundle_row_bytes

    @property
    def capacity_amplification(self) -> float:
        """P / r (0x09C); infinite when r = 0 means no copy is needed at all."""
        return self.block_tokens / self.valid_tail_rows if self.valid_tail_rows else float("inf")


# ---- single-step operations -------------------------------------------------------------------------
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
        alloc.emit("fork", {"r": parent_id, "c": child_id})
        return child

    return alloc.transact(run)


def truncate(alloc: Allocator, request_id: str, keep_tokens: int, expected_generation: int | None = None,
             expected_table_version: int | None = None) -> ReleaseResult:
    """Keep the first ``keep_tokens`` rows; whole suffix blocks beyond them lose this request's reference."""

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
        alloc.emit("truncate", {"r": request_id, "k": keep_tokens // alloc.groups[0].block_tokens,
                                "keep_tokens": keep_tokens})
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


def _end(alloc: Allocator, action: str, request_id: str, expected_generation: int | None) -> ReleaseResult:
    def run() -> ReleaseResult:
        alloc._require_no_txn()
        before = alloc.digest()
        rec = alloc.validate_expected(request_id, expected_generation, None, None)
        dropped = [h for table in rec.tables for h in table]
        _ended(alloc, request_id, rec)
        freed, evictable = _drop(alloc, dropped)
        alloc.emit("release", {"r": request_id, "reason": action})
        return ReleaseResult(request_id, action, before, alloc.digest(), tuple(dropped), freed, evictable,
                             alloc.epoch)

    return alloc.transact(run)


def release(alloc: Allocator, request_id: str, expected_generation: int | None = None) -> ReleaseResult:
    """Normal completion: every strong reference goes; cached full blocks become EVICTABLE."""
    return _end(alloc, "release", request_id, expected_generation)


def cancel(alloc: Allocator, request_id: str, expected_generation: int | None = None) -> ReleaseResult:
    """Same physical mechanics as release; the receipt's reason differs (0x05E)."""
    return _end(alloc, "cancel", request_id, expected_generation)


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
        alloc.emit("cache_block", {"r": request_id, "j": logical_block + 1, "key": key})
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


def touch(alloc: Allocator, request_id: str, keys: Sequence[str]) -> RequestRecord:
    """Admit ``request_id`` mapping the cached bundles of ``keys`` (+1 ref; zero-ref ones leave the queue)."""

    def run() -> RequestRecord:
        alloc._require_no_txn()
        if request_id in alloc.requests:
            raise Rejected(AllocRejection.DUPLICATE_REQUEST, f"request {request_id!r}")
        if not keys:
            raise Rejected(AllocRejection.EMPTY_APPEND, f"touch {request_id} without keys")
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
        alloc.emit("prefix_hit", {"r": request_id, "k": len(keys), "keys": tuple(keys)})
        return rec

    return alloc.transact(run)


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
                alloc.emit("evict", {"g": g, "b": h.block_id, "key": key})
        if not out:
            raise Rejected(AllocRejection.CACHE_IDENTITY_MISSING, f"{key!r}")
        return tuple(out)

    return alloc.transact(run)


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
        alloc.emit("retain_read", {"g": handle.cache_group_id, "b": handle.block_id, "lease": lease_id})
        return lease_id

    return alloc.transact(run)


def release_lease(alloc: Allocator, lease_id: int) -> None:
    def run() -> None:
        alloc._drop_leases([lease_id])
        alloc.emit("release_lease", {"lease": lease_id})

    alloc.transact(run)


def delayed_write(alloc: Allocator, handle: BlockHandle, offset: int, token: int) -> None:
    """A writer that holds only a handle (D's delayed writer of 0x05E): the generation fence decides.

    A stale generation, or a current one whose block is back in the queue (a retired handle), is rejected
    and recorded as the spec's ``stale_write_rejected``; the state is unchanged.
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
            alloc.record_outside_state("stale_write_rejected", {"g": handle.cache_group_id,
                                                                "h": {"block": handle.block_id,
                                                                      "gen": handle.generation}})
        raise
    owner = pool.blocks[handle.block_id].reserved_by
    if owner is None:
        raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"{handle} is published; write through append")
    alloc.write_rows(owner, handle.cache_group_id, handle, offset, (token,))


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
        alloc.emit("reader_snapshot", {"x": reader_id, "r": request_id})
        return rec

    return alloc.transact(run)


def reader_release(alloc: Allocator, reader_id: str) -> None:
    """The reader is done: its leases go; blocks left without references return to the queue."""

    def run() -> None:
        if reader_id not in alloc.readers:
            raise Rejected(AllocRejection.LEASE_NOT_HELD, f"reader {reader_id!r}")
        rec, _tokens = alloc.readers[reader_id]
        del alloc.readers[reader_id]
        _drop(alloc, [h for table in rec.tables for h in table])
        alloc.emit("reader_release", {"x": reader_id})

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


# ---- self-check ------------------------------------------------------------------------------------
def self_check(alloc: Allocator) -> None:
    """Recompute refcounts from reachability, queue membership, cross-group valid rows, the partition of
    every pool and the digest; raise :class:`SelfCheckFailed` naming the first violation."""

    def fail(msg: str) -> None:
        raise SelfCheckFailed(msg)

    refs: list[dict[int, int]] = [{} for _ in alloc.pools]
    for rid, rec in alloc.requests.items():
        if len(rec.tables) != len(alloc.groups):
            fail(f"{rid}: {len(rec.tables)} tables for {len(alloc.groups)} groups")
        token_rows = []
        for g, table in enumerate(rec.tables):
            p = alloc.groups[g].block_tokens
            if len(table) != ceil_div(rec.context_tokens, p):
                fail(f"{rid} group {g}: {len(table)} blocks for {rec.context_tokens} tokens")
            rows: list[int] = []
            for j, h in enumerate(table):
                pool = alloc.pools[g]
                blk = pool.blocks.get(h.block_id)
                if blk is None or blk.generation != h.generation or h.pool_id != pool.config.pool_id:
                    fail(f"{rid} group {g} maps stale or foreign {h}")
                if blk.reserved_by is not None:
                    fail(f"{rid} maps unpublished {h}")
                visible = min(p, rec.context_tokens - j * p)
                if blk.valid_rows < visible:
                    fail(f"{rid} sees {visible} rows of {h} which holds {blk.valid_rows}")
                rows.extend(blk.rows[:visible])
                refs[g][h.block_id] = refs[g].get(h.block_id, 0) + 1
            token_rows.append(tuple(rows))
        if len(set(token_rows)) > 1:
            fail(f"{rid}: cache groups disagree on the request's rows")
    for reader_id, (snap, _tokens) in alloc.readers.items():
        for table in snap.tables:
            for h in table:
                if alloc.pools[h.cache_group_id].blocks[h.block_id].generation != h.generation:
                    fail(f"reader {reader_id} holds stale {h}")
                refs[h.cache_group_id][h.block_id] = refs[h.cache_group_id].get(h.block_id, 0) + 1
    for lease_id, h in alloc.leases.items():
        g = h.cache_group_id
        if alloc.pools[g].blocks[h.block_id].generation != h.generation:
            fail(f"lease {lease_id} holds stale {h}")
        refs[g][h.block_id] = refs[g].get(h.block_id, 0) + 1
    for g, pool in enumerate(alloc.pools):
        if dict(pool.refs.data) != refs[g]:
            fail(f"group {g}: stored refcounts {dict(pool.refs.data)} != reachable {refs[g]}")
        if len(pool.q_at) != len(pool.q_seq):
            fail(f"group {g}: queue maps disagree")
        for b, rec in pool.blocks.items():
            queued = b in pool.q_seq
            if queued and pool.q_at.get(pool.q_seq[b]) != b:
                fail(f"group {g}: queue position of block {b} is inconsistent")
            roles = [queued, b in refs[g], rec.reserved_by is not None]
            if sum(roles) != 1:
                fail(f"group {g}: block {b} is queued/referenced/reserved = {roles}")
            if rec.reserved_by is not None and rec.reserved_by not in alloc.txns:
                fail(f"group {g}: block {b} reserved by closed transaction {rec.reserved_by}")
            if rec.cache_key is not None and alloc.index.get((g, rec.cache_key)) != pool.handle(b):
                fail(f"group {g}: block {b} carries key {rec.cache_key!r} the index does not map to it")
            if rec.valid_rows > pool.config.block_tokens:
                fail(f"group {g}: block {b} holds {rec.valid_rows} rows")
    for (g, key), h in alloc.index.items():
        if alloc.pools[g].blocks[h.block_id].cache_key != key or alloc.pools[g].handle(h.block_id) != h:
            fail(f"index entry {key!r} in group {g} names {h}, which does not carry it")
    if alloc.journal.recompute_digest() != alloc.digest():
        fail("incremental digest differs from the digest recomputed from scratch")


# ---- fixture loaders and the seed's fixtures -------------------------------------------------------
def install_committed_request(alloc: Allocator, request_id: str, tokens: Sequence[int],
                              block_ids: Sequence[Sequence[int]], generations: Sequence[Sequence[int]],
                              table_version: int, request_generation: int = 1) -> RequestRecord:
    """Fixture loader: place an already committed request (blocks taken from the queue at the given
    generations). Not an operation of the protocol; the self-check runs afterwards."""

    def run() -> RequestRecord:
        tables = []
        for g, ids in enumerate(block_ids):
            pool, p = alloc.pools[g], alloc.groups[g].block_tokens
            if len(ids) != ceil_div(len(tokens), p):
                raise ValueError(f"group {g}: {len(ids)} blocks for {len(tokens)} tokens")
            table = []
            for j, (b, gen) in enumerate(zip(ids, generations[g], strict=True)):
                if pool.state_of(b) in (BlockState.FREE, BlockState.EVICTABLE):
                    pool._dequeue(b)
                    pool.blocks[b] = BlockRecord(generation=gen, rows=tuple(tokens[j * p:(j + 1) * p]))
                    pool.refs[b] = 1
                else:
                    pool.incref(b)
                table.append(pool.handle(b))
            tables.append(tuple(table))
        rec = RequestRecord(request_generation, table_version, len(tokens), tuple(tables))
        alloc.requests[request_id] = rec
        return rec

    rec = alloc.transact(run)
    self_check(alloc)
    return rec


FIXTURE_TOKENS_A = tuple(range(100, 133))  # 33 tokens of request A (values are arbitrary and distinct)


def fixture_0x05b(policy: QueuePolicy = QueuePolicy.LRU, check_every_op: bool = True) -> Allocator:
    """Two cache groups of 0x04E/0x05B (P=16; rows 48 KiB and 16 KiB) with A committed at context 33,
    table version 5, tails 1002@9 and 2002@12, allocator epoch 43.

    Reconstruction (the seed gives only the tail handles): each pool has four blocks, 1000-1003 and
    2000-2003, so the only free blocks are 1003 and 2003, at generations 11 and 5: taking them for D's
    COW destination yields 1003@12 and 2003@6 as the seed states, and the truncate of 0x05E returns them
    as the only free blocks, so F's allocation reuses them at 13 and 7 under either queue policy. The
    generations of A's two full blocks (3, 5 and 7, 8) are arbitrary.
    """
    groups = [GroupConfig(0, 0, 16, 48 * KiB), GroupConfig(1, 1, 16, 16 * KiB)]
    alloc = Allocator(groups, [[1000, 1001, 1002, 1003], [2000, 2001, 2002, 2003]],
                      generations=[{1003: 11}, {2003: 5}], epoch=43, policy=policy,
                      check_every_op=check_every_op)
    install_committed_request(alloc, "A", FIXTURE_TOKENS_A, [[1000, 1001, 1002], [2000, 2001, 2002]],
                              [[3, 5, 9], [7, 8, 12]], table_version=5)
    return alloc


def fixture_0x05b_forked(check_every_op: bool = True) -> Allocator:
    """0x05B up to the fork: A appended privately at token 33 (context 34, version 6), then forked to D."""
    alloc = fixture_0x05b(check_every_op=check_every_op)
    alloc.append("A", 133, expected_generation=1, expected_table_version=5)
    fork(alloc, "A", "D", expected_generation=1, expected_table_version=6)
    return alloc


def fixture_0x0d(check_every_op: bool = True) -> Allocator:
    """0x0D's TP-local fixture through the live allocator: one group (P=16, 64 KiB rows), eight blocks
    100-107; A (33 tokens) allocated into 100, 101, 102; B (25) and C (16) are exact prefixes of A,
    made by fork and truncate, so they share A's blocks; A's two full blocks are cached."""
    alloc = Allocator([GroupConfig(0, 0, 16, 64 * KiB)], [list(range(100, 108))], check_every_op=check_every_op)
    alloc.allocate("A", FIXTURE_TOKENS_A)
    fork(alloc, "A", "B")
    truncate(alloc, "B", 25)
    fork(alloc, "A", "C")
    truncate(alloc, "C", 16)
    cache_block(alloc, "A", 0, "A/0")
    cache_block(alloc, "A", 1, "A/1")
    return alloc


@attrs.frozen
class LedgerCounts:
    """Counts the 0x0D ledger reads from the live allocator state (single cache group)."""

    logical_rows: int
    request_map_entries: int
    unique_blocks: int
    unique_materialized_rows: int
    provisioned_blocks: int
    cached_hash_entries: int
    request_tail_records: int
    free_queue_entries: int
    block_tokens: int
    row_bytes: int


def ledger_counts(alloc: Allocator) -> LedgerCounts:
    """Read the 0x0D ledger's counts off the committed state of a one-group allocator."""
    pool = alloc.pools[0]
    handles = [h for rec in alloc.requests.data.values() for h in rec.tables[0]]
    unique = {h.block_id for h in handles}
    return LedgerCounts(
        logical_rows=sum(rec.context_tokens for rec in alloc.requests.data.values()),
        request_map_entries=len(handles), unique_blocks=len(unique),
        unique_materialized_rows=sum(pool.blocks[b].valid_rows for b in unique),
        provisioned_blocks=len(pool.blocks), cached_hash_entries=len(alloc.index),
        request_tail_records=len(alloc.requests), free_queue_entries=pool.num_queued(),
        block_tokens=alloc.groups[0].block_tokens, row_bytes=alloc.groups[0].row_bytes)


# ---- 0x05G failure lab --------------------------------------------------------------------------------
def _after_cow(alloc: Allocator) -> Allocator:
    alloc.append("D", 900, expected_generation=1, expected_table_version=1)
    return alloc


def _truncated(alloc: Allocator) -> Allocator:
    truncate(_after_cow(alloc), "D", 32)
    return alloc


def _steps(*calls):
    """A multi-step operation: each call takes the allocator and the transaction id of the first."""

    def op(alloc: Allocator):
        def run():
            txn_id = calls[0](alloc)
            for call in calls[1:]:
                call(alloc, txn_id)

        alloc.transact(run)  # the failed operation is the whole transaction

    return op


def _begin(plan: tuple[str, ...], request_id: str = "D"):
    return lambda alloc: alloc.begin("append", request_id, plan, (900,))


def expect_unchanged(alloc: Allocator, op) -> None:
    """Run ``op``; if it is rejected the digest must equal the predecessor's and the self-check hold."""
    before = alloc.digest()
    try:
        op(alloc)
    except Rejected:
        if alloc.digest() != before:
            raise SelfCheckFailed("a rejected operation changed the state digest") from None
        self_check(alloc)
        raise


_0X05G: list[tuple[str, object, object, object]] = [
    # (description, reason, fixture, op)
    ("append with a stale allocator epoch", AllocRejection.EPOCH_MISMATCH, None,
     lambda a: a.append("D", 900, expected_epoch=42)),
    ("append with another request generation", AllocRejection.REQUEST_GENERATION_MISMATCH, None,
     lambda a: a.append("D", 900, expected_generation=2)),
    ("append against a stale table version", AllocRejection.TABLE_VERSION_MISMATCH, None,
     lambda a: a.append("D", 900, expected_table_version=0)),
    ("append to a request that was never admitted", AllocRejection.UNKNOWN_REQUEST, None,
     lambda a: a.append("Z", 900, expected_table_version=3)),
    ("truncate a cancelled request", AllocRejection.REQUEST_ALREADY_ENDED, lambda a: (cancel(a, "D"), a)[1],
     lambda a: truncate(a, "D", 16)),
    ("fork onto a live request id", AllocRejection.DUPLICATE_REQUEST, None, lambda a: fork(a, "A", "D")),
    ("fork a request onto itself", AllocRejection.FORK_ONTO_SELF, None, lambda a: fork(a, "A", "A")),
    ("allocate without tokens", AllocRejection.EMPTY_APPEND, None, lambda a: a.allocate("F", [])),
    ("allocate with every block of a group owned", PoolRejection.OUT_OF_MEMORY, _after_cow,
     lambda a: a.allocate("F", [1])),
    ("delayed write through 1003@12 after 1003@13 was allocated (ABA)", PoolRejection.STALE_BLOCK_GENERATION,
     lambda a: (_truncated(a).allocate("F", list(range(500, 516))), a)[1],
     lambda a: delayed_write(a, BlockHandle(0, 0, 1003, 12), 3, 901)),
    ("delayed write through a retired handle whose block is free", PoolRejection.HANDLE_NOT_OWNED, _truncated,
     lambda a: delayed_write(a, BlockHandle(0, 0, 1003, 12), 3, 901)),
    ("lease through a handle of another pool", PoolRejection.FOREIGN_POOL_HANDLE, None,
     lambda a: retain_read(a, BlockHandle(1, 0, 1000, 3))),
    ("COW source handle that is not the current tail", AllocRejection.UNEXPECTED_SOURCE_HANDLE, None,
     lambda a: cow_append(a, "D", 900, 1, 1, (BlockHandle(0, 0, 1001, 5), BlockHandle(1, 1, 2001, 8)))),
    ("COW copy of fewer rows than the predecessor tail holds", AllocRejection.COPY_ROW_COUNT_MISMATCH, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_begin(t), lambda a, t: a.cow_reserve(t, 0),
            lambda a, t: a.cow_copy(t, 0, 1))),
    ("COW append row written past the copied frontier", AllocRejection.WRITE_OFFSET_MISMATCH, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_begin(t), lambda a, t: a.cow_reserve(t, 0),
            lambda a, t: a.cow_copy(t, 0, 2),
            lambda a, t: a.write_rows(t, 0, a._destination(a._txn(t), 0), 3, (900,)))),
    ("COW publication before the destinations were validated", AllocRejection.FRONTIER_NOT_VALID, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_begin(t), lambda a, t: a.cow_reserve(t, 0),
            lambda a, t: a.cow_reserve(t, 1), lambda a, t: a.cow_copy(t, 0, 2), lambda a, t: a.cow_copy(t, 1, 2),
            lambda a, t: a.write_rows(t, 0, a._destination(a._txn(t), 0), 2, (900,)),
            lambda a, t: a.write_rows(t, 1, a._destination(a._txn(t), 1), 2, (900,)),
            lambda a, t: a.publish_bundle(t))),
    ("boundary publication with only group 0 reserved", AllocRejection.HALF_BUNDLE_PUBLICATION,
     lambda a: (truncate(a, "D", 32), a)[1],
     _steps(_begin(("new", "new")), lambda a, t: a.reserve_block(t, 0),
            lambda a, t: a.write_rows(t, 0, a._destination(a._txn(t), 0), 0, (900,)),
            lambda a, t: a.publish_bundle(t))),
    ("in-place write into the shared tail", AllocRejection.WRITE_TO_SHARED_BLOCK, None,
     _steps(_begin(("unique", "unique")),
            lambda a, t: a.write_rows(t, 0, a.request("D").tables[0][-1], 2, (900,)))),
    ("COW reservation on a transaction whose path is in place", AllocRejection.WRONG_STEP_FOR_PATH, None,
     _steps(_begin(("unique", "unique")), lambda a, t: a.cow_reserve(t, 0))),
    ("COW reservation before the source leases", AllocRejection.STEP_OUT_OF_ORDER, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_reserve(t, 0))),
    ("fork while a transaction is in flight", AllocRejection.TRANSACTION_IN_FLIGHT, None,
     _steps(_begin(("cow", "cow")), lambda a, t: fork(a, "A", "E"))),
    ("publish a transaction that does not exist", AllocRejection.UNKNOWN_TRANSACTION, None,
     lambda a: a.publish_bundle("t999")),
    ("roll back after publication", AllocRejection.ROLLBACK_AFTER_PUBLICATION, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_begin(t), lambda a, t: a.cow_reserve(t, 0),
            lambda a, t: a.cow_reserve(t, 1), lambda a, t: a.cow_copy(t, 0, 2), lambda a, t: a.cow_copy(t, 1, 2),
            lambda a, t: a.write_rows(t, 0, a._destination(a._txn(t), 0), 2, (900,)),
            lambda a, t: a.write_rows(t, 1, a._destination(a._txn(t), 1), 2, (900,)),
            lambda a, t: a.cow_validate(t), lambda a, t: a.publish_bundle(t),
            lambda a, t: a.rollback_unpublished(t, 0))),
    ("compensate a rolled-back receipt", AllocRejection.NOTHING_TO_COMPENSATE, None,
     lambda a: compensate(a, attrs.evolve(_rolled_back_receipt(), request_id="D"))),
    ("remove an interior logical block", AllocRejection.INTERIOR_BLOCK_REMOVAL, None,
     lambda a: drop_logical_block(a, "A", 0)),
    ("remove a logical block past the table", AllocRejection.BAD_LOGICAL_BLOCK, None,
     lambda a: drop_logical_block(a, "A", 7)),
    ("truncate to the current length", AllocRejection.TRUNCATE_NOT_SHORTER, None,
     lambda a: truncate(a, "A", 34)),
    ("release a lease that is not held", AllocRejection.LEASE_NOT_HELD, None, lambda a: release_lease(a, 99)),
    ("cache the partial tail block", AllocRejection.CACHE_PARTIAL_BLOCK, None,
     lambda a: cache_block(a, "A", 2, "k")),
    ("cache a second block under a key already bound", AllocRejection.CACHE_KEY_CONFLICT,
     lambda a: (cache_block(a, "A", 0, "k"), a)[1], lambda a: cache_block(a, "A", 1, "k")),
    ("re-key a block that already carries an identity", AllocRejection.CACHE_BLOCK_ALREADY_KEYED,
     lambda a: (cache_block(a, "A", 0, "k0"), a)[1], lambda a: cache_block(a, "A", 0, "k1")),
    ("touch a key no group holds", AllocRejection.CACHE_IDENTITY_MISSING, None,
     lambda a: touch(a, "G", ["missing"])),
    ("evict a key no group holds", AllocRejection.CACHE_IDENTITY_MISSING, None, lambda a: evict(a, "missing")),
    ("second snapshot by a reader that holds one", AllocRejection.READER_BUSY,
     lambda a: (reader_snapshot(a, "x", "A"), a)[1], lambda a: reader_snapshot(a, "x", "D")),
]


def _rolled_back_receipt() -> AllocationReceipt:
    alloc = fixture_0x05b_forked(check_every_op=False)
    alloc.fault_after.add(("cow_reserve", 0))
    return alloc.append("D", 900)


def _trigger(fixture, op):
    def trigger():
        alloc = fixture_0x05b_forked()
        if fixture is not None:
            alloc = fixture(alloc)
        expect_unchanged(alloc, op)

    return trigger


def _register_0x05g() -> None:
    from kvexact.reference.rejections import NegativeCase, register_negative

    for description, reason, fixture, op in _0X05G:
        register_negative(NegativeCase("0x05G", reason, description, _trigger(fixture, op)))  # type: ignore


_register_0x05g()


def ledger_fixture_from(alloc: Allocator, reserved_rows_tokens: dict[str, int], record_sizes=None):
    """The 0x0D ledger's inputs read off a live one-group allocator (``ledgers.LedgerFixture``).

    Rectangular reservations are not allocator state, so they are given per request.
    """
    from kvexact.reference import ledgers

    pool = alloc.pools[0]
    views = [ledgers.RequestView(rid, rec.context_tokens, reserved_rows_tokens[rid],
                                 tuple(h.block_id for h in rec.tables[0]))
             for rid, rec in sorted(alloc.requests.items())]
    return ledgers.LedgerFixture(
        row_bytes=alloc.groups[0].row_bytes, block_tokens=alloc.groups[0].block_tokens, requests=views,
        valid_rows_by_block=tuple((b, rec.valid_rows) for b, rec in sorted(pool.blocks.items())
                                  if pool.refcount(b) > 0),
        pool_block_ids=tuple(sorted(pool.blocks.data)),
        cached_hash_block_ids=tuple(sorted(h.block_id for (g, _k), h in alloc.index.items() if g == 0)),
        free_queue_block_ids=tuple(pool.queue_order()),
        record_sizes=record_sizes or ledgers.WORKED_RECORD_SIZES)
