"""Allocation transactions over per-group block pools (seed 0x04A-0x04F, 0x05C).

Invariants kept by :class:`Allocator`:

* refcount(h) = committed request-map references + active leases (0x04B); a cache identity is weak;
* an unpublished (reserved) block is never reachable from a request map (0x04A);
* a multi-group bundle publishes in one step or not at all: publishing only some groups is rejected;
* a transaction that fails before publication leaves the state digest exactly as it was (0x04F);
  after publication history is never erased: a compensating successor is published instead;
* counters (docs/design.md "Counters"): the allocator epoch advances when a transaction that reserved physical
  blocks publishes (never on rollback or rejection); a block's generation advances each time it leaves
  the free+evictable queue for a new owner; a request's table version advances on every publication
  that changes its snapshot (tables, length or valid rows); a request's generation is 1 on first
  admission and one more than the last ended incarnation on re-admission.

Every mutation is a sequence of *steps*. A step is a method (or a function of ``lifecycle.py``) marked
:func:`step`: its name is the snake_case name of the spec action it is the twin of (``cow_reserve`` is
``CowReserve``), and it emits one trace record when a recorder is attached. A step may enclose others
(``append_boundary`` encloses ``append_reserve``, ``append_write`` and ``append_publish``), so a spec that
models the whole as one action records the outer step and one that models the parts records the parts.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from kvexact.reference.handles import BlockHandle
from kvexact.reference.pool import BlockPool, BlockState, GroupConfig, JDict, Journal, QueuePolicy
from kvexact.reference.rejections import Rejected


class AllocRejection(enum.Enum):
    """Named malformed transitions of the allocator and COW path (0x05G)."""

    EPOCH_MISMATCH = "expected allocator epoch is not the current one"
    REQUEST_GENERATION_MISMATCH = "expected request generation is not the request's current generation"
    TABLE_VERSION_MISMATCH = "expected table version is not the request's current table version"
    UNKNOWN_REQUEST = "no committed request with this id"
    DUPLICATE_REQUEST = "a committed request with this id already exists"
    REQUEST_ALREADY_ENDED = "request was already released, cancelled or never re-admitted"
    EMPTY_APPEND = "append or allocate without any token"
    TRANSACTION_IN_FLIGHT = "another transaction is in flight"
    UNKNOWN_TRANSACTION = "no in-flight transaction with this id"
    WRONG_STEP_FOR_PATH = "this step does not belong to the transaction's append path for that group"
    STEP_OUT_OF_ORDER = "step taken before the step it depends on"
    HALF_BUNDLE_PUBLICATION = "publication would map some cache groups but not all"
    COPY_ROW_COUNT_MISMATCH = "COW copy must copy exactly the predecessor's valid tail rows"
    WRITE_OFFSET_MISMATCH = "row written somewhere other than the expected frontier"
    FRONTIER_NOT_VALID = "destination data frontier does not hold every row the successor exposes"
    WRITE_TO_SHARED_BLOCK = "in-place write to a block with more than one strong reference"
    WRITE_TO_CACHED_BLOCK = "in-place write to a block that carries a prefix-cache identity (it is immutable)"
    INTERIOR_BLOCK_REMOVAL = "only a suffix may be removed; dropping an interior block breaks positions"
    TRUNCATE_NOT_SHORTER = "truncate length must be shorter than the context and not negative"
    ROLLBACK_AFTER_PUBLICATION = "a published transaction cannot roll back; publish a compensating successor"
    NOTHING_TO_COMPENSATE = "receipt did not publish a successor that can be compensated"
    FORK_ONTO_SELF = "fork target equals its parent"
    LEASE_NOT_HELD = "lease id is not active"
    CACHE_PARTIAL_BLOCK = "only full, immutable blocks can be published to the prefix cache"
    CACHE_KEY_CONFLICT = "cache key already names another block in this group"
    CACHE_BLOCK_ALREADY_KEYED = "block already carries another cache identity"
    CACHE_IDENTITY_MISSING = "no cached block carries this key in every cache group"
    BAD_LOGICAL_BLOCK = "logical block index outside the request's table"
    UNEXPECTED_SOURCE_HANDLE = "expected source handle is not the request's current tail"
    READER_BUSY = "this reader already holds a snapshot"
    UNKNOWN_OPERATION = "a transaction is an allocate or an append (0x04E); any other operation name is refused"
    BAD_PLAN = "a plan names one path per cache group: alloc for an allocate; new, cow or unique for an append"


OPERATIONS = ("allocate", "append")  # the transactions run_txn and begin accept (0x04E)


def check_operation(operation: str) -> None:
    """Refuse a transaction name other than allocate and append by name (UNKNOWN_OPERATION)."""
    if operation not in OPERATIONS:
        raise Rejected(AllocRejection.UNKNOWN_OPERATION, f"operation {operation!r}; known: {', '.join(OPERATIONS)}")


class InjectedFailure(Exception):
    """A fault injected before publication (0x04F): the transaction must roll back exactly."""


@attrs.frozen
class RequestRecord:
    """A committed request map: one block table per cache group plus its logical length."""

    request_generation: int
    table_version: int
    context_tokens: int
    tables: tuple[tuple[BlockHandle, ...], ...]


@attrs.frozen
class AllocationTxn:
    """An in-flight transaction (0x04D); ``plan`` holds each group's append path."""

    transaction_id: str
    expected_allocator_epoch: int
    request_id: str
    expected_request_generation: int
    expected_table_version: int
    operation: str
    touched_handles: tuple[BlockHandle, ...]
    reserved_handles: tuple[BlockHandle, ...]
    publication_state: str  # RESERVED -> READY_TO_PUBLISH | BEGUN -> VALIDATED -> PUBLISHED (COW)
    plan: tuple[str, ...] = ()  # per group: "new", "unique", "cow", "alloc"
    new_tokens: tuple[int, ...] = ()
    lease_ids: tuple[int, ...] = ()
    copied_rows: int = 0
    evicted_keys: tuple[str | None, ...] = ()  # aligned with reserved_handles: identity each reuse evicted
    copied_groups: tuple[int, ...] = ()
    written_groups: tuple[int, ...] = ()
    source_tail_rows: int = 0  # COW: the predecessor's valid tail rows (what cow_copy copies)


