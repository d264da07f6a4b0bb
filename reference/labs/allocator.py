"""The allocator's seed fixtures (0x05B, 0x0D) and its failure lab (0x05G).

Reconstructed fixtures hold every fact the seed states (docs/design.md, "Seed fixtures that the seed only
summarizes"); each docstring says how. Every 0x05G case is a malformed transition on the 0x05B fixture
after the fork, rejected by its name with the state digest unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from kvexact.reference.allocator import (
    AllocationReceipt,
    Allocator,
    AllocRejection,
    RequestRecord,
    SelfCheckFailed,
    ceil_div,
)
from kvexact.reference.handles import BlockHandle
from kvexact.reference.lifecycle import (
    cache_block,
    cancel,
    compensate,
    cow_append,
    delayed_write,
    drop_logical_block,
    fork,
    prefix_hit,
    reader_snapshot,
    release_lease,
    retain_read,
    truncate,
)
from kvexact.reference.pool import BlockRecord, BlockState, GroupConfig, PoolRejection, QueuePolicy
from kvexact.reference.rejections import NegativeCase, Rejected, register_negative

KiB = 1024
MiB = 1024 * KiB


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
    alloc.self_check()
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


def _cached_then_truncated(alloc: Allocator) -> Allocator:
    """F (16 tokens, unique) caches its block 0, then truncates to 4: its tail is a cached, full block."""
    alloc.allocate("F", list(range(700, 716)))
    cache_block(alloc, "F", 0, "F/0")
    truncate(alloc, "F", 4)
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
        alloc.self_check()
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
            lambda a, t: a.cow_write(t, 0, a._destination(a._txn(t), 0), 3, (900,)))),
    ("COW publication before the destinations were validated", AllocRejection.FRONTIER_NOT_VALID, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_begin(t), lambda a, t: a.cow_reserve(t, 0),
            lambda a, t: a.cow_reserve(t, 1), lambda a, t: a.cow_copy(t, 0, 2), lambda a, t: a.cow_copy(t, 1, 2),
            lambda a, t: a.cow_write(t, 0, a._destination(a._txn(t), 0), 2, (900,)),
            lambda a, t: a.cow_write(t, 1, a._destination(a._txn(t), 1), 2, (900,)),
            lambda a, t: a.cow_publish(t))),
    ("boundary publication with only group 0 reserved", AllocRejection.HALF_BUNDLE_PUBLICATION,
     lambda a: (truncate(a, "D", 32), a)[1],
     _steps(_begin(("new", "new")), lambda a, t: a.append_reserve(t, 0),
            lambda a, t: a.write_rows(t, 0, a._destination(a._txn(t), 0), 0, (900,)),
            lambda a, t: a.append_publish(t))),
    ("in-place write into the shared tail", AllocRejection.WRITE_TO_SHARED_BLOCK, None,
     _steps(_begin(("unique", "unique")),
            lambda a, t: a.write_rows(t, 0, a.request("D").tables[0][-1], 2, (900,)))),
    ("in-place write into a cached block a truncate left as the tail", AllocRejection.WRITE_TO_CACHED_BLOCK,
     _cached_then_truncated, _steps(_begin(("unique", "unique"), "F"),
                                    lambda a, t: a.write_rows(t, 0, a.request("F").tables[0][-1], 4, (900,)))),
    ("COW reservation on a transaction whose path is in place", AllocRejection.WRONG_STEP_FOR_PATH, None,
     _steps(_begin(("unique", "unique")), lambda a, t: a.cow_reserve(t, 0))),
    ("COW reservation before the source leases", AllocRejection.STEP_OUT_OF_ORDER, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_reserve(t, 0))),
    ("fork while a transaction is in flight", AllocRejection.TRANSACTION_IN_FLIGHT, None,
     _steps(_begin(("cow", "cow")), lambda a, t: fork(a, "A", "E"))),
    ("publish a transaction that does not exist", AllocRejection.UNKNOWN_TRANSACTION, None,
     lambda a: a.append_publish("t999")),
    ("roll back after publication", AllocRejection.ROLLBACK_AFTER_PUBLICATION, None,
     _steps(_begin(("cow", "cow")), lambda a, t: a.cow_begin(t), lambda a, t: a.cow_reserve(t, 0),
            lambda a, t: a.cow_reserve(t, 1), lambda a, t: a.cow_copy(t, 0, 2), lambda a, t: a.cow_copy(t, 1, 2),
            lambda a, t: a.cow_write(t, 0, a._destination(a._txn(t), 0), 2, (900,)),
            lambda a, t: a.cow_write(t, 1, a._destination(a._txn(t), 1), 2, (900,)),
            lambda a, t: a.cow_validate(t), lambda a, t: a.cow_publish(t),
            lambda a, t: a.cow_rollback(t, 0))),
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
    ("prefix hit on a key no group holds", AllocRejection.CACHE_IDENTITY_MISSING, None,
     lambda a: prefix_hit(a, "G", ["missing"])),
    ("drop a reference a free block does not hold (a double release)", PoolRejection.REFCOUNT_UNDERFLOW, None,
     lambda a: a.pools[0].decref(next(b for b in sorted(a.pools[0].blocks) if a.pools[0].refcount(b) == 0))),
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


def register() -> None:
    """Register the 0x05G lab's cases (called once, by :func:`kvexact.reference.labs.register_all`)."""
    for description, reason, fixture, op in _0X05G:
        register_negative(NegativeCase("0x05G", reason, description, _trigger(fixture, op)))  # type: ignore


def ledger_fixture_from(alloc: Allocator, reserved_rows_tokens: dict[str, int], record_sizes=None):
    """The 0x0D ledger's inputs read off a live one-group allocator (``ledgers.LedgerFixture``).

    Rectangular reservations are not allocator state, so they are given per request.
    """
    from kvexact.reference import ledgers
    from kvexact.reference.labs.ledgers import WORKED_RECORD_SIZES

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
        record_sizes=record_sizes or WORKED_RECORD_SIZES)