@attrs.frozen
class AllocationReceipt:
    """Physical facts of one committed, rolled-back or compensating transaction (0x04D, 0x05A)."""

    transaction_id: str
    request_id: str
    operation: str
    predecessor_digest: str
    successor_digest: str
    useful_new_rows: int
    new_physical_blocks: int
    copied_rows: int
    copy_payload_bytes: int
    refcount_deltas: tuple[tuple[BlockHandle, int], ...]
    allocator_epoch_after: int
    outcome: str  # PUBLISHED | ROLLED_BACK | COMPENSATED
    paths: tuple[str, ...] = ()
    new_capacity_bytes: int = 0
    append_write_bytes: int = 0
    table_version_after: int | None = None
    published_tables: tuple[tuple[BlockHandle, ...], ...] = ()
    rejection: enum.Enum | None = None
    copies: tuple[tuple[BlockHandle, BlockHandle], ...] = ()  # (source, destination) of each COW copy

    @property
    def copy_traffic_bytes(self) -> int:
        """Copy read + copy write + append write (0x05A)."""
        return 2 * self.copy_payload_bytes + self.append_write_bytes


@attrs.frozen
class ReleaseResult:
    """What truncate, release or cancel returned to the pools (0x05E)."""

    request_id: str
    reason: str  # "release" | "cancel" | "truncate"
    predecessor_digest: str
    successor_digest: str
    dropped_handles: tuple[BlockHandle, ...]
    freed_handles: tuple[BlockHandle, ...]  # refcount reached 0 without a cache identity: FREE
    evictable_handles: tuple[BlockHandle, ...]  # refcount reached 0 with a cache identity: EVICTABLE
    allocator_epoch_after: int
    table_version_after: int | None = None


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class SelfCheckFailed(AssertionError):
    """The committed state broke an invariant that :meth:`Allocator.self_check` recomputes."""


def step(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark the reference twin of a spec action: ``fn.__name__`` is the action's name in snake_case, and
    the records ``fn`` emits (through its first argument, the allocator) carry it, nested inside the steps
    that enclose it."""

    @functools.wraps(fn)
    def wrapper(alloc: Any, *args: Any, **kwargs: Any) -> Any:
        alloc._steps.append(fn.__name__)
        try:
            return fn(alloc, *args, **kwargs)
        finally:
            alloc._steps.pop()

    wrapper.is_step = True  # type: ignore[attr-defined]
    return wrapper


class Allocator:
    """Committed allocator state for a set of cache groups, mutated only by journaled transactions."""

    def __init__(self, groups: Sequence[GroupConfig], block_ids: Sequence[Sequence[int]],
                 generations: Sequence[dict[int, int]] | None = None, epoch: int = 0,
                 policy: QueuePolicy = QueuePolicy.LRU, check_every_op: bool = False) -> None:
        if not groups or len(groups) != len(block_ids):
            raise ValueError("one block id list per cache group is required")
        if [g.cache_group_id for g in groups] != list(range(len(groups))):
            raise ValueError("cache group ids must be 0..n-1 in order")
        self.journal = Journal()
        self.groups = tuple(groups)
        self.pools = tuple(BlockPool(self.journal, g, list(ids), (generations or [{}] * len(groups))[i], policy)
                           for i, (g, ids) in enumerate(zip(groups, block_ids, strict=True)))
        self.requests = JDict(self.journal, "requests")
        self.ended = JDict(self.journal, "ended")  # request id -> last generation of an ended incarnation
        self.leases = JDict(self.journal, "leases")  # lease id -> handle
        self.index = JDict(self.journal, "cache_index")  # (group, key) -> handle (weak identity)
        self.txns = JDict(self.journal, "txns")
        self.readers = JDict(self.journal, "readers")  # reader id -> (request snapshot, its tokens)
        self.scalars = JDict(self.journal, "scalars")
        self.scalars["epoch"] = epoch
        self.scalars["next_txn"] = 1
        self.scalars["next_lease"] = 1
        self.journal.forget()
        self.check_every_op = check_every_op
        self.recorder: Any = None  # a projection.TraceRecorder, or None
        self.fault_after: set[tuple[str, int | None]] = set()
        self._pending_records: list[Any] = []
        self._steps: list[str] = []  # the steps running now, outermost first
        self._fault_pending = False

    # ---- basic queries -----------------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self.scalars["epoch"]

    def digest(self) -> str:
        return self.journal.digest()

    def request(self, request_id: str) -> RequestRecord:
        rec = self.requests.get(request_id)
        if rec is None:
            reason = AllocRejection.REQUEST_ALREADY_ENDED if request_id in self.ended else \
                AllocRejection.UNKNOWN_REQUEST
            raise Rejected(reason, f"request {request_id!r}")
        return rec

    def refcount(self, handle: BlockHandle) -> int:
        pool = self.pools[handle.cache_group_id]
        pool.check_handle(handle)
        return pool.refcount(handle.block_id)

    def block_state(self, handle: BlockHandle) -> BlockState:
        pool = self.pools[handle.cache_group_id]
        pool.check_handle(handle)
        return pool.state_of(handle.block_id)

    def tail_rows(self, rec: RequestRecord, group: int) -> int:
        """Rows of the request's last logical block visible to it in ``group``."""
        if not rec.tables[group]:
            return 0
        return rec.context_tokens - (len(rec.tables[group]) - 1) * self.groups[group].block_tokens

    def tokens_of(self, request_id: str) -> tuple[int, ...]:
        """The request's logical token history, read through group 0's table."""
        rec = self.request(request_id)
        out: list[int] = []
        for h in rec.tables[0]:
            out.extend(self.pools[0].blocks[h.block_id].rows)
        return tuple(out[: rec.context_tokens])

    def self_check(self) -> None:
        """Recompute refcounts from reachability, queue membership, cross-group valid rows, the partition of
        every pool and the digest; raise :class:`SelfCheckFailed` naming the first violation."""

        def fail(msg: str) -> None:
            raise SelfCheckFailed(msg)

        refs: list[dict[int, int]] = [{} for _ in self.pools]
        for rid, rec in self.requests.items():
            if len(rec.tables) != len(self.groups):
                fail(f"{rid}: {len(rec.tables)} tables for {len(self.groups)} groups")
            token_rows = []
            for g, table in enumerate(rec.tables):
                p = self.groups[g].block_tokens
                if len(table) != ceil_div(rec.context_tokens, p):
                    fail(f"{rid} group {g}: {len(table)} blocks for {rec.context_tokens} tokens")
                rows: list[int] = []
                for j, h in enumerate(table):
                    pool = self.pools[g]
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
        for reader_id, (snap, _tokens) in self.readers.items():
            for table in snap.tables:
                for h in table:
                    if self.pools[h.cache_group_id].blocks[h.block_id].generation != h.generation:
                        fail(f"reader {reader_id} holds stale {h}")
                    refs[h.cache_group_id][h.block_id] = refs[h.cache_group_id].get(h.block_id, 0) + 1
        for lease_id, h in self.leases.items():
            g = h.cache_group_id
            if self.pools[g].blocks[h.block_id].generation != h.generation:
                fail(f"lease {lease_id} holds stale {h}")
            refs[g][h.block_id] = refs[g].get(h.block_id, 0) + 1
        for g, pool in enumerate(self.pools):
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
                if rec.reserved_by is not None and rec.reserved_by not in self.txns:
                    fail(f"group {g}: block {b} reserved by closed transaction {rec.reserved_by}")
                if rec.cache_key is not None and self.index.get((g, rec.cache_key)) != pool.handle(b):
                    fail(f"group {g}: block {b} carries key {rec.cache_key!r} the index does not map to it")
                if rec.valid_rows > pool.config.block_tokens:
                    fail(f"group {g}: block {b} holds {rec.valid_rows} rows")
        for (g, key), h in self.index.items():
            if self.pools[g].blocks[h.block_id].cache_key != key or self.pools[g].handle(h.block_id) != h:
                fail(f"index entry {key!r} in group {g} names {h}, which does not carry it")
        if self.journal.recompute_digest() != self.digest():
            fail("incremental digest differs from the digest recomputed from scratch")

    # ---- transaction machinery -----------------------------------------------------------------
    def transact(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` atomically: on any exception every cell and trace record it wrote is undone."""
        journal = self.journal
        outer = journal.depth == 0
        mark = journal.mark()
        rec_mark = len(self._pending_records)
        journal.depth += 1
        try:
            result = fn()
        except BaseException:
            journal.undo_to(mark)
            del self._pending_records[rec_mark:]
            raise
        finally:
            journal.depth -= 1
        if self._fault_pending:
            self._fault_pending = False
            if not outer:
                raise InjectedFailure("fault injected after the step just taken")
        if outer:
            journal.forget()
            if self.recorder is not None:
                for path, params, state, composite in self._pending_records:
                    self.recorder.record(path, params, state, composite)
            self._pending_records.clear()
            if self.check_every_op:
                self.self_check()
        return result

    def emit(self, params: dict[str, Any], wrote: tuple[tuple[int, int], ...] = (), composite: bool = False) -> None:
        """One trace record of the step running now (``composite``: a step that enclosed recorded steps);
        then a fault injected after it, if armed."""
        if self.recorder is not None:
            self._pending_records.append((tuple(self._steps), params, self.recorder.snapshot(self, wrote), composite))
        key = (self._steps[-1], params.get("g"))
        if key in self.fault_after:
            self.fault_after.discard(key)
            self._fault_pending = True

    def record_outside_state(self, params: dict[str, Any]) -> None:
        """A trace record of the step running now that leaves the reference state unchanged (a rejection the
        spec models as a step of its history variables, e.g. ``stale_write_rejected``)."""
        if self.recorder is not None:
            self.recorder.record(tuple(self._steps), params, self.recorder.snapshot(self, ()), False)

    def _txn(self, txn_id: str) -> AllocationTxn:
        txn = self.txns.get(txn_id)
        if txn is None:
            raise Rejected(AllocRejection.UNKNOWN_TRANSACTION, f"transaction {txn_id!r}")
        return txn

    def _require_no_txn(self) -> None:
        if len(self.txns):
            raise Rejected(AllocRejection.TRANSACTION_IN_FLIGHT, f"in flight: {sorted(self.txns.data)}")

    def validate_expected(self, request_id: str, expected_generation: int | None,
                          expected_table_version: int | None, expected_epoch: int | None) -> RequestRecord:
        """Step 1 of 0x05C: epoch, request generation and table version must match the predecessor."""
        if expected_epoch is not None and expected_epoch != self.epoch:
            raise Rejected(AllocRejection.EPOCH_MISMATCH, f"expected {expected_epoch}, current {self.epoch}")
        rec = self.request(request_id)
        if expected_generation is not None and expected_generation != rec.request_generation:
            raise Rejected(AllocRejection.REQUEST_GENERATION_MISMATCH,
                           f"{request_id}: expected {expected_generation}, current {rec.request_generation}")
        if expected_table_version is not None and expected_table_version != rec.table_version:
            raise Rejected(AllocRejection.TABLE_VERSION_MISMATCH,
                           f"{request_id}: expected {expected_table_version}, current {rec.table_version}")
        return rec

    def _new_txn_id(self) -> str:
        n = self.scalars["next_txn"]
        self.scalars["next_txn"] = n + 1
        return f"t{n}"

    # ---- steps (one spec action each) ------------------------------------------------------------
    def current_or_empty(self, request_id: str) -> RequestRecord:
        """The committed request, or the empty request a first boundary append would start."""
        rec = self.requests.get(request_id)
        if rec is not None:
            return rec
        return RequestRecord(self.ended.get(request_id, 0) + 1, 0, 0, tuple(() for _ in self.groups))

    def begin(self, operation: str, request_id: str, plan: tuple[str, ...], new_tokens: tuple[int, ...],
              expected_generation: int | None = None, expected_table_version: int | None = None,
              expected_epoch: int | None = None) -> str:
        """Open a transaction after validating the expected predecessor (0x05C step 1). Not a spec action:
        nothing the specs observe changes until the transaction's first step."""

        def run() -> str:
            check_operation(operation)
            self._require_no_txn()
            paths = ("alloc",) if operation == "allocate" else ("new", "cow", "unique")
            if len(plan) != len(self.groups) or any(p not in paths for p in plan):
                raise Rejected(AllocRejection.BAD_PLAN, f"{operation} plan {tuple(plan)!r} for {len(self.groups)} "
                               "cache groups")
            if not new_tokens:
                raise Rejected(AllocRejection.EMPTY_APPEND, f"{operation} {request_id}")
            if expected_epoch is not None and expected_epoch != self.epoch:
                raise Rejected(AllocRejection.EPOCH_MISMATCH, f"expected {expected_epoch}, current {self.epoch}")
            if operation == "allocate" and request_id in self.requests:
                raise Rejected(AllocRejection.DUPLICATE_REQUEST, f"request {request_id!r}")
            if request_id in self.requests:
                rec = self.validate_expected(request_id, expected_generation, expected_table_version, None)
            else:
                rec = self.current_or_empty(request_id)
                if operation != "allocate" and request_id not in self.ended and expected_table_version not in (
                        None, 0):
                    raise Rejected(AllocRejection.UNKNOWN_REQUEST, f"request {request_id!r}")
            touched = tuple(t[-1] for t in rec.tables if t)
            txn_id = self._new_txn_id()
            self.txns[txn_id] = AllocationTxn(
                transaction_id=txn_id, expected_allocator_epoch=self.epoch, request_id=request_id,
                expected_request_generation=rec.request_generation, expected_table_version=rec.table_version,
                operation=operation, touched_handles=touched, reserved_handles=(), publication_state="RESERVED",
                plan=plan, new_tokens=tuple(new_tokens))
            return txn_id

        return self.transact(run)

    def _reserve(self, txn_id: str, group: int, wanted: str, emit: bool) -> BlockHandle:
        def run() -> BlockHandle:
            txn = self._txn(txn_id)
            if txn.plan[group] != wanted or txn.publication_state not in ("RESERVED", "BEGUN"):
                raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"{wanted} reservation for group {group} on a "
                               f"{txn.plan[group]!r} path in state {txn.publication_state}")
            if txn.plan[group] in ("new", "cow") and self._destination(txn, group) is not None:
                raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"group {group} already has a destination")
            if txn.plan[group] == "cow" and txn.publication_state != "BEGUN":
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, "cow_reserve before cow_begin")
            handle, lost_key = self.pools[group].reserve(txn_id)
            if lost_key is not None:  # reuse evicts the old weak identity first (0x04B)
                del self.index[(group, lost_key)]
            self.txns[txn_id] = attrs.evolve(txn, reserved_handles=(*txn.reserved_handles, handle),
                                             evicted_keys=(*txn.evicted_keys, lost_key))
            if emit:
                self.emit({"r": txn.request_id, "g": group, "b": handle.block_id})
            return handle

        return self.transact(run)

    @step
    def append_reserve(self, txn_id: str, group: int) -> BlockHandle:
        """Reserve the unpublished block of ``group`` that a boundary append fills (0x04E)."""
        return self._reserve(txn_id, group, "new", emit=True)

    @step
    def cow_reserve(self, txn_id: str, group: int) -> BlockHandle:
        """Reserve the unpublished COW destination of ``group`` (0x05C step 3)."""
        return self._reserve(txn_id, group, "cow", emit=True)

    @step
    def cow_begin(self, txn_id: str) -> tuple[int, ...]:
        """Lease every COW source tail while the copy is in flight (0x05C steps 2 and 4)."""

        def run() -> tuple[int, ...]:
            txn = self._txn(txn_id)
            if txn.publication_state != "RESERVED" or "cow" not in txn.plan:
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, f"cow_begin on {txn_id} ({txn.publication_state})")
            lease_ids = []
            for g, src in enumerate(txn.touched_handles):
                if txn.plan[g] != "cow":
                    continue
                self.pools[g].check_handle(src)
                lease_id = self.scalars["next_lease"]
                self.scalars["next_lease"] = lease_id + 1
                self.leases[lease_id] = src
                self.pools[g].incref(src.block_id)
                lease_ids.append(lease_id)
            rows = self.tail_rows(self.request(txn.request_id), txn.plan.index("cow"))
            self.txns[txn_id] = attrs.evolve(txn, lease_ids=tuple(lease_ids), publication_state="BEGUN",
                                             source_tail_rows=rows)
            self.emit({"r": txn.request_id, "t": txn.new_tokens[0]})
            return tuple(lease_ids)

        return self.transact(run)

    def _destination(self, txn: AllocationTxn, group: int) -> BlockHandle | None:
        for h in reversed(txn.reserved_handles):
            if h.cache_group_id == group:
                return h
        return None

    @step
    def cow_copy(self, txn_id: str, group: int, rows: int) -> None:
        """Copy exactly the predecessor's valid tail rows from the leased source (0x05C step 5)."""

        def run() -> None:
            txn = self._txn(txn_id)
            if txn.plan[group] != "cow" or group in txn.copied_groups:
                raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"cow_copy on group {group}")
            dst = self._destination(txn, group)
            src = txn.touched_handles[group]
            if dst is None or not any(self.leases.get(i) == src for i in txn.lease_ids):
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, "copy needs a reserved destination and a "
                               f"leased source in group {group}")
            expected = self.tail_rows(self.request(txn.request_id), group)
            if rows != expected:
                raise Rejected(AllocRejection.COPY_ROW_COUNT_MISMATCH, f"group {group}: {rows} rows, "
                               f"predecessor tail holds {expected}")
            self.pools[group].set_rows(dst, self.pools[group].check_handle(src).rows[:rows])
            self.txns[txn_id] = attrs.evolve(txn, copied_rows=txn.copied_rows + rows,
                                             copied_groups=(*txn.copied_groups, group))
            self.emit({"r": txn.request_id, "g": group}, wrote=((group, dst.block_id),))

        self.transact(run)

    def write_rows(self, txn_id: str, group: int, handle: BlockHandle, offset: int,
                   tokens: Sequence[int]) -> None:
        """Write ``tokens`` at ``offset`` of a block the transaction may write, on a path other than COW.

        The block must be the transaction's reserved destination, or (unique path) the request's own tail
        with exactly one strong reference; ``offset`` must equal the block's valid frontier. Not a spec
        action of its own: the writes of a boundary or in-place append are parts of its other steps.
        """
        if self._txn(txn_id).plan[group] == "cow":
            raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"group {group} copies on write: cow_write writes it")
        self._write_rows(txn_id, group, handle, offset, tokens)

    @step
    def cow_write(self, txn_id: str, group: int, handle: BlockHandle, offset: int, tokens: Sequence[int]) -> None:
        """Write the new rows into the COW destination of ``group`` after its copy (0x05C step 6)."""
        if self._txn(txn_id).plan[group] != "cow":
            raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"group {group} does not copy on write")
        self._write_rows(txn_id, group, handle, offset, tokens)

    def _write_rows(self, txn_id: str, group: int, handle: BlockHandle, offset: int, tokens: Sequence[int]) -> None:
        def run() -> None:
            txn = self._txn(txn_id)
            pool = self.pools[group]
            rec = pool.check_handle(handle)
            if handle not in txn.reserved_handles:
                if txn.plan[group] != "unique" or handle != txn.touched_handles[group]:
                    raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"{handle} is not writable by {txn_id}")
                if pool.refcount(handle.block_id) != 1:
                    raise Rejected(AllocRejection.WRITE_TO_SHARED_BLOCK,
                                   f"{handle} has {pool.refcount(handle.block_id)} strong references")
                if rec.cache_key is not None:  # a published block is immutable: its key names these rows
                    raise Rejected(AllocRejection.WRITE_TO_CACHED_BLOCK, f"{handle} carries key {rec.cache_key!r}")
                visible = self.tail_rows(self.request(txn.request_id), group)
                rows = rec.rows[:visible]  # rows past the visible frontier are dead (after a truncate)
            else:
                rows = rec.rows
                if txn.plan[group] == "cow" and (group not in txn.copied_groups or group in txn.written_groups):
                    raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, f"cow_write on group {group} before its "
                                   "copy, or twice")
            if offset != len(rows) or offset + len(tokens) > self.groups[group].block_tokens:
                raise Rejected(AllocRejection.WRITE_OFFSET_MISMATCH, f"{handle}: offset {offset}, frontier "
                               f"{len(rows)}, {len(tokens)} rows, block {self.groups[group].block_tokens}")
            pool.set_rows(handle, (*rows, *tokens))
            self.txns[txn_id] = attrs.evolve(txn, written_groups=(*txn.written_groups, group))
            if txn.plan[group] == "cow":
                self.emit({"r": txn.request_id, "g": group}, wrote=((group, handle.block_id),))

        self.transact(run)

    @step
    def append_write(self, txn_id: str) -> None:
        """Boundary path: every group's destination holds its written rows; READY_TO_PUBLISH (0x04A)."""

        def run() -> None:
            txn = self._txn(txn_id)
            if set(txn.written_groups) != set(range(len(self.groups))) or txn.publication_state != "RESERVED":
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, f"append_write on {txn_id}: written "
                               f"{txn.written_groups}, state {txn.publication_state}")
            self.txns[txn_id] = attrs.evolve(txn, publication_state="READY_TO_PUBLISH")
            self.emit({"r": txn.request_id})

        self.transact(run)

    @step
    def cow_validate(self, txn_id: str) -> None:
        """0x05C step 7: every destination holds the copied rows plus the new one; stamp the bundle."""

        def run() -> None:
            txn = self._txn(txn_id)
            cow_groups = [g for g, path in enumerate(txn.plan) if path == "cow"]
            if txn.publication_state != "BEGUN" or set(txn.written_groups) != set(range(len(self.groups))):
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, f"cow_validate on {txn_id}: written "
                               f"{txn.written_groups}, state {txn.publication_state}")
            for g, path in enumerate(txn.plan):  # a group at a block boundary reserved a new block (0x04E)
                if path == "new":
                    self._check_frontier(txn, g, (self._destination(txn, g),))  # type: ignore[arg-type]
            for g in cow_groups:
                self._check_frontier(txn, g, (self._destination(txn, g),))  # type: ignore[arg-type]
                dst = self._destination(txn, g)
                assert dst is not None
                rec = self.pools[g].blocks[dst.block_id]
                self.pools[g].blocks[dst.block_id] = attrs.evolve(rec, bundle_epoch=self.epoch + 1)
            self.txns[txn_id] = attrs.evolve(txn, publication_state="VALIDATED")
            self.emit({"r": txn.request_id})

        self.transact(run)

    def successor_tables(self, txn: AllocationTxn) -> tuple[tuple[tuple[BlockHandle, ...], ...], int]:
        """The tables and length the transaction would publish."""
        if txn.operation == "allocate":
            tables = tuple(tuple(h for h in txn.reserved_handles if h.cache_group_id == g)
                           for g in range(len(self.groups)))
            return tables, len(txn.new_tokens)
        rec = self.current_or_empty(txn.request_id)
        out = []
        for g, table in enumerate(rec.tables):
            path, dst = txn.plan[g], self._destination(txn, g)
            if path == "new":
                out.append((*table, dst) if dst is not None else table)
            elif path == "cow":
                out.append((*table[:-1], dst) if dst is not None else table)
            else:
                out.append(table)
        return tuple(out), rec.context_tokens + len(txn.new_tokens)

    def _check_frontier(self, txn: AllocationTxn, group: int, table: tuple[BlockHandle, ...]) -> None:
        """Each block the transaction writes or exposes anew holds exactly the rows the successor shows."""
        p, path = self.groups[group].block_tokens, txn.plan[group]
        if path == "alloc":
            wants = [(h, txn.new_tokens[j * p:(j + 1) * p]) for j, h in enumerate(table)]
        elif path == "new":
            wants = [(table[-1], txn.new_tokens)]
        else:
            src = txn.touched_handles[group]
            old_rows = self.tail_rows(self.request(txn.request_id), group)
            wants = [(table[-1], (*self.pools[group].check_handle(src).rows[:old_rows], *txn.new_tokens))]
        for h, want in wants:
            have = self.pools[group].check_handle(h).rows
            if have != tuple(want):
                raise Rejected(AllocRejection.FRONTIER_NOT_VALID, f"{h} holds {len(have)} rows, the successor "
                               f"exposes {len(want)} (or they differ)")

    @step
    def append_publish(self, txn_id: str) -> tuple[BlockHandle, ...]:
        """Publish a boundary append: every group's new block joins its table at once (0x04A)."""
        return self._publish(txn_id)

    @step
    def append_in_place(self, txn_id: str) -> tuple[BlockHandle, ...]:
        """Publish an in-place append into every group's private tail (0x04E)."""
        return self._publish(txn_id)

    @step
    def cow_publish(self, txn_id: str) -> tuple[BlockHandle, ...]:
        """The COW linearization point (0x05C step 8)."""
        return self._publish(txn_id)

    def _publish(self, txn_id: str) -> tuple[BlockHandle, ...]:
        """The linearization point (0x05C step 8): successor tables, length and refcount deltas at once."""

        def run() -> tuple[BlockHandle, ...]:
            txn = self._txn(txn_id)
            if txn.expected_allocator_epoch != self.epoch:
                raise Rejected(AllocRejection.EPOCH_MISMATCH, f"{txn_id} began at epoch "
                               f"{txn.expected_allocator_epoch}, now {self.epoch}")
            tables, context = self.successor_tables(txn)
            for g, table in enumerate(tables):
                need = ceil_div(context, self.groups[g].block_tokens)
                if len(table) != need or (txn.plan[g] in ("new", "cow") and self._destination(txn, g) is None):
                    raise Rejected(AllocRejection.HALF_BUNDLE_PUBLICATION, f"group {g} would map {len(table)} "
                                   f"blocks for {context} tokens (needs {need}) or lacks its destination")
            cow = "cow" in txn.plan
            if cow and txn.publication_state != "VALIDATED":
                raise Rejected(AllocRejection.FRONTIER_NOT_VALID, f"{txn_id} publishes before cow_validate")
            if not cow:
                if set(txn.written_groups) != set(range(len(self.groups))):
                    raise Rejected(AllocRejection.FRONTIER_NOT_VALID, f"{txn_id}: groups written "
                                   f"{txn.written_groups}")
                for g, table in enumerate(tables):  # 0x05C step 7 for the non-COW paths
                    self._check_frontier(txn, g, table)
            if not cow and "new" in txn.plan and txn.publication_state != "READY_TO_PUBLISH":
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, f"{txn_id} publishes before append_write")
            old = self.requests.get(txn.request_id)
            new_epoch = self.epoch + 1 if txn.reserved_handles else self.epoch
            for h in txn.reserved_handles:
                pool = self.pools[h.cache_group_id]
                pool.publish_reserved(h, txn_id)
                pool.blocks[h.block_id] = attrs.evolve(pool.blocks[h.block_id], bundle_epoch=new_epoch)
            for g, table in enumerate(tables):
                before = set(old.tables[g]) if old is not None else set()
                for h in table:
                    if h not in before:
                        self.pools[g].incref(h.block_id)
                for h in before - set(table):
                    self.pools[g].decref(h.block_id)
            self.requests[txn.request_id] = RequestRecord(
                request_generation=txn.expected_request_generation,
                table_version=txn.expected_table_version + 1, context_tokens=context, tables=tables)
            self.scalars["epoch"] = new_epoch
            r = txn.request_id
            if cow:
                self.txns[txn_id] = attrs.evolve(txn, publication_state="PUBLISHED")
                self.emit({"r": r})
            else:
                del self.txns[txn_id]
                if txn.operation == "allocate":
                    self.emit({"r": r, "n": len(txn.new_tokens)})
                elif "new" in txn.plan:
                    self.emit(self._boundary_params(txn),
                              wrote=tuple((h.cache_group_id, h.block_id) for h in txn.reserved_handles))
                else:
                    self.emit({"r": r, "t": txn.new_tokens[0]},
                              wrote=tuple((g, t[-1].block_id) for g, t in enumerate(tables)))
            return tuple(h for t in tables for h in t)

        return self.transact(run)

    def _boundary_params(self, txn: AllocationTxn) -> dict[str, Any]:
        """The append's parameters; ``dest`` is 0 (none, as in KVAllocation.tla's ``txn.dest``) for a group that
        reserved no block: with block sizes that differ per group (0x04E) one group can be at a boundary while
        another appends in place or copies on write."""
        dests = [self._destination(txn, g) for g in range(len(self.groups))]
        return {"r": txn.request_id, "t": txn.new_tokens[0],
                "dest": {g: 0 if d is None else d.block_id for g, d in enumerate(dests)}}

    @step
    def cow_release_sources(self, txn_id: str) -> None:
        """Drop the COW transaction's temporary leases and close it (0x05C step 9)."""

        def run() -> None:
            txn = self._txn(txn_id)
            if txn.publication_state != "PUBLISHED":
                raise Rejected(AllocRejection.STEP_OUT_OF_ORDER, f"{txn_id} is {txn.publication_state}")
            self._drop_leases(txn.lease_ids)
            del self.txns[txn_id]
            self.emit({"r": txn.request_id})

        self.transact(run)

    def _drop_leases(self, lease_ids: Sequence[int]) -> None:
        for lease_id in lease_ids:
            h = self.leases.get(lease_id)
            if h is None:
                raise Rejected(AllocRejection.LEASE_NOT_HELD, f"lease {lease_id}")
            del self.leases[lease_id]
            self.pools[h.cache_group_id].decref(h.block_id)

    @step
    def append_rollback(self, txn_id: str, since_mark: int) -> None:
        """Undo an unpublished boundary or in-place append exactly (0x04F); see :meth:`_rollback`."""
        self._rollback(txn_id, since_mark, "cow" not in self._txn(txn_id).plan)

    @step
    def cow_rollback(self, txn_id: str, since_mark: int) -> None:
        """Undo an unpublished COW transaction exactly, its source leases included (0x04F)."""
        self._rollback(txn_id, since_mark, "cow" in self._txn(txn_id).plan)

    def _rollback(self, txn_id: str, since_mark: int, fits: bool) -> None:
        """Return every reservation and lease of an unpublished transaction: the predecessor state exactly.
        ``since_mark`` is the journal mark taken before the transaction began."""
        txn = self._txn(txn_id)
        if not fits:
            raise Rejected(AllocRejection.WRONG_STEP_FOR_PATH, f"{txn_id} follows the paths {txn.plan}")
        if txn.publication_state == "PUBLISHED":
            raise Rejected(AllocRejection.ROLLBACK_AFTER_PUBLICATION, f"{txn_id}")
        self.journal.undo_to(since_mark)
        self.emit({"r": txn.request_id})

    # ---- whole operations (a sequence of steps) ---------------------------------------------------
    def run_txn(self, operation: str, request_id: str, tokens: Sequence[int],
                expected_generation: int | None = None, expected_table_version: int | None = None,
                expected_epoch: int | None = None) -> AllocationReceipt:
        """allocate (a new request) or append (0x04E's three paths)."""
        before = self.digest()
        mark = self.journal.mark()
        tokens = tuple(tokens)
        check_operation(operation)
        if operation == "allocate":
            plan = ("alloc",) * len(self.groups)
        else:
            if len(tokens) != 1:
                raise Rejected(AllocRejection.EMPTY_APPEND if not tokens else AllocRejection.WRITE_OFFSET_MISMATCH,
                               f"append writes exactly one row, got {len(tokens)}")
            if request_id not in self.requests and expected_table_version not in (None, 0):
                self.request(request_id)  # raises the right name
            plan = self.append_plan(self.current_or_empty(request_id))

        def run() -> AllocationReceipt:
            txn_id = self.begin(operation, request_id, plan, tokens, expected_generation,
                                expected_table_version, expected_epoch)
            try:
                closing = self._fill(txn_id, tokens, mark)
            except InjectedFailure:
                rollback = self.cow_rollback if "cow" in plan else self.append_rollback
                rollback(txn_id, mark)
                closing = None
            if closing is None:
                return self._receipt(txn_id, None, request_id, operation, before, "ROLLED_BACK")
            return self._receipt(txn_id, closing, request_id, operation, before, "PUBLISHED")

        return self.transact(run)

    def append_plan(self, rec: RequestRecord) -> tuple[str, ...]:
        """0x04E per group: a boundary reserves new; otherwise, if any group's tail is shared (or carries
        an immutable cache identity), every non-boundary group copies on write, else they all write in
        place."""
        boundary = [self.tail_rows(rec, g) in (0, self.groups[g].block_tokens) for g in range(len(self.groups))]
        shared = any(not b and (self.pools[g].refcount(rec.tables[g][-1].block_id) != 1
                                or self.pools[g].blocks[rec.tables[g][-1].block_id].cache_key is not None)
                     for g, b in enumerate(boundary))
        return tuple("new" if b else ("cow" if shared else "unique") for b in boundary)

    @step
    def append_boundary(self, txn_id: str, tokens: tuple[int, ...], since_mark: int) -> AllocationTxn | None:
        """A boundary append as one step (0x04A): reserve a block per group, write, ``append_write``,
        ``append_publish``; a fault injected after a reservation rolls it back exactly, inside this step.
        Returns the transaction as it stood before publication, or None after a rollback."""
        try:
            for g in range(len(self.groups)):
                self.append_reserve(txn_id, g)
            for g in range(len(self.groups)):
                self.write_rows(txn_id, g, self._destination(self._txn(txn_id), g), 0, tokens)  # type: ignore
            self.append_write(txn_id)
            closing = self._txn(txn_id)
            self.append_publish(txn_id)
        except InjectedFailure:
            self.append_rollback(txn_id, since_mark)
            return None
        self.emit(self._boundary_params(closing), wrote=tuple((h.cache_group_id, h.block_id)
                                                             for h in closing.reserved_handles), composite=True)
        return closing

    def _fill(self, txn_id: str, tokens: tuple[int, ...], since_mark: int) -> AllocationTxn | None:
        """Take every step of the transaction's plan up to and including its close; return the transaction
        as it stood before publication (None when a boundary append rolled back)."""
        txn = self._txn(txn_id)
        if set(txn.plan) == {"new"}:
            return self.append_boundary(txn_id, tokens, since_mark)
        if "cow" in txn.plan:
            return self.append_copy(txn_id, tokens)
        return self._fill_steps(txn_id, tokens)

    @step
    def append_copy(self, txn_id: str, tokens: tuple[int, ...]) -> AllocationTxn:
        """An append onto a partial tail that is shared or cached (0x04E, 0x05C, 0x07D) as one step: ``cow_begin``,
        then ``cow_reserve``, ``cow_copy`` and ``cow_write`` per group, ``cow_validate``, ``cow_publish`` and
        ``cow_release_sources``. A fault injected inside it propagates (the caller rolls back with
        ``cow_rollback``). Returns the transaction as it stood before publication."""
        closing = self._fill_steps(txn_id, tokens)
        assert closing is not None
        dest = {g: self._destination(closing, g) for g in range(len(self.groups))}
        self.emit({"r": closing.request_id, "d": {g: h.block_id for g, h in dest.items() if h is not None}},
                  wrote=tuple((g, h.block_id) for g, h in dest.items() if h is not None), composite=True)
        return closing

    def _fill_steps(self, txn_id: str, tokens: tuple[int, ...]) -> AllocationTxn | None:
        """The steps of an allocation, an in-place append or a copy-on-write append, up to its close."""
        txn = self._txn(txn_id)
        cow = "cow" in txn.plan
        if cow:
            self.cow_begin(txn_id)
        for g, path in enumerate(txn.plan):
            p = self.groups[g].block_tokens
            if path == "alloc":
                for j in range(ceil_div(len(tokens), p)):
                    h = self._reserve(txn_id, g, "alloc", emit=False)
                    self.write_rows(txn_id, g, h, 0, tokens[j * p:(j + 1) * p])
            elif path == "new":
                self.append_reserve(txn_id, g)
            elif path == "cow":
                self.cow_reserve(txn_id, g)
        for g, path in enumerate(txn.plan):
            rows = self.tail_rows(self.current_or_empty(txn.request_id), g)
            if path == "new":
                self.write_rows(txn_id, g, self._destination(self._txn(txn_id), g), 0, tokens)  # type: ignore
            elif path == "cow":
                self.cow_copy(txn_id, g, rows)
                self.cow_write(txn_id, g, self._destination(self._txn(txn_id), g), rows, tokens)  # type: ignore
            elif path == "unique":
                self.write_rows(txn_id, g, txn.touched_handles[g], rows, tokens)
        if "new" in txn.plan and not cow:  # with a COW group, cow_validate checks the new blocks too
            self.append_write(txn_id)
        if cow:
            self.cow_validate(txn_id)
        closing = self._txn(txn_id)
        if cow:
            self.cow_publish(txn_id)
            self.cow_release_sources(txn_id)
        elif "new" in txn.plan:
            self.append_publish(txn_id)
        elif txn.operation == "append":
            self.append_in_place(txn_id)
        else:
            self._publish(txn_id)  # a new request's allocation: recorded as the allocate step
        return closing

    def _receipt(self, txn_id: str, txn: AllocationTxn | None, request_id: str, operation: str, before: str,
                 outcome: str) -> AllocationReceipt:
        if txn is None:
            return AllocationReceipt(
                transaction_id=txn_id, request_id=request_id, operation=operation, predecessor_digest=before,
                successor_digest=self.digest(), useful_new_rows=0, new_physical_blocks=0, copied_rows=0,
                copy_payload_bytes=0, refcount_deltas=(), allocator_epoch_after=self.epoch, outcome=outcome)
        rec = self.request(request_id)
        row_bytes = sum(g.row_bytes for g in self.groups)
        cow_groups = [g for g, p in enumerate(txn.plan) if p == "cow"]
        rows_per_group = txn.copied_rows // len(cow_groups) if cow_groups else 0
        deltas: list[tuple[BlockHandle, int]] = [(h, +1) for h in txn.reserved_handles]
        deltas += [(txn.touched_handles[g], -1) for g in cow_groups]
        return AllocationReceipt(
            transaction_id=txn_id, request_id=request_id, operation=operation, predecessor_digest=before,
            successor_digest=self.digest(), useful_new_rows=len(txn.new_tokens),
            new_physical_blocks=len(txn.reserved_handles), copied_rows=rows_per_group,
            copy_payload_bytes=sum(self.groups[g].row_bytes * rows_per_group for g in cow_groups),
            refcount_deltas=tuple(deltas), allocator_epoch_after=self.epoch, outcome=outcome,
            paths=txn.plan,
            new_capacity_bytes=sum(self.groups[h.cache_group_id].block_bytes for h in txn.reserved_handles),
            append_write_bytes=len(txn.new_tokens) * row_bytes, table_version_after=rec.table_version,
            published_tables=rec.tables,
            copies=tuple((txn.touched_handles[g], self._destination(txn, g)) for g in cow_groups))  # type: ignore

    @step
    def allocate(self, request_id: str, tokens: Sequence[int], expected_epoch: int | None = None
                 ) -> AllocationReceipt:
        """Admit a new request: reserve ceil(n/P_g) blocks per group, write its rows, publish together."""
        return self.run_txn("allocate", request_id, tokens, expected_epoch=expected_epoch)

    def append(self, request_id: str, token: int, expected_generation: int | None = None,
               expected_table_version: int | None = None, expected_epoch: int | None = None
               ) -> AllocationReceipt:
        """Append one row (0x04E): new bundle at a boundary, in place on a unique tail, else COW."""
        return self.run_txn("append", request_id, (token,), expected_generation, expected_table_version,
                            expected_epoch)
